defmodule Grove.Metrics do
  @moduledoc """
  Events and metrics, a small local equivalent of `:telemetry` (which is not
  available here): code `execute/3`s events and anyone can `attach/4` a
  handler to them. Each part of Grove says what its metrics are itself (a
  `Grove.Metrics.Source`: counters, gauges, log-bucketed histograms,
  `Grove.Metrics.Histogram`), and `Grove.Metrics.Collector` gathers them
  for the exporters (Prometheus, StatsD) and the dashboard's history.

  Handlers run in the process that executes the event, at once: there is no
  process hop per event. They are kept in `:persistent_term` (read for free,
  written only when handlers are attached or detached), so an event nobody
  listens to costs one lookup. A handler that raises is detached and logged,
  so a broken handler cannot break the code that emits events.

  ## Events

  Event names are a tree; measurements are numbers, metadata describes.

  | event | measurements | metadata |
  | --- | --- | --- |
  | `[:grove, :zone, :tick]` | `duration` (native units), `changes` | `zone`, `world` |
  | `[:grove, :zone, :restart]` | `entities` | `zone`, `world` |
  | `[:grove, :life, :generation]` | `duration` (microseconds), `births`, `deaths`, `live` (the zone's) | `zone`, `world`, `generation` |
  | `[:grove, :session, :start]` | | `encoding` |
  | `[:grove, :session, :stop]` | | `encoding`, `reason` |
  | `[:grove, :session, :slow_consumer]` | | `encoding` |
  | `[:grove, :session, :protocol_error]` | | `code`, `instance` |
  | `[:grove, :load, :report]` | `players`, `moves_per_s`, `p50_ms`, `p99_ms`, `errors` | `knee`, `phase`, `instance` |

  `[:grove, :zone, :tick]` is emitted for every delta a zone publishes: at
  its tick, or, in a zone with one viewer, in the turn of each of that
  viewer's moves, or each game tick, that changed it (a lone walker's zone
  emits one a move).

  The hottest things are counted in place, in `:counters`, by the code that
  does them, and read by their part's source rather than dispatched one by one:
  moves by outcome, handoffs and views per zone (`Grove.World.stats/1` and
  `Grove.World.zone_loads/1`), frames, bytes, coalesced views and dropped
  broadcasts per connection (`Grove.Gateway.stats/0`), and the round trip
  of actors' moves (`Grove.Actors.Stats`). At 250,000 moves a second a
  dispatch per move would cost more than the move's own bookkeeping.

  ## Examples

      iex> Grove.Metrics.attach("doc", [:doc, :event], fn _event, m, _meta, pid -> send(pid, {:got, m.n}) end, self())
      iex> Grove.Metrics.execute([:doc, :event], %{n: 3})
      iex> receive do {:got, n} -> n end
      3
      iex> Grove.Metrics.detach("doc")
      :ok
  """

  require Logger

  @type event :: [atom(), ...]
  @type handler :: (event(), map(), map(), term() -> any())

  @doc "Emits an event to every handler attached to it."
  @spec execute(event(), map(), map()) :: :ok
  def execute(event, measurements \\ %{}, metadata \\ %{}) do
    case :persistent_term.get({__MODULE__, event}, []) do
      [] -> :ok
      handlers -> Enum.each(handlers, &run(&1, event, measurements, metadata))
    end
  end

  defp run({id, fun, config}, event, measurements, metadata) do
    fun.(event, measurements, metadata, config)
  rescue
    error ->
      Logger.error(
        "metrics handler #{inspect(id)} failed on #{inspect(event)} and was detached: #{Exception.message(error)}"
      )

      detach(id)
  end

  @doc """
  Runs `fun`, emitting `event ++ [:start]` before and `event ++ [:stop]`
  after with its `duration` in native units (or `event ++ [:exception]` if it
  raises, and re-raises). Returns what `fun` returns.
  """
  @spec span(event(), map(), (() -> result)) :: result when result: var
  def span(event, metadata, fun) do
    started = System.monotonic_time()
    execute(event ++ [:start], %{system_time: System.system_time()}, metadata)

    try do
      result = fun.()
      execute(event ++ [:stop], %{duration: System.monotonic_time() - started}, metadata)
      result
    rescue
      error ->
        execute(
          event ++ [:exception],
          %{duration: System.monotonic_time() - started},
          Map.put(metadata, :error, error)
        )

        reraise error, __STACKTRACE__
    end
  end

  @doc "Attaches a handler to one event; `id` must be unique."
  @spec attach(term(), event(), handler(), term()) :: :ok | {:error, :already_exists}
  def attach(id, event, fun, config \\ nil), do: attach_many(id, [event], fun, config)

  @doc "Attaches one handler to several events."
  @spec attach_many(term(), [event()], handler(), term()) :: :ok | {:error, :already_exists}
  def attach_many(id, events, fun, config \\ nil) when is_function(fun, 4) do
    :global.trans({__MODULE__, self()}, fn ->
      if id in attached_ids() do
        {:error, :already_exists}
      else
        for event <- events do
          handlers = :persistent_term.get({__MODULE__, event}, [])
          :persistent_term.put({__MODULE__, event}, handlers ++ [{id, fun, config}])
        end

        :persistent_term.put({__MODULE__, :ids}, Map.put(ids(), id, events))
        :ok
      end
    end)
  end

  @doc "Detaches a handler from every event it was attached to."
  @spec detach(term()) :: :ok | {:error, :not_found}
  def detach(id) do
    :global.trans({__MODULE__, self()}, fn ->
      case Map.pop(ids(), id) do
        {nil, _} ->
          {:error, :not_found}

        {events, rest} ->
          for event <- events do
            case Enum.reject(:persistent_term.get({__MODULE__, event}, []), &(elem(&1, 0) == id)) do
              [] -> :persistent_term.erase({__MODULE__, event})
              handlers -> :persistent_term.put({__MODULE__, event}, handlers)
            end
          end

          :persistent_term.put({__MODULE__, :ids}, rest)
          :ok
      end
    end)
  end

  @doc "The ids of the attached handlers."
  @spec attached_ids() :: [term()]
  def attached_ids, do: Map.keys(ids())

  defp ids, do: :persistent_term.get({__MODULE__, :ids}, %{})
end
