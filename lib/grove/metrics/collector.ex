defmodule Grove.Metrics.Collector do
  @moduledoc """
  Gathers a Grove instance's metrics from its parts. Each part says what
  its metrics are itself (a `Grove.Metrics.Source`); the instance hands the
  collector the sources of the parts it started, and the collector knows
  none of them. Exporters read every part's metrics now (`metrics/1`).

  Once a second the collector takes a reading of every source and records a
  sample of the dashboard's series (rates, percentiles, gauges), each
  part's share of it, in a history table kept for `:history` samples (an
  hour by default), so a dashboard that reloads loses nothing. What a part
  keeps for the latest sample alone (a zone heat map) is read with
  `current/3`.

  Readers never wait for it: the history lives in an ETS table, and
  `metrics/1` reads the parts' counters directly.

  ## Options

    * `:instance` - the Grove instance (required)
    * `:sources` - the parts' sources, `{module, argument}` (default none)
    * `:interval` - milliseconds between samples (default `1000`)
    * `:history` - samples kept (default `3600`)
  """

  use GenServer

  alias Grove.Metrics.Source

  defstruct [:instance, :sources, :interval, :history, :table, :current, :last]

  @doc false
  def start_link(opts) do
    instance = Keyword.fetch!(opts, :instance)
    GenServer.start_link(__MODULE__, opts, name: name(instance))
  end

  @doc false
  def child_spec(opts) do
    %{id: {__MODULE__, Keyword.fetch!(opts, :instance)}, start: {__MODULE__, :start_link, [opts]}}
  end

  @doc "The samples recorded after `since_ms` (system time, milliseconds), oldest first."
  @spec history(atom(), integer()) :: [map()]
  def history(instance, since_ms \\ 0) do
    table = published(instance).table
    :ets.select(table, [{{:"$1", :"$2"}, [{:>, :"$1", since_ms}], [:"$2"]}])
  end

  @doc "The latest sample, or `nil` before the first."
  @spec latest(atom()) :: map() | nil
  def latest(instance) do
    table = published(instance).table

    case :ets.last(table) do
      :"$end_of_table" -> nil
      key -> :ets.lookup_element(table, key, 2)
    end
  end

  @doc """
  What a part keeps for the latest sample alone under `key` (the world's
  `:zone_heat`, every zone's moves per second), or `default` before the
  first sample.
  """
  @spec current(atom(), atom(), term()) :: term()
  def current(instance, key, default \\ nil) do
    case :ets.lookup(published(instance).current, key) do
      [{^key, value}] -> value
      [] -> default
    end
  end

  @doc """
  Every metric of every part now, for exporters: a list of `{name, type,
  help, values}` (`t:Grove.Metrics.Source.metric/0`), a family that several
  parts export gathered under its one name.
  """
  @spec metrics(atom()) :: [Source.metric()]
  def metrics(instance) do
    published(instance).sources
    |> Enum.flat_map(fn {module, argument} -> module.metrics(argument) end)
    |> gather()
  end

  defp gather(families) do
    {order, by_name} =
      Enum.reduce(families, {[], %{}}, fn {name, type, help, values}, {order, by_name} ->
        case by_name do
          %{^name => {type, help, earlier}} ->
            {order, %{by_name | name => {type, help, earlier ++ values}}}

          _ ->
            {[name | order], Map.put(by_name, name, {type, help, values})}
        end
      end)

    for name <- Enum.reverse(order) do
      {type, help, values} = by_name[name]
      {name, type, help, values}
    end
  end

  # Callbacks

  @impl true
  def init(opts) do
    instance = Keyword.fetch!(opts, :instance)
    sources = Keyword.get(opts, :sources, [])
    table = :ets.new(:grove_metrics_history, [:ordered_set, :protected, read_concurrency: true])
    current = :ets.new(:grove_metrics_current, [:set, :protected, read_concurrency: true])

    :persistent_term.put({__MODULE__, instance}, %{
      table: table,
      current: current,
      sources: sources
    })

    state = %__MODULE__{
      instance: instance,
      sources: sources,
      interval: Keyword.get(opts, :interval, 1000),
      history: Keyword.get(opts, :history, 3600),
      table: table,
      current: current
    }

    # The first reading at the first interval: parts started after the
    # collector (the gateway) are running by then.
    {:ok, schedule(state)}
  end

  @impl true
  def handle_info(:sample, %__MODULE__{last: nil} = state),
    do: {:noreply, schedule(%{state | last: reading(state)})}

  def handle_info(:sample, %__MODULE__{last: last} = state) do
    now = reading(state)
    seconds = max((now.at - last.at) / 1000, 0.001)

    {fields, current} =
      Enum.reduce(state.sources, {%{}, %{}}, fn {module, argument} = source, {fields, current} ->
        {more, more_current} =
          module.sample(argument, last.parts[source], now.parts[source], seconds)

        {Map.merge(fields, more), Map.merge(current, more_current)}
      end)

    sample = Map.put(fields, :t, System.system_time(:millisecond))
    :ets.insert(state.table, {sample.t, sample})
    :ets.insert(state.current, Map.to_list(current))
    trim(state)
    {:noreply, schedule(%{state | last: now})}
  end

  defp reading(state) do
    %{
      at: System.monotonic_time(:millisecond),
      parts:
        Map.new(state.sources, fn {module, argument} = source ->
          {source, module.reading(argument)}
        end)
    }
  end

  defp schedule(state) do
    Process.send_after(self(), :sample, state.interval)
    state
  end

  defp trim(state) do
    excess = :ets.info(state.table, :size) - state.history

    if excess > 0,
      do: Enum.each(1..excess, fn _ -> :ets.delete(state.table, :ets.first(state.table)) end)
  end

  defp name(instance), do: :"#{instance}.Metrics.Collector"
  defp published(instance), do: :persistent_term.get({__MODULE__, instance})
end
