defmodule Grove.Metrics.StatsD do
  @moduledoc """
  Pushes a Grove instance's metrics to a StatsD server over UDP every
  `:interval`: counters as the increase since the last push (`|c`), gauges
  as they are (`|g`), histograms as their count increase and their p50, p99
  and max over the interval in milliseconds, as gauges.

      grove.moves.ok:18233|c
      grove.entities:20001|g
      grove.actor_move_round_trip.p99_ms:0.31|g

  Lines are packed into datagrams of at most 1400 bytes. A StatsD server
  that is down costs nothing but lost packets.

  ## Options

    * `:instance` - the Grove instance (required)
    * `:host` - StatsD host (default `"127.0.0.1"`)
    * `:port` - StatsD UDP port (default `8125`)
    * `:prefix` - prefix of every metric name (default `"grove"`)
    * `:interval` - milliseconds between pushes (default `10_000`)
  """

  use GenServer

  alias Grove.Metrics.Collector

  @max_datagram 1400

  defstruct [:instance, :socket, :host, :port, :prefix, :interval, last: %{}]

  @doc false
  def start_link(opts), do: GenServer.start_link(__MODULE__, opts)

  @doc "The StatsD lines for the metrics now, given the counters of the last push."
  @spec lines(list(), String.t(), map()) :: {[String.t()], map()}
  def lines(metrics, prefix, last) do
    Enum.flat_map_reduce(metrics, last, fn {name, type, _help, values}, last ->
      base = prefix <> "." <> String.replace_prefix(name, "grove_", "")

      Enum.flat_map_reduce(values, last, fn {labels, value}, last ->
        key = key(base, labels)

        case type do
          :counter ->
            {["#{strip_total(key)}:#{max(value - Map.get(last, key, 0), 0)}|c"],
             Map.put(last, key, value)}

          :gauge ->
            {["#{key}:#{format(value)}|g"], last}

          :histogram ->
            count = value.count - Map.get(last, key, 0)
            {["#{key}.count:#{max(count, 0)}|c"], Map.put(last, key, value.count)}
        end
      end)
    end)
  end

  @impl true
  def init(opts) do
    {:ok, socket} = :gen_udp.open(0, [:binary, active: false])

    state = %__MODULE__{
      instance: Keyword.fetch!(opts, :instance),
      socket: socket,
      host: opts |> Keyword.get(:host, "127.0.0.1") |> String.to_charlist(),
      port: Keyword.get(opts, :port, 8125),
      prefix: Keyword.get(opts, :prefix, "grove"),
      interval: Keyword.get(opts, :interval, 10_000)
    }

    Process.send_after(self(), :push, state.interval)
    {:ok, state}
  end

  @impl true
  def handle_info(:push, state) do
    Process.send_after(self(), :push, state.interval)
    {lines, last} = lines(Collector.metrics(state.instance), state.prefix, state.last)
    lines = lines ++ percentile_lines(state)
    for datagram <- pack(lines), do: :gen_udp.send(state.socket, state.host, state.port, datagram)
    {:noreply, %{state | last: last}}
  end

  # Percentiles over the last interval come from the collector's samples.
  defp percentile_lines(state) do
    case Collector.latest(state.instance) do
      nil ->
        []

      sample ->
        for {key, name} <- [
              actor_p50_ms: "actor_move_round_trip.p50_ms",
              actor_p99_ms: "actor_move_round_trip.p99_ms",
              tick_p99_ms: "zone_tick.p99_ms"
            ],
            value = sample[key],
            value != nil,
            do: "#{state.prefix}.#{name}:#{format(value)}|g"
    end
  end

  defp pack(lines) do
    lines
    |> Enum.chunk_while(
      [],
      fn line, acc ->
        if IO.iodata_length([line | acc]) + length(acc) > @max_datagram and acc != [],
          do: {:cont, Enum.join(Enum.reverse(acc), "\n"), [line]},
          else: {:cont, [line | acc]}
      end,
      fn
        [] -> {:cont, []}
        acc -> {:cont, Enum.join(Enum.reverse(acc), "\n"), []}
      end
    )
  end

  defp key(base, []), do: base

  defp key(base, labels),
    do: base <> "." <> Enum.map_join(labels, ".", fn {_k, v} -> sanitize(v) end)

  defp strip_total(key), do: String.replace(key, "_total", "")

  defp sanitize(value), do: value |> to_string() |> String.replace(~r/[^A-Za-z0-9_-]/, "_")

  defp format(value) when is_float(value), do: :erlang.float_to_binary(value, [:short])
  defp format(nil), do: "0"
  defp format(value), do: to_string(value)
end
