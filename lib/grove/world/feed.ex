defmodule Grove.World.Feed do
  @moduledoc false
  # What zones publish for their viewers, read without a message.
  #
  # A watched zone collects what changes between two ticks and, at the tick,
  # encodes that delta once in every format its viewers read (the gateway's
  # WebSocket frames, `Grove.World.View`'s raw binaries, ...), and puts the
  # result here under the zone's next sequence number. Viewers keep, per
  # zone, the last sequence number they took, and read on from there when
  # they are ready to: a viewer that is behind reads several deltas at once,
  # or finds that the oldest it needs is gone and asks for a snapshot.
  #
  # A zone is the only writer of its entries on its own node (one ETS row per zone and
  # sequence number, with every format in it) and of its sequence number in
  # an `:atomics` array; it writes the row before it publishes the number,
  # so a reader that sees a number finds its row. Rows older than `history`
  # ticks are deleted as new ones arrive. Table and array belong to the
  # world's keeper, so they outlive any zone: a restarted zone carries on
  # from the number it had.
  #
  # In a cluster, a zone that runs on another node is written here by this
  # node's relay (`Grove.World.Relay`), with the numbers the zone gave its
  # deltas: the zone sends each delta, encoded, once to every node where it
  # has viewers. Numbers only go up, but for `reset/3`: a relayed delta
  # that arrives after the zone has moved here and published a later one
  # is kept but does not take the number back, and a zone that starts
  # watched from another node, or comes here from one, sets the number its
  # viewers' snapshots carry with `reset/3`, which forgets the rows kept so
  # far, so that no reader ever takes a delta of another run of the zone.

  #
  # A world of zones on demand keeps each zone's number with its other
  # counters (`Grove.World.Slots`), only while it has them: a zone that
  # falls asleep with nothing to keep forgets its deltas (`forget_zone/3`)
  # and starts again from 0.

  defstruct [:table, :seqs, :history]

  @type format :: {module(), term()}
  @type t :: %__MODULE__{
          table: :ets.tid(),
          seqs: :atomics.atomics_ref() | {:slots, :ets.tid()},
          history: pos_integer()
        }

  @doc """
  A feed for `zones` zones keeping the last `history` deltas of each;
  with `{:slots, table}`, the numbers are the zones' own, in their slots.
  """
  @spec new(pos_integer() | {:slots, :ets.tid()}, pos_integer()) :: t()
  def new(zones, history) do
    %__MODULE__{
      table:
        :ets.new(:grove_feed, [:set, :public, read_concurrency: true, write_concurrency: true]),
      seqs: if(is_integer(zones), do: :atomics.new(zones, signed: false), else: zones),
      history: history
    }
  end

  @doc "The sequence number of the zone's latest delta (0 before the first)."
  @spec latest(t(), non_neg_integer()) :: non_neg_integer()
  def latest(%__MODULE__{} = feed, zone), do: latest_at(seq_ref(feed, zone))

  @doc "Forgets the deltas of a zone whose latest number was `latest`."
  @spec forget_zone(t(), non_neg_integer(), non_neg_integer()) :: :ok
  def forget_zone(%__MODULE__{} = feed, zone, latest),
    do: forget(feed, zone, latest - feed.history + 1, latest)

  defp put_seq(feed, zone, seq) do
    case seq_ref(feed, zone) do
      {ref, at} -> :atomics.put(ref, at, seq)
      nil -> :ok
    end
  end

  @doc """
  Publishes the zone's delta `seq`, one encoding per format; called by the
  zone, or for a zone on another node by this node's relay.
  """
  @spec publish(t(), non_neg_integer(), pos_integer(), [{format(), term()}]) :: :ok
  def publish(%__MODULE__{} = feed, zone, seq, encoded) do
    # A relayed delta older than the history kept would never be deleted.
    if seq > latest(feed, zone) - feed.history do
      :ets.insert(feed.table, {{zone, seq}, encoded})
      advance(feed, zone, seq)
    else
      :ok
    end
  end

  # The number goes up only; after a gap (deltas a relay did not get), the
  # rows the gap pushed out of the history go too.
  defp advance(feed, zone, seq) do
    case latest(feed, zone) do
      latest when latest >= seq ->
        :ok

      latest ->
        case compare_exchange(feed, zone, latest, seq) do
          :ok ->
            forget(feed, zone, latest - feed.history + 1, min(latest, seq - feed.history))

          _changed ->
            advance(feed, zone, seq)
        end
    end
  end

  defp compare_exchange(feed, zone, latest, seq) do
    case seq_ref(feed, zone) do
      {ref, at} -> :atomics.compare_exchange(ref, at, latest, seq)
      # A zone on demand without slots has no viewer to publish to.
      nil -> :ok
    end
  end

  defp forget(feed, zone, first, last) do
    for seq <- max(first, 1)..last//1, do: :ets.delete(feed.table, {zone, seq})
    :ok
  end

  @doc """
  Prepares the feed for a zone that moves to this node from another, where
  it was at `seq`: it carries on from `seq`, or from this feed's latest
  number if that is later (so that it never goes back), and the deltas
  kept so far are forgotten, being of another run of the zone or already
  covered by the snapshots its viewers get when it starts here.
  """
  @spec carry_on(t(), non_neg_integer(), non_neg_integer()) :: :ok
  def carry_on(%__MODULE__{} = feed, zone, seq) do
    case latest(feed, zone) do
      ^seq ->
        :ok

      latest ->
        put_seq(feed, zone, max(latest, seq))
        forget(feed, zone, latest - feed.history + 1, latest)
    end
  end

  @doc """
  Makes `seq` the zone's latest number, forgetting the deltas kept, unless
  it is the latest already: a reader holding an older or a later number
  finds its deltas `:gone` and asks for a snapshot.
  """
  @spec reset(t(), non_neg_integer(), non_neg_integer()) :: :ok
  def reset(%__MODULE__{} = feed, zone, seq) do
    case latest(feed, zone) do
      ^seq ->
        :ok

      latest ->
        put_seq(feed, zone, seq)
        forget(feed, zone, latest - feed.history + 1, latest)
    end
  end

  @doc """
  The zone's deltas after `since`, oldest first, in `format`, with the
  sequence number of the last one; `:gone` when the oldest of them is no
  longer kept (the reader is too far behind and needs a snapshot).
  """
  @spec since(t(), non_neg_integer(), non_neg_integer(), format()) ::
          {[term()], non_neg_integer()} | :gone
  def since(%__MODULE__{} = feed, zone, since, format),
    do: since_at(feed, seq_ref(feed, zone), zone, since, format)

  @doc """
  Where the zone's latest number is kept, for `latest_at/1` and
  `since_at/5` to read without looking the zone up; nil for a zone on
  demand that keeps none. A zone on demand keeps it with its counters
  (`Grove.World.Slots`), which it drops only as it falls asleep with
  nothing to keep: what this gives holds while the zone is watched.
  """
  @spec seq_ref(t(), non_neg_integer()) :: {:atomics.atomics_ref(), pos_integer()} | nil
  def seq_ref(%__MODULE__{seqs: {:slots, slots}}, zone),
    do: Grove.World.Slots.seq_slot(slots, zone)

  def seq_ref(%__MODULE__{seqs: seqs}, zone), do: {seqs, zone + 1}

  @doc "The latest number where `seq_ref/2` said it is kept (0 where none is)."
  @spec latest_at({:atomics.atomics_ref(), pos_integer()} | nil) :: non_neg_integer()
  def latest_at({ref, at}), do: :atomics.get(ref, at)
  def latest_at(nil), do: 0

  @doc "`since/4`, its latest number read where `seq_ref/2` said it is kept."
  @spec since_at(
          t(),
          {:atomics.atomics_ref(), pos_integer()} | nil,
          non_neg_integer(),
          non_neg_integer(),
          format()
        ) :: {[term()], non_neg_integer()} | :gone
  def since_at(%__MODULE__{} = feed, ref, zone, since, format) do
    case latest_at(ref) do
      ^since -> {[], since}
      latest when latest - since > feed.history -> :gone
      latest when latest > since -> collect(feed, zone, latest, since, format, [], latest)
      # The reader holds a number from before a restart of the world: start afresh.
      _older -> :gone
    end
  end

  # Newest first, so the list comes out oldest first.
  defp collect(_feed, _zone, since, since, _format, acc, latest), do: {acc, latest}

  defp collect(feed, zone, seq, since, format, acc, latest) do
    case :ets.lookup(feed.table, {zone, seq}) do
      [{_key, encoded}] ->
        case List.keyfind(encoded, format, 0) do
          {_format, data} -> collect(feed, zone, seq - 1, since, format, [data | acc], latest)
          # Published before this format had a viewer here.
          nil -> :gone
        end

      [] ->
        :gone
    end
  end
end
