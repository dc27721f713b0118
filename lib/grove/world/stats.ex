defmodule Grove.World.Stats do
  @moduledoc false
  # The world's hot counters: one `:counters` array, written by zones and by
  # the client API without any process hop, read by status lines, benches
  # and (later) the metrics exporters.

  # Moves by outcome first, in the order of `Grove.World.rejections/0`.
  @keys [:moves_ok | Grove.World.rejections()] ++
          [
            :joins,
            :join_failures,
            :leaves,
            :departures,
            :handoffs,
            :handoffs_refused,
            :handoffs_stale,
            :forwards,
            :deltas_published,
            :snapshots_sent,
            # Deltas sent once per node with viewers of a zone elsewhere,
            # and those not sent because that node's connection was busy.
            :deltas_relayed,
            :deltas_dropped,
            :zone_restarts,
            # Zones another node handed to this one at an epoch no newer
            # than the one known here, refused (`Grove.World.Placer.State`).
            :zone_handovers_stale,
            # Resident actors' steps their zone skipped (due too long ago,
            # or while it shed load) and those in which they stood still.
            :resident_skipped,
            :resident_stayed,
            # Zones on demand: started when first needed, and put to sleep;
            # sleeping zones' entities or game's layers written to the store
            # (and writes it refused), zones that read their entities back
            # as they woke (and those it could not give them to). Of the
            # wakes, those ahead of an entity that came near (`:wake_ahead`).
            :zone_wakes,
            :zone_wakes_ahead,
            :zone_sleeps,
            :zone_saves,
            :zone_save_failures,
            :zone_loads,
            :zone_load_failures,
            # Bacteria: generations computed (by all zones), cells born and
            # dead, patterns seeded and refused, looks at the neighbours'
            # rows that found one lagging (tried again 10 ms later).
            :generations,
            :births,
            :deaths,
            :seeds,
            :seeds_refused,
            :life_waits,
            # A game's actions by outcome (done, refused by the game,
            # refused by the world, interrupted), those run across a zone
            # border, those whose answer never came or came too late; its
            # callbacks that failed; its tallies with nowhere to go.
            :acts_ok,
            :acts_refused,
            :acts_rejected,
            :acts_interrupted,
            :acts_across,
            :acts_expired,
            :acts_late,
            :game_failures,
            :tallies_dropped,
            # Live reloads (`Grove.Reloader`) by outcome: loaded, refused
            # (the old code kept), put off (a zone did not answer in time
            # to be held: tried again); and the zones that did not answer.
            :reloads,
            :reloads_refused,
            :reloads_put_off,
            :reload_zones_late,
            # The game's state in the store: batches saved, zones saved in
            # them (of which whole bases, the others their changed cells
            # alone), zones loaded from a save, zones laid anew without asking
            # the store (the world knows they have no save), saves (and
            # loads) that failed, tallies written.
            :game_saves,
            :game_zones_saved,
            :game_bases_saved,
            :game_zones_loaded,
            :game_loads_skipped,
            :game_save_failures,
            :tallies_written,
            # Chat: lines said (told to the speaker's viewers), and lines
            # the world refused (busy, not the speaker's, no such entity).
            :chat_lines,
            :chat_rejected,
            # Gauges: how many entities of each kind are in the world now.
            :players,
            :actors,
            :bacteria
          ]

  for {key, index} <- Enum.with_index(@keys, 1) do
    defp index(unquote(key)), do: unquote(index)
  end

  @type key :: atom()
  @type t :: :counters.counters_ref()

  @spec new() :: t()
  def new, do: :counters.new(length(@keys), [:write_concurrency])

  @spec incr(t(), key(), integer()) :: :ok
  def incr(stats, key, by \\ 1), do: :counters.add(stats, index(key), by)

  @doc "The counter key for a move outcome."
  @spec outcome_key(:ok | atom()) :: key()
  def outcome_key(:ok), do: :moves_ok
  def outcome_key(reason), do: reason

  @spec get(t(), key()) :: integer()
  def get(stats, key), do: :counters.get(stats, index(key))

  @spec read(t()) :: %{key() => integer()}
  def read(stats), do: Map.new(@keys, &{&1, :counters.get(stats, index(&1))})
end
