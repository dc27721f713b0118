defmodule Grove.World.Zone do
  @moduledoc false
  # The process around one zone's pure core (`Zone.State`): it owns the
  # mailbox, the tick timer, the monitors and all I/O: ETS writes, outcome
  # messages to clients, handoff messages to neighbours, deltas to watchers.
  #
  # Messages only flow one way. Clients cast moves here and get an outcome
  # message back; zones cast handoffs to each other and answer with casts;
  # nothing here ever calls another process, so no call cycle can exist.
  #
  # The rules of handoffs and ownership (moves that cross the border,
  # arrivals and their answers, deferred operations, leaves, owners that
  # die, handoffs that expire) are `Zone.Handoff`'s: plain functions that
  # return the new state and the effects to carry out, which `run_effects/2`
  # does here, in order. A move inside the zone returns its plain result.
  #
  # The zone writes its entities to its own ETS table (owned by the world's
  # keeper, so it outlives this process) and their zone to the directory. A
  # restarted zone rebuilds itself from that table, keeping only the rows the
  # directory still assigns to it.
  #
  # Views: viewers subscribe to the zones their viewport overlaps and get a
  # snapshot at once; while anyone watches, each tick that changed something
  # publishes one delta per format in the world's feed, and relays it once
  # to each other node with viewers. Who watches, the number of the last
  # delta and how viewers follow their entities are `Zone.Views`'s, plain
  # data that returns effects like `Zone.Handoff`; this process carries them
  # out (sends, monitors, the feed, the table of subscriptions). A zone
  # nobody watches does no view work and, with no handoff pending and no
  # overload to re-measure, has no tick at all.
  #
  # Zones on demand (a world started with `zones: :on_demand`): a zone
  # starts when something is first sent to it (`wake/2`, through
  # `Grove.World.zone_address/2`) and recovers its entities from its table
  # as a restarted zone does. Once it has held no player's entity, no viewer
  # and no handoff for `zone_idle`, it sleeps: it stops monitoring, gives up
  # its name, and lingers for `handoff_timeout`, passing what still comes
  # to its new run (which the first such message wakes), then stops. Its
  # table stays if it holds entities that no store took, so that they are
  # still where readers look for them, and it wakes when one of them moves;
  # an empty one goes, with its counters unless they count entities asleep
  # in the store (`Grove.World.Slots`). Its name is in the world's
  # registry, not an atom: a world of millions of zones makes none.
  #
  # Bacteria (Grove.World.Life): the zone computes its own cells of the
  # automaton, one generation at a time, on a timer of its own (`life_timer`).
  # The rules are `Zone.Bacteria`'s (plain data, which says when a
  # generation is due, how neighbouring zones wait for each other and
  # what a generation changes); the zone reads the neighbours' rows and
  # the clock, and writes its row, the minimap and the counts.
  #
  # A game (Grove.Game): the rules are `Zone.Game`'s, on the pure core; the
  # zone keeps the game's cell layer in a table of its own (owned by the
  # keeper, like its entities' table; entities' attributes are in their
  # rows), writes what each operation changed (`sync_game/1`), sends the
  # tallies on, logs failures, ticks the game on a timer of its own
  # (`game_timer`; where nobody watches, set only for the tick at which it
  # owes `:catch_up`) and carries actions that run in another zone.

  use GenServer

  alias Grove.{Metrics, World}
  alias Grove.Cluster.Placement
  alias Grove.Game.Act

  alias Grove.World.{
    ChatLog,
    Directory,
    Entity,
    Feed,
    Grid,
    Life,
    Places,
    Relay,
    Slots,
    Stats,
    Terrain
  }

  alias Grove.World.Game.Storage
  alias Grove.World.Zone.{Bacteria, Chat, Handoff, Residents, Saves, State, Views}
  alias Grove.World.Zone.Game, as: GameRules

  require Logger

  # How often (in handled messages) the zone measures its own mailbox.
  @measure_every 16

  # A zone's young heap grows with the entities it holds (`fit_heap/1`):
  # this many words an entity, from this many entities on. At 625
  # entities, 256 words copy 24 words a move in the collector where 128
  # copied 43 (half the collections), for 1.6 times the young heap (the
  # VM's sizes 196,650 words against 121,536: some 240 MB more over 400
  # crowded zones, reckoned from those sizes; at 250,000 actors the
  # runtime's total measured some 400 MB more in all, on a build that
  # also changed the herds, the rest not measured apart); 480 words
  # copied 14, for 630 MB more.
  @heap_words_an_entity 256
  @heap_from_entities 128
  # 8 MB a zone at most (4,096 entities): a zone of large cells crowded
  # past that collects more often rather than holding more memory.
  @heap_most_words 1_048_576

  # Resident actors: how late a step may come before it is skipped rather
  # than taken late (the beats and their phases are the world's options).
  @walk_late_ms 500
  @roll_range Grove.Actor.roll_max() + 1

  defstruct [
    :world,
    :index,
    :core,
    :table,
    :game_table,
    :tick_timer,
    # When that tick is due (monotonic ms).
    :tick_due,
    # Where nobody watches: the timer that settles handoffs and actions
    # left with no answer (`ensure_tick/1`).
    :expiry_timer,
    # Zones on demand: the check that puts the zone to sleep once it has
    # been idle for `zone_idle` (`watch_idle/1`).
    :idle_timer,
    # A player's entity the idle watch found here last (`watch_idle/1`),
    # looked up again before the zone's entities are looked through.
    :player,
    :life_timer,
    :game_timer,
    :handed_over,
    :locate,
    :views,
    :bacteria,
    # The core as it was before the game's code was reloaded, while the
    # reload is undecided (`code_change/3`).
    :game_before,
    # Resident actors (`Zone.Residents`, with the rounds of
    # `Grove.World.walk/1`), and the timer of their next steps.
    :residents,
    :walk_timer,
    :walk_beat,
    walk_halted: false,
    overloaded: false,
    # When the zone last published a delta (monotonic ms; nil before it
    # did): one that sheds load keeps its viewers' pace (`tick/1`).
    published_at: nil,
    monitors: %{},
    idle_since: nil,
    asleep: false
  ]

  @typedoc "A subscription: a viewer process and the format it reads."
  @type subscriber :: {pid(), Feed.format()}

  @type t :: %__MODULE__{
          world: World.t(),
          index: Grid.zone_index(),
          core: State.t() | nil,
          table: :ets.tid(),
          game_table: :ets.tid() | nil,
          locate: Handoff.locate(),
          tick_timer: reference() | nil,
          tick_due: integer() | nil,
          expiry_timer: reference() | nil,
          idle_timer: reference() | nil,
          player: Entity.id() | nil,
          life_timer: reference() | nil,
          game_timer: reference() | nil,
          bacteria: Bacteria.t() | nil,
          overloaded: boolean(),
          published_at: integer() | nil,
          monitors: %{reference() => {:entity, Entity.id()} | {:subscriber, subscriber()}},
          views: Views.t(),
          idle_since: integer() | nil,
          asleep: boolean(),
          game_before: State.t() | nil
        }

  @spec start_link({World.t(), Grid.zone_index()} | {World.t(), Grid.zone_index(), :ahead}) ::
          GenServer.on_start()
  def start_link({%World{} = world, index}), do: start_link({world, index, :now})

  # A stand-in is marked in the registry, where the zones awake are listed.
  def start_link({%World{} = world, index, :stand_in}) do
    {:via, Registry, {registry, ^index}} = name(world, index)
    name = {:via, Registry, {registry, index, :stand_in}}

    GenServer.start_link(__MODULE__, {world, index, :stand_in},
      name: name,
      spawn_opt: world.zone_spawn
    )
  end

  def start_link({%World{} = world, index, how}) do
    GenServer.start_link(__MODULE__, {world, index, how},
      name: name(world, index),
      spawn_opt: world.zone_spawn
    )
  end

  @doc """
  A zone's name: an atom made at start for each zone of a world whose
  zones all run, an entry of the world's registry for a zone on demand.
  """
  @spec name(World.t(), Grid.zone_index()) ::
          atom() | {:via, Registry, {atom(), Grid.zone_index()}}
  def name(%World{zones_on_demand: true} = world, index),
    do: {:via, Registry, {World.registry(world), index}}

  def name(%World{} = world, index), do: elem(world.zones, index)

  @spec child_spec({World.t(), Grid.zone_index()}) :: Supervisor.child_spec()
  def child_spec({_world, index} = arg) do
    %{id: {__MODULE__, index}, start: {__MODULE__, :start_link, [arg]}}
  end

  @doc """
  Starts a zone of a world of zones on demand, unless it runs already;
  returns its process, or `nil` when the world is stopping. A zone woken
  `:ahead` (an entity came near it, `wake_ahead/3`) has nothing waiting for
  it yet: it makes its ground at low priority, behind the moves of the
  zones that run. A `:stand_in` (a zone on demand of a cluster handed
  over asleep, with nothing of its own) runs nothing: it holds what is
  sent to it under the zone's name until the new owner runs the zone,
  then passes it on there (`Grove.World.Placer`), so that no run of the
  zone starts here meanwhile.
  """
  @spec wake(World.t(), Grid.zone_index(), :now | :ahead | :stand_in) :: pid() | nil
  def wake(%World{} = world, index, how \\ :now) do
    spec = %{
      id: {__MODULE__, index},
      start: {__MODULE__, :start_link, [{world, index, how}]},
      # One that crashes starts again from its table; one that sleeps does not.
      restart: :transient
    }

    case DynamicSupervisor.start_child(World.Supervisor.awake_supervisor(world.name), spec) do
      {:ok, pid} ->
        if how != :stand_in, do: Stats.incr(world.stats, :zone_wakes)
        if how == :ahead, do: Stats.incr(world.stats, :zone_wakes_ahead)
        pid

      {:error, {:already_started, pid}} ->
        pid
    end
  catch
    :exit, {:noproc, _} -> nil
  end

  @doc """
  Puts a zone of a world of zones on demand to sleep now if it is idle (no
  player's entity, no viewer, no handoff), whatever its idle time:
  `:asleep`, or `:awake` when it is not idle (or was not running).
  """
  @spec sleep_if_idle(pid(), timeout()) :: :asleep | :awake
  def sleep_if_idle(pid, timeout) do
    GenServer.call(pid, :sleep_if_idle, timeout)
  catch
    # It stopped meanwhile: asleep already, or its world stops.
    :exit, {reason, _} when reason in [:noproc, :normal, :shutdown] -> :awake
  end

  @doc """
  Empties a zone's tables on this node, with the counts that follow its
  entities (density, population), once the zone no longer runs here (it
  was handed over, or its node lost its quorum); returns the entities
  that were in it.
  """
  @spec forget(World.t(), Grid.zone_index()) :: [Entity.t()]
  def forget(%World{} = world, index) do
    table = Slots.table(world, index)
    entities = for row <- Slots.rows(world, index), do: Entity.from_row(row)

    for entity <- entities do
      World.Minimap.add(world, {entity.x, entity.y}, -1)
      Stats.incr(world.stats, population_key(entity), -1)
    end

    Places.clear(world, index)

    if table, do: :ets.delete_all_objects(table)
    game_table = Slots.game_table(world, index)
    if game_table, do: :ets.delete_all_objects(game_table)
    :ets.match_delete(world.subscriptions, {index, :_, :_, :_})
    Slots.put_entities(world, index, 0)
    entities
  end

  @doc """
  Waits until the zone, just started, has recovered (its entities and its
  game's layer are in its tables); `:ok` at once afterwards.
  """
  @spec recovered(World.t(), Grid.zone_index()) :: :ok
  def recovered(%World{} = world, index),
    do: GenServer.call(name(world, index), :recovered, :infinity)

  # Callbacks

  @impl true
  def init({world, index, :stand_in}) do
    {:ok,
     %__MODULE__{
       world: world,
       index: index,
       locate: &Directory.lookup(world.name, &1),
       handed_over: {:holding, []}
     }}
  end

  def init({world, index, how}) do
    # Its core, with its ground, is made in `handle_continue/2`, once
    # whoever started it (a supervisor, which starts one zone at a time)
    # has moved on.
    {table, game_table} = Slots.open(world, index)
    # Nobody watches a zone that starts; its subscribers, recovered, say so again.
    Slots.put_watched(world, index, false)

    zone = %__MODULE__{
      world: world,
      index: index,
      table: table,
      game_table: game_table,
      locate: &Directory.lookup(world.name, &1),
      # Viewers hold sequence numbers: a restarted zone carries on from its last.
      views: Views.new(index, world.grid, node(), Feed.latest(world.feed, index))
    }

    {:ok, schedule_idle_check(zone), {:continue, {:recover, how}}}
  end

  @impl true
  def handle_continue({:recover, how}, zone) do
    zone =
      zone
      |> make_core(how)
      |> recover_entities()
      |> recover_game()
      |> recover_life()
      |> recover_subscribers()
      |> count_entities()

    zone = zone |> ensure_tick() |> schedule_game_tick() |> sync_game()
    # Waking leaves garbage on the zone's heap (its game's layer laid,
    # its rows read; the ground is made on a heap of its own,
    # `Terrain.area_of/3`) for a state of a few KB; a zone that then sees
    # little traffic would keep it for as long as it runs, since nothing
    # else makes it collect its old heap. Dropped here, once: a world of
    # zones on demand keeps thousands awake.
    :erlang.garbage_collect()
    {:noreply, zone}
  end

  # A zone that sleeps passes what still comes to its next run, woken by it.
  @impl true
  def handle_cast(message, %__MODULE__{asleep: true} = zone) do
    GenServer.cast(World.zone_address(zone.world, zone.index), message)
    {:noreply, zone}
  end

  # A zone handed over to another node (`Grove.World.Placer`) holds what it
  # gets until the new owner runs, then passes everything on to it.
  def handle_cast(message, %__MODULE__{handed_over: handed} = zone) when handed != nil,
    do: {:noreply, pass_on(zone, {:"$gen_cast", message})}

  def handle_cast({:move, id, direction, owner, tag, hops}, zone) do
    zone = zone |> sample_mailbox() |> handle_move(id, direction, owner, tag, hops)
    {:noreply, zone |> sync_game() |> ensure_tick()}
  end

  # A batch of one owner's moves: one message in, one message out for every
  # outcome decided here. Moves that cross into another zone get their outcome
  # from that zone, on their own.
  def handle_cast({:moves, owner, moves}, zone) do
    {outcomes, zone} = zone |> sample_mailbox() |> batch_moves(owner, moves, false)

    # What the game's hooks changed is written before the outcomes go out.
    zone = sync_game(zone)
    if outcomes != [], do: send(owner, {:grove_moves, outcomes})
    {:noreply, ensure_tick(zone)}
  end

  # The same, answered tallied (`World.move_many/3`): a move taken as
  # asked, one step in its direction, by its tag alone (an integer), any
  # other (and one whose tag is not an integer) by its outcome as above.
  def handle_cast({:moves_tallied, owner, moves}, zone) do
    {outcomes, zone} = zone |> sample_mailbox() |> batch_moves(owner, moves, true)
    zone = sync_game(zone)
    if outcomes != [], do: send(owner, {:grove_moved, outcomes})
    {:noreply, ensure_tick(zone)}
  end

  # Actions (a game's): decided here, or run in the zone of their target.
  def handle_cast({:act, id, request, owner, tag, hops}, zone) do
    zone = zone |> sample_mailbox() |> owe_game()

    case act_one(zone, id, request, owner, tag, hops, :erlang.monotonic_time(:millisecond)) do
      {:pending, zone} ->
        {:noreply, zone |> sync_game() |> ensure_tick()}

      {outcome, zone} ->
        {:noreply, zone |> reply_act(owner, id, tag, outcome) |> sync_game() |> ensure_tick()}
    end
  end

  # A batch of one owner's actions, answered in one message, like moves.
  def handle_cast({:acts, owner, acts}, zone) do
    {outcomes, zone} = zone |> sample_mailbox() |> batch_acts(owner, acts)
    if outcomes != [], do: send(owner, {:grove_acts, outcomes})
    {:noreply, zone |> sync_game() |> ensure_tick()}
  end

  # A batch of one owner's moves and actions (`World.step_many/3`): the
  # moves, then the actions, as the two batches would be taken one after
  # the other, answered in one message.
  def handle_cast({:steps, owner, moves, acts}, zone) do
    zone = sample_mailbox(zone)
    {moved, zone} = batch_moves(zone, owner, moves, false)
    {acted, zone} = batch_acts(sync_game(zone), owner, acts)
    zone = sync_game(zone)
    if moved != [] or acted != [], do: send(owner, {:grove_steps, moved ++ acted})
    {:noreply, ensure_tick(zone)}
  end

  # A line said (chat): an event at the speaker's cell for the next delta,
  # and the world's recent log.
  def handle_cast({:say, id, text, owner, tag, hops}, zone) do
    zone = sample_mailbox(zone)

    said =
      if zone.overloaded,
        do: {:rejected, :busy, zone.core},
        else: Chat.say(zone.core, id, text, owner, hops, zone.locate)

    case said do
      {:said, cell, core} ->
        ChatLog.record(zone.world.chat_log, id, cell, text)
        Stats.incr(zone.world.stats, :chat_lines)
        send(owner, {:grove_say, id, tag, :ok})
        {:noreply, ensure_tick(%{zone | core: core})}

      {:forward, to, _core} ->
        Stats.incr(zone.world.stats, :forwards)
        GenServer.cast(World.zone_address(zone.world, to), {:say, id, text, owner, tag, hops + 1})
        {:noreply, zone}

      {:rejected, reason, _core} ->
        Stats.incr(zone.world.stats, :chat_rejected)
        send(owner, {:grove_say, id, tag, {:rejected, reason}})
        {:noreply, zone}
    end
  end

  # An action of an entity of zone `from` whose target is one of our cells.
  def handle_cast({:act_at, act, from, owner, tag}, zone) do
    zone = zone |> sample_mailbox() |> owe_game()

    {:noreply,
     zone |> carry_out(GameRules.act_at(zone.core, act, from, owner, tag)) |> sync_game()}
  end

  def handle_cast({:act_done, id, tag, owner, outcome, attrs}, zone) do
    done = GameRules.act_done(zone.core, id, tag, owner, outcome, attrs, env(zone))
    {:noreply, zone |> carry_out(done) |> sync_game()}
  end

  # The handoff's messages: the rules are `Zone.Handoff`'s, the effects ours.
  def handle_cast({:arrive, %Entity{} = entity, target, from, tag}, zone) do
    zone = sample_mailbox(zone)

    {effects, core} =
      if reaches?(zone, entity.owner) do
        Handoff.arrive(zone.core, entity, target, from, tag)
      else
        {[{:send, from, {:refused, entity.id, entity.owner, tag, :busy}}], zone.core}
      end

    for {:adopt, arrived} <- effects, do: across_nodes(zone, arrived, from, 1)
    {:noreply, zone |> carry_out({effects, core}) |> walked_here(effects, tag) |> sync_game()}
  end

  def handle_cast({:arrived, id, to}, zone) do
    {effects, core} = Handoff.arrived(zone.core, id, to, env(zone))
    for {:let_go, entity} <- effects, do: across_nodes(zone, entity, to, -1)
    {:noreply, carry_out(zone, {effects, core})}
  end

  def handle_cast({:refused, id, owner, tag, reason}, zone) do
    refused = Handoff.refused(zone.core, id, owner, tag, reason, env(zone))
    {:noreply, zone |> carry_out(refused) |> sync_game()}
  end

  def handle_cast({:leave, id, owner, from, hops}, zone) do
    zone = owe_game(zone)
    left = Handoff.leave(zone.core, id, owner, from, hops, zone.locate)
    {:noreply, zone |> carry_out(left) |> sync_game()}
  end

  # Views: the rules are `Zone.Views`'s, the effects ours. A snapshot
  # shows the game's ticks this zone owed while nobody watched it.
  def handle_cast({:subscribe, pid, entity_id, format}, zone) do
    zone = settle_game(zone)
    zone = view(zone, Views.subscribe(zone.views, zone.core, pid, entity_id, format))
    {:noreply, ensure_tick(zone)}
  end

  def handle_cast({:unsubscribe, pid, entity_id, format}, zone),
    do: {:noreply, view(zone, Views.unsubscribe(zone.views, pid, entity_id, format))}

  # A viewer that fell behind the feed, or lost track, asks for a snapshot.
  def handle_cast({:snapshot, pid, format}, zone) do
    zone = settle_game(zone)
    {:noreply, view(zone, Views.snapshot(zone.views, zone.core, pid, format))}
  end

  def handle_cast({:snapshot, pid, format, tiles}, zone) do
    zone = settle_game(zone)
    {:noreply, view(zone, Views.snapshot_tiles(zone.views, zone.core, pid, format, tiles))}
  end

  def handle_cast(:tick, zone), do: {:noreply, tick(zone)}

  # Every resident steps once in a round, by hand (`Grove.World.walk/1`):
  # one that arrived here from a zone that walked the round first, by the
  # step it took there, steps no more in it. The round goes out to the
  # zones one by one, and that step may come before the round does.
  def handle_cast({:walk, _round}, %__MODULE__{residents: nil} = zone), do: {:noreply, zone}

  def handle_cast({:walk, round}, zone) do
    beat = zone.walk_beat + 1
    now = :erlang.monotonic_time(:millisecond)
    # Due as it is asked for: its lateness is the time the zone takes to step each.
    due = {beat, :erlang.monotonic_time(:microsecond)}
    {ids, residents} = Residents.start_round(zone.residents, round)

    {ok, stayed, _skipped, zone} =
      step(ids, %{zone | residents: residents}, zone.core, due, now, 0, 0, 0)

    {:noreply, count_walk(%{zone | walk_beat: beat}, ok, stayed, 0)}
  end

  # Manual stepping (`Grove.World.Bacteria.step_life/1`): the target moved on.
  def handle_cast(:generation, %__MODULE__{life_timer: nil} = zone),
    do: {:noreply, advance_life(zone)}

  # A look at the neighbours is due anyway; it will see the new target.
  def handle_cast(:generation, zone), do: {:noreply, zone}

  def handle_cast({:seed, id, pattern, direction, owner, tag, hops}, zone) do
    {:noreply,
     zone |> sample_mailbox() |> seed(id, pattern, direction, owner, tag, hops) |> ensure_tick()}
  end

  # Zones that run again, empty, after their node was lost (each with the
  # epoch of its new run): the viewers here whose viewport overlaps them
  # subscribe to them again, and an entity that was on its way to the run
  # that was lost is lost with it (whether it got there is unknown): it
  # goes from here too, and its owner is told, to place it again. This
  # news comes when the placer has told its own clients, which can take a
  # while: an entity sent meanwhile to the new run is on its way to a zone
  # that lives, and is not lost.
  def handle_cast({:zones_lost, runs}, zone) do
    grid = zone.world.grid
    runs = Map.new(runs)

    zone =
      for {_id, %Entity{updates: :view} = entity} <- zone.core.entities,
          to <- Grid.view_zones(grid, {entity.x, entity.y}, entity.view_radius),
          is_map_key(runs, to),
          reduce: zone,
          do: (zone -> view(zone, Views.subscribe_to(zone.views, zone.core, entity, to)))

    lost = State.lost_handoffs(zone.core, runs)
    zone = Enum.reduce(lost, zone, &lose_in_transit(&2, &1))
    # Actions sent to a run that was lost are answered `interrupted`; their
    # actors stay.
    interrupted = GameRules.expire(zone.core, nil, runs, env(zone))
    {:noreply, zone |> carry_out(interrupted) |> sync_game()}
  end

  # A join whose caller stopped waiting: undone if the entity was placed.
  def handle_cast({:abandon, id, owner}, zone),
    do: {:noreply, zone |> carry_out(Handoff.abandon(zone.core, id, owner)) |> sync_game()}

  @impl true
  def handle_call(:sleep_if_idle, _from, %__MODULE__{asleep: true} = zone),
    do: {:reply, :asleep, zone}

  def handle_call(message, from, %__MODULE__{asleep: true} = zone) do
    World.send_zone(zone.world, zone.index, {:"$gen_call", from, message})
    {:noreply, zone}
  end

  # A stand-in (`wake/3`) has nothing to hand over.
  def handle_call(:hand_over, _from, %__MODULE__{core: nil, handed_over: {:holding, _}} = zone),
    do: {:reply, :nothing, zone}

  def handle_call(message, from, %__MODULE__{handed_over: handed} = zone) when handed != nil,
    do: {:noreply, pass_on(zone, {:"$gen_call", from, message})}

  def handle_call(:sleep_if_idle, _from, zone) do
    if zone.world.zones_on_demand and idle?(zone) do
      {answer, zone} = sleep(zone)
      {:reply, answer, zone}
    else
      {:reply, :awake, zone}
    end
  end

  # The first step of a handover: what the new owner needs (the table's
  # rows, the subscriptions and the number its viewers hold), and from now
  # on, nothing is handled here.
  def handle_call(:hand_over, _from, zone) do
    for {ref, _} <- zone.monitors, do: Process.demonitor(ref, [:flush])
    cancel_timers(zone)
    zone = settle_game(zone)
    rows = :ets.tab2list(zone.table)
    subscriptions = :ets.lookup(zone.world.subscriptions, zone.index)
    # The game's layer as its table holds it, readiness mark included.
    layer = if zone.game_table, do: :ets.tab2list(zone.game_table), else: []

    {:reply, {rows, subscriptions, zone.views.seq, layer},
     %{
       zone
       | handed_over: {:holding, []},
         monitors: %{},
         tick_timer: nil,
         expiry_timer: nil,
         game_timer: nil,
         idle_timer: nil
     }}
  end

  # Answered only once `handle_continue/2` has run.
  def handle_call(:recovered, _from, zone), do: {:reply, :ok, zone}

  # Its residents stand still from now on (`Grove.World.halt_walks/1`).
  def handle_call(:halt_walks, _from, zone) do
    if zone.walk_timer, do: :erlang.cancel_timer(zone.walk_timer)
    {:reply, :ok, %{zone | walk_halted: true, walk_timer: nil}}
  end

  def handle_call({:join, entity, candidates, deadline}, from, zone),
    do: handle_call({:join, entity, candidates, deadline, %{}}, from, zone)

  def handle_call({:join, entity, candidates, deadline, info}, _from, zone) do
    case State.fetch(zone.core, entity.id) do
      # Placed again after its node was lost, but held here all along (it
      # was on its way to a zone of that node): it is here, once.
      {:ok, %Entity{owner: owner} = held} when owner == entity.owner ->
        {:reply, {:ok, held.id, {held.x, held.y}}, zone}

      {:ok, %Entity{}} ->
        {:reply, {:error, :occupied}, zone}

      :error ->
        {:reply, reply, zone} = join(owe_game(zone), entity, candidates, deadline, info)
        {:reply, reply, sync_game(zone)}
    end
  end

  def handle_call({:leave, id, owner, hops}, from, zone) do
    zone = owe_game(zone)
    left = Handoff.leave(zone.core, id, owner, from, hops, zone.locate)
    {:noreply, zone |> carry_out(left) |> sync_game()}
  end

  def handle_call(:audit, _from, zone) do
    problems = State.audit(zone.core)

    table_problems =
      for %Entity{id: id} = entity <- Map.values(zone.core.entities),
          :ets.lookup(zone.table, id) != [Entity.to_row(entity)],
          do: "entity #{id} differs from its table row"

    placed = Enum.sort(Places.of_zone(zone.world, zone.index))

    place_problems =
      if placed ==
           Enum.sort(
             for {id, e} <- zone.core.entities, do: {Places.block(zone.world, e.x, e.y), id}
           ),
         do: [],
         else: ["zone #{zone.index}'s places differ from its entities: #{inspect(placed)}"]

    resident = for {id, _} <- zone.core.entities, not State.leaving?(zone.core, id), do: id
    {:reply, {resident, problems ++ table_problems ++ place_problems}, zone}
  end

  defp join(zone, entity, candidates, deadline, info) do
    if System.system_time(:millisecond) > deadline do
      # The caller gave up waiting; placing the entity now would leave a ghost.
      {:reply, {:error, :timeout}, zone}
    else
      case State.place(zone.core, entity, candidates, info) do
        {:ok, placed, core} ->
          zone = %{zone | core: core} |> adopt(placed)
          add_density(zone, placed, 1)
          Stats.incr(zone.world.stats, :joins)
          Stats.incr(zone.world.stats, population_key(placed))
          :counters.add(zone.world.kind_counts, placed.kind + 1, 1)
          zone = if placed.updates == :view, do: follow(zone, placed, nil), else: zone
          {:reply, {:ok, placed.id, {placed.x, placed.y}}, ensure_tick(zone)}

        {:rejected, reason, core} ->
          {:reply, {:error, reason}, %{zone | core: core}}
      end
    end
  end

  # Asleep, it has passed on what came while it lingered: it stops. What
  # came after its time was up, while it waited to be run, is behind this
  # message in its mailbox, and is passed on first: a stop would drop it.
  @impl true
  def handle_info(:linger_over, %__MODULE__{asleep: true} = zone) do
    pass_on_mailbox(zone)
    {:stop, :normal, zone}
  end

  # Its own timers and monitors are nobody else's business now.
  def handle_info(_message, %__MODULE__{asleep: true} = zone), do: {:noreply, zone}

  # The zone's idle check (`watch_idle/1`; one cancelled as it went off is let be).
  def handle_info({:timeout, timer, :idle_check}, %__MODULE__{idle_timer: timer} = zone) do
    zone = %{zone | idle_timer: nil}
    now = System.monotonic_time(:millisecond)

    cond do
      not idle?(zone) ->
        {:noreply, schedule_idle_check(%{zone | idle_since: nil})}

      # Idle, with no check set as it became so: from now.
      zone.idle_since == nil ->
        {:noreply, schedule_idle_check(%{zone | idle_since: now})}

      now - zone.idle_since >= zone.world.zone_idle ->
        case sleep(zone) do
          {:asleep, zone} ->
            {:noreply, zone}

          # The store could not take what it holds: tried again after
          # another idle period, not at every check, so that a store that
          # falls behind is not asked again by every zone at once.
          {:awake, zone} ->
            {:noreply, schedule_idle_check(%{zone | idle_since: now})}
        end

      true ->
        {:noreply, schedule_idle_check(zone, zone.idle_since + zone.world.zone_idle - now)}
    end
  end

  def handle_info({:timeout, _timer, :idle_check}, zone), do: {:noreply, zone}

  # The new owner runs: this node's copy of the zone goes, and what waited
  # (and whatever comes until the zone is stopped) follows it there. A
  # stand-in stops on its own too, at the time its placer would stop it:
  # a node that pauses meanwhile forgets that.
  def handle_info({:handed_to, address}, %__MODULE__{handed_over: {:holding, held}} = zone) do
    _entities = forget(zone.world, zone.index)
    for raw <- Enum.reverse(held), do: forward(address, raw)

    if zone.core == nil,
      do: Process.send_after(self(), :stand_in_over, 10 * zone.world.handoff_timeout)

    {:noreply, %{zone | handed_over: {:forwarding, address}}}
  end

  def handle_info(:stand_in_over, %__MODULE__{core: nil, handed_over: {:forwarding, _}} = zone),
    do: {:stop, :normal, zone}

  # The new owner could not take it: a stand-in gives up the zone's name,
  # and what waited goes to the zone, woken here as it would have been.
  def handle_info(:keep, %__MODULE__{core: nil, handed_over: {:holding, held}} = zone) do
    Registry.unregister(World.registry(zone.world), zone.index)
    for raw <- Enum.reverse(held), do: World.send_zone(zone.world, zone.index, raw)
    {:stop, :normal, zone}
  end

  # The new owner could not take it: the zone carries on here, with what waited.
  def handle_info(:keep, %__MODULE__{handed_over: {:holding, held}} = zone) do
    for raw <- Enum.reverse(held), do: send(self(), raw)

    zone =
      Enum.reduce(zone.core.entities, %{zone | monitors: %{}}, fn {id, entity}, zone ->
        ref = Process.monitor(entity.owner)

        %{
          zone
          | core: State.put_entity(zone.core, %{entity | monitor: ref}),
            monitors: Map.put(zone.monitors, ref, {:entity, id})
        }
      end)

    zone = view(zone, Views.monitor_all(zone.views))
    {:noreply, ensure_tick(schedule_idle_check(%{zone | handed_over: nil, idle_since: nil}))}
  end

  def handle_info(_message, %__MODULE__{handed_over: handed} = zone) when handed != nil,
    do: {:noreply, zone}

  # A handover given up on before the zone was asked for anything.
  def handle_info(:keep, zone), do: {:noreply, zone}

  # The view tick (a timer cancelled as it went off is let be: a zone
  # with one viewer publishes in its turns and cancels it).
  def handle_info({:timeout, timer, :tick}, %__MODULE__{tick_timer: timer} = zone) do
    {:noreply, %{zone | tick_timer: nil} |> tick() |> ensure_tick()}
  end

  def handle_info({:timeout, _timer, :tick}, zone), do: {:noreply, zone}

  def handle_info(:generation, zone),
    do: {:noreply, advance_life(%{zone | life_timer: nil})}

  # A tick of a game that ticks on its clock: its timer (one cancelled
  # as it went off is let be).
  def handle_info({:timeout, timer, :game_tick}, %__MODULE__{game_timer: timer} = zone) do
    zone = %{zone | game_timer: nil}
    {interval, phase} = game_clock(zone)
    index = game_tick_index(interval, phase)
    core = GameRules.tick_at(zone.core, index, GameRules.roll())
    zone = sync_game(%{zone | core: core}, :ticks)
    {:noreply, zone |> publish_alone(:any) |> ensure_tick() |> schedule_game_tick()}
  end

  def handle_info({:timeout, _timer, :game_tick}, zone), do: {:noreply, zone}

  # Handoffs and actions with no answer, where nobody watches (`ensure_tick/1`).
  def handle_info({:timeout, timer, :expire}, %__MODULE__{expiry_timer: timer} = zone),
    do: {:noreply, %{zone | expiry_timer: nil} |> expire_handoffs() |> ensure_tick()}

  def handle_info({:timeout, _timer, :expire}, zone), do: {:noreply, zone}

  # The residents due step (a timer cancelled as it went off is let be).
  def handle_info({:timeout, timer, :walk}, %__MODULE__{walk_timer: timer} = zone),
    do: {:noreply, zone |> walk() |> schedule_walk()}

  def handle_info({:timeout, _timer, :walk}, zone), do: {:noreply, zone}

  # A tick asked for by hand (`Grove.World.Game.tick/1`).
  def handle_info(:game_tick, zone) do
    core = GameRules.tick(zone.core, GameRules.roll())
    {:noreply, %{zone | core: core} |> sync_game(:ticks) |> publish_alone(:any) |> ensure_tick()}
  end

  def handle_info({:DOWN, ref, :process, pid, _reason}, zone) do
    case Map.pop(zone.monitors, ref) do
      {{:entity, id}, monitors} ->
        zone = %{zone | monitors: monitors}
        {:noreply, zone |> carry_out(Handoff.owner_down(zone.core, id)) |> sync_game()}

      {{:subscriber, {^pid, format}}, monitors} ->
        zone = %{zone | monitors: monitors}
        {:noreply, view(zone, Views.down(zone.views, pid, format))}

      {nil, _} ->
        {:noreply, zone}
    end
  end

  def handle_info(message, zone) do
    Logger.warning("zone #{zone.index} ignored an unexpected message: #{inspect(message)}")
    {:noreply, zone}
  end

  # The game's code is reloaded (`Grove.World.Game.renew/3`), while the
  # zone is held (`:sys.suspend/1`, as OTP's release handling does it): its
  # state takes the new shape, kept beside the old until every zone has
  # taken it; then the new is kept (`:commit`) or, if any zone's upgrade
  # failed, the old (`:abort`). Nothing is written out before the commit.
  @impl true
  def code_change(_old, %__MODULE__{} = zone, {:grove_game, :upgrade, spec}) do
    case GameRules.renew(zone.core, spec) do
      {:ok, core} -> {:ok, %{zone | core: core, game_before: zone.core}}
      {:error, core} -> {:error, hd(core.game.failures)}
    end
  end

  def code_change(_old, %__MODULE__{game_before: before} = zone, {:grove_game, :commit})
      when before != nil do
    %State{game: %{spec: spec}} = zone.core
    :ets.insert(game_table(zone), {:ready, spec.version, 0, nil})
    # Its layer is the new version's now, whatever it was laid as.
    Slots.unlaid(zone.world, zone.index)
    zone = %{zone | game_before: nil, world: %{zone.world | game: spec}}
    {:ok, zone |> schedule_game_tick() |> sync_game() |> ensure_tick()}
  end

  def code_change(_old, %__MODULE__{game_before: before} = zone, {:grove_game, :abort})
      when before != nil,
      do: {:ok, %{zone | core: before, game_before: nil}}

  def code_change(_old, zone, _extra), do: {:ok, zone}

  ## Sleep

  # Idle: nothing a player holds or watches, nothing in flight, no
  # resident that walks (a zone steps its residents itself: asleep, they
  # would stand still, where an actor its herd walks wakes it).
  defp idle?(%__MODULE__{handed_over: nil} = zone), do: quiet?(zone) and a_player(zone) == nil
  defp idle?(_zone), do: false

  defp quiet?(%__MODULE__{core: core} = zone) do
    map_size(core.leaving) == 0 and not Views.watched?(zone.views) and
      (zone.residents == nil or Residents.empty?(zone.residents))
  end

  # A player's entity here, or nil: the one found last while it is still
  # here, else one found among the zone's entities.
  defp a_player(%__MODULE__{player: player, core: %State{entities: entities}}) do
    case entities do
      %{^player => %Entity{kind: 1}} -> player
      _ -> find_player(entities)
    end
  end

  # A look through the zone's entities for a player's.
  defp find_player(entities),
    do: Enum.find_value(entities, fn {id, entity} -> if entity.kind == 1, do: id end)

  # A zone that becomes idle is checked once, when its idle time is up
  # (`watch_idle/1` sets the check as it becomes idle, and whatever may
  # make it so ends with `ensure_tick/1`, which calls it): it sleeps then,
  # unless it was busy meanwhile. A zone that is not idle is checked once
  # an idle period too, which finds a zone that became idle by a way that
  # set no check. Checked every quarter of a period, a roaming walker's
  # zones left behind took four or five turns each before they slept, and
  # each it watched one every quarter period.
  defp schedule_idle_check(zone, after_ms \\ nil)

  defp schedule_idle_check(
         %__MODULE__{world: %World{zones_on_demand: true, zone_idle: idle}} = zone,
         after_ms
       )
       when is_integer(idle) do
    if zone.idle_timer, do: :erlang.cancel_timer(zone.idle_timer, async: true, info: false)
    timer = :erlang.start_timer(max(after_ms || idle, 1), self(), :idle_check)
    %{zone | idle_timer: timer}
  end

  defp schedule_idle_check(zone, _after_ms), do: zone

  # Whether the zone became idle (its check is set for when its idle time
  # is up) or busy again since it was (what it does is in its turns), told
  # from what it holds at the end of a turn that may change it. Where
  # anyone watches or a handoff is under way it is busy, told at once;
  # else by a player's entity here: the one found last, while it stays,
  # so that a player who walks a zone nobody watches does not have its
  # entities looked through at every move (`a_player/1`); they are, as
  # that one goes.
  defp watch_idle(
         %__MODULE__{
           world: %World{zones_on_demand: true, zone_idle: idle},
           idle_since: nil,
           handed_over: nil,
           core: %State{watched: false, leaving: leaving}
         } = zone
       )
       when is_integer(idle) and map_size(leaving) == 0 do
    cond do
      not quiet?(zone) ->
        zone

      player = a_player(zone) ->
        %{zone | player: player}

      true ->
        now = System.monotonic_time(:millisecond)
        schedule_idle_check(%{zone | idle_since: now, player: nil})
    end
  end

  defp watch_idle(
         %__MODULE__{idle_since: since, core: %State{watched: watched, leaving: leaving}} = zone
       )
       when since != nil and (watched or map_size(leaving) > 0),
       do: %{zone | idle_since: nil}

  defp watch_idle(zone), do: zone

  # The directory keeps its entities; their rows and the game's layer go
  # to the store when the world has one (`Zone.Saves`), else they stay in
  # its tables. A game's layer as the game laid it, unchanged since but by
  # the game's own ticks, goes nowhere: the next wake lays it again the
  # same; one the store holds (the saver wrote it, or the zone woke from
  # it), unchanged since but by ticks, is in the store already. A zone whose store
  # cannot take what it holds does not sleep: it stays awake, as it was,
  # and tries again after another idle period, so that nothing it held piles up in
  # memory behind it. What was sent to its name before it gave it up is in
  # its mailbox, and is passed on from there.
  defp sleep(zone) do
    # Ticks owed to a layer that needs no save would be run for nothing.
    zone = if laid?(zone), do: zone, else: settle_game(zone)
    zone = count_entities(zone)

    case store_asleep(zone) do
      :ok -> {:asleep, fall_asleep(zone)}
      :failed -> {:awake, zone}
    end
  end

  # The zone's view tick, its handoffs' expiry and its game's tick, as it
  # hands itself over or falls asleep.
  defp cancel_timers(zone) do
    for timer <- [zone.tick_timer, zone.expiry_timer, zone.game_timer, zone.idle_timer],
        timer != nil,
        do: :erlang.cancel_timer(timer)

    :ok
  end

  defp fall_asleep(zone) do
    share_asleep(zone)
    for {ref, _} <- zone.monitors, do: Process.demonitor(ref, [:flush])
    # A game's layer is in the store or its table; its ticks wait for the zone to wake.
    cancel_timers(zone)
    Slots.put_load(zone.world, zone.index, 0)
    # What it holds no more goes before its name: a run that wakes after
    # it finds its slot as this one leaves it.
    Slots.close(zone.world, zone.index, zone.table, zone.game_table)
    Registry.unregister(World.registry(zone.world), zone.index)
    Stats.incr(zone.world.stats, :zone_sleeps)
    Process.send_after(self(), :linger_over, zone.world.handoff_timeout)

    %{
      zone
      | asleep: true,
        monitors: %{},
        tick_timer: nil,
        expiry_timer: nil,
        game_timer: nil,
        idle_timer: nil,
        core: nil,
        bacteria: nil
    }
  end

  # Each table is emptied once the store has what it held (both saves),
  # and only then: a zone whose store cannot take it stays awake with it.
  # A world without a store keeps it in the tables, but a game's layer
  # as the game laid it.
  defp store_asleep(%__MODULE__{world: %World{store: nil}} = zone) do
    if laid?(zone), do: :ets.delete_all_objects(game_table(zone))
    :ok
  end

  defp store_asleep(%__MODULE__{world: world, index: index} = zone) do
    # Its bacteria's cells go with its entities; its row keeps its borders.
    life =
      with %Life{} <- world.life,
           [{_, _, bits, _, _} = row] when bits != nil <- :ets.lookup(world.life_table, index),
           do: row,
           else: (_ -> nil)

    layer = if laid?(zone), do: nil, else: game_layer(world, index)
    rows = :ets.tab2list(zone.table)

    with :ok <- stored(zone, "its game's layer", save_layer(world, index, layer)),
         :ok <- stored(zone, "its entities and bacteria", save_rows(world, index, rows, life)) do
      if rows != [] or life != nil do
        :ets.delete_all_objects(zone.table)
        if life, do: :ets.insert(world.life_table, put_elem(life, 2, nil))
      end

      if world.game, do: :ets.delete_all_objects(game_table(zone))
      :ok
    end
  end

  defp laid?(%__MODULE__{world: %World{game: nil}}), do: false
  defp laid?(zone), do: Slots.as_laid?(zone.world, zone.index)

  defp game_layer(%World{game: nil}, _index), do: nil
  defp game_layer(world, index), do: World.Game.layer(world, index)

  defp save_layer(_world, _index, nil), do: :nothing

  # A whole base, which drops the changes of the saver's base: the saver
  # writes a base of its own for the zone's next run.
  defp save_layer(world, index, layer) do
    {save, _id} = World.Game.base_entries(world, index, layer)

    with :ok <- Storage.save_state(world.store, World.Game.save_scope(world), save),
         do: World.Game.has_saves(world, [index])
  end

  defp save_rows(_world, _index, [], nil), do: :nothing
  defp save_rows(world, index, rows, life), do: Saves.save(world, index, rows, life)

  defp stored(_zone, _what, :nothing), do: :ok

  defp stored(zone, _what, :ok) do
    Stats.incr(zone.world.stats, :zone_saves)
    :ok
  end

  defp stored(zone, what, {:error, reason}) do
    Stats.incr(zone.world.stats, :zone_save_failures)

    Logger.warning(
      "zone #{zone.index} stays awake with #{what}: the store could not take it (#{inspect(reason)}); " <>
        "it tries again after its idle time"
    )

    :failed
  end

  # The casts and calls still in the mailbox of a zone asleep whose
  # lingering is over go to its next run, as they did while it lingered;
  # the rest (its own timers and monitors) is nobody's business now.
  defp pass_on_mailbox(%__MODULE__{asleep: true} = zone) do
    receive do
      {:"$gen_cast", message} ->
        {:noreply, _} = handle_cast(message, zone)
        pass_on_mailbox(zone)

      {:"$gen_call", from, message} ->
        case handle_call(message, from, zone) do
          {:reply, reply, _} -> GenServer.reply(from, reply)
          {:noreply, _} -> :ok
        end

        pass_on_mailbox(zone)
    after
      0 -> :ok
    end
  end

  defp pass_on(%__MODULE__{handed_over: {:holding, held}} = zone, raw),
    do: %{zone | handed_over: {:holding, [raw | held]}}

  defp pass_on(%__MODULE__{handed_over: {:forwarding, address}} = zone, raw) do
    forward(address, raw)
    zone
  end

  # A zone on demand handed over is reached through its new node's door.
  defp forward({:via, World.Door, name}, raw), do: World.Door.send(name, raw)
  defp forward(address, raw), do: send(address, raw)

  ## Moves

  # A tick of the game that fell due before the move came runs before it
  # (`game_due_alone/2`), so the move, its `enter/2` and its outcome come
  # after the tick, as they would have had the tick's timer gone off first.
  defp handle_move(zone, id, direction, owner, tag, hops) do
    zone = game_due_alone(zone, owner)

    case apply_one(zone, id, direction, owner, tag, hops, :erlang.monotonic_time(:millisecond)) do
      {:pending, zone} ->
        zone

      {outcome, zone} ->
        zone = publish_alone(zone, owner)
        reply(zone, owner, id, tag, outcome)
        zone
    end
  end

  # A zone with one viewer publishes what changed in the turn that changed
  # it, where the tick would have taken a turn of its own to publish it:
  # a move of that viewer's (before its outcome, whose write is the
  # viewer's first read of it anyway, since a moving player's views ride
  # on its outcomes: it reads the delta with this outcome rather than the
  # next), or its game's tick (`viewer` `:any`). Nobody else sees the
  # zone, so nobody sees its delta sooner than at a tick but that viewer;
  # a tick set for what changed before goes with it, and a zone with more
  # viewers gathers its changes for its tick, as before. Where the world
  # is ticked by hand, or the zone sheds load, the tick publishes.
  defp publish_alone(
         %__MODULE__{world: %World{tick: tick}, overloaded: false, core: %State{} = core} = zone,
         viewer
       )
       when is_integer(tick) and core.watched do
    if Views.alone?(zone.views, viewer) and State.pending?(core) do
      if zone.tick_timer,
        do: :erlang.cancel_timer(zone.tick_timer, async: true, info: false)

      publish_delta(%{zone | tick_timer: nil})
    else
      zone
    end
  end

  defp publish_alone(zone, _owner), do: zone

  # Applies one move and returns its outcome, or `:pending` when another
  # zone will give it (a handoff, a forward, a move deferred meanwhile).
  # A move inside the zone, the hot path, goes through no effects list.
  defp apply_one(%__MODULE__{overloaded: true} = zone, _id, _dir, _owner, _tag, _hops, _now),
    do: {{:rejected, :busy}, zone}

  # What a game's hooks changed is written before the outcome goes out
  # (`sync_game/1`, nothing without a game): whoever is answered reads it.
  defp apply_one(zone, id, direction, owner, tag, hops, now) do
    case Handoff.move(zone.core, id, direction, owner, tag, hops, now, zone.locate) do
      {:moved, %Entity{updates: :view} = entity, from, core} ->
        zone = %{zone | core: core} |> sync_game() |> moved(entity, from)
        {{:ok, {entity.x, entity.y}}, follow(zone, entity, from)}

      {:moved, entity, from, core} ->
        {{:ok, {entity.x, entity.y}}, %{zone | core: core} |> sync_game() |> moved(entity, from)}

      {:rejected, reason, core} ->
        {{:rejected, reason}, %{zone | core: core}}

      {:pending, effects, core} ->
        {:pending, carry_out(zone, {effects, core})}
    end
  end

  # A batch's moves taken: their outcomes decided here, and the zone;
  # `tallied`, a move taken as asked is answered by its tag alone.
  defp batch_moves(zone, owner, moves, tallied) do
    now = :erlang.monotonic_time(:millisecond)

    {outcomes, ok, occupied, blocked, zone} =
      take_batch(moves, zone, owner, now, [], 0, 0, 0, written(zone, tallied))

    # The batch's steps taken, and those refused on a taken or blocking
    # cell (a third of them in a crowd), counted at once.
    if ok + occupied + blocked > 0,
      do: Slots.add_move(zone.world, zone.index, ok + occupied + blocked)

    if ok > 0, do: Stats.incr(zone.world.stats, :moves_ok, ok)
    if occupied > 0, do: Stats.incr(zone.world.stats, :occupied, occupied)
    if blocked > 0, do: Stats.incr(zone.world.stats, :blocked, blocked)
    {outcomes, zone}
  end

  # A batch's actions taken: the outcomes decided here (one run in another
  # zone is answered from there), and the zone.
  defp batch_acts(zone, owner, acts) do
    zone = owe_game(zone)
    now = :erlang.monotonic_time(:millisecond)

    Enum.reduce(acts, {[], zone}, fn {id, request, tag}, {outcomes, zone} ->
      case act_one(zone, id, request, owner, tag, 0, now) do
        {:pending, zone} ->
          {outcomes, zone}

        {outcome, zone} ->
          count_act(zone, outcome)
          {[{id, tag, outcome} | outcomes], zone}
      end
    end)
  end

  # A batch's moves in one pass over the zone's core, each as `apply_one/7`
  # would apply it: the common step inside the zone (an entity that does
  # not watch) updates the core alone, with no copy of the zone's state
  # and no write of the game's changes until the batch is done; anything
  # else goes through `apply_one/7` with the zone as it stands. What a
  # step writes besides the core (`written/1`) is read once for the batch,
  # and the steps taken and refused on a taken or a blocking cell are
  # counted in arguments (`ok`, `occupied`, `blocked`), with no tuple of
  # them made at each move. `apply_plain/12`'s `:moved`, `:occupied` and
  # `:blocked` branches answer and count a step as the first three
  # branches here do: change both together.
  defp apply_batch([], zone, core, _owner, _now, outcomes, ok, occupied, blocked, _written),
    do: {outcomes, ok, occupied, blocked, %{zone | core: core}}

  defp apply_batch(
         moves,
         %__MODULE__{overloaded: true} = zone,
         core,
         _owner,
         _now,
         outcomes,
         ok,
         occupied,
         blocked,
         _written
       ) do
    zone = %{zone | core: core}
    busy = for {id, _direction, tag} <- moves, do: {id, tag, {:rejected, :busy}}
    for _ <- busy, do: count_outcome(zone, {:rejected, :busy})
    {Enum.reverse(busy, outcomes), ok, occupied, blocked, zone}
  end

  defp apply_batch(
         [{id, direction, tag} | rest],
         zone,
         core,
         owner,
         now,
         outcomes,
         ok,
         occupied,
         blocked,
         written
       ) do
    case Handoff.move(core, id, direction, owner, tag, 0, now, zone.locate) do
      {:moved, %Entity{updates: updates} = entity, from, core} when updates != :view ->
        {fx, fy} = from
        step_written(written, zone, id, entity.x, entity.y, fx, fy)

        outcomes =
          if elem(written, 3) and is_integer(tag),
            do: [tag | outcomes],
            else: [{id, tag, {:ok, {entity.x, entity.y}}} | outcomes]

        apply_batch(rest, zone, core, owner, now, outcomes, ok + 1, occupied, blocked, written)

      {:rejected, :occupied, core} ->
        outcomes = [{id, tag, {:rejected, :occupied}} | outcomes]
        apply_batch(rest, zone, core, owner, now, outcomes, ok, occupied + 1, blocked, written)

      {:rejected, :blocked, core} ->
        outcomes = [{id, tag, {:rejected, :blocked}} | outcomes]
        apply_batch(rest, zone, core, owner, now, outcomes, ok, occupied, blocked + 1, written)

      {:rejected, reason, core} ->
        outcome = {:rejected, reason}
        count_outcome(zone, outcome)
        outcomes = [{id, tag, outcome} | outcomes]
        apply_batch(rest, zone, core, owner, now, outcomes, ok, occupied, blocked, written)

      _other ->
        {outcomes, ok, zone} =
          apply_undone(zone, core, id, direction, owner, tag, now, outcomes, ok, elem(written, 3))

        apply_batch(rest, zone, zone.core, owner, now, outcomes, ok, occupied, blocked, written)
    end
  end

  # The batch's moves from here on: a plain zone's (`State.plain?/1`)
  # through `apply_plain/12`, any other's through `apply_batch/10`.
  defp take_batch(moves, zone, owner, now, outcomes, ok, occupied, blocked, written) do
    %__MODULE__{core: core} = zone

    if zone.overloaded == false and State.plain?(core) do
      apply_plain(
        moves,
        zone,
        core,
        core.entities,
        core.cells,
        owner,
        now,
        outcomes,
        ok,
        occupied,
        blocked,
        written
      )
    else
      apply_batch(moves, zone, core, owner, now, outcomes, ok, occupied, blocked, written)
    end
  end

  # `apply_batch/10` in a plain zone, with its entities and cells held
  # apart from its state (`State.plain_step/7`), so that a step copies
  # neither the state nor the zone: they are put back once the batch is
  # done, or before a move that is not a plain step, which goes through
  # `apply_batch/10` on the zone as it stands; the moves after it come
  # back here if the zone is still plain. The step is the common one of
  # `State`'s `move_to/7` (`State.plain_step/7`), and the three branches
  # below answer and count it as `apply_batch/10`'s `:moved`, `:occupied`
  # and `:blocked` branches do: change both together.
  #
  # A move handed back (`:other`: a handoff, a step refused on its rate,
  # by another owner, of an unknown or a leaving entity) costs more than
  # in `apply_batch/10` alone: the step tried, the state and the zone
  # copied to put the entities and cells back, the entity looked up again,
  # and `State.plain?/1` asked again after it. Rare at a herd's pace
  # (handoffs some 2 % of the moves), but a batch of moves refused on the
  # rate, from a client past its limit, pays it at each.
  defp apply_plain(
         [],
         zone,
         core,
         entities,
         cells,
         _owner,
         _now,
         outcomes,
         ok,
         occupied,
         blocked,
         _written
       ),
       do:
         {outcomes, ok, occupied, blocked, %{zone | core: State.put_plain(core, entities, cells)}}

  defp apply_plain(
         [{id, direction, tag} = move | rest],
         zone,
         core,
         entities,
         cells,
         owner,
         now,
         outcomes,
         ok,
         occupied,
         blocked,
         written
       ) do
    case State.plain_step(core, entities, cells, id, direction, owner, now) do
      {:moved, %Entity{x: x, y: y}, fx, fy, entities, cells} ->
        step_written(written, zone, id, x, y, fx, fy)

        outcomes =
          if elem(written, 3) and is_integer(tag),
            do: [tag | outcomes],
            else: [{id, tag, {:ok, {x, y}}} | outcomes]

        apply_plain(
          rest,
          zone,
          core,
          entities,
          cells,
          owner,
          now,
          outcomes,
          ok + 1,
          occupied,
          blocked,
          written
        )

      {:occupied, entities} ->
        outcomes = [{id, tag, {:rejected, :occupied}} | outcomes]

        apply_plain(
          rest,
          zone,
          core,
          entities,
          cells,
          owner,
          now,
          outcomes,
          ok,
          occupied + 1,
          blocked,
          written
        )

      {:blocked, entities} ->
        outcomes = [{id, tag, {:rejected, :blocked}} | outcomes]

        apply_plain(
          rest,
          zone,
          core,
          entities,
          cells,
          owner,
          now,
          outcomes,
          ok,
          occupied,
          blocked + 1,
          written
        )

      :other ->
        zone = %{zone | core: State.put_plain(core, entities, cells)}

        {outcomes, ok, occupied, blocked, zone} =
          apply_batch(
            [move],
            zone,
            zone.core,
            owner,
            now,
            outcomes,
            ok,
            occupied,
            blocked,
            written
          )

        take_batch(rest, zone, owner, now, outcomes, ok, occupied, blocked, written)
    end
  end

  # A batch's move that is not a plain step (a handoff, a watching
  # entity, a game's hooks), undone: `apply_one/7` applies it again on the
  # zone as it stood, and its outcome joins the batch's, unless another
  # zone gives it. Rare beside the steps, so it may make a tuple.
  defp apply_undone(zone, core, id, direction, owner, tag, now, outcomes, ok, tallied) do
    case apply_one(%{zone | core: core}, id, direction, owner, tag, 0, now) do
      {:pending, zone} ->
        {outcomes, ok, zone}

      {{:ok, _cell}, zone} when tallied and is_integer(tag) ->
        {[tag | outcomes], ok + 1, zone}

      {{:ok, _cell} = outcome, zone} ->
        {[{id, tag, outcome} | outcomes], ok + 1, zone}

      {outcome, zone} ->
        count_outcome(zone, outcome)
        {[{id, tag, outcome} | outcomes], ok, zone}
    end
  end

  # What a step writes besides the core, as `moved/3` reads it from the
  # zone and its world (a map of more than 32 keys, a hash trie) at each
  # step: the table, the density's block, and whether zones wake ahead;
  # and whether the batch is answered tallied.
  defp written(%__MODULE__{table: table, world: world}, tallied),
    do: {table, world.density_block, world.zones_on_demand, tallied}

  # `moved/3`, with what it reads read once for a batch: entity `id`
  # stepped from `{fx, fy}` to `{x, y}`.
  defp step_written({table, block, on_demand, _tallied}, zone, id, x, y, fx, fy) do
    :ets.update_element(table, id, [{2, x}, {3, y}])

    if div(fx, block) != div(x, block) or div(fy, block) != div(y, block),
      do: density_step(zone.world, zone.index, id, {fx, fy}, {x, y})

    if on_demand, do: wake_ahead(zone, {fx, fy}, {x, y})
    :ok
  end

  defp moved(zone, %Entity{id: id, x: x, y: y}, from) do
    :ets.update_element(zone.table, id, [{2, x}, {3, y}])
    shift_density(zone, id, from, {x, y})
    wake_ahead(zone, from, {x, y})
  end

  # Zones on demand: an entity that comes within `wake_ahead` cells of a
  # zone that sleeps wakes it, which makes its ground while the entity
  # takes its last steps: a move across into it is answered as into any
  # zone awake. A zone of another node is woken by its own.
  defp wake_ahead(%__MODULE__{world: %World{zones_on_demand: true} = world} = zone, from, to) do
    for index <- Grid.approached(world.grid, zone.index, from, to, world.wake_ahead),
        do: World.wake_zone(world, index)

    zone
  end

  defp wake_ahead(zone, _from, _to), do: zone

  ## Effects

  # What `Zone.Handoff` decided, carried out in order. A handoff that never
  # gets its answer is settled by a later tick, so one started here (or
  # replayed) makes sure there is one.
  defp carry_out(zone, {effects, core}),
    do: %{zone | core: core} |> sync_game() |> run_effects(effects) |> ensure_tick()

  defp run_effects(zone, []), do: zone
  defp run_effects(zone, [effect | rest]), do: zone |> run_effect(effect) |> run_effects(rest)

  # An entity handed to another zone: the placement it goes to is recorded
  # with the handoff (`{:zones_lost, ...}`).
  defp run_effect(zone, {:send, to, {:arrive, %Entity{id: id}, _, _, _} = message}) do
    {address, epoch} = World.zone_placement(zone.world, to)
    GenServer.cast(address, message)
    %{zone | core: State.sent_to(zone.core, id, epoch)}
  end

  # An action run in another zone: the same, for `{:zones_lost, ...}`.
  defp run_effect(zone, {:send, to, {:act_at, %Act{actor: %Entity{id: id}}, _, _, _} = message}) do
    {address, epoch} = World.zone_placement(zone.world, to)
    GenServer.cast(address, message)
    %{zone | core: State.acting_at(zone.core, id, epoch)}
  end

  defp run_effect(zone, {:send, to, message}) do
    GenServer.cast(World.zone_address(zone.world, to), message)
    zone
  end

  defp run_effect(zone, {:reply, owner, id, tag, outcome}) do
    reply(zone, owner, id, tag, outcome)
    zone
  end

  defp run_effect(zone, {:answer, from, result}) do
    GenServer.reply(from, result)
    zone
  end

  defp run_effect(zone, {:acted, owner, id, tag, outcome}),
    do: reply_act(zone, owner, id, tag, outcome)

  defp run_effect(zone, {:count, stat}) do
    Stats.incr(zone.world.stats, stat)
    zone
  end

  defp run_effect(zone, {:adopt, %Entity{x: x, y: y} = entity}) do
    zone = adopt(zone, entity)
    add_density(zone, entity, 1)
    wake_ahead(zone, nil, {x, y})
  end

  defp run_effect(zone, {:view, entity, before}), do: follow(zone, entity, before)

  defp run_effect(zone, {:moved, %Entity{updates: :view} = entity, from}),
    do: zone |> moved(entity, from) |> follow(entity, from)

  defp run_effect(zone, {:moved, entity, from}), do: moved(zone, entity, from)
  defp run_effect(zone, {:let_go, entity}), do: let_go(zone, entity)
  defp run_effect(zone, {:dropped, entity}), do: dropped(zone, entity)

  defp run_effect(zone, {:directory, id, to}) do
    Directory.moved_on(zone.world.name, id, zone.index, to)
    zone
  end

  # The subscriptions' table: a restarted or handed-over zone rebuilds its
  # viewers from it.
  defp run_effect(zone, {:remember, pid, id, format}) do
    :ets.insert(zone.world.subscriptions, {zone.index, pid, id, format})
    zone
  end

  defp run_effect(zone, {:forget, pid, id, format}) do
    :ets.delete_object(zone.world.subscriptions, {zone.index, pid, id, format})
    zone
  end

  defp run_effect(zone, {:forget_viewer, pid, format}) do
    :ets.match_delete(zone.world.subscriptions, {zone.index, pid, :_, format})
    zone
  end

  defp run_effect(zone, {:monitor, {pid, _format} = viewer}) do
    ref = Process.monitor(pid)

    %{
      zone
      | views: Views.monitored(zone.views, viewer, ref),
        monitors: Map.put(zone.monitors, ref, {:subscriber, viewer})
    }
  end

  defp run_effect(zone, {:demonitor, ref}), do: forget_monitor(zone, ref)

  defp run_effect(zone, {:tell, pid, message}) do
    tell(zone, pid, message)
    zone
  end

  defp run_effect(zone, {:feed_from, node, seq}) do
    :erlang.send(
      Relay.address(zone.world.name, node),
      {:feed_from, zone.index, seq},
      [:noconnect]
    )

    zone
  end

  defp run_effect(zone, {:publish, seq, encoded}) do
    Feed.publish(zone.world.feed, zone.index, seq, encoded)
    zone
  end

  # A node whose connection is busy is not waited for: the delta is dropped
  # (counted), and its viewers, finding a gap in their feed, ask for snapshots.
  defp run_effect(zone, {:relay, node, seq, encoded}) do
    message = {:feed, zone.index, seq, encoded}

    case :erlang.send(Relay.address(zone.world.name, node), message, [:noconnect, :nosuspend]) do
      :ok -> Stats.incr(zone.world.stats, :deltas_relayed)
      _not_sent -> Stats.incr(zone.world.stats, :deltas_dropped)
    end

    zone
  end

  # Published for the herds, which rest their actors where nobody watches
  # (`Grove.Actors`' `:unseen_every`).
  defp run_effect(zone, {:watch, watched}) do
    Slots.put_watched(zone.world, zone.index, watched)

    %{zone | core: State.watch(zone.core, watched)}
    |> ensure_tick()
    |> reschedule_game_tick()
  end

  defp env(zone),
    do: %{locate: zone.locate, now: :erlang.monotonic_time(:millisecond), busy: zone.overloaded}

  ## Views

  # A viewing entity joined, moved or arrived: its subscriptions follow its
  # viewport. Most moves leave them as they were and change nothing here.
  defp follow(zone, entity, before) do
    case Views.follow(zone.views, zone.core, entity, before) do
      {[], _views} -> zone
      followed -> view(zone, followed)
    end
  end

  # What `Zone.Views` decided, carried out in order.
  # A zone one viewer watched that a second comes to watch sets its game's
  # timer again, for the tick itself: it went off a quarter interval late
  # for that viewer's moves to run the tick (`game_tick_late/2`).
  defp view(zone, {effects, views}) do
    alone = Views.alone?(zone.views, :any)
    zone = run_effects(%{zone | views: views}, effects)

    if alone and Views.watched?(zone.views) and not Views.alone?(zone.views, :any),
      do: reschedule_game_tick(zone),
      else: zone
  end

  # What a zone tells one viewer (a snapshot, the end of its subscription)
  # goes to a viewer on another node through that node's relay, like the
  # deltas: so the viewer gets it in the order the zone sent it, and never
  # a zone's word that it is no longer watched before the snapshot that
  # preceded it.
  defp tell(_zone, pid, message) when node(pid) == node(), do: send(pid, message)

  defp tell(zone, pid, message) do
    :erlang.send(
      Relay.address(zone.world.name, node(pid)),
      {:view, pid, message},
      [:noconnect]
    )
  end

  ## Removal

  # An entity owned here is gone (`Zone.State` forgot it already): so goes
  # everything that refers to it.
  defp dropped(zone, %Entity{id: id} = entity) do
    # The directory first: a zone killed between the two restarts with
    # a row the directory does not place here, which recovery drops;
    # the other way round it would leave an entry no zone holds.
    World.Relay.release(zone.world, id, zone.index, node(entity.owner))
    :ets.delete(zone.table, id)
    add_density(zone, entity, -1)
    Stats.incr(zone.world.stats, :departures)
    Stats.incr(zone.world.stats, population_key(entity), -1)
    :counters.add(zone.world.kind_counts, entity.kind + 1, -1)
    zone = zone |> forget_monitor(entity.monitor) |> count_entities() |> move_out(entity)
    if entity.updates == :view, do: view(zone, Views.drop(zone.views, entity)), else: zone
  end

  defp lose_in_transit(zone, id) do
    {:ok, tag, deferred, core} = State.cancel_handoff(zone.core, id)
    {:ok, entity} = State.fetch(core, id)
    zone = %{zone | core: core}
    reply(zone, entity.owner, id, tag, {:rejected, :interrupted})

    for operation <- deferred do
      case operation do
        {:move, _direction, owner, tag} -> reply(zone, owner, id, tag, {:rejected, :interrupted})
        {:leave, _owner, from} -> GenServer.reply(from, :ok)
        :owner_down -> :ok
      end
    end

    {entity, core} = State.remove(zone.core, id)
    zone = dropped(%{zone | core: core}, entity)
    send(entity.owner, {:grove_lost, id})
    zone
  end

  ## Ownership

  # The entity lives in another zone now: this one forgets its copy, and
  # leaves the directory and the population to the new owner.
  defp let_go(zone, %Entity{} = entity) do
    :ets.delete(zone.table, entity.id)
    add_density(zone, entity, -1)
    zone |> forget_monitor(entity.monitor) |> count_entities() |> move_out(entity)
  end

  # Each node counts the players and actors in its own zones: one that
  # crosses into another node's zone moves from one count to the other.
  defp across_nodes(%__MODULE__{world: %World{cluster: nil}}, _entity, _other, _by), do: :ok

  defp across_nodes(zone, entity, other, by) do
    if World.zone_node(zone.world, other) != node(),
      do: Stats.incr(zone.world.stats, population_key(entity), by)

    :ok
  end

  # An entity whose owner's node this one cannot reach stays where it
  # was: its owner would hear neither where it went nor, should this node
  # then lose its quorum, that it was lost with it.
  defp reaches?(%__MODULE__{world: %World{cluster: nil}}, _owner), do: true
  defp reaches?(_zone, owner), do: node(owner) == node() or node(owner) in Node.list(:connected)

  # Takes ownership of an entity placed or arrived here: table row, directory, monitor.
  defp adopt(zone, %Entity{} = entity) do
    ref = Process.monitor(entity.owner)
    entity = %{entity | monitor: ref}
    :ets.insert(zone.table, Entity.to_row(entity))
    World.Relay.assign(zone.world, entity.id, zone.index, entity.owner)

    count_entities(%{
      zone
      | core: State.put_entity(zone.core, entity),
        monitors: Map.put(zone.monitors, ref, {:entity, entity.id})
    })
    |> reside(entity)
  end

  # The zone's population, for heat maps, as it changes.
  defp count_entities(zone) do
    Slots.put_entities(zone.world, zone.index, State.size(zone.core))
    zone
  end

  defp forget_monitor(zone, nil), do: zone

  # Without `:flush`: flushing reads the whole mailbox for the monitor's
  # `DOWN`, on every handoff out of the zone, and a crowd at a border hands
  # off hundreds a second while its mailbox is longest. A `DOWN` already
  # queued for a monitor forgotten here finds no entry and is ignored.
  defp forget_monitor(zone, ref) do
    Process.demonitor(ref)
    %{zone | monitors: Map.delete(zone.monitors, ref)}
  end

  ## Density (the minimap) and places: per block of cells, entity counts
  ## in :atomics and which entities, in the world's `Places`

  defp shift_density(%__MODULE__{world: world} = zone, id, {fx, fy} = from, {tx, ty} = to) do
    block = world.density_block

    if div(fx, block) != div(tx, block) or div(fy, block) != div(ty, block),
      do: density_step(world, zone.index, id, from, to)
  end

  # A step from one density block to another.
  defp density_step(world, index, id, from, to) do
    World.Minimap.add(world, from, -1)
    World.Minimap.add(world, to, 1)
    Places.step(world, index, id, from, to)
  end

  defp add_density(%__MODULE__{world: world} = zone, %Entity{id: id, x: x, y: y}, by) do
    World.Minimap.add(world, {x, y}, by)

    if by > 0,
      do: Places.add(world, zone.index, id, {x, y}),
      else: Places.remove(world, zone.index, id, {x, y})
  end

  defp population_key(%Entity{kind: 1}), do: :players
  defp population_key(%Entity{}), do: :actors

  # A resident's step is nobody's request: it is counted, and answered to
  # no one (`walk_tag/1`).
  defp reply(zone, _owner, _id, {__MODULE__, :walk, _round}, outcome),
    do: count_outcome(zone, outcome)

  defp reply(zone, owner, id, tag, outcome) do
    count_outcome(zone, outcome)
    send(owner, {:grove_move, id, tag, outcome})
  end

  defp count_outcome(zone, outcome) do
    Slots.add_move(zone.world, zone.index)
    Stats.incr(zone.world.stats, outcome_key(outcome))
  end

  ## Actions

  # One action, decided here (its outcome) or `:pending`: it runs in the
  # zone of its target, waits behind its entity's handoff, or follows it.
  defp act_one(%__MODULE__{overloaded: true} = zone, _id, _req, _owner, _tag, _hops, _now),
    do: {{:rejected, :busy}, zone}

  defp act_one(zone, id, request, owner, tag, hops, now) do
    case GameRules.act(zone.core, id, request, owner, tag, hops, now, zone.locate) do
      {:acted, outcome, core} -> {outcome, sync_game(%{zone | core: core})}
      {:pending, effects, core} -> {:pending, carry_out(zone, {effects, core})}
    end
  end

  # A resident's action, like its step, is answered to no one.
  defp reply_act(zone, _owner, _id, {__MODULE__, :walk, _round}, outcome) do
    count_act(zone, outcome)
    zone
  end

  defp reply_act(zone, owner, id, tag, outcome) do
    count_act(zone, outcome)
    send(owner, {:grove_act, id, tag, outcome})
    zone
  end

  defp count_act(zone, outcome) do
    Slots.add_move(zone.world, zone.index)
    Stats.incr(zone.world.stats, act_key(outcome))
  end

  defp act_key({:ok, _data}), do: :acts_ok
  defp act_key({:refused, _reason}), do: :acts_refused
  defp act_key({:rejected, :interrupted}), do: :acts_interrupted
  defp act_key({:rejected, _reason}), do: :acts_rejected

  ## The game's writes

  # What the last operation changed in the game, carried out: the layer's
  # rows and the entities' attributes into the tables (readers see them
  # without a message, and a restarted zone rebuilds from them), tallies to
  # the world's tally, failures to the log. Nothing to do without a game.
  @doc false
  @spec sync_game(t(), :entities | :ticks) :: t()
  def sync_game(zone, by \\ :entities)

  def sync_game(%__MODULE__{core: %State{game: nil}} = zone, _by), do: zone

  def sync_game(zone, by) do
    case GameRules.take_output(zone.core) do
      {nil, _core} ->
        zone

      {output, core} ->
        zone = %{zone | core: core}
        table = game_table(zone)

        for {key, value, _code, _walk} = row <- output.cells do
          if value == nil, do: :ets.delete(table, key), else: :ets.insert(table, row)
        end

        if output.cells != [] do
          mark_changed(zone, for({key, _, _, _} <- output.cells, do: key))
          touched(zone, by)
        end

        for %Entity{} = entity <- output.entities do
          :ets.update_element(zone.table, entity.id, [
            {Entity.look_position(), entity.look},
            {Entity.attrs_position(), entity.attrs}
          ])
        end

        if output.tallies != [], do: World.Game.tally(zone.world, output.tallies)
        for failure <- output.failures, do: World.Game.failed(zone.world, zone.index, failure)
        zone
    end
  end

  defp game_table(zone), do: zone.game_table

  # What the game's own ticks alone changed in a zone on demand is not
  # counted as a change of its layer: the saver does not write it, and the
  # zone falls asleep without writing it, to wake as it was last laid or
  # saved (docs/decisions.md, "Zones on demand"). What an entity or an
  # action changed is counted, and with it every cell changed since.
  defp touched(%__MODULE__{world: %World{zones_on_demand: true}}, :ticks), do: :ok
  defp touched(zone, _by), do: World.Game.touched(zone.world, zone.index)

  # Which cells changed since the base of the zone's save, for the game's
  # saver to write only those (`Grove.World.Game.Saver`): marks in the
  # layer's table, after the values they mark, so that a saver that takes
  # a mark reads the value it marks, or a newer one.
  defp mark_changed(%__MODULE__{world: %World{store: nil}}, _keys), do: :ok
  defp mark_changed(_zone, []), do: :ok

  defp mark_changed(zone, keys),
    do: :ets.insert(game_table(zone), for(key <- keys, do: World.Game.changed_mark(key)))

  # The game's ticks owed while nobody watched, run before anything reads
  # what they change from outside the zone's core (`GameRules.settle/1`).
  defp settle_game(zone) do
    %__MODULE__{core: core} = zone = owe_game(zone)
    sync_game(%{zone | core: GameRules.settle(core)}, :ticks)
  end

  # The ticks of the game's clock that fell due since the zone last
  # looked, counted as owed where nobody watches (`GameRules.due/3`): before
  # an action, a join or a leave, a look, a handover or a sleep, since such
  # a zone has no timer at each tick.
  defp owe_game(zone) do
    case game_clock(zone) do
      {interval, phase} ->
        index = game_tick_index(interval, phase)
        sync_game(%{zone | core: GameRules.due(zone.core, index, GameRules.roll())}, :ticks)

      nil ->
        zone
    end
  end

  # A game that ticks on its clock: every `interval` ms, its ticks spread
  # over the zones like views' ticks (zone `index`'s tick `k` falls due at
  # `k * interval + phase` of the monotonic clock).
  defp game_clock(%__MODULE__{core: %State{game: %GameRules{spec: %{tick: tick} = spec}}} = zone)
       when is_integer(tick) and is_map_key(spec.hooks, :tick),
       do: {tick, div(zone.index * tick, Grid.zone_count(zone.world.grid))}

  defp game_clock(_zone), do: nil

  defp game_tick_index(interval, phase),
    do: Integer.floor_div(System.monotonic_time(:millisecond) - phase, interval)

  # The timer of the game's next tick, or, in a zone that counts the ticks
  # it owes, of the tick at which it owes `:catch_up` of them.
  defp schedule_game_tick(%__MODULE__{game_timer: nil} = zone) do
    case game_clock(zone) do
      {interval, phase} ->
        %__MODULE__{core: core} = zone = owe_game(zone)
        next = GameRules.next_tick(core, game_tick_index(interval, phase))

        at = game_tick_at(core, next, interval, phase) + game_tick_late(zone, interval)
        timer = :erlang.start_timer(at, self(), :game_tick, abs: true)
        %{zone | game_timer: timer}

      nil ->
        zone
    end
  end

  defp schedule_game_tick(zone), do: zone

  # When the timer of tick `next` goes off: at the tick, spread over the
  # zones, where someone watches; where nobody does, at the first whole
  # interval after it (still within tick `next` of the zone's clock), the
  # same instant for every zone nobody watches, so that the scheduler
  # wakes once for all of them rather than once for each.
  defp game_tick_at(%State{watched: true}, next, interval, phase), do: next * interval + phase
  defp game_tick_at(_core, next, interval, 0), do: next * interval
  defp game_tick_at(_core, next, interval, _phase), do: (next + 1) * interval

  # Where one viewer watches, the timer goes off a quarter of an interval
  # after the tick: a move of that viewer's meanwhile runs the tick in its
  # own turn (`game_due_alone/2`), and the timer is set for the next. A
  # player who walks reads what the tick changed with its next outcome
  # whichever turn ran it; one who stands reads it that much later.
  defp game_tick_late(%__MODULE__{core: %State{watched: true}, views: views}, interval) do
    if Views.alone?(views, :any), do: div(interval, 4), else: 0
  end

  defp game_tick_late(_zone, _interval), do: 0

  # A move of a zone's only viewer, after a tick of its game fell due:
  # the tick runs now, in the move's turn, where its timer, set a little
  # after it (`game_tick_late/2`), would have taken a turn of its own.
  defp game_due_alone(%__MODULE__{core: %State{watched: true}, game_timer: timer} = zone, owner)
       when timer != nil do
    with true <- Views.alone?(zone.views, owner),
         {interval, phase} <- game_clock(zone),
         %State{game: %GameRules{at: at}} when at != nil <- zone.core,
         index when index > at <- game_tick_index(interval, phase) do
      :erlang.cancel_timer(timer, async: true, info: false)
      core = GameRules.tick_at(zone.core, index, GameRules.roll())
      zone = sync_game(%{zone | core: core, game_timer: nil}, :ticks)
      schedule_game_tick(zone)
    else
      _not_due -> zone
    end
  end

  defp game_due_alone(zone, _owner), do: zone

  # Watched or not any more: the game's timer is set again, for the next
  # tick or for the tick at which the zone owes `:catch_up`.
  defp reschedule_game_tick(%__MODULE__{game_timer: nil} = zone), do: zone

  defp reschedule_game_tick(zone) do
    Process.cancel_timer(zone.game_timer)
    schedule_game_tick(%{zone | game_timer: nil})
  end

  defp outcome_key({:ok, _cell}), do: :moves_ok
  defp outcome_key({:rejected, reason}), do: Stats.outcome_key(reason)

  ## Bacteria

  # The zone's cells of the automaton, from its row in the life table when
  # it restarts; a zone that restarts late owes generations, and catches
  # up at once.
  defp recover_life(%__MODULE__{world: %World{life: nil}} = zone), do: zone

  defp recover_life(%__MODULE__{world: world, index: index} = zone) do
    row =
      case :ets.lookup(world.life_table, index) do
        # Its cells were in a store that could not give them back.
        [{_, _, nil, _, _}] -> nil
        [row] -> row
        [] -> nil
      end

    # A zone on demand that wakes resumes at the world's generation, and so
    # does a zone of a cluster that starts without a row: its generations
    # count from the clock's epoch (`Grove.World.Keeper`), long before it
    # started. One with a row (handed over, or started again from its
    # heir's copy after its node was lost) catches up from it, as a zone
    # that restarts does: its neighbours wait for its rows, and the
    # generations it owes come out as on one grid.
    resume =
      if world.zones_on_demand or (world.cluster != nil and row == nil),
        do: world_generation(world)

    {effects, core, bacteria} =
      Bacteria.recover(
        world.life,
        world.life_epoch,
        world.terrain_options[:seed],
        zone.core,
        row,
        resume
      )

    zone = run_life(%{zone | core: core, bacteria: bacteria}, effects, nil)

    # Awake again, with its board as it slept or handed over: the other
    # nodes that read it hear so, whether or not it computed a row here.
    unless Enum.any?(effects, &match?({:row, _}, &1)),
      do: share_row(zone, hd(:ets.lookup(world.life_table, index)))

    advance_life(zone)
  end

  # The generations that are due, one per message, as far as the
  # neighbours' rows allow.
  defp advance_life(%__MODULE__{bacteria: nil} = zone), do: zone

  defp advance_life(%__MODULE__{world: world, bacteria: bacteria} = zone) do
    table = world.life_table

    # A neighbour on demand that sleeps shows its borders as they stand.
    read_row = fn index ->
      row = :ets.lookup(table, index)

      case {row, asleep?(world, index, row)} do
        {[row], false} -> row
        {[row], true} -> {:frozen, elem(row, 3)}
        {[], false} -> nil
        {[], true} -> {:frozen, nil}
      end
    end

    started = System.monotonic_time(:microsecond)
    {effects, core, bacteria} = Bacteria.advance(bacteria, zone.core, life_target(zone), read_row)
    run_life(%{zone | core: core, bacteria: bacteria}, effects, started)
  end

  # The generation the world is due at: by the clock, or as far as manual
  # stepping has asked.
  defp life_target(%__MODULE__{world: %World{life: %Life{interval: :manual}} = world}),
    do: :atomics.get(world.life_target, 1)

  defp life_target(zone),
    do: Bacteria.target(zone.bacteria, System.monotonic_time(:millisecond))

  defp world_generation(%World{life: %Life{interval: :manual}} = world),
    do: :atomics.get(world.life_target, 1)

  defp world_generation(%World{life: %Life{interval: interval}} = world),
    do: max(div(System.monotonic_time(:millisecond) - world.life_epoch, interval), 0)

  # In a cluster, a neighbour that another node runs reads this zone's row
  # in that node's life table: the row goes there, through its door, once
  # to each node that runs a neighbour, and to the zone's heir, the node
  # that would own it were this one lost, for it to start again from there.
  defp share_row(%__MODULE__{world: %World{cluster: nil}}, _row), do: :ok

  defp share_row(%__MODULE__{world: world, bacteria: bacteria, index: index}, row) do
    here = node()

    owners =
      for {_direction, neighbour} when neighbour != nil <- bacteria.neighbours,
          owner = World.zone_node(world, neighbour),
          owner != here,
          do: owner

    owners =
      case Grove.Cluster.members(world.cluster) -- [here] do
        [] -> owners
        others -> [Placement.owner(index, others) | owners]
      end

    owners |> Enum.uniq() |> Enum.each(&World.Door.share_row(world.name, &1, row))
  end

  # A zone on demand that falls asleep tells the nodes that read its row:
  # the row without its cells (in the store, or in this node's table),
  # which says it sleeps, and its neighbours there read its borders frozen.
  defp share_asleep(%__MODULE__{world: %World{cluster: nil}}), do: :ok
  defp share_asleep(%__MODULE__{bacteria: nil}), do: :ok

  defp share_asleep(%__MODULE__{world: world, index: index} = zone) do
    case :ets.lookup(world.life_table, index) do
      [row] -> share_row(zone, put_elem(row, 2, nil))
      [] -> :ok
    end
  end

  # Whether a neighbour sleeps: one of this node's when it has no process;
  # one of another node's when its row there says so (no cells: see
  # `share_asleep/1`), or when no row of it came (it never ran).
  defp asleep?(%World{zones_on_demand: true} = world, index, row) do
    if World.zone_node(world, index) == node(),
      do: World.zone_pid(world, index) == nil,
      else: match?([], row) or match?([{_, _, nil, _, _}], row)
  end

  defp asleep?(_world, _index, _row), do: false

  defp seed(%__MODULE__{bacteria: nil} = zone, id, _pattern, _direction, owner, tag, _hops) do
    send(owner, {:grove_seed, id, tag, {:rejected, :disabled}})
    zone
  end

  defp seed(zone, id, pattern, direction, owner, tag, hops) do
    request = {id, pattern, direction, owner, tag, hops}

    {effects, bacteria} =
      Bacteria.seed(zone.bacteria, zone.core, request, zone.locate, zone.overloaded)

    run_life(%{zone | bacteria: bacteria}, effects, nil)
  end

  # What `Zone.Bacteria` decided, carried out in order; `started` is when
  # the zone began the generation (monotonic microseconds): the time it
  # takes counts its writes too.
  defp run_life(zone, effects, started),
    do: Enum.reduce(effects, zone, &run_life_effect(&2, &1, started))

  defp run_life_effect(zone, {:row, row}, _started) do
    :ets.insert(zone.world.life_table, row)
    share_row(zone, row)
    zone
  end

  # Bacteria count on the minimap like entities, in a layer of their own:
  # a generation's cells come row by row, and each run of them in one
  # block is one write, with the world's fields read once, where each
  # cell read them from the world (a hash trie) and wrote its block.
  defp run_life_effect(%__MODULE__{world: world} = zone, {:cells, born, died}, _started) do
    %World{life_density: density, density_block: block, density_cols: cols} = world
    add_life_density(born, {density, block, cols}, 1, 0, 0)
    add_life_density(died, {density, block, cols}, -1, 0, 0)
    Stats.incr(world.stats, :bacteria, length(born) - length(died))
    zone
  end

  defp run_life_effect(zone, {:generation, generation, births, deaths, live}, started) do
    world = zone.world
    took = System.monotonic_time(:microsecond) - started
    Stats.incr(world.stats, :generations)
    Stats.incr(world.stats, :births, births)
    Stats.incr(world.stats, :deaths, deaths)
    Grove.Metrics.Histogram.record(world.life_time, took)

    Metrics.execute(
      [:grove, :life, :generation],
      %{duration: took, births: births, deaths: deaths, live: live},
      %{zone: zone.index, world: world.name, generation: generation}
    )

    # What changed goes out with the next delta.
    ensure_tick(zone)
  end

  defp run_life_effect(zone, {:wake, :now}, _started) do
    # More are owed: after whatever waits in the mailbox.
    send(self(), :generation)
    %{zone | life_timer: make_ref()}
  end

  defp run_life_effect(%__MODULE__{life_timer: nil} = zone, {:wake, {:at, due}}, _started),
    do: %{zone | life_timer: Process.send_after(self(), :generation, due, abs: true)}

  defp run_life_effect(zone, {:wake, {:at, _due}}, _started), do: zone

  defp run_life_effect(zone, {:wake, {:after, wait}}, _started),
    do: %{zone | life_timer: Process.send_after(self(), :generation, wait)}

  defp run_life_effect(zone, {:seeded, owner, id, tag, outcome}, _started) do
    send(owner, {:grove_seed, id, tag, outcome})
    zone
  end

  defp run_life_effect(zone, effect, _started), do: run_effect(zone, effect)

  # `at` is the block of the run so far (atomics count from 1: 0 is none).
  defp add_life_density([{x, y} | cells], {density, block, cols} = layer, by, at, count) do
    case div(y, block) * cols + div(x, block) + 1 do
      ^at ->
        add_life_density(cells, layer, by, at, count + 1)

      next ->
        if count > 0, do: :atomics.add(density, at, by * count)
        add_life_density(cells, layer, by, next, 1)
    end
  end

  defp add_life_density([], {density, _block, _cols}, by, at, count) do
    if count > 0, do: :atomics.add(density, at, by * count)
    :ok
  end

  ## Ticks

  # A tick set at the tick's pace because the zone sheds load (it
  # measures its mailbox again, `tick_period/1`) publishes only once its
  # viewers' period has passed: else the hottest zones, when the server
  # is busiest, would encode and relay a delta, and write it to the feed,
  # every `:tick` where their viewers' pace is stretched.
  defp tick(zone) do
    shedding = zone.overloaded
    zone = zone |> measure_mailbox() |> expire_handoffs()

    if zone.core.watched and (not shedding or viewers_due?(zone)),
      do: publish_delta(zone),
      else: zone
  end

  # The viewers' period (`World.tick_interval/1`) has passed since the
  # zone last published: a slot of it, as `schedule_tick/1` places its
  # ticks, begun since.
  defp viewers_due?(%__MODULE__{published_at: nil}), do: true

  defp viewers_due?(%__MODULE__{published_at: at} = zone) do
    case World.tick_interval(zone.world) do
      period when is_integer(period) ->
        phase = div(zone.index * period, Grid.zone_count(zone.world.grid))
        now = System.monotonic_time(:millisecond)
        Integer.floor_div(now - phase, period) > Integer.floor_div(at - phase, period)

      _manual ->
        true
    end
  end

  # What changed since the last delta, published: at a tick, or in the
  # turn that changed it in a zone with one viewer (`publish_alone/2`).
  defp publish_delta(zone) do
    started = System.monotonic_time()
    {changes, departed, labels, core} = State.flush(zone.core)
    {extra, core} = State.flush_extra(core, labels)
    published_at = System.convert_time_unit(started, :native, :millisecond)
    zone = %{zone | core: core, published_at: published_at}
    # Encoded once per format, whatever the number of viewers.
    zone = view(zone, Views.publish(zone.views, core, changes, departed, extra))

    # The world's own histogram (its metrics), and the event for anyone listening.
    duration = System.monotonic_time() - started
    micros = System.convert_time_unit(duration, :native, :microsecond)
    Grove.Metrics.Histogram.record(zone.world.tick_time, micros)

    Metrics.execute(
      [:grove, :zone, :tick],
      %{
        duration: duration,
        changes: length(changes) + length(departed)
      },
      %{zone: zone.index, world: zone.world.name}
    )

    zone
  end

  # A handoff with no answer for too long: the target zone died with it. The
  # directory says who owns the entity now; settle by it.
  defp expire_handoffs(%__MODULE__{core: %State{leaving: leaving, acting: acting}} = zone)
       when map_size(leaving) == 0 and map_size(acting) == 0,
       do: zone

  defp expire_handoffs(zone) do
    cutoff = System.monotonic_time(:millisecond) - zone.world.handoff_timeout
    {effects, core} = Handoff.expire(zone.core, cutoff, env(zone))
    zone = %{zone | core: core} |> sync_game() |> run_effects(effects)
    # Actions that ran in another zone and got no answer: that zone died.
    {effects, core} = GameRules.expire(zone.core, cutoff, %{}, env(zone))
    %{zone | core: core} |> sync_game() |> run_effects(effects)
  end

  # A zone ticks only while it has something to do at a tick: a delta for
  # its viewers (something changed since the last), or an overload to
  # measure again (moves are refused unsent while it lasts, so no message
  # would re-measure it); a tick settles handoffs and actions left with no
  # answer too. A watched zone where nothing changes has no tick, as one
  # nobody watches: the next change sets it, at the same slot of the
  # zone's period as a tick that ran all along (`schedule_tick/1`), so
  # that the delta goes out when it would have. Whatever may change what
  # a delta carries ends with this call. With no tick, handoffs and
  # actions that await an answer wait for a timer of their own instead,
  # set for when the oldest of them could be given up on and cancelled
  # once none awaits an answer (one comes within milliseconds): a tick
  # every 100 ms only to find nothing stale woke the zone, and the
  # scheduler, a hundred times a second in a world with nobody connected.
  @doc false
  @spec ensure_tick(t()) :: t()
  def ensure_tick(zone), do: zone |> watch_idle() |> ensure_timers()

  defp ensure_timers(%__MODULE__{world: %World{tick: tick}, core: %State{} = core} = zone)
       when is_integer(tick) do
    zone =
      if zone.tick_timer == nil and ((core.watched and State.pending?(core)) or zone.overloaded),
        do: schedule_tick(zone),
        else: zone

    awaiting = map_size(core.leaving) > 0 or map_size(core.acting) > 0

    case zone do
      %__MODULE__{expiry_timer: nil, tick_timer: nil} when awaiting ->
        %{zone | expiry_timer: :erlang.start_timer(expiry_due(zone), self(), :expire, abs: true)}

      %__MODULE__{expiry_timer: timer} when timer != nil and not awaiting ->
        :erlang.cancel_timer(timer, async: true, info: false)
        %{zone | expiry_timer: nil}

      zone ->
        zone
    end
  end

  defp ensure_timers(zone), do: zone

  # Just past the moment the oldest handoff or action awaiting an answer
  # is stale (`expire_handoffs/1`'s cutoff).
  defp expiry_due(%__MODULE__{core: %State{leaving: leaving, acting: acting}, world: world}) do
    oldest = fn _id, %{since: since}, oldest -> min(since, oldest) end
    now = System.monotonic_time(:millisecond)
    since = :maps.fold(oldest, :maps.fold(oldest, now, leaving), acting)
    since + world.handoff_timeout + 1
  end

  defp schedule_tick(zone), do: set_tick(zone, next_tick(zone))

  defp set_tick(zone, due),
    do: %{zone | tick_timer: :erlang.start_timer(due, self(), :tick, abs: true), tick_due: due}

  # When the zone's next tick is due (monotonic ms). Zones tick at the
  # same rate but spread over the period, so the work of publishing
  # deltas does not arrive all at once.
  defp next_tick(zone) do
    tick = tick_period(zone)
    phase = div(zone.index * tick, Grid.zone_count(zone.world.grid))
    # The clock may be negative: floored, so the tick is due within one
    # period (`div/2` rounds towards zero, one to two periods out).
    now = System.monotonic_time(:millisecond)
    (Integer.floor_div(now - phase, tick) + 1) * tick + phase
  end

  # The period stretches while the server is busy (`World.pace_ticks/2`)
  # for the viewers' deltas alone: a zone that sheds load ticks to measure
  # its mailbox again, and answers `:busy` until it does, so it ticks every
  # `:tick` (watched or not), as does one nobody watches.
  defp tick_period(%__MODULE__{overloaded: false, core: %State{watched: true}, world: world}),
    do: World.tick_interval(world)

  defp tick_period(%__MODULE__{world: %World{tick: tick}}), do: tick

  ## Resident actors

  # A resident that joins, arrives or is recovered here comes onto the
  # zone's schedule; one that goes (to another zone, or out of the world)
  # comes off it.
  defp reside(zone, %Entity{walk: nil}), do: zone

  defp reside(zone, %Entity{id: id, walk: {_module, _state, interval}}) do
    %World{resident_beat: beat, resident_phases: phases} = zone.world
    residents = zone.residents || Residents.new(beat, rem(zone.index, phases) * div(beat, phases))
    start_walking(%{zone | residents: Residents.add(residents, id, interval)})
  end

  defp move_out(zone, %Entity{walk: nil}), do: zone
  defp move_out(%__MODULE__{residents: nil} = zone, _entity), do: zone

  defp move_out(zone, %Entity{id: id, walk: {_module, _state, interval}}),
    do: %{zone | residents: Residents.drop(zone.residents, id, interval)}

  # Residents that arrived by a step of a round of `Grove.World.walk/1`
  # (the tag of its move says which) have taken their step of it.
  defp walked_here(
         %__MODULE__{residents: %Residents{}} = zone,
         effects,
         {__MODULE__, :walk, round}
       )
       when is_integer(round) do
    Enum.reduce(effects, zone, fn
      {:adopt, %Entity{id: id}}, zone ->
        %{zone | residents: Residents.arrived(zone.residents, id, round)}

      _effect, zone ->
        zone
    end)
  end

  defp walked_here(zone, _effects, _tag), do: zone

  # A resident's step or action is tagged with the round of
  # `Grove.World.walk/1` it belongs to (nil where residents walk by their
  # own beats), which goes with it into the zone it crosses into; the tag
  # names this module, so that no caller's tag of a move or an action (a
  # `:walk` or a `{:walk, n}` of its own) is taken for it and its outcome
  # kept from the caller.
  defp walk_tag(zone), do: {__MODULE__, :walk, Residents.current_round(zone.residents)}

  # The beats start with the first resident, from the next one on; a world
  # that ticks by hand steps its residents by hand too (`Grove.World.walk/1`).
  defp start_walking(%__MODULE__{world: %World{tick: :manual}, walk_beat: nil} = zone),
    do: %{zone | walk_beat: 0}

  defp start_walking(%__MODULE__{world: %World{tick: :manual}} = zone), do: zone

  defp start_walking(%__MODULE__{walk_halted: true} = zone), do: zone

  defp start_walking(%__MODULE__{walk_timer: nil} = zone) do
    beat = Residents.slot_at(zone.residents, :erlang.monotonic_time(:millisecond))
    schedule_walk(%{zone | walk_beat: beat})
  end

  defp start_walking(zone), do: zone

  # The next beat, while anyone is on the schedule.
  defp schedule_walk(zone) do
    if zone.walk_halted or Residents.empty?(zone.residents) do
      %{zone | walk_timer: nil}
    else
      at = Residents.due_ms(zone.residents, zone.walk_beat + 1)
      %{zone | walk_timer: :erlang.start_timer(at, self(), :walk, abs: true)}
    end
  end

  # The residents of each beat since the last, each stepped through the
  # move rules as a client's move would be (`Zone.Handoff.move/8`),
  # counted like one and answered to no one: a step across the border is
  # a handoff like any other, and the zone on the other side puts the
  # resident on its own schedule. A beat more than `@walk_late_ms` late,
  # or one while the zone sheds load, is skipped and counted. Each step's
  # lateness, from when its beat was due to when the zone took it, goes
  # to the world's histogram (`grove_resident_step_lateness_seconds`): a
  # resident has no round trip, and this is what stands for one.
  defp walk(%__MODULE__{residents: residents} = zone) do
    now = :erlang.monotonic_time(:millisecond)
    now_beat = Residents.slot_at(residents, now)

    {ok, stayed, skipped, zone} =
      Enum.reduce((zone.walk_beat + 1)..now_beat//1, {0, 0, 0, zone}, fn beat,
                                                                         {ok, stayed, skipped,
                                                                          zone} ->
        due = Residents.due(zone.residents, beat)

        if zone.overloaded or now - Residents.due_ms(residents, beat) > @walk_late_ms do
          {ok, stayed, skipped + length(due), zone}
        else
          step(
            due,
            zone,
            zone.core,
            {beat, Residents.due_ms(residents, beat) * 1000},
            now,
            ok,
            stayed,
            skipped
          )
        end
      end)

    count_walk(%{zone | walk_beat: max(now_beat, zone.walk_beat)}, ok, stayed, skipped)
  end

  defp count_walk(zone, ok, stayed, skipped) do
    if ok > 0 do
      Slots.add_move(zone.world, zone.index, ok)
      Stats.incr(zone.world.stats, :moves_ok, ok)
    end

    if skipped > 0, do: Stats.incr(zone.world.stats, :resident_skipped, skipped)
    if stayed > 0, do: Stats.incr(zone.world.stats, :resident_stayed, stayed)
    zone |> sync_game() |> ensure_tick()
  end

  defp step([], zone, core, _due, _now, ok, stayed, skipped),
    do: {ok, stayed, skipped, %{zone | core: core}}

  defp step([id | rest], zone, core, {beat, due_us} = due, now, ok, stayed, skipped) do
    case core.entities do
      %{^id => %Entity{walk: {module, state, _interval} = walk, owner: owner} = entity} ->
        late = max(:erlang.monotonic_time(:microsecond) - due_us, 0)
        Grove.Metrics.Histogram.record(zone.world.resident_lateness, late)
        roll = :erlang.phash2({id, beat}, @roll_range)
        {direction, next} = module.step(state, sense(zone, entity, module), roll)

        core =
          if next === state, do: core, else: walked(zone, core, entity, put_elem(walk, 1, next))

        if is_atom(direction) and direction != :stay do
          case Handoff.move(core, id, direction, owner, walk_tag(zone), 0, now, zone.locate) do
            {:moved, %Entity{updates: updates} = entity, from, core} when updates != :view ->
              moved(zone, entity, from)
              step(rest, zone, core, due, now, ok + 1, stayed, skipped)

            {:rejected, reason, core} ->
              count_outcome(zone, {:rejected, reason})
              step(rest, zone, core, due, now, ok, stayed, skipped)

            # Its handoff still waits for an answer: it steps from its next zone.
            _other when is_map_key(core.leaving, id) ->
              step(rest, zone, core, due, now, ok, stayed + 1, skipped)

            _other ->
              # Undone: `apply_one/7` applies it again on the zone as it stood.
              case apply_one(%{zone | core: core}, id, direction, owner, walk_tag(zone), 0, now) do
                {:pending, zone} ->
                  step(rest, zone, zone.core, due, now, ok, stayed, skipped)

                {{:ok, _cell}, zone} ->
                  step(rest, zone, zone.core, due, now, ok + 1, stayed, skipped)

                {outcome, zone} ->
                  count_outcome(zone, outcome)
                  step(rest, zone, zone.core, due, now, ok, stayed, skipped)
              end
          end
        else
          case direction do
            {:act, action, target} ->
              zone = resident_act(%{zone | core: core}, id, action, target, %{}, owner, now)
              step(rest, zone, zone.core, due, now, ok, stayed, skipped)

            {:act, action, target, args} ->
              zone = resident_act(%{zone | core: core}, id, action, target, args, owner, now)
              step(rest, zone, zone.core, due, now, ok, stayed, skipped)

            _stay ->
              step(rest, zone, core, due, now, ok, stayed + 1, skipped)
          end
        end

      # Handed over and not let go yet, or gone: not stepped here.
      _other ->
        step(rest, zone, core, due, now, ok, stayed, skipped)
    end
  end

  # What a resident kind senses, read here as its herd would read it
  # (`Grove.Actor.Senses`), with no message: the entities near it from
  # the world's index of places and the zones' tables (this zone's rows
  # are written as each step is taken, so a resident sees the steps taken
  # before its own in the same beat), the game's layer near it, and its
  # own attributes from the core. The world's `:senses` module makes them
  # into the kind's senses; a kind that senses nothing is given `nil`.
  defp sense(zone, %Entity{id: id, x: x, y: y, kind: kind} = entity, module) do
    case sight(module) do
      nil ->
        nil

      {radius, entities, game} ->
        world = zone.world
        at = {x, y}

        {cells, walk} = if game, do: game_near(zone, at, radius), else: {nil, %{}}

        world.senses.from_sight(%{
          id: id,
          kind: kind,
          at: at,
          radius: radius,
          terrain: world.terrain,
          entities: if(entities, do: nearby(world, id, at, radius)),
          cells: cells,
          walk: walk,
          attrs: if(game, do: entity.attrs)
        })
    end
  end

  # The layer near a cell: from the core when the square lies in the
  # zone, else from the tables of the zones it covers; none without a game.
  defp game_near(%__MODULE__{core: %State{game: nil}}, _at, _radius), do: {%{}, %{}}

  defp game_near(%__MODULE__{core: core} = zone, {x, y} = at, radius) do
    {x0, y0, x1, y1} = core.bounds

    if x - radius >= x0 and y - radius >= y0 and x + radius < x1 and y + radius < y1,
      do: GameRules.near(core, {x - radius, y - radius, x + radius, y + radius}),
      else: Grove.World.Game.near(zone.world, at, radius)
  end

  defp nearby(world, id, at, radius),
    do: for({other, _, _, _} = seen <- World.nearby(world, at, radius), other != id, do: seen)

  # A kind's senses (`senses/0`) as `{radius, entities?, game?}`, or `nil`
  # for none, read once per kind and process.
  defp sight(module) do
    case Process.get({:grove_sight, module}, :unknown) do
      :unknown ->
        sight = World.sight(module)
        Process.put({:grove_sight, module}, sight)
        sight

      sight ->
        sight
    end
  end

  # A resident's action, checked as `World.act/6` checks a client's, run
  # here or in the zone of its target, counted and answered to no one.
  defp resident_act(zone, id, action, target, args, owner, now) do
    case World.check_act(zone.world, action, args) do
      {:ok, {name, args}} ->
        case act_one(zone, id, {name, target, args}, owner, walk_tag(zone), 0, now) do
          {:pending, zone} ->
            zone

          {outcome, zone} ->
            count_act(zone, outcome)
            zone
        end

      {:error, reason} ->
        count_act(zone, {:rejected, reason})
        zone
    end
  end

  # A kind's new state, kept in the core and the row (a restarted zone walks on from it).
  defp walked(zone, core, entity, walk) do
    :ets.update_element(zone.table, entity.id, {Entity.walk_position(), walk})
    State.put_entity(core, %{entity | walk: walk})
  end

  ## Load

  # Reading one's own queue length takes the lock senders take, so a busy
  # zone does it every few messages only. The count lives in the process
  # dictionary: bumping it there costs less than copying the zone struct.
  defp sample_mailbox(zone) do
    case Process.get(:grove_zone_handled, 0) do
      @measure_every ->
        Process.put(:grove_zone_handled, 0)
        measure_mailbox(zone)

      handled ->
        Process.put(:grove_zone_handled, handled + 1)
        zone
    end
  end

  # Publishes the mailbox length where clients read it before sending, and
  # sheds moves with `:busy` while it is past the limit.
  defp measure_mailbox(zone) do
    zone = fit_heap(zone)
    {:message_queue_len, queued} = Process.info(self(), :message_queue_len)
    Slots.put_load(zone.world, zone.index, queued)
    overloaded = queued > zone.world.mailbox_limit

    cond do
      overloaded == zone.overloaded ->
        zone

      # A tick set at the viewers' stretched pace is set again at the
      # tick's, unless it is due first; and back at theirs once the zone
      # no longer sheds load.
      overloaded and zone.tick_timer != nil ->
        ensure_tick(sooner_tick(%{zone | overloaded: true}))

      zone.tick_timer != nil ->
        ensure_tick(retick(%{zone | overloaded: false}))

      true ->
        ensure_tick(%{zone | overloaded: overloaded})
    end
  end

  # A crowded zone's young heap is as large as its entities need, where
  # the VM's own stayed near 28,690 words at 625 entities: its moves'
  # garbage filled it five times a second, and each collection copied
  # again what the moves since the last had rewritten of the state
  # (entities, rows, the maps' inner nodes), which was most of the
  # collector's work. `@heap_words_an_entity` words an entity (the VM
  # rounds it up to one of its heap sizes, about 1.6 times apart, so a
  # zone whose population wavers keeps its heap), from
  # `@heap_from_entities` entities on, `@heap_most_words` at most; fewer
  # keep the VM's (`+hms`), so a world of zones on demand, most of them
  # quiet, pays nothing. A world that names its zones' `:min_heap_size`
  # (`:zone_process`) keeps that one.
  defp fit_heap(%__MODULE__{core: %State{} = core, world: %World{zone_spawn: spawn}} = zone) do
    unless Keyword.has_key?(spawn, :min_heap_size) do
      wanted = heap_for(State.size(core))

      if wanted != Process.get(:grove_zone_heap, 0) do
        Process.flag(:min_heap_size, least_heap(wanted))
        Process.put(:grove_zone_heap, wanted)
      end
    end

    zone
  end

  defp fit_heap(zone), do: zone

  @doc false
  # The least young heap, in words, of a zone of `entities` (0: the VM's
  # own).
  @spec heap_for(non_neg_integer()) :: non_neg_integer()
  def heap_for(entities) when entities < @heap_from_entities, do: 0
  def heap_for(entities), do: min(entities * @heap_words_an_entity, @heap_most_words)

  # 0 is the VM's own least heap (`+hms`), as a zone had it at its start.
  defp least_heap(0), do: elem(:erlang.system_info(:min_heap_size), 1)
  defp least_heap(words), do: words

  # The tick set, or one at the zone's pace now, whichever is due first
  # (one that went off already has its message on the way).
  defp sooner_tick(%__MODULE__{tick_timer: timer, tick_due: due} = zone) do
    case next_tick(zone) do
      next when next < due ->
        :erlang.cancel_timer(timer, async: true, info: false)
        set_tick(zone, next)

      _later ->
        zone
    end
  end

  defp retick(%__MODULE__{tick_timer: timer, tick_due: due} = zone) do
    case next_tick(zone) do
      ^due ->
        zone

      next ->
        :erlang.cancel_timer(timer, async: true, info: false)
        set_tick(zone, next)
    end
  end

  ## Recovery

  defp recover_entities(zone) do
    %__MODULE__{table: table, index: index, world: world} = zone

    rows = with [] <- :ets.tab2list(table), do: load_asleep(zone)

    # Rows whose entity the directory now places elsewhere belong to a
    # handoff this zone finished but did not live to clean up.
    {mine, stale} =
      Enum.split_with(rows, fn row -> Directory.lookup(world.name, elem(row, 0)) == index end)

    for row <- stale, do: :ets.delete(table, elem(row, 0))

    # A zone on demand that wakes recovers its entities as a matter of course.
    if mine != [] and not world.zones_on_demand do
      Stats.incr(world.stats, :zone_restarts)

      Metrics.execute([:grove, :zone, :restart], %{entities: length(mine)}, %{
        zone: index,
        world: world.name
      })

      Logger.info("zone #{index} restarted with #{length(mine)} entities")
    end

    entities = Enum.map(mine, &Entity.from_row/1)
    # Written again from the rows: a zone that stopped between writing a
    # row and its place finds it here.
    Places.reset(world, index, for(entity <- entities, do: {entity.id, {entity.x, entity.y}}))
    zone = %{zone | core: State.restore(zone.core, entities)}

    Enum.reduce(entities, zone, fn entity, zone ->
      ref = Process.monitor(entity.owner)
      entity = %{entity | monitor: ref}

      zone = %{
        zone
        | core: State.put_entity(zone.core, entity),
          monitors: Map.put(zone.monitors, ref, {:entity, entity.id})
      }

      zone = reside(zone, entity)
      # Subscriptions are idempotent, so a viewer's are simply asserted again.
      if entity.updates == :view, do: follow(zone, entity, nil), else: zone
    end)
  end

  # The game's layer: from the zone's table when it ran here before (a
  # restart, or a handover that filled it), else as the game first lays it.
  # The zone keeps its own ground only, and a border of one cell around
  # it, where its moves step out.
  defp make_core(%__MODULE__{world: world, index: index} = zone, how) do
    {x0, y0, _x1, _y1} = Grid.zone_bounds(world.grid, index)
    previous = if how == :ahead, do: Process.flag(:priority, :low)
    ground = Terrain.area_of(world.terrain, x0, y0)
    if previous, do: Process.flag(:priority, previous)
    %{zone | core: State.new(index, world.grid, ground, world.rules)}
  end

  # A zone on demand that slept with its entities in the store (its table
  # is empty, its count is not): they go back in its table, then are
  # recovered from there like any other rows. A store that cannot give
  # them is asked again; one that never does loses them, loudly.
  defp load_asleep(zone) do
    if Saves.asleep_in_store?(zone.world, zone.index),
      do: load_asleep(zone, 3),
      else: []
  end

  defp load_asleep(zone, tries) do
    case Saves.load(zone.world, zone.index) do
      {:ok, {rows, life}} ->
        :ets.insert(zone.table, rows)
        if life, do: :ets.insert(zone.world.life_table, life)
        Stats.incr(zone.world.stats, :zone_loads)
        drop_save(zone)
        rows

      {:error, :unavailable} when tries > 1 ->
        load_asleep(zone, tries - 1)

      {:error, reason} ->
        Stats.incr(zone.world.stats, :zone_load_failures)
        count = Slots.entities(zone.world, zone.index)

        Logger.error(
          "zone #{zone.index} woke without the #{count} entities it slept with: " <>
            "the store could not give them (#{inspect(reason)})"
        )

        []
    end
  end

  # In a cluster, a zone's save is in the store only while it sleeps: one
  # left there once it woke would be read again by the node that takes the
  # zone after this one is lost (`Grove.World.Placer`), and give back
  # entities that went on.
  defp drop_save(%__MODULE__{world: %World{cluster: nil}}), do: :ok

  defp drop_save(%__MODULE__{world: world, index: index}) do
    case Saves.drop(world, index) do
      :ok ->
        :ok

      {:error, reason} ->
        Logger.warning(
          "zone #{index} woke with its save still in the store: " <>
            "it could not be dropped (#{inspect(reason)})"
        )
    end
  end

  defp recover_game(%__MODULE__{world: %World{game: nil}} = zone), do: zone

  defp recover_game(%__MODULE__{world: world} = zone) do
    # The game as it runs now, its code reloaded perhaps since the zone
    # was first started.
    world = %{world | game: World.fetch!(world.name).game}
    zone = %{zone | world: world}
    table = game_table(zone)

    case :ets.lookup(table, :ready) do
      # Of another version when the game's code was reloaded while the
      # zone slept: upgraded then, and written back as such.
      [{:ready, version, _code, _walk}] ->
        rows =
          for {key, value, _code, _walk} <- :ets.tab2list(table),
              is_integer(key),
              do: {key, value}

        core = GameRules.setup(zone.core, world.game, rows, version)
        :ets.insert(table, {:ready, core.game.spec.version, 0, nil})
        %{zone | core: core}

      [] ->
        {core, changed} =
          case World.Game.load(world, zone.index) do
            # A layer laid anew needs no save until it changes (`Slots.laid/2`).
            :generate ->
              Slots.laid(world, zone.index)
              {GameRules.setup(zone.core, world.game, :generate), []}

            # A save with no changes beside its base holds the layer as it
            # is laid now: it needs no save until it changes, as one laid
            # anew; one with changes is written whole as the zone sleeps.
            {rows, []} ->
              Slots.saved(world, zone.index, Slots.changes(world, zone.index))
              {GameRules.setup(zone.core, world.game, rows), []}

            {rows, changed} ->
              Slots.unlaid(world, zone.index)
              {GameRules.setup(zone.core, world.game, rows), changed}
          end

        :ets.insert(table, GameRules.rows(core))
        # The cells its save's base does not hold as they are: changed still.
        mark_changed(zone, changed)
        :ets.insert(table, {:ready, world.game.version, 0, nil})
        %{zone | core: core}
    end
  end

  defp recover_subscribers(zone) do
    :ets.lookup(zone.world.subscriptions, zone.index)
    |> Enum.reduce(zone, fn {_index, pid, entity_id, format}, zone ->
      view(zone, Views.subscribe(zone.views, zone.core, pid, entity_id, format))
    end)
  end
end
