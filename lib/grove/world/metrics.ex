defmodule Grove.World.Metrics do
  @moduledoc """
  The world's metrics (a `Grove.Metrics.Source`; its argument is the
  world's name): moves by outcome, handoffs, entities, views, zones'
  mailboxes and ticks, bacteria; and for the dashboard, their rates and a
  heat map of every zone's moves per second.
  """

  @behaviour Grove.Metrics.Source

  import Grove.Metrics.Histogram, only: [to_ms: 1]
  import Grove.Metrics.Source, only: [per_second: 3]

  alias Grove.Metrics.Histogram
  alias Grove.World

  @outcomes [:moves_ok | World.rejections()]

  @impl true
  def metrics(name) do
    world = World.fetch!(name)
    stats = World.stats(world)
    loads = World.zone_loads(world)

    [
      {"grove_moves_total", :counter, "Moves decided by zones, by outcome.",
       for(key <- @outcomes, do: {[outcome: outcome_label(key)], stats[key]})},
      {"grove_handoffs_total", :counter, "Entities handed from zone to zone.",
       [{[], stats.handoffs}]},
      {"grove_acts_total", :counter,
       "A game's actions decided by zones, by outcome: done, refused by the game, rejected by the world, interrupted.",
       for(
         {key, outcome} <- [
           acts_ok: :ok,
           acts_refused: :refused,
           acts_rejected: :rejected,
           acts_interrupted: :interrupted
         ],
         do: {[outcome: outcome], stats[key]}
       )},
      {"grove_chat_lines_total", :counter,
       "Lines said by players and told to those who see them.", [{[], stats.chat_lines}]},
      {"grove_chat_refused_total", :counter,
       "Lines not said, by reason: refused by the gateway (empty, too_long, bad_utf8, " <>
         "bad_character, rate_limited) or by the world (busy, not the speaker's, no such entity).",
       [{[reason: :world], stats.chat_rejected}]},
      {"grove_chat_log_lines", :gauge,
       "Lines kept in the world's recent chat log in memory, and how many it may keep.",
       (fn {kept, max} -> [{[kept: :now], kept}, {[kept: :max], max}] end).(
         World.chat_log_usage(world)
       )},
      {"grove_acts_across_total", :counter,
       "A game's actions run in the zone of their target, across a zone border.",
       [{[], stats.acts_across}]},
      {"grove_acts_expired_total", :counter,
       "Actions across a zone border whose answer never came (their zone died), answered interrupted.",
       [{[], stats.acts_expired}]},
      {"grove_game_failures_total", :counter,
       "A game's callbacks that raised or answered something malformed (each logged at most once every 10 s).",
       [{[], stats.game_failures}]},
      {"grove_reloads_total", :counter,
       "Live reloads of changed code (development): loaded, refused (the old code and state kept), " <>
         "or put off because a zone did not answer in time to be held (tried again).",
       [
         {[result: :ok], stats.reloads},
         {[result: :refused], stats.reloads_refused},
         {[result: :put_off], stats.reloads_put_off}
       ]},
      {"grove_reload_zones_late_total", :counter,
       "Zones that did not answer in time to be held for a live reload.",
       [{[], stats.reload_zones_late}]},
      {"grove_game_tallies_dropped_total", :counter,
       "A game's tallies with no tally to go to (a world without a store).",
       [{[], stats.tallies_dropped}]},
      {"grove_game_tallies_written_total", :counter,
       "Tally totals written to the store (each node its own share).",
       [{[], stats.tallies_written}]},
      {"grove_game_saves_total", :counter,
       "Batches of zones' game state written to the store, and those the store could not take.",
       [{[result: :ok], stats.game_saves}, {[result: :failed], stats.game_save_failures}]},
      {"grove_game_zones_saved_total", :counter, "Zones' game layers written to the store.",
       [{[], stats.game_zones_saved}]},
      {"grove_game_bases_saved_total", :counter,
       "Zones' game layers written whole (a base); the others were written as their changed cells.",
       [{[], stats.game_bases_saved}]},
      {"grove_game_zones_loaded_total", :counter,
       "Zones that started from their save in the store (a world starting again, a lost node's zones).",
       [{[], stats.game_zones_loaded}]},
      {"grove_game_loads_skipped_total", :counter,
       "Zones on demand whose game layer was laid anew without a read of the store, known to have no save there.",
       [{[], stats.game_loads_skipped}]},
      {"grove_game_save_age_seconds", :gauge,
       "Seconds since the zones' game state was last saved: what a zone lost with its node would miss, at most.",
       case World.Game.saved_at(world) do
         nil -> []
         at -> [{[], (System.system_time(:millisecond) - at) / 1000}]
       end},
      {"grove_joins_total", :counter, "Entities that joined the world.", [{[], stats.joins}]},
      {"grove_departures_total", :counter, "Entities that left or whose client died.",
       [{[], stats.departures}]},
      {"grove_zone_restarts_total", :counter, "Zones restarted with their entities.",
       [{[], stats.zone_restarts}]},
      {"grove_zone_handovers_stale_total", :counter,
       "Zones another node handed to this one at an epoch no newer than the one known here, refused: the zone had moved on.",
       [{[], stats.zone_handovers_stale}]},
      {"grove_zone_wakes_total", :counter,
       "Zones on demand started because something needed them.", [{[], stats.zone_wakes}]},
      {"grove_zone_wakes_ahead_total", :counter,
       "Of the zones on demand started, those woken ahead of an entity that came near.",
       [{[], stats.zone_wakes_ahead}]},
      {"grove_zone_sleeps_total", :counter, "Zones on demand put to sleep when idle.",
       [{[], stats.zone_sleeps}]},
      {"grove_zone_saves_total", :counter,
       "What sleeping zones held (entities, a game's layer) written to the store.",
       [{[], stats.zone_saves}]},
      {"grove_zone_save_failures_total", :counter,
       "Writes of zones falling asleep that the store refused; each such zone stays awake and tries again.",
       [{[], stats.zone_save_failures}]},
      {"grove_zone_loads_total", :counter,
       "Zones that read their entities back from the store as they woke.",
       [{[], stats.zone_loads}]},
      {"grove_zone_load_failures_total", :counter,
       "Zones that woke without the entities they slept with: the store could not give them.",
       [{[], stats.zone_load_failures}]},
      {"grove_zones_awake", :gauge,
       "Zones running now (every zone, unless zones start on demand).",
       [{[], stats.zones_awake}]},
      {"grove_view_deltas_total", :counter,
       "View deltas zones published for their viewers (each encoded once per format).",
       [{[], stats.deltas_published}]},
      {"grove_view_snapshots_total", :counter, "Zone snapshots sent to viewers.",
       [{[], stats.snapshots_sent}]},
      {"grove_view_deltas_relayed_total", :counter,
       "View deltas sent to other nodes' relays, once per node with viewers of the zone.",
       [{[], stats.deltas_relayed}]},
      {"grove_view_deltas_dropped_total", :counter,
       "View deltas not sent to another node because the connection to it was busy.",
       [{[], stats.deltas_dropped}]},
      {"grove_entities", :gauge, "Entities in the world.", [{[], stats.entities}]},
      {"grove_players", :gauge, "Players in the world.", [{[], stats.players}]},
      {"grove_actors", :gauge, "Actors in the world.", [{[], stats.actors}]},
      {"grove_zone_mailbox_max", :gauge, "The longest zone mailbox, as zones last measured it.",
       [{[], stats.zone_mailbox_max}]},
      {"grove_zone_mailbox", :gauge, "Mailbox length of the five busiest zones.",
       loads
       |> Enum.sort_by(& &1.mailbox, :desc)
       |> Enum.take(5)
       |> Enum.map(&{[zone: &1.zone], &1.mailbox})},
      {"grove_zone_tick_duration_seconds", :histogram,
       "Time a zone takes to publish a delta: at its tick, or, in a zone with one viewer, " <>
         "in the turn of each move or game tick that changed it.",
       [{[], Histogram.export(world.tick_time, 1_000_000)}]},
      {"grove_resident_steps_total", :counter,
       "Resident actors' steps: taken by their zones (whatever came of them), or skipped " <>
         "(due too long ago, or while the zone shed load).",
       [
         {[result: :taken], Histogram.count(world.resident_lateness)},
         {[result: :skipped], stats.resident_skipped}
       ]},
      {"grove_resident_stood_total", :counter,
       "Of the resident actors' steps taken, those in which they stood still.",
       [{[], stats.resident_stayed}]},
      {"grove_resident_step_lateness_seconds", :histogram,
       "How late a resident actor's step came: from when its beat was due to when its zone took it.",
       [{[], Histogram.export(world.resident_lateness, 1_000_000)}]},
      {"grove_bacteria", :gauge, "Live bacteria (cells of the Game of Life) in the world.",
       [{[], stats.bacteria}]},
      {"grove_life_births_total", :counter, "Bacteria born, seeded ones included.",
       [{[], stats.births}]},
      {"grove_life_deaths_total", :counter, "Bacteria that died.", [{[], stats.deaths}]},
      {"grove_life_generations_total", :counter, "Generations computed, summed over zones.",
       [{[], stats.generations}]},
      {"grove_life_waits_total", :counter,
       "Looks of a zone at its neighbours' rows of bacteria that found one lagging, each 10 ms apart.",
       [{[], stats.life_waits}]},
      {"grove_life_generation_duration_seconds", :histogram,
       "Time a zone takes to compute one generation of bacteria.",
       case world.life_time do
         nil -> []
         life_time -> [{[], Histogram.export(life_time, 1_000_000)}]
       end}
    ]
  end

  @impl true
  def reading(name) do
    world = World.fetch!(name)

    %{
      stats: World.stats(world),
      zones: World.zone_loads(world),
      tick: Histogram.snapshot(world.tick_time)
    }
  end

  @impl true
  def sample(_name, before, now, seconds) do
    rate = fn key -> per_second(now.stats[key], before.stats[key], seconds) end
    moves = Enum.reduce(@outcomes, 0, &(&2 + now.stats[&1] - before.stats[&1]))
    tick = Histogram.diff(now.tick, before.tick)

    fields = %{
      moves_per_s: round(moves / seconds),
      moves_ok_per_s: rate.(:moves_ok),
      busy_per_s: rate.(:busy),
      handoffs_per_s: rate.(:handoffs),
      entities: now.stats.entities,
      players: now.stats.players,
      actors: now.stats.actors,
      zone_mailbox_max: now.stats.zone_mailbox_max,
      tick_p99_ms: to_ms(Histogram.percentile(tick, 99))
    }

    # By zone: a world of zones on demand knows zones that come and go.
    moved = Map.new(before.zones, &{&1.zone, &1.moves})

    heat =
      for %{zone: zone, moves: moves} <- now.zones,
          do: per_second(moves, min(Map.get(moved, zone, 0), moves), seconds)

    {fields, %{zone_heat: heat}}
  end

  defp outcome_label(:moves_ok), do: :ok
  defp outcome_label(key), do: key
end
