defmodule Grove.Actors.Stats do
  @moduledoc false
  # What the actors see from the client side: moves sent, outcomes by kind,
  # and the round trip from sending a move to its outcome. Herds record here
  # directly (`:counters`), so reading it costs the herds nothing.

  alias Grove.Metrics.Histogram

  # `:timeout` is the one-GenServer baseline's (`Grove.Bench.Baseline`):
  # its calls can time out; the world's moves always get an outcome.
  @keys [:sent, :joined, :join_failed, :ok | Grove.World.rejections()] ++ [:timeout]

  for {key, index} <- Enum.with_index(@keys, 1) do
    defp index(unquote(key)), do: unquote(index)
  end

  defstruct [:counters, :latency]

  @type t :: %__MODULE__{counters: :counters.counters_ref(), latency: Histogram.t()}

  @spec new() :: t()
  def new,
    do: %__MODULE__{
      counters: :counters.new(length(@keys), [:write_concurrency]),
      latency: Histogram.new()
    }

  @spec incr(t(), atom(), integer()) :: :ok
  def incr(%__MODULE__{counters: counters}, key, by \\ 1),
    do: :counters.add(counters, index(key), by)

  @doc "Records an outcome and its round trip in microseconds."
  @spec outcome(t(), atom(), non_neg_integer()) :: :ok
  def outcome(%__MODULE__{counters: counters, latency: latency}, key, micros) do
    :counters.add(counters, index(key), 1)
    Histogram.record(latency, micros)
  end

  @doc "All counters and a latency snapshot, to diff against a later reading."
  @spec read(t()) :: %{counts: %{atom() => integer()}, latency: Histogram.snapshot()}
  def read(%__MODULE__{counters: counters, latency: latency}) do
    %{
      counts: Map.new(@keys, &{&1, :counters.get(counters, index(&1))}),
      latency: Histogram.snapshot(latency)
    }
  end

  @doc "What happened between two readings."
  @spec diff(map(), map()) :: %{counts: %{atom() => integer()}, latency: Histogram.snapshot()}
  def diff(later, earlier) do
    %{
      counts: Map.new(later.counts, fn {k, v} -> {k, v - earlier.counts[k]} end),
      latency: Histogram.diff(later.latency, earlier.latency)
    }
  end
end
