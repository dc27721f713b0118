defmodule Grove.Store.Metrics do
  @moduledoc """
  The store's metrics (a `Grove.Metrics.Source`; its argument is the
  store's name, `Grove.store/1`): its requests by outcome, its queue, its
  group commits, and how long requests wait for a worker and the database.
  None while the store is not running.
  """

  @behaviour Grove.Metrics.Source

  alias Grove.Metrics.{Histogram, Source}
  alias Grove.Store

  @outcomes [:completed, :errors, :rejected_full, :expired, :timed_out]

  @impl true
  def metrics(store) do
    case Store.waits(store) do
      nil -> []
      waits -> metrics(waits, Store.stats(store))
    end
  end

  defp metrics(waits, stats) do
    [
      Source.request_waits([
        {[stage: :store_queue], Histogram.export(waits.queue, 1_000_000)},
        {[stage: :database], Histogram.export(waits.database, 1_000_000)}
      ]),
      {"grove_store_requests_total", :counter,
       "Store requests by outcome: completed, errors, rejected_full (the queue was full), " <>
         "expired (dropped unrun past their deadline), timed_out (their caller stopped waiting).",
       for(outcome <- @outcomes, do: {[outcome: outcome], stats[outcome]})},
      {"grove_store_queued", :gauge, "Store requests waiting for a worker.",
       [{[], stats.queued}]},
      {"grove_store_transactions_total", :counter,
       "Transactions that committed writes (a group commit each).", [{[], stats.transactions}]},
      {"grove_store_batched_writes_total", :counter,
       "Writes committed by those transactions; divided by them, the mean group.",
       [{[], stats.batched_writes}]}
    ]
  end

  @impl true
  def reading(_store), do: nil

  @impl true
  def sample(_store, _before, _now, _seconds), do: {%{}, %{}}
end
