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
  # out and tried again later; they are not lost. `:stayed` counts steps
  # whose kind chose not to move (nothing was sent); `:rested`, turns an
  # actor let pass where nobody watches (`:unseen_every`; nothing was
  # decided or sent). `:left` counts actors
  # a herd retired (they left the world: the cluster's members changed),
  # and `:leave_retried` their leaves refused `:busy` or timed out and
  # tried again; `:joined` minus `:left` is how many of this node's actors
  # are in the world. `:lost` counts actors whose entities went with a
  # lost node (or whose node paused, short of its cluster's quorum); each
  # is taken off `:joined` and joins again. `:sent_remote` counts
  # the moves sent to a zone another node of the cluster runs (a world
  # alone sends none, and its herds do not look).
  #
  # Per kind: one `:counters` array holds a row of every key for each kind
  # of the group; a herd writes its kind's row through the handle
  # `for_kind/2` gives it (as cheap as a single row), `read/1` sums the
  # rows and `read_kind/2` reads one. The round trip histogram is shared.

  alias Grove.Metrics.Histogram

  @skip_reasons [:unanswered, :full, :late]

  # `:timeout` is the one-GenServer baseline's (the lab's `Grove.Bench.Baseline`):
  # its calls can time out; the world's moves always get an outcome.
  # A game's actions (`Grove.Game`) are counted as sent, then as `:acted`
  # (done), `:refused` (by the game), or the world's reason, beside moves'.
  @keys [:sent, :joined, :join_failed, :ok | Grove.World.rejections()] ++
          [:timeout, :skipped_unanswered, :skipped_full, :skipped_late] ++
          [:in_flight, :expired, :join_retried, :stayed, :rested, :sent_remote] ++
          [:left, :leave_retried, :lost] ++
          [:acts_sent, :acted, :refused, :unknown_action, :bad_args, :out_of_reach, :disabled]
  @size length(@keys)

  for {key, index} <- Enum.with_index(@keys, 1) do
    defp index(unquote(key)), do: unquote(index)
  end

  defstruct [:counters, :latency, kinds: 1, offset: 0]

  @type t :: %__MODULE__{
          counters: :counters.counters_ref(),
          latency: Histogram.t(),
          kinds: pos_integer(),
          offset: non_neg_integer()
        }

  @doc "Why a herd skips a move; each is counted as `:skipped_<reason>`."
  @spec skip_reasons() :: [atom()]
  def skip_reasons, do: @skip_reasons

  @doc "Counters for `kinds` kinds of actors (a row each) and one round trip histogram."
  @spec new(pos_integer()) :: t()
  def new(kinds \\ 1) when is_integer(kinds) and kinds > 0,
    do: %__MODULE__{
      counters: :counters.new(@size * kinds, [:write_concurrency]),
      latency: Histogram.new(),
      kinds: kinds
    }

  @doc "The handle a herd of the `kind`th kind (from 0) counts with."
  @spec for_kind(t(), non_neg_integer()) :: t()
  def for_kind(%__MODULE__{kinds: kinds} = stats, kind) when kind in 0..(kinds - 1)//1,
    do: %{stats | offset: kind * @size}

  @spec incr(t(), atom(), integer()) :: :ok
  def incr(%__MODULE__{counters: counters, offset: offset}, key, by \\ 1),
    do: :counters.add(counters, offset + index(key), by)

  @doc """
  Records outcomes of one round trip (a batch answered at once), by key
  (`[{key, count}]`, counts of 0 skipped): each key's counter, and the
  round trip once for them all.
  """
  @spec outcomes(t(), [{atom(), non_neg_integer()}], non_neg_integer()) :: :ok
  def outcomes(%__MODULE__{counters: counters, latency: latency, offset: offset}, keyed, micros) do
    total =
      Enum.reduce(keyed, 0, fn
        {_key, 0}, total ->
          total

        {key, count}, total ->
          :counters.add(counters, offset + index(key), count)
          total + count
      end)

    if total > 0, do: Histogram.record(latency, micros, total)
    :ok
  end

  @doc "All counters, every kind's summed, and a latency snapshot, to diff against a later reading."
  @spec read(t()) :: %{counts: %{atom() => integer()}, latency: Histogram.snapshot()}
  def read(%__MODULE__{counters: counters, latency: latency, kinds: kinds}) do
    %{
      counts:
        Map.new(@keys, fn key ->
          {key,
           Enum.reduce(
             0..(kinds - 1),
             0,
             &(&2 + :counters.get(counters, &1 * @size + index(key)))
           )}
        end),
      latency: Histogram.snapshot(latency)
    }
  end

  @doc "The counters of the `kind`th kind (from 0) alone."
  @spec read_kind(t(), non_neg_integer()) :: %{atom() => integer()}
  def read_kind(%__MODULE__{counters: counters, kinds: kinds}, kind)
      when kind in 0..(kinds - 1)//1,
      do: Map.new(@keys, &{&1, :counters.get(counters, kind * @size + index(&1))})

  @doc "Every reason a move is counted under: `:ok` and the world's rejections."
  @spec outcomes() :: [atom()]
  def outcomes, do: [:ok | Grove.World.rejections()]

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
