defmodule Grove.Accounts.Metrics do
  @moduledoc """
  The accounts' metrics (a `Grove.Metrics.Source`; its argument is the
  accounts' name): how long requests wait for a permit to hash a password.
  None while the accounts are not running.
  """

  @behaviour Grove.Metrics.Source

  alias Grove.Accounts
  alias Grove.Metrics.{Histogram, Source}

  @impl true
  def metrics(name) do
    case Accounts.lookup(name) do
      nil ->
        []

      accounts ->
        waits = Accounts.hash_waits(accounts.name)
        [Source.request_waits([{[stage: :password], Histogram.export(waits, 1_000_000)}])]
    end
  end

  @impl true
  def reading(_name), do: nil

  @impl true
  def sample(_name, _before, _now, _seconds), do: {%{}, %{}}
end
