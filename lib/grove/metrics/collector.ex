defmodule Grove.Metrics.Collector do
  @moduledoc """
  Gathers a Grove instance's metrics: it attaches to the events of
  `Grove.Metrics` (zone ticks, sessions, protocol errors, load reports),
  reads the counters the world, the gateway and the actors keep in place,
  and samples the BEAM. Once a second it records a sample of every series
  (rates, percentiles, gauges) in a history table, kept for `:history`
  seconds (an hour by default), so a dashboard that reloads loses nothing.

  Readers never wait for it: the history lives in an ETS table
  (`history/2`), and `metrics/1` reads the counters directly.

  ## Options

    * `:instance` - the Grove instance (required)
    * `:interval` - milliseconds between samples (default `1000`)
    * `:history` - samples kept (default `3600`)
  """

  use GenServer

  import Grove.Metrics.Histogram, only: [to_ms: 1]

  alias Grove.{Actors, Gateway, Metrics, World}
  alias Grove.Metrics.Histogram

  @outcomes [:moves_ok | World.rejections()]
  # Load reports older than this are no longer "a load run going on".
  @load_report_ttl_ms 15_000

  defstruct [
    :instance,
    :interval,
    :history,
    :table,
    :handler_id,
    :last,
    :scheduler,
    tick: nil,
    errors: nil
  ]

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
    table = table(instance)
    :ets.select(table, [{{:"$1", :"$2"}, [{:>, :"$1", since_ms}], [:"$2"]}])
  end

  @doc "Moves per second of every zone over the last sample, for heat maps."
  @spec zone_heat(atom()) :: [non_neg_integer()]
  def zone_heat(instance) do
    case :ets.lookup(:persistent_term.get({__MODULE__, instance}).load, :zones) do
      [{:zones, rates}] -> rates
      [] -> []
    end
  end

  @doc "The latest sample, or `nil` before the first."
  @spec latest(atom()) :: map() | nil
  def latest(instance) do
    table = table(instance)

    case :ets.last(table) do
      :"$end_of_table" -> nil
      key -> :ets.lookup_element(table, key, 2)
    end
  end

  @doc """
  Every metric now, for exporters: a list of `{name, type, help, values}`
  where values are `{labels, number}` for counters and gauges and
  `{labels, %{buckets: [{le, count}], sum: number, count: integer}}` for
  histograms (in seconds).
  """
  @spec metrics(atom()) :: [{String.t(), :counter | :gauge | :histogram, String.t(), list()}]
  def metrics(instance) do
    %{tick: tick, errors: errors} = :persistent_term.get({__MODULE__, instance})
    world = World.stats(Grove.world(instance))
    gateway = gateway_stats()
    actor_latency = actor_histogram(instance)
    actors = actor_stats(instance)
    kinds = actor_kinds(instance)
    loads = World.zone_loads(Grove.world(instance))
    memory = :erlang.memory()
    latest = latest(instance) || %{}

    [
      {"grove_moves_total", :counter, "Moves decided by zones, by outcome.",
       for(key <- @outcomes, do: {[outcome: outcome_label(key)], world[key]})},
      {"grove_handoffs_total", :counter, "Entities handed from zone to zone.",
       [{[], world.handoffs}]},
      {"grove_acts_total", :counter,
       "A game's actions decided by zones, by outcome: done, refused by the game, rejected by the world, interrupted.",
       for(
         {key, outcome} <- [
           acts_ok: :ok,
           acts_refused: :refused,
           acts_rejected: :rejected,
           acts_interrupted: :interrupted
         ],
         do: {[outcome: outcome], world[key]}
       )},
      {"grove_acts_across_total", :counter,
       "A game's actions run in the zone of their target, across a zone border.",
       [{[], world.acts_across}]},
      {"grove_acts_expired_total", :counter,
       "Actions across a zone border whose answer never came (their zone died), answered interrupted.",
       [{[], world.acts_expired}]},
      {"grove_game_failures_total", :counter,
       "A game's callbacks that raised or answered something malformed (each logged at most once every 10 s).",
       [{[], world.game_failures}]},
      {"grove_game_tallies_dropped_total", :counter,
       "A game's tallies with no tally to go to (a world without a store).",
       [{[], world.tallies_dropped}]},
      {"grove_game_tallies_written_total", :counter,
       "Tally totals written to the store (each node its own share).",
       [{[], world.tallies_written}]},
      {"grove_game_saves_total", :counter,
       "Batches of zones' game state written to the store, and those the store could not take.",
       [{[result: :ok], world.game_saves}, {[result: :failed], world.game_save_failures}]},
      {"grove_game_zones_saved_total", :counter, "Zones' game layers written to the store.",
       [{[], world.game_zones_saved}]},
      {"grove_game_zones_loaded_total", :counter,
       "Zones that started from their save in the store (a world starting again, a lost node's zones).",
       [{[], world.game_zones_loaded}]},
      {"grove_game_save_age_seconds", :gauge,
       "Seconds since the zones' game state was last saved: what a zone lost with its node would miss, at most.",
       case World.Game.saved_at(Grove.world(instance)) do
         nil -> []
         at -> [{[], (System.system_time(:millisecond) - at) / 1000}]
       end},
      {"grove_joins_total", :counter, "Entities that joined the world.", [{[], world.joins}]},
      {"grove_departures_total", :counter, "Entities that left or whose client died.",
       [{[], world.departures}]},
      {"grove_zone_restarts_total", :counter, "Zones restarted with their entities.",
       [{[], world.zone_restarts}]},
      {"grove_zone_wakes_total", :counter,
       "Zones on demand started because something needed them.", [{[], world.zone_wakes}]},
      {"grove_zone_sleeps_total", :counter, "Zones on demand put to sleep when idle.",
       [{[], world.zone_sleeps}]},
      {"grove_zones_awake", :gauge,
       "Zones running now (every zone, unless zones start on demand).",
       [{[], world.zones_awake}]},
      {"grove_view_deltas_total", :counter,
       "View deltas zones published for their viewers (each encoded once per format).",
       [{[], world.deltas_published}]},
      {"grove_view_snapshots_total", :counter, "Zone snapshots sent to viewers.",
       [{[], world.snapshots_sent}]},
      {"grove_view_deltas_relayed_total", :counter,
       "View deltas sent to other nodes' relays, once per node with viewers of the zone.",
       [{[], world.deltas_relayed}]},
      {"grove_view_deltas_dropped_total", :counter,
       "View deltas not sent to another node because the connection to it was busy.",
       [{[], world.deltas_dropped}]},
      {"grove_cluster_bytes_total", :counter,
       "Bytes to and from each other node over distributed Erlang, since its connection came up.",
       for(
         {peer, counts} <- Grove.Cluster.traffic(),
         {direction, bytes} <- counts,
         do: {[peer: peer, direction: direction], bytes}
       )},
      {"grove_entities", :gauge, "Entities in the world.", [{[], world.entities}]},
      {"grove_players", :gauge, "Players in the world.", [{[], world.players}]},
      {"grove_actors", :gauge, "Actors in the world.", [{[], world.actors}]},
      {"grove_zone_mailbox_max", :gauge, "The longest zone mailbox, as zones last measured it.",
       [{[], world.zone_mailbox_max}]},
      {"grove_zone_mailbox", :gauge, "Mailbox length of the five busiest zones.",
       loads
       |> Enum.sort_by(& &1.mailbox, :desc)
       |> Enum.take(5)
       |> Enum.map(&{[zone: &1.zone], &1.mailbox})},
      {"grove_zone_tick_duration_seconds", :histogram,
       "Time a zone takes for its tick (deltas and upkeep).", [{[], histogram(tick, 1_000_000)}]},
      {"grove_bacteria", :gauge, "Live bacteria (cells of the Game of Life) in the world.",
       [{[], world.bacteria}]},
      {"grove_life_births_total", :counter, "Bacteria born, seeded ones included.",
       [{[], world.births}]},
      {"grove_life_deaths_total", :counter, "Bacteria that died.", [{[], world.deaths}]},
      {"grove_life_generations_total", :counter, "Generations computed, summed over zones.",
       [{[], world.generations}]},
      {"grove_life_generation_duration_seconds", :histogram,
       "Time a zone takes to compute one generation of bacteria.",
       case World.fetch!(Grove.world(instance)).life_time do
         nil -> []
         life_time -> [{[], histogram(life_time, 1_000_000)}]
       end},
      {"grove_actor_move_round_trip_seconds", :histogram,
       "Round trip of actors' moves, send to outcome.",
       if(actor_latency, do: [{[], histogram(actor_latency, 1_000_000)}], else: [])},
      {"grove_actors_of_kind", :gauge, "Actors of each kind in the world.",
       for(kind <- kinds, kind.actors != nil, do: {[kind: kind.name], kind.actors})},
      {"grove_actors_share", :gauge,
       "Actors of each kind this node owes: its share of a cluster's total, or all of them alone.",
       for(kind <- kinds, do: {[kind: kind.name], kind.share})},
      {"grove_actors_retired_total", :counter,
       "Actors this node retired (they left the world) since the cluster's members changed.",
       for(kind <- kinds, do: {[kind: kind.name], kind.counts.left})},
      {"grove_actor_moves_total", :counter,
       "Actors' moves by kind and outcome, as the actors received them.",
       for(
         kind <- kinds,
         outcome <- Actors.Stats.outcomes(),
         do: {[kind: kind.name, outcome: outcome], kind.counts[outcome]}
       )},
      {"grove_actor_stays_total", :counter,
       "Steps actors of each kind chose to stand still (nothing sent).",
       for(kind <- kinds, do: {[kind: kind.name], kind.counts.stayed})},
      {"grove_actor_moves_sent_total", :counter, "Moves the actors sent.",
       actor_values(actors, &[{[], &1.counts.sent}])},
      {"grove_actor_moves_sent_remote_total", :counter,
       "Moves the actors sent to zones another node of the cluster runs (none on a node alone).",
       actor_values(actors, &[{[], &1.counts.sent_remote}])},
      {"grove_actor_moves_skipped_total", :counter,
       "Moves the actors skipped rather than queue: the previous one unanswered, " <>
         "the herd's moves in flight at their limit, or the herd late.",
       actor_values(actors, fn read ->
         for reason <- Actors.Stats.skip_reasons(),
             do: {[reason: reason], read.counts[:"skipped_#{reason}"]}
       end)},
      {"grove_actor_moves_in_flight", :gauge, "Actors' moves sent and not yet answered.",
       actor_values(actors, &[{[], &1.counts.in_flight}])},
      {"grove_actor_moves_expired_total", :counter,
       "Actors' moves given up on for want of an outcome.",
       actor_values(actors, &[{[], &1.counts.expired}])},
      {"grove_actor_joins_retried_total", :counter,
       "Actors' joins refused busy or timed out, tried again later.",
       actor_values(actors, &[{[], &1.counts.join_retried}])},
      {"grove_player_move_seconds", :histogram,
       "Players' moves on the server: from the frame read off the socket to the outcome written.",
       case player_histogram() do
         nil -> []
         source -> [{[], histogram(source, 1_000_000)}]
       end},
      {"grove_sessions", :gauge, "Connected WebSocket sessions.",
       [{[], gateway[:sessions] || 0}]},
      {"grove_sessions_refused_total", :counter,
       "WebSocket upgrades refused because the gateway was full.",
       [{[], gateway[:refused] || 0}]},
      {"grove_socket_writes_total", :counter,
       "Writes to clients' sockets (each carries every frame then due), by encoding.",
       [
         {[encoding: "json"], gateway[:writes_json] || 0},
         {[encoding: "binary"], gateway[:writes_binary] || 0}
       ]},
      {"grove_bytes_out_total", :counter, "Bytes sent to clients, by encoding.",
       [
         {[encoding: "json"], gateway[:bytes_out_json] || 0},
         {[encoding: "binary"], gateway[:bytes_out_binary] || 0}
       ]},
      {"grove_frames_in_total", :counter, "Frames received from clients.",
       [{[], gateway[:frames_in] || 0}]},
      {"grove_views_held_total", :counter,
       "Writes that left views and broadcasts behind because the socket was behind.",
       [{[], gateway[:views_held] || 0}]},
      {"grove_slow_consumers_total", :counter, "Connections closed for not keeping up.",
       [{[], gateway[:slow_consumers] || 0}]},
      {"grove_goodbyes_reset_total", :counter,
       "Connections reset because the client did not take its goodbye in time.",
       [{[], gateway[:goodbyes_reset] || 0}]},
      {"grove_positions_unavailable_total", :counter,
       "Players placed at random because the store could not say where they stood.",
       [{[], gateway[:positions_unavailable] || 0}]},
      {"grove_moves_settled_total", :counter,
       "Players' moves answered by the gateway because their zone died holding them.",
       [{[], gateway[:moves_settled] || 0}]},
      {"grove_players_restored_total", :counter,
       "Players placed again after their area was lost with its node.",
       [{[], gateway[:restored] || 0}]},
      {"grove_players_rejoin_asked_total", :counter,
       "Players told to reconnect: their node lost its cluster's quorum, or had no cell for them.",
       [{[], gateway[:rejoin_asked] || 0}]},
      {"grove_http_refused_total", :counter,
       "HTTP requests refused as they were read, by status: malformed (400, 501, 505), " <>
         "a body, request target or headers over the limit (413, 414, 431).",
       for(
         status <- [400, 413, 414, 431, 501, 505],
         do: {[status: status], gateway[:"refused_#{status}"] || 0}
       )},
      {"grove_http_client_errors_total", :counter,
       "HTTP clients that closed their connection or fell silent in the middle of a request.",
       [{[], gateway[:client_errors] || 0}]},
      {"grove_http_cut_by_stop_total", :counter,
       "HTTP requests in flight when a stop ended the server, cut without an answer.",
       [{[], gateway[:cut_by_stop] || 0}]},
      {"grove_player_acts_refused_total", :counter,
       "Players' actions the gateway answered itself: an unknown action or bad arguments, " <>
         "and more than the connection's rate.",
       [
         {[reason: :bad_action], gateway[:acts_refused] || 0},
         {[reason: :rate_limited], gateway[:acts_rate_limited] || 0}
       ]}
    ] ++
      request_metrics(instance) ++
      [
        {"grove_protocol_errors_total", :counter, "Bad client messages, by error code.",
         for({code, ref} <- errors, do: {[code: code], :counters.get(ref, 1)})},
        {"grove_beam_memory_bytes", :gauge, "Memory the BEAM uses, by kind.",
         for(
           kind <- [:total, :processes, :ets, :binary, :atom, :code],
           do: {[kind: kind], memory[kind]}
         )},
        {"grove_beam_processes", :gauge, "Processes in the BEAM.",
         [{[], :erlang.system_info(:process_count)}]},
        {"grove_beam_ports", :gauge, "Ports (sockets, files, drivers) open in the BEAM.",
         [{[], :erlang.system_info(:port_count)}]},
        {"grove_beam_ets_tables", :gauge, "ETS tables in the BEAM.", [{[], length(:ets.all())}]},
        {"grove_beam_mailbox_max", :gauge,
         "The longest mailbox of any process, read at scrape time.", [{[], mailbox_max()}]},
        {"grove_beam_run_queue", :gauge, "Processes waiting for a scheduler.",
         [{[], :erlang.statistics(:total_run_queue_lengths)}]},
        {"grove_beam_scheduler_utilization", :gauge,
         "Share of time schedulers were busy over the last sample.",
         [{[], Map.get(latest, :scheduler_utilization, 0.0)}]}
      ]
  end

  # Where HTTP requests wait, and the store behind them.
  defp request_metrics(instance) do
    clock =
      case Gateway.lookup() do
        %{clock: clock} -> Grove.Gateway.Clock.read(clock)
        _ -> nil
      end

    accounts = Grove.Accounts.lookup(:"#{instance}.Accounts")
    store = Grove.store(instance)
    store_waits = Grove.Store.waits(store)
    store_stats = Grove.Store.stats(store)

    waits =
      if(clock, do: Enum.to_list(clock.waits), else: []) ++
        if(accounts, do: [password: Grove.Accounts.hash_waits(accounts.name)], else: []) ++
        if(store_waits,
          do: [store_queue: store_waits.queue, database: store_waits.database],
          else: []
        )

    [
      {"grove_request_wait_seconds", :histogram,
       "Where HTTP requests wait, by stage: accept (a new connection to its first request line), " <>
         "head (reading the head), handler (Yaws and the body, to the handler), password " <>
         "(for a permit to hash), store_queue (for a store worker), database (a read, or a " <>
         "batch's whole transaction).",
       for({stage, source} <- waits, do: {[stage: stage], histogram(source, 1_000_000)})},
      {"grove_http_late_total", :counter,
       "API requests answered 503 because their deadline could not be kept, by where: " <>
         "arrival (passed before the handler), password (no permit in time), store (no answer in time).",
       if(clock, do: for({stage, n} <- clock.late, do: {[stage: stage], n}), else: [])},
      {"grove_store_requests_total", :counter,
       "Store requests by outcome: completed, errors, rejected_full (the queue was full), " <>
         "expired (dropped unrun past their deadline), timed_out (their caller stopped waiting).",
       if(store_waits,
         do:
           for(
             outcome <- [:completed, :errors, :rejected_full, :expired, :timed_out],
             do: {[outcome: outcome], store_stats[outcome]}
           ),
         else: []
       )},
      {"grove_store_queued", :gauge, "Store requests waiting for a worker.",
       if(store_waits, do: [{[], store_stats.queued}], else: [])},
      {"grove_store_transactions_total", :counter,
       "Transactions that committed writes (a group commit each).",
       if(store_waits, do: [{[], store_stats.transactions}], else: [])},
      {"grove_store_batched_writes_total", :counter,
       "Writes committed by those transactions; divided by them, the mean group.",
       if(store_waits, do: [{[], store_stats.batched_writes}], else: [])}
    ]
  end

  defp histogram(source, per_second) do
    %{
      buckets:
        for(
          {edge, count} <- Histogram.cumulative_powers(source, 34),
          do: {edge / per_second, count}
        ),
      sum: Histogram.sum(source) / per_second,
      count: Histogram.count(source)
    }
  end

  defp actor_values(nil, _values), do: []
  defp actor_values(read, values), do: values.(read)

  defp outcome_label(:moves_ok), do: :ok
  defp outcome_label(key), do: key

  # Callbacks

  @impl true
  def init(opts) do
    instance = Keyword.fetch!(opts, :instance)
    table = :ets.new(:grove_metrics_history, [:ordered_set, :protected, read_concurrency: true])
    # The latest zone heat map and load report; load reports are written by
    # whoever receives them (the gateway's request process).
    load = :ets.new(:grove_metrics_latest, [:set, :public, read_concurrency: true])
    tick = Histogram.new()
    errors = Map.new(Grove.Protocol.error_codes(), &{&1, :counters.new(1, [:write_concurrency])})

    :persistent_term.put({__MODULE__, instance}, %{
      table: table,
      load: load,
      tick: tick,
      errors: errors
    })

    handler_id = {__MODULE__, instance}
    # A collector that was killed could not detach its handler; this one
    # replaces it (the old one holds the old counters).
    _ = Metrics.detach(handler_id)

    :ok =
      Metrics.attach_many(
        handler_id,
        [[:grove, :zone, :tick], [:grove, :session, :protocol_error], [:grove, :load, :report]],
        &__MODULE__.handle_event/4,
        %{
          tick: tick,
          errors: errors,
          load: load,
          instance: instance,
          world: Grove.world(instance)
        }
      )

    state = %__MODULE__{
      instance: instance,
      interval: Keyword.get(opts, :interval, 1000),
      history: Keyword.get(opts, :history, 3600),
      table: table,
      handler_id: handler_id,
      tick: tick,
      errors: errors,
      scheduler: :scheduler.sample()
    }

    Process.flag(:trap_exit, true)
    {:ok, schedule(%{state | last: reading(state)})}
  end

  @doc false
  # Handlers are global to the VM: each collector takes only its own
  # instance's events (its world's zones, its gateway's sessions).
  def handle_event([:grove, :zone, :tick], %{duration: duration}, %{world: world}, %{
        world: world,
        tick: tick
      }),
      do: Histogram.record(tick, System.convert_time_unit(duration, :native, :microsecond))

  def handle_event([:grove, :session, :protocol_error], _m, %{code: code, instance: instance}, %{
        instance: instance,
        errors: errors
      }) do
    case errors do
      %{^code => ref} -> :counters.add(ref, 1, 1)
      _ -> :ok
    end
  end

  def handle_event([:grove, :load, :report], measurements, %{instance: instance} = metadata, %{
        instance: instance,
        load: load
      }),
      do:
        :ets.insert(
          load,
          {:latest, System.monotonic_time(:millisecond),
           Map.merge(measurements, Map.delete(metadata, :instance))}
        )

  def handle_event(_event, _measurements, _metadata, _config), do: :ok

  @impl true
  def handle_info(:sample, state) do
    now = reading(state)
    scheduler = :scheduler.sample()
    sample = sample(state, state.last, now, :scheduler.utilization(state.scheduler, scheduler))
    seconds = max((now.at - state.last.at) / 1000, 0.001)
    :ets.insert(state.table, {sample.t, sample})

    :ets.insert(
      :persistent_term.get({__MODULE__, state.instance}).load,
      {:zones, zone_rates(state.last.zones, now.zones, seconds)}
    )

    trim(state)
    {:noreply, schedule(%{state | last: now, scheduler: scheduler})}
  end

  @impl true
  def terminate(_reason, state) do
    Metrics.detach(state.handler_id)
    :ok
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

  ## Samples

  defp reading(state) do
    %{
      at: System.monotonic_time(:millisecond),
      world: World.stats(Grove.world(state.instance)),
      zones: World.zone_loads(Grove.world(state.instance)),
      gateway: gateway_stats(),
      actors: actor_stats(state.instance),
      kinds: actor_kinds(state.instance),
      tick: Histogram.snapshot(state.tick),
      player: if(source = player_histogram(), do: Histogram.snapshot(source), else: [])
    }
  end

  defp sample(state, before, now, utilization) do
    seconds = max((now.at - before.at) / 1000, 0.001)

    rate = fn source, key ->
      round(((now[source][key] || 0) - (before[source][key] || 0)) / seconds)
    end

    moves = Enum.reduce(@outcomes, 0, fn key, acc -> acc + now.world[key] - before.world[key] end)
    memory = :erlang.memory()

    actor_latency =
      if now.actors && before.actors,
        do: Histogram.diff(now.actors.latency, before.actors.latency),
        else: []

    tick = Histogram.diff(now.tick, before.tick)

    actor_skipped =
      if now.actors && before.actors,
        do: Actors.Stats.skipped(now.actors.counts) - Actors.Stats.skipped(before.actors.counts),
        else: 0

    player =
      if now.player != [] and before.player != [],
        do: Histogram.diff(now.player, before.player),
        else: []

    %{
      t: System.system_time(:millisecond),
      moves_per_s: round(moves / seconds),
      moves_ok_per_s: rate.(:world, :moves_ok),
      busy_per_s: rate.(:world, :busy),
      handoffs_per_s: rate.(:world, :handoffs),
      entities: now.world.entities,
      players: now.world.players,
      actors: now.world.actors,
      zone_mailbox_max: now.world.zone_mailbox_max,
      actor_p50_ms: to_ms(Histogram.percentile(actor_latency, 50)),
      actor_p99_ms: to_ms(Histogram.percentile(actor_latency, 99)),
      actor_skipped_per_s: round(actor_skipped / seconds),
      kinds: kind_rates(before.kinds, now.kinds, seconds),
      tick_p99_ms: to_ms(Histogram.percentile(tick, 99)),
      player_p99_ms: to_ms(Histogram.percentile(player, 99)),
      sessions: now.gateway[:sessions] || 0,
      writes_out_per_s: rate.(:gateway, :writes_json) + rate.(:gateway, :writes_binary),
      bytes_out_json_per_s: rate.(:gateway, :bytes_out_json),
      bytes_out_binary_per_s: rate.(:gateway, :bytes_out_binary),
      bytes_in_per_s: rate.(:gateway, :bytes_in),
      views_held_per_s: rate.(:gateway, :views_held),
      slow_consumers: now.gateway[:slow_consumers] || 0,
      protocol_errors_per_s: rate.(:gateway, :protocol_errors),
      memory_mb: round(memory[:total] / 1_000_000),
      processes: :erlang.system_info(:process_count),
      run_queue: :erlang.statistics(:total_run_queue_lengths),
      scheduler_utilization: normal_utilization(utilization),
      load_run: load_run(state.instance)
    }
  end

  # Each kind's actors and, over the sample, its moves, those that went
  # through, and its stays, per second.
  defp kind_rates(before, now, seconds) do
    earlier = Map.new(before, &{&1.name, &1.counts})

    for kind <- now do
      was = Map.get(earlier, kind.name, kind.counts)
      rate = fn key -> round((kind.counts[key] - was[key]) / seconds) end
      answered = fn counts -> Enum.reduce(Actors.Stats.outcomes(), 0, &(&2 + counts[&1])) end

      %{
        name: kind.name,
        emoji: kind.emoji,
        actors: kind.actors,
        moves_per_s: round((answered.(kind.counts) - answered.(was)) / seconds),
        ok_per_s: rate.(:ok),
        stayed_per_s: rate.(:stayed)
      }
    end
  end

  defp zone_rates(before, now, seconds) do
    Enum.zip_with(before, now, fn b, n -> round((n.moves - b.moves) / seconds) end)
  end

  defp load_run(instance) do
    case :ets.lookup(:persistent_term.get({__MODULE__, instance}).load, :latest) do
      [{:latest, at, report}] ->
        if System.monotonic_time(:millisecond) - at < @load_report_ttl_ms, do: report

      [] ->
        nil
    end
  end

  defp normal_utilization(samples) do
    normal = for {:normal, _id, util, _} <- samples, do: util
    if normal == [], do: 0.0, else: Float.round(Enum.sum(normal) / length(normal), 3)
  end

  # One pass over every process: a few milliseconds with tens of thousands.
  defp mailbox_max do
    Enum.reduce(Process.list(), 0, fn pid, longest ->
      case Process.info(pid, :message_queue_len) do
        {:message_queue_len, length} -> max(length, longest)
        nil -> longest
      end
    end)
  end

  defp gateway_stats do
    if Gateway.lookup(), do: Gateway.stats(), else: %{}
  end

  defp player_histogram do
    if Gateway.lookup(), do: Gateway.move_time()
  end

  defp actor_histogram(instance) do
    Actors.stats(Grove.actors(instance)).latency
  rescue
    ArgumentError -> nil
  end

  defp actor_stats(instance) do
    Actors.Stats.read(Actors.stats(Grove.actors(instance)))
  rescue
    ArgumentError -> nil
  end

  defp actor_kinds(instance) do
    Actors.by_kind(Grove.actors(instance))
  rescue
    ArgumentError -> []
  end

  defp name(instance), do: :"#{instance}.Metrics.Collector"
  defp table(instance), do: :persistent_term.get({__MODULE__, instance}).table
end
