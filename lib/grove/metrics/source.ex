defmodule Grove.Metrics.Source do
  @moduledoc """
  A part of Grove that has metrics says what they are itself: it exports
  them (`c:metrics/1`) and gives the dashboard's samples their share
  (`c:reading/1`, `c:sample/4`). The instance hands the collector
  (`Grove.Metrics.Collector`) the sources of the parts it started, each as
  `{module, argument}`; the collector knows none of the parts, it gathers.

  A source answers for its own part when the part is not running (not yet,
  or between restarts): no values then, never an error.

  The parts' sources: `Grove.Cluster.Metrics`, `Grove.World.Metrics`,
  `Grove.Actors.Metrics`, `Grove.Store.Metrics`, `Grove.Accounts.Metrics`,
  `Grove.Gateway.Metrics`, and the VM's own, `Grove.Metrics.BEAM`.
  """

  @typedoc """
  A metric family: its name, type, help and values, `{labels, number}` for
  counters and gauges and `{labels, Grove.Metrics.Histogram.export/2}` for
  histograms (in seconds). Two sources may export values of one family (one
  name): the collector gathers them under it, in the order of the sources.
  """
  @type metric ::
          {String.t(), :counter | :gauge | :histogram, String.t(), [{keyword(), term()}]}

  @type t :: {module(), term()}

  @doc "Every metric of the part now, for the exporters."
  @callback metrics(argument :: term()) :: [metric()]

  @doc "What the part's share of the next sample is made from: its counters as they are now."
  @callback reading(argument :: term()) :: term()

  @doc """
  The part's fields of a sample, over the `seconds` between two of its
  readings, and what is kept for the latest sample alone, out of the
  history (a zone heat map: `Grove.Metrics.Collector.current/3`).
  """
  @callback sample(argument :: term(), before :: term(), now :: term(), seconds :: float()) ::
              {map(), map()}

  @doc """
  The rate of a count between two readings, per second, rounded.

      iex> Grove.Metrics.Source.per_second(150, 100, 0.5)
      100
  """
  @spec per_second(number(), number(), float()) :: integer()
  def per_second(now, before, seconds), do: round((now - before) / seconds)

  @doc """
  The family of where HTTP requests wait, by stage: three parts have stages
  of it (the gateway, the accounts, the store), each exports its own values
  under this one name and help.
  """
  @spec request_waits([{keyword(), map()}]) :: metric()
  def request_waits(values) do
    {"grove_request_wait_seconds", :histogram,
     "Where HTTP requests wait, by stage: accept (a new connection to its first request line), " <>
       "head (reading the head), handler (Yaws and the body, to an API handler), upgrade " <>
       "(the same for a WebSocket upgrade, to its handler), password " <>
       "(for a permit to hash), store_queue (for a store worker), database (a read, or a " <>
       "batch's whole transaction).", values}
  end
end
