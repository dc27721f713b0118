defmodule Grove.Actors.Stats do
  @moduledoc false
  # What the actors see from the client side: moves sent, outcomes by kind,
  # the round trip from sending a move to its outcome, and the moves herds
  # shed rather than queue. Herds record here directly (`:counters`), so
  # reading it costs the herds nothing.
  #
  # Moves skipped, by reason (see Grove.Actors.Herd):
  #
  #   * `:skipped_unanswered` - the actor's previous move had no outcome yet;
  #   * `:skipped_full` - its herd had `max_in_flight` moves unanswered;
  #   * `:skipped_late` - its herd got to it more than `late_ms` after it
  #     was due.
  #
  # `:in_flight` is a gauge kept in a counter: herds add what they send and
  # take off what is answered or given up (`:expired`: no outcome within
  # `move_timeout`). `:join_retried` counts joins refused `:busy` or timed
  # out and tried again later; they are not lost.

  alias Grove.Metrics.Histogram

  @skip_reasons [:unanswered, :full, :late]

  # `:timeout` is the one-GenServer baseline's (`Grove.Bench.Baseline`):
  # its calls can time out; the world's moves always get an outcome.
  @keys [:sent, :joined, :join_failed, :ok | Grove.World.rejections()] ++
          [:timeout, :skipped_unanswered, :skipped_full, :skipped_late] ++
          [:in_flight, :expired, :join_retried]

  for {key, index} <- Enum.with_index(@keys, 1) do
    defp index(unquote(key)), do: unquote(index)
  end

  defstruct [:counters, :latency]

  @type t :: %__MODULE__{counters: :counters.counters_ref(), latency: Histogram.t()}

  @doc "Why a herd skips a move; each is counted as `:skipped_<reason>`."
  @spec skip_reasons() :: [atom()]
  def skip_reasons, do: @skip_reasons

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

  @doc "Moves skipped in all, from a reading's counts."
  @spec skipped(%{atom() => integer()}) :: integer()
  def skipped(counts),
    do: counts.skipped_unanswered + counts.skipped_full + counts.skipped_late

  @doc "What happened between two readings (`:in_flight`, a gauge, keeps the later value)."
  @spec diff(map(), map()) :: %{counts: %{atom() => integer()}, latency: Histogram.snapshot()}
  def diff(later, earlier) do
    %{
      counts:
        Map.new(later.counts, fn
          {:in_flight, v} -> {:in_flight, v}
          {k, v} -> {k, v - earlier.counts[k]}
        end),
      latency: Histogram.diff(later.latency, earlier.latency)
    }
  end
end
