defmodule Grove.World do
  @moduledoc """
  The shared grid world and the client API that players, actors and tests use.

  A world is a supervisor: start as many as you like under different names.
  The grid is cut into square zones; each zone is a process and the single
  writer for the entities inside it. Terrain is immutable (made whole at
  start, or area by area in a large world) and entity positions are in
  ETS, so reads never queue behind writes.

  This module is the client API and the world's description (`fetch!/1`,
  where its zones run). The rest has rooms of its own, which the functions
  here of the same name delegate to: starting a world in
  `Grove.World.Supervisor`, bacteria (seeding, stepping, reading them) in
  `Grove.World.Bacteria`, and what the world counts (entities, counters,
  zone loads, the minimap's density) in `Grove.World.Counts`.

  ## Options

    * `:name` - the world's name, an atom (required)
    * `:width`, `:height` - size of the grid in cells (default `1000` x `1000`)
    * `:zone_size` - side of a zone in cells (default `50`)
    * `:view_tile` - side in cells of the view tiles zones are cut into
      for the gateway's viewers, a divisor of `:zone_size`: a player is
      sent the tiles its viewport overlaps (default: the largest divisor
      of `:zone_size` up to 10)
    * `:seed` - terrain seed, any term (default `1`)
    * `:terrain` - terrain options: the `:generator` module and its own
      options, see `Grove.World.Terrain` (default `[]`, Grove's woodland)
    * `:rules` - move rules, see `Grove.World.Rules` (default `[]`)
    * `:tick` - milliseconds between view deltas, or `:manual` to tick with
      `tick/1` (default `100`)
    * `:tick_max` - the most milliseconds between view deltas when whoever
      measures the server's load (the gateway's pacer) stretches the ticks
      as it gets busy (`pace_ticks/2`); at least `:tick` (default `:tick`:
      they do not stretch; the server's configuration sets `250`)
    * `:mailbox_limit` - messages a zone may have queued before moves are
      answered `:busy` at once (default `5000`)
    * `:view_history` - ticks of view deltas each zone keeps in the feed for
      viewers to read; a viewer further behind asks for a snapshot
      (default `32`)
    * `:handoff_timeout` - milliseconds a handoff may wait for an answer
      before the zone settles it from the directory (default `5000`)
    * `:cluster` - the Grove instance whose `Grove.Cluster` places this
      world's zones on nodes, or `nil` for a world that runs every zone on
      this node (default `nil`)
    * `:density_block` - side in cells of the blocks `density/1` counts
      entities in, for minimaps (default `10`, larger in a world wider or
      higher than 10,000 cells, so that there are at most 1,000 a side)
    * `:chat_log` - how many of the lines said last (`say/4`) the world
      keeps in memory, for `recent_chat/2`; `0` keeps none (default `200`)
    * `:life` - bacteria, born and dying by a Game of Life the zones compute:
      `false` for none, or options, see `Grove.World.Life` (default `false`)
    * `:game` - the game the world runs: a module implementing `Grove.Game`,
      `{module, options}`, or `nil` for none (default `nil`); see
      `Grove.World.Game.Spec` for the options every game takes
    * `:store` - `{module, name}`, where the game's state is kept (see
      `Grove.World.Game.Storage`; `{Grove.Store, store}` for a store):
      the zones' layers, saved in batches and loaded when a zone starts
      with nothing, and its tallies (see `Grove.World.Game`, "State that
      lasts"); `nil` for a game whose state lives as long as the world
      runs, and whose tallies are counted and dropped (default `nil`; an
      instance with a store gives its world that store). With zones on
      demand, a zone that sleeps keeps its entities and its layer there
      too, and reads them back as it wakes
    * `:zones` - `:always` to run every zone from the start, or `:on_demand`
      to start a zone when first needed (an entity placed in it or crossing
      into it, a viewport reaching it) and stop it when idle, for worlds
      much larger than what is ever in use at once. A zone's bacteria
      (`:life`) stand still while it sleeps, and go on from there when it
      wakes; in a cluster, a zone wakes on the node that owns it, and one
      that sleeps is handed over with what it holds when its owner changes
      (default `:always`)
    * `:zone_idle` - in a world of zones on demand, milliseconds a zone
      stays awake without a player's entity, a viewer, a handoff or a
      resident actor (`join/2`'s `:walk`, which its zone steps) before it
      sleeps, or `:manual` to put idle zones to sleep with
      `sleep_idle/1` only (default `60000`)
    * `:wake_ahead` - in a world of zones on demand, how many cells from a
      zone that sleeps an entity that moves wakes it, so that the zone has
      made its ground before the entity steps in; `0` wakes a zone only
      when something is sent to it (default `4`)
    * `:resident_beat` - milliseconds between the beats on which zones step
      their resident actors (`join/2`'s `:walk`): a resident steps on one
      beat in every `interval / resident_beat` (its interval rounded to
      whole beats), so a zone's steps come in bursts this far apart
      (default `500`)
    * `:resident_phases` - how many groups the zones' beats are spread over,
      each group's beats `resident_beat / resident_phases` ms after the
      last's, so that all zones do not step at once (default `4`)
    * `:senses` - the module that makes what a resident kind senses into
      its senses (`from_sight/1`, given a map of `:id`, `:kind`, `:at`,
      `:radius`, `:terrain`, `:entities`, `:cells`, `:walk` and `:attrs`,
      read by its zone as a herd reads them): a kind that senses may
      reside only in a world that has one (default `nil`; an instance
      gives its world `Grove.Actor.Senses`, which sits above the world)
    * `:zone_process` - the options each zone's process starts with
      (`:erlang.spawn_opt/2`'s `:min_heap_size`, `:min_bin_vheap_size`,
      `:fullsweep_after`, `:message_queue_data`) (default `[]`, the VM's).
      Without a `:min_heap_size` here, a zone of 128 entities or more
      asks for a young heap of 256 words an entity (8 MB at most), so
      that a crowded zone's moves do not make it collect several times a
      second; one named here is kept whatever the crowd (see
      `docs/benchmarks.md`, "250,000 actors: what a zone's move
      allocates, and a crowded zone's heap", and `docs/decisions.md`)

  ## The client API

  A client is any process. It joins to get an entity, moves it one step at a
  time and leaves (or dies, which removes its entities at once).

      {:ok, id, {x, y}} = Grove.World.join(world, updates: :self)
      :ok = Grove.World.move(world, id, :ne, 1)
      receive do
        {:grove_move, ^id, 1, {:ok, {x, y}}} -> {x, y}
        {:grove_move, ^id, 1, {:rejected, reason}} -> reason
      end

  Every move gets exactly one outcome message,
  `{:grove_move, id, tag, {:ok, {x, y}} | {:rejected, reason}}`, where the
  reason is one of `:out_of_bounds`, `:blocked`, `:occupied`,
  `:rate_limited`, `:busy`, `:not_owner` or `:unknown_entity`, unless the
  zone process holding the move is killed before it answers (a restarted
  zone rebuilds its entities, not its mailbox): the gateway settles its
  players' moves then from where their entities stand, with `:interrupted`
  when they did not move.

  What a client receives besides outcomes depends on `:updates` at join:

    * `:none` - move outcomes only;
    * `:self` - the same; the default (kept distinct so that messages about
      the client's own entity can be added without touching `:none` clients);
    * `:view` - also the zones around its viewport, in the form it names
      with `:view_format` (see `Grove.World.ViewFormat`): for each zone a
      `{:grove_view, zone, :snapshot, seq, data}` message when the viewport
      reaches it and `{:grove_view, zone, :closed}` when it leaves it. In
      between, the zone publishes a delta each tick that changed something,
      encoded once for all its viewers; the viewer reads them when it is
      ready with `view_deltas/4`, from `seq` on. `Grove.World.View` does
      all this for in-VM clients and assembles their viewport.

  In a world that spans several nodes, an entity in a zone whose node is
  lost is lost with it; its owner, if it lives on a surviving node, is
  sent `{:grove_lost, id}` once the zone runs again elsewhere, and may
  place it again with `join/2`'s `:id` (the gateway puts its players back
  on their last acknowledged cell, the actors their herds run go back to
  theirs).

  No process of the world ever calls a client: everything it sends is a
  plain message, and what it publishes for many is read without one.
  """

  @behaviour Grove.World.Client

  alias Grove.World.{
    Places,
    Audit,
    ChatLog,
    Directory,
    Door,
    Entity,
    Feed,
    Grid,
    Bacteria,
    Counts,
    Life,
    Placer,
    Rules,
    Slots,
    Stats,
    Terrain,
    Zone
  }

  @enforce_keys [:name, :grid, :rules, :tick]
  defstruct [
    :name,
    # The name of the registry of its zones on demand on this node
    # (`Grove.World.Supervisor.registry/1`), made once: a move looks its
    # zone up there, and an atom made from a string costs a microsecond.
    :registry,
    :grid,
    :terrain,
    :rules,
    :tick,
    :zones,
    :tables,
    :keeper,
    :subscriptions,
    :away,
    :feed,
    :ids,
    :load,
    :stats,
    :zone_moves,
    :zone_entities,
    :zone_watched,
    :kind_counts,
    :density,
    :places,
    :density_cols,
    :density_rows,
    :life,
    :life_table,
    :life_epoch,
    :life_target,
    :life_time,
    :life_density,
    :game,
    :game_tables,
    :game_changes,
    :slots,
    :game_log,
    :store,
    :game_saves,
    :tally,
    :tick_time,
    :resident_lateness,
    :chat_log,
    :tick_max,
    # The milliseconds between a watched zone's ticks now, from `:tick`
    # to `:tick_max` (`pace_ticks/2`); nil with `tick: :manual`.
    :tick_pace,
    density_block: 10,
    mailbox_limit: 5000,
    view_history: 32,
    handoff_timeout: 5000,
    terrain_options: [],
    cluster: nil,
    zones_on_demand: false,
    zone_idle: 60_000,
    wake_ahead: 4,
    resident_beat: 500,
    resident_phases: 4,
    senses: nil,
    zone_spawn: [],
    id_base: 0,
    id_span: nil
  ]

  @type name :: atom()
  @type t :: %__MODULE__{
          name: name(),
          grid: Grid.t(),
          terrain: Terrain.t() | nil,
          rules: Rules.t(),
          tick: pos_integer() | :manual,
          tick_max: pos_integer() | nil,
          tick_pace: :atomics.atomics_ref() | nil,
          zones: tuple() | nil,
          tables: tuple() | nil,
          keeper: atom() | nil,
          subscriptions: :ets.tid() | nil,
          away: :ets.tid() | nil,
          feed: Grove.World.Feed.t() | nil,
          ids: :atomics.atomics_ref() | nil,
          load: :atomics.atomics_ref() | nil,
          stats: Stats.t() | nil,
          zone_moves: :counters.counters_ref() | nil,
          zone_entities: :atomics.atomics_ref() | nil,
          zone_watched: :atomics.atomics_ref() | nil,
          kind_counts: :counters.counters_ref() | nil,
          density: :atomics.atomics_ref() | nil,
          places: :ets.tid() | nil,
          density_cols: pos_integer() | nil,
          density_rows: pos_integer() | nil,
          density_block: pos_integer(),
          life: Life.t() | nil,
          life_table: :ets.tid() | nil,
          life_epoch: integer() | nil,
          life_target: :atomics.atomics_ref() | nil,
          life_time: Grove.Metrics.Histogram.t() | nil,
          life_density: :atomics.atomics_ref() | nil,
          game: Grove.World.Game.Spec.t() | nil,
          game_tables: tuple() | nil,
          game_changes: :atomics.atomics_ref() | nil,
          slots: Grove.World.Slots.t() | nil,
          game_log: :atomics.atomics_ref() | nil,
          chat_log: ChatLog.t() | non_neg_integer(),
          # Where what outlasts a run goes: the game's state and the
          # entities of zones that sleep (the `:store` option), or nil.
          store: Grove.World.Game.Storage.t() | nil,
          game_saves: :ets.tid() | nil,
          tally: atom() | nil,
          tick_time: Grove.Metrics.Histogram.t() | nil,
          resident_lateness: Grove.Metrics.Histogram.t() | nil,
          mailbox_limit: pos_integer(),
          view_history: pos_integer(),
          handoff_timeout: pos_integer(),
          terrain_options: keyword(),
          cluster: atom() | nil,
          zones_on_demand: boolean(),
          zone_idle: pos_integer() | :manual,
          wake_ahead: non_neg_integer(),
          resident_beat: pos_integer(),
          resident_phases: pos_integer(),
          senses: module() | nil,
          zone_spawn: Grove.SpawnOptions.t(),
          id_base: non_neg_integer(),
          id_span: pos_integer() | nil
        }

  @rejections [
    :out_of_bounds,
    :blocked,
    :occupied,
    :rate_limited,
    :busy,
    :not_owner,
    :unknown_entity,
    :interrupted
  ]

  @typedoc "Why a move was refused; `rejections/0` lists them all."
  @type rejection ::
          :out_of_bounds
          | :blocked
          | :occupied
          | :rate_limited
          | :interrupted
          | :busy
          | :not_owner
          | :unknown_entity

  @type outcome :: {:ok, Grid.cell()} | {:rejected, rejection()}

  # How many random cells one zone tries when a join asks for a random place.
  @placement_tries 16
  # How many zones a random join tries before it gives up.
  @placement_zones 8

  ## Starting

  @doc "Starts a world; see the module doc for options."
  @spec start_link(keyword()) :: Supervisor.on_start()
  defdelegate start_link(opts), to: Grove.World.Supervisor

  @doc """
  Validates options into a world description without starting anything.
  Raises `ArgumentError` with the offending option.
  """
  @spec new!(keyword()) :: t()
  defdelegate new!(opts), to: Grove.World.Supervisor

  @doc false
  defdelegate zones_supervisor(name), to: Grove.World.Supervisor

  @doc false
  def child_spec(opts) do
    %{
      id: Keyword.get(opts, :name, __MODULE__),
      start: {__MODULE__, :start_link, [opts]},
      type: :supervisor
    }
  end

  @doc """
  True when the world and every one of its zones this node runs are
  running (a readiness check); false while the node is paused, short of
  a quorum of its cluster.
  """
  @spec ready?(name() | t()) :: boolean()
  def ready?(world) do
    case lookup(world_name(world)) do
      # No zone needs to run for a world of zones on demand to be ready;
      # in a cluster, it is ready once placed.
      %__MODULE__{zones_on_demand: true, slots: slots} = world when slots != nil ->
        not paused?(world) and (world.cluster == nil or Placer.published(world.name) != nil)

      %__MODULE__{zones: zones} = world when is_tuple(zones) ->
        not paused?(world) and
          Enum.all?(0..(tuple_size(zones) - 1), fn index ->
            zone_node(world, index) != node() or Process.whereis(elem(zones, index)) != nil
          end)

      _ ->
        false
    end
  end

  @doc """
  True while this node is paused: its side of the cluster has no quorum,
  so it runs no zone and takes no player (`Grove.Cluster`).
  """
  @spec paused?(name() | t()) :: boolean()
  def paused?(%__MODULE__{cluster: nil}), do: false
  def paused?(%__MODULE__{name: name}), do: Placer.paused?(name)
  def paused?(name) when is_atom(name), do: paused?(fetch!(name))

  defp world_name(%__MODULE__{name: name}), do: name
  defp world_name(name) when is_atom(name), do: name

  @doc "The world's description: grid, terrain, tables. Read without a message."
  @spec fetch!(name() | t()) :: t()
  def fetch!(%__MODULE__{} = world), do: world
  def fetch!(name) when is_atom(name), do: :persistent_term.get({__MODULE__, name})

  defp lookup(name), do: :persistent_term.get({__MODULE__, name}, nil)

  @doc false
  # The world's keeper publishes its description once its tables are made,
  # and takes it back when it stops: this module is the one owner of the key.
  @spec publish(t()) :: :ok
  def publish(%__MODULE__{name: name} = world),
    do: :persistent_term.put({__MODULE__, name}, world)

  @doc false
  @spec unpublish(name()) :: :ok
  def unpublish(name) do
    :persistent_term.erase({__MODULE__, name})
    :ok
  end

  ## The client API

  @doc """
  Joins the world: creates an entity owned by the calling process (or
  `:owner`) and returns its id and cell.

  ## Options

    * `:at` - `{x, y}` to start on that exact cell, `:random` for a random
      free cell anywhere, or `{:within, {x0, y0, x1, y1}}` for a random free
      cell in that rectangle, upper bounds exclusive (default `:random`); a
      player's random cell is always on the terrain's mainland
      (`Grove.World.Terrain.mainland?/3`), so every player can walk to
      every other
    * `:updates` - `:none`, `:self` or `:view`, see the module doc (default `:self`)
    * `:view_radius` - cells seen in each direction with `updates: :view`
      (default `8`, a 17 x 17 viewport)
    * `:view_format` - `{module, format}`: the form in which the zones hand
      this viewer what they publish, see `Grove.World.ViewFormat` (default
      `{Grove.World.View, :raw}`)
    * `:kind` - `:actor`, `:player` or an integer in 0..255 that clients
      draw (default `:actor`)
    * `:owner` - the process that moves it and receives its messages
      (default `self()`)
    * `:timeout` - milliseconds to wait for the zone (default `5000`)
    * `:label` - `{name, avatar}`, two strings: what viewers are told this
      entity is called and looks like (`Grove.World.ViewFormat`), once as
      it comes into their view of a zone (default `nil`, none; players
      have one, see `Grove.Text.name/1`)
    * `:id` - the id of an entity of this owner's that a lost node took
      with it (the owner was sent `{:grove_lost, id}`), to place it again
      under the same id, which the others' views still know it by
      (default: a new id)
    * `:info` - what the game's `join/3` hook is told of the entity, a map
      (the gateway tells it a player's `%{account: id, name: name}`;
      default `%{}`)
    * `:walk` - `{kind, state, interval}`: a resident actor, which its
      zone steps itself every `interval` ms, asking the `Grove.Actor`
      `kind` where to (or what to do), from its `state` and, for a kind
      that senses, what its zone reads for it (in a world with
      `:senses`); its owner sends no moves and hears of none (`Grove.Actors`'
      `:resident`; default `nil`: the owner moves it)
  """
  @impl Grove.World.Client
  @spec join(name() | t(), keyword()) ::
          {:ok, Entity.id(), Grid.cell()}
          | {:error,
             :out_of_bounds | :blocked | :occupied | :no_free_cell | :busy | :timeout | :paused}
  def join(world, opts \\ []) do
    world = fetch!(world)

    if paused?(world), do: {:error, :paused}, else: join_unpaused(world, opts)
  end

  defp join_unpaused(world, opts) do
    opts =
      Keyword.validate!(opts,
        at: :random,
        updates: :self,
        view_radius: 8,
        view_format: {Grove.World.View, :raw},
        kind: :actor,
        owner: self(),
        timeout: 5000,
        id: nil,
        label: nil,
        info: %{},
        walk: nil
      )

    id = opts[:id] || next_id(world)
    # The first id of every 65,536 makes room for them in the directory.
    unless Directory.ready?(world.name, id),
      do: :ok = GenServer.call(world.keeper, {:directory_chunk, id})

    entity = %Entity{
      id: id,
      owner: opts[:owner],
      kind: kind_code(opts[:kind]),
      updates: validate_updates(opts[:updates]),
      view_radius: validate_radius(opts[:view_radius]),
      view_format: validate_format(opts[:view_format]),
      label: validate_label(opts[:label]),
      walk: validate_walk(world, opts[:walk])
    }

    # The zone may run on another node, whose monotonic clock starts
    # elsewhere: the deadline is in the system's time, which nodes share.
    deadline = System.system_time(:millisecond) + opts[:timeout]

    case opts[:at] do
      {x, y} when is_integer(x) and is_integer(y) ->
        if Grid.in_bounds?(world.grid, x, y),
          do: join_zone(world, Grid.zone_of(world.grid, x, y), entity, [{x, y}], deadline, opts),
          else: {:error, :out_of_bounds}

      :random ->
        join_random(world, entity, {0, 0, world.grid.width, world.grid.height}, deadline, opts)

      {:within, {x0, y0, x1, y1} = area}
      when is_integer(x0) and is_integer(y0) and is_integer(x1) and is_integer(y1) ->
        area = clip(world.grid, area)

        if area == :empty,
          do: {:error, :out_of_bounds},
          else: join_random(world, entity, area, deadline, opts)

      other ->
        raise ArgumentError, ":at must be {x, y} or :random, got: #{inspect(other)}"
    end
  end

  defp validate_walk(_world, nil), do: nil

  # The world is below the actors (docs/architecture.md): it asks the
  # kind's module itself, as its zone will, not `Grove.Actor`.
  defp validate_walk(world, {module, _state, interval} = walk)
       when is_atom(module) and is_integer(interval) and interval > 0 do
    cond do
      not (Code.ensure_loaded?(module) and function_exported?(module, :step, 3)) ->
        raise ArgumentError, ":walk: #{inspect(module)} is not an actor's kind (no step/3)"

      sight(module) != nil and world.senses == nil ->
        raise ArgumentError,
              ":walk: #{inspect(module)} senses, and this world has no :senses to make its senses with"

      true ->
        walk
    end
  end

  defp validate_walk(_world, other),
    do:
      raise(
        ArgumentError,
        ":walk must be {kind, state, interval_ms}, got: #{inspect(other)}"
      )

  @doc false
  # What a resident kind senses (its `senses/0`, as `Grove.Actor`
  # describes it): `{radius, entities?, game?}`, or `nil` for nothing.
  @spec sight(module()) :: {pos_integer(), boolean(), boolean()} | nil
  def sight(module) do
    with true <- function_exported?(module, :senses, 0),
         [_ | _] = senses <- module.senses() do
      {Keyword.fetch!(senses, :radius), senses[:entities] == true, senses[:game] == true}
    else
      _ -> nil
    end
  end

  defp next_id(%__MODULE__{id_span: nil} = world), do: :atomics.add_get(world.ids, 1, 1)
  defp next_id(world), do: next_id(world, 1000)

  # A node's range wraps around after 4 million joins, past ids still in use.
  defp next_id(_world, 0), do: raise("no free entity id in this node's range")

  defp next_id(world, tries) do
    n = :atomics.add_get(world.ids, 1, 1)
    id = world.id_base + rem(n - 1, world.id_span) + 1

    if Directory.ready?(world.name, id) and Directory.lookup(world.name, id) != nil,
      do: next_id(world, tries - 1),
      else: id
  end

  defp join_random(world, entity, area, deadline, opts, zones_left \\ @placement_zones)

  defp join_random(_world, _entity, _area, _deadline, _opts, 0), do: {:error, :no_free_cell}

  # Picks a random cell of the area, then tries random cells of the area in
  # that cell's zone, which alone can say which of them are free; cells the
  # terrain blocks are never tried, nor, for players, cells off the
  # terrain's mainland (`Terrain.mainland?/3`).
  defp join_random(world, entity, {ax0, ay0, ax1, ay1} = area, deadline, opts, zones_left) do
    grid = world.grid

    index =
      Grid.zone_of(grid, ax0 + :rand.uniform(ax1 - ax0) - 1, ay0 + :rand.uniform(ay1 - ay0) - 1)

    {zx0, zy0, zx1, zy1} = Grid.zone_bounds(grid, index)
    {x0, y0, x1, y1} = {max(ax0, zx0), max(ay0, zy0), min(ax1, zx1), min(ay1, zy1)}

    mainland_only? = world.rules.blocking and entity.kind == kind_code(:player)

    candidates =
      for _ <- 1..@placement_tries,
          x = x0 + :rand.uniform(x1 - x0) - 1,
          y = y0 + :rand.uniform(y1 - y0) - 1,
          not (world.rules.blocking and Terrain.blocked?(world.terrain, x, y)),
          not mainland_only? or Terrain.mainland?(world.terrain, x, y),
          uniq: true,
          do: {x, y}

    case candidates == [] or join_zone(world, index, entity, candidates, deadline, opts) do
      true ->
        join_random(world, entity, area, deadline, opts, zones_left - 1)

      {:error, reason} when reason in [:occupied, :blocked] ->
        join_random(world, entity, area, deadline, opts, zones_left - 1)

      result ->
        result
    end
  end

  defp clip(%Grid{width: w, height: h}, {x0, y0, x1, y1}) do
    {x0, y0, x1, y1} = {max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)}
    if x0 < x1 and y0 < y1, do: {x0, y0, x1, y1}, else: :empty
  end

  defp join_zone(world, index, entity, candidates, deadline, opts) do
    if Slots.load(world, index) > world.mailbox_limit do
      Stats.incr(world.stats, :join_failures)
      {:error, :busy}
    else
      zone = zone_address(world, index)

      try do
        message = join_message(entity, candidates, deadline, opts[:info])

        case GenServer.call(zone, message, opts[:timeout]) do
          # A zone of another node tells this node's relay where the entity
          # is, which may read that after the owner has its answer: the
          # owner could move it, or act, before this node's directory knew.
          {:ok, id, _cell} = joined when world.cluster != nil ->
            Directory.assign(world.name, id, index)
            joined

          answer ->
            answer
        end
      catch
        :exit, {:timeout, _} ->
          # The zone may have placed the entity just as we stopped waiting;
          # nobody would know its id. This cast reaches the zone after the
          # join, and takes the entity back if it is there.
          GenServer.cast(zone, {:abandon, entity.id, entity.owner})
          {:error, :timeout}

        :exit, {reason, _} when reason in [:noproc, :normal, :shutdown] ->
          {:error, :busy}

        # Its node was lost, and the zone does not run elsewhere yet.
        :exit, {{:nodedown, _node}, _} ->
          {:error, :busy}
      end
    end
  end

  # A join with nothing to tell a game keeps the message it always had.
  defp join_message(entity, candidates, deadline, info) when map_size(info) == 0,
    do: {:join, entity, candidates, deadline}

  defp join_message(entity, candidates, deadline, info) when is_map(info),
    do: {:join, entity, candidates, deadline, info}

  @doc """
  Moves an entity one step in a direction: `:n`, `:ne`, `:e`, `:se`, `:s`,
  `:sw`, `:w` or `:nw`. Returns at once; the outcome arrives as
  `{:grove_move, id, tag, outcome}` in the calling process's mailbox (the
  caller must own the entity).
  """
  @impl Grove.World.Client
  @spec move(name() | t(), Entity.id(), Grid.direction(), term()) :: :ok
  def move(world, id, direction, tag \\ nil) when is_integer(id) do
    {_sent, :none, nil} = send_move(fetch!(world), id, direction, tag, nil, nil, :none)
    :ok
  end

  @typedoc """
  A zone's process kept by the caller of `move_by/7` while its entity
  stays in that zone: the zone's index, its process and where its mailbox
  length is kept (`Grove.World.Slots.load_slot/2`); nil when none is kept.
  """
  @type kept_zone :: {Grid.zone_index(), pid(), {:atomics.atomics_ref(), pos_integer()}} | nil

  @doc false
  # `move/4` that returns the process of the zone the move went to (nil
  # when none is named here), as `zone_of/2` names it: a player's session
  # keeps it, to settle the move should that zone die holding it
  # (`Grove.Gateway.Session.settle_lost/2`). The zone is looked up once for
  # both; `move/4`, whose callers keep no zone, looks up only its address.
  # `before` is called on `acc` just before the move goes to its zone, and
  # not for a move refused here (its entity unknown, its zone busy), and
  # what it gives is returned with the zone: a session asks there for the
  # tiles the move brings into view, which a move refused brings none of.
  #
  # `kept` is what the last call returned (nil at first): while the entity
  # stays in one zone of a world alone whose zones run on demand, its
  # process, alive, takes the move, and its mailbox's length is read
  # where it was found, without the registry and the zone's row looked up
  # at every move. The directory still says which zone holds the entity;
  # a zone that died, or one the entity left, is looked up again, and woken
  # if it sleeps, as at the first move. (A zone falls asleep only with no
  # player's entity and no viewer in it, and passes on what comes while
  # it lingers: what still goes to its process reaches its next run.)
  # A zone kept that lingers asleep is still alive, and taken as kept
  # until it stops (`handoff_timeout`): its mailbox's length is read from
  # its old run's counters, which it zeroed as it fell asleep, so no move
  # is refused as busy there, and each move takes a hop more, through it
  # to its next run. That is harmless for a player's session, the one
  # caller that keeps its zone, whose entity keeps that zone awake.
  @spec move_by(
          name() | t(),
          Entity.id(),
          Grid.direction(),
          term(),
          acc,
          (acc -> acc),
          kept_zone()
        ) :: {pid() | nil, kept_zone(), acc}
        when acc: term()
  def move_by(world, id, direction, tag, acc, before, kept)
      when is_integer(id) and is_function(before, 1) do
    world = fetch!(world)

    case send_move(world, id, direction, tag, acc, before, kept) do
      {nil, kept, acc} -> {nil, kept, acc}
      {{_index, pid}, kept, acc} when is_pid(pid) -> {pid, kept, acc}
      {{index, _address}, kept, acc} -> {zone_pid(world, index), kept, acc}
    end
  end

  # The move sent to its zone, or its refusal to the caller: the zone's
  # index and the address the move went to (nil for an unknown entity),
  # with the zone kept (`:none` when the caller keeps none) and `acc` as
  # `before` (if any) gave it, called only for a move that goes.
  defp send_move(world, id, direction, tag, acc, before, kept) do
    require Grid

    unless Grid.is_direction(direction) do
      raise ArgumentError, "not a direction: #{inspect(direction)}"
    end

    case Directory.lookup(world.name, id) do
      nil ->
        Stats.incr(world.stats, :unknown_entity)
        send(self(), {:grove_move, id, tag, {:rejected, :unknown_entity}})
        {nil, kept, acc}

      index ->
        case kept_alive(kept, index) do
          {_index, pid, slot} ->
            if Slots.load_at(slot) > world.mailbox_limit do
              busy(world, id, tag)
              {{index, pid}, kept, acc}
            else
              acc = if before, do: before.(acc), else: acc
              GenServer.cast(pid, {:move, id, direction, self(), tag, 0})
              {{index, pid}, kept, acc}
            end

          nil ->
            if Slots.load(world, index) > world.mailbox_limit do
              busy(world, id, tag)
              {{index, nil}, unkept(kept), acc}
            else
              acc = if before, do: before.(acc), else: acc
              address = zone_address(world, index)
              GenServer.cast(address, {:move, id, direction, self(), tag, 0})
              {{index, address}, keep(world, index, address, kept), acc}
            end
        end
    end
  end

  defp busy(world, id, tag) do
    Stats.incr(world.stats, :busy)
    send(self(), {:grove_move, id, tag, {:rejected, :busy}})
  end

  # The zone kept, when it is the entity's and its process still runs.
  defp kept_alive({index, pid, _slot} = kept, index) do
    if Process.alive?(pid), do: kept
  end

  defp kept_alive(_kept, _index), do: nil

  defp unkept(:none), do: :none
  defp unkept(_kept), do: nil

  # What a caller that keeps its zone keeps after a move went to `address`:
  # a zone on demand's process in a world alone (in a cluster a zone may
  # move to another node, and is looked up at every move).
  defp keep(_world, _index, _address, :none), do: :none

  defp keep(%__MODULE__{cluster: nil, zones_on_demand: true} = world, index, pid, _kept)
       when is_pid(pid) do
    case Slots.load_slot(world, index) do
      nil -> nil
      slot -> {index, pid, slot}
    end
  end

  defp keep(_world, _index, _address, _kept), do: nil

  @doc """
  Moves several entities of the calling process at once, each one step:
  `moves` is a list of `{id, direction, tag}`. Moves are grouped by zone and
  each zone gets one message, which makes this far cheaper than one `move/4`
  per entity when a process drives many entities.

  Each move still gets exactly one outcome. The outcomes a zone decides come
  back together as `{:grove_moves, [{id, tag, outcome}]}`; a move that
  crosses into another zone gets its outcome from that zone, alone, as
  `{:grove_move, id, tag, outcome}`.
  """
  @impl Grove.World.Client
  @spec move_many(name() | t(), [{Entity.id(), Grid.direction(), term()}]) :: :ok
  def move_many(world, moves) when is_list(moves), do: move_many(world, moves, [])

  @doc """
  `move_many/2`, with `opts`, `[]` or the one option below (anything else
  raises `ArgumentError`):

    * `tally: true` - a zone answers its moves in one `{:grove_moved,
      answers}`, where a move taken as asked (one step in its direction,
      `{:ok, cell}` in `move_many/2`'s answer) is its tag alone, an
      integer, and any other move `{id, tag, outcome}` as there (a move
      whose tag is not an integer, taken or not, too). A client that knows
      where its entities stood does not need the cell back: the answer is
      a word or two a move where an outcome with its cell is a dozen,
      made, sent and read. Moves refused before a zone saw them (`busy`,
      `unknown_entity`), and those that cross into another zone, are
      answered as `move_many/2` answers them. Only in a world alone: in a
      world of a cluster a zone may run on a node of an older release,
      which does not take a tallied batch, so there every move is
      answered as `move_many/2` answers it.
  """
  @impl Grove.World.Client
  @spec move_many(name() | t(), [{Entity.id(), Grid.direction(), term()}], keyword()) :: :ok
  def move_many(world, moves, opts) when is_list(moves) do
    world = fetch!(world)
    kind = batch_kind(world, opts)
    # The directory's chunks read once for the batch, not at each move.
    {by_zone, unknown} = route_moves(moves, Directory.reader(world.name))
    Stats.incr(world.stats, :unknown_entity, length(unknown))
    busy = send_batches(by_zone, world, kind, [])

    case unknown ++ busy do
      [] -> :ok
      outcomes -> send(self(), {:grove_moves, outcomes})
    end

    :ok
  end

  # A batch's message by `move_many/3`'s options, matched whole (cheaper
  # than a keyword list validated at each batch): tallied in a world alone
  # only, since a zone of a cluster may run on a node of an older release,
  # which has no clause for it.
  defp batch_kind(%__MODULE__{cluster: nil}, tally: true), do: :moves_tallied
  defp batch_kind(%__MODULE__{}, tally: true), do: :moves
  defp batch_kind(%__MODULE__{}, tally: false), do: :moves
  defp batch_kind(%__MODULE__{}, []), do: :moves

  defp batch_kind(%__MODULE__{}, opts) do
    raise ArgumentError,
          "move_many/3 takes [], [tally: true] or [tally: false], not #{inspect(opts)}"
  end

  # The moves by zone, `[{index, moves}]`, a zone once and in the order
  # of the zones' indexes, its moves in the order they came; and the
  # unknown ids' outcomes, last first. Taken in one pass as runs of one
  # zone: a move of the run's zone joins the run (newest first), one of
  # another starts a run, and the runs are merged by zone at the end. A
  # client's moves are mostly of a few zones in long runs (a herd's, of
  # its area): a batch of one zone is one run, reversed once, with no
  # tuple made for each move and no sort of them all (the sort and the
  # runs taken from it were 37 % of the routing's profiled time).
  defp route_moves(moves, directory), do: route_moves(moves, directory, nil, [], [], [])

  defp route_moves([{id, direction, tag} = move | rest], directory, index, run, runs, unknown) do
    require Grid

    unless Grid.is_direction(direction) do
      raise ArgumentError, "not a direction: #{inspect(direction)}"
    end

    case Directory.read(directory, id) do
      nil ->
        unknown = [{id, tag, {:rejected, :unknown_entity}} | unknown]
        route_moves(rest, directory, index, run, runs, unknown)

      ^index ->
        route_moves(rest, directory, index, [move | run], runs, unknown)

      other ->
        route_moves(rest, directory, other, [move], add_run(index, run, runs), unknown)
    end
  end

  defp route_moves([], _directory, index, run, runs, unknown),
    do: {by_zone(add_run(index, run, runs)), unknown}

  defp add_run(nil, [], runs), do: runs
  defp add_run(index, run, runs), do: [{index, run} | runs]

  # The runs (last first, each newest first) merged by zone: sorted by
  # zone (a stable sort, so each zone's runs stay last first, and there
  # are few of them), each zone's put in order by reversing each run onto
  # the moves of the runs after it.
  defp by_zone([]), do: []
  defp by_zone([{index, run}]), do: [{index, :lists.reverse(run)}]
  defp by_zone(runs), do: merge_runs(:lists.keysort(1, runs), [])

  defp merge_runs([{index, run} | rest], merged),
    do: merge_zone(rest, index, :lists.reverse(run), merged)

  defp merge_runs([], merged), do: :lists.reverse(merged)

  defp merge_zone([{index, run} | rest], index, moves, merged),
    do: merge_zone(rest, index, :lists.reverse(run, moves), merged)

  defp merge_zone(rest, index, moves, merged), do: merge_runs(rest, [{index, moves} | merged])

  # One batch per zone, as a message of `kind` (`:moves`, or
  # `:moves_tallied`); the moves of a zone that is busy are answered
  # `busy` here.
  defp send_batches([], _world, _kind, busy), do: busy

  defp send_batches([{index, zone_moves} | rest], world, kind, busy) do
    if Slots.load(world, index) > world.mailbox_limit do
      Stats.incr(world.stats, :busy, length(zone_moves))
      busy = for({id, _direction, tag} <- zone_moves, do: {id, tag, {:rejected, :busy}}) ++ busy
      send_batches(rest, world, kind, busy)
    else
      GenServer.cast(zone_address(world, index), {kind, self(), zone_moves})
      send_batches(rest, world, kind, busy)
    end
  end

  @doc """
  Asks for an action of the world's game (`Grove.Game`) by an entity the
  calling process owns: `action` by name (an atom or a string, as the
  game's `actions/0` names it), toward `target` (`:here`, the entity's own
  cell; a direction; or an adjacent cell `{x, y}`), with `args` (a map, by
  the names the game declares). Returns at once; the outcome arrives as
  `{:grove_act, id, tag, outcome}`, exactly one per action:

    * `{:ok, data}` - done; `data` is the game's small answer (a map)
    * `{:refused, reason}` - the game said no (`reason`, an atom of its own)
    * `{:rejected, reason}` - the world said no: `:unknown_action`,
      `:bad_args` (`Grove.World.Game.Spec.check/3` says why), `:out_of_reach` (a
      target cell that is neither the entity's nor next to it),
      `:out_of_bounds`, `:rate_limited` (actions count against the same
      rate as moves), `:busy`, `:not_owner`, `:unknown_entity`,
      `:disabled` (the world has no game), or `:interrupted` (the action
      failed in the game's code, or the zone it ran in stopped before it
      answered; nothing of it was applied)

  A target across a zone border is fine: the action runs in the zone of
  its target, which answers through the actor's zone.
  """
  @impl Grove.World.Client
  @spec act(name() | t(), Entity.id(), atom() | String.t(), term(), map(), term()) :: :ok
  def act(world, id, action, target \\ :here, args \\ %{}, tag \\ nil) when is_integer(id) do
    world = fetch!(world)

    case check_act(world, action, args) do
      {:ok, request} ->
        case Directory.lookup(world.name, id) do
          nil ->
            Stats.incr(world.stats, :unknown_entity)
            send(self(), {:grove_act, id, tag, {:rejected, :unknown_entity}})

          index ->
            if Slots.load(world, index) > world.mailbox_limit do
              Stats.incr(world.stats, :busy)
              send(self(), {:grove_act, id, tag, {:rejected, :busy}})
            else
              {name, args} = request

              GenServer.cast(
                zone_address(world, index),
                {:act, id, {name, target, args}, self(), tag, 0}
              )
            end
        end

      {:error, reason} ->
        send(self(), {:grove_act, id, tag, {:rejected, reason}})
    end

    :ok
  end

  @doc """
  Says a line (chat) as an entity the calling process owns: the zone that
  holds the entity tells everyone who sees its cell, as an event named
  `:chat` with `%{text: line}` in the area's next delta
  (`Grove.World.Zone.State.event/5`), and keeps it in the world's recent
  log (`recent_chat/2`). The line is taken as it is: checking it is the
  caller's (`Grove.Text.check_speech/2`). Returns at once; exactly one
  `{:grove_say, id, tag, outcome}` follows: `:ok`, or `{:rejected,
  reason}` with `:busy`, `:not_owner` or `:unknown_entity`.
  """
  @impl Grove.World.Client
  @spec say(name() | t(), Entity.id(), String.t(), term()) :: :ok
  def say(world, id, text, tag \\ nil) when is_integer(id) and is_binary(text) do
    world = fetch!(world)

    case Directory.lookup(world.name, id) do
      nil ->
        Stats.incr(world.stats, :unknown_entity)
        send(self(), {:grove_say, id, tag, {:rejected, :unknown_entity}})

      index ->
        if Slots.load(world, index) > world.mailbox_limit do
          Stats.incr(world.stats, :busy)
          send(self(), {:grove_say, id, tag, {:rejected, :busy}})
        else
          GenServer.cast(zone_address(world, index), {:say, id, text, self(), tag, 0})
        end
    end

    :ok
  end

  @doc """
  The lines said last in the world (on this node), oldest first, at most
  `limit` and at most the log's size (the world's `:chat_log` option):
  `%{at: system_time_ms, id: id, x: x, y: y, text: text}` each. Nothing
  said is kept anywhere else.
  """
  @spec recent_chat(name() | t(), non_neg_integer()) :: [map()]
  def recent_chat(world, limit \\ 100), do: ChatLog.recent(fetch!(world).chat_log, limit)

  @doc "How many lines the recent chat log holds now, and how many it may hold."
  @spec chat_log_usage(name() | t()) :: {non_neg_integer(), non_neg_integer()}
  def chat_log_usage(world), do: ChatLog.usage(fetch!(world).chat_log)

  @doc """
  Asks for several actions of the calling process's entities at once:
  `acts` is a list of `{id, action, target, args, tag}`, grouped by zone
  like `move_many/2`'s moves. Each gets exactly one outcome; those a zone
  decides come back together as `{:grove_acts, [{id, tag, outcome}]}`, an
  action that runs in another zone alone, as `{:grove_act, id, tag,
  outcome}`.
  """
  @impl Grove.World.Client
  @spec act_many(name() | t(), [{Entity.id(), atom() | String.t(), term(), map(), term()}]) :: :ok
  def act_many(world, acts) when is_list(acts) do
    world = fetch!(world)

    {by_zone, refused} = acts_by_zone(world, acts)

    busy =
      Enum.flat_map(by_zone, fn {index, zone_acts} ->
        if Slots.load(world, index) > world.mailbox_limit do
          Stats.incr(world.stats, :busy, length(zone_acts))
          for {id, _request, tag} <- zone_acts, do: {id, tag, {:rejected, :busy}}
        else
          GenServer.cast(zone_address(world, index), {:acts, self(), Enum.reverse(zone_acts)})
          []
        end
      end)

    case refused ++ busy do
      [] -> :ok
      outcomes -> send(self(), {:grove_acts, outcomes})
    end

    :ok
  end

  @doc """
  Moves and actions of the calling process's entities at once, as
  `move_many/2` and `act_many/2` take them: a zone with both gets them in
  one message, moves first, and answers both in one `{:grove_steps,
  [{id, tag, outcome}]}`, a move's outcome or an action's; a zone with only
  one or the other gets and answers them as those two do. Each move and
  action still gets exactly one outcome, one that runs or lands in another
  zone alone, as there.
  """
  @impl Grove.World.Client
  @spec step_many(
          name() | t(),
          [{Entity.id(), Grid.direction(), term()}],
          [{Entity.id(), atom() | String.t(), term(), map(), term()}]
        ) :: :ok
  def step_many(world, moves, []), do: move_many(world, moves)
  def step_many(world, [], acts), do: act_many(world, acts)

  def step_many(world, moves, acts) when is_list(moves) and is_list(acts) do
    world = fetch!(world)
    {by_zone, unknown} = route_moves(moves, Directory.reader(world.name))
    Stats.incr(world.stats, :unknown_entity, length(unknown))

    {acts_by_zone, refused} = acts_by_zone(world, acts)
    moves_by_zone = Map.new(by_zone)

    zones = Enum.uniq(Map.keys(moves_by_zone) ++ Map.keys(acts_by_zone))

    busy =
      Enum.flat_map(zones, fn index ->
        zone_moves = Map.get(moves_by_zone, index, [])
        zone_acts = acts_by_zone |> Map.get(index, []) |> :lists.reverse()

        if Slots.load(world, index) > world.mailbox_limit do
          Stats.incr(world.stats, :busy, length(zone_moves) + length(zone_acts))

          for({id, _direction, tag} <- zone_moves, do: {id, tag, {:rejected, :busy}}) ++
            for {id, _request, tag} <- zone_acts, do: {id, tag, {:rejected, :busy}}
        else
          message =
            case {zone_moves, zone_acts} do
              {moves, []} -> {:moves, self(), moves}
              {[], acts} -> {:acts, self(), acts}
              {moves, acts} -> {:steps, self(), moves, acts}
            end

          GenServer.cast(zone_address(world, index), message)
          []
        end
      end)

    case unknown ++ refused ++ busy do
      [] -> :ok
      outcomes -> send(self(), {:grove_steps, outcomes})
    end

    :ok
  end

  # Actions checked and grouped by the zone of their entity, each zone's
  # newest first, with the outcomes of those refused before any zone sees
  # them (an unknown entity, an action the game does not have).
  defp acts_by_zone(world, acts) do
    Enum.reduce(acts, {%{}, []}, fn {id, action, target, args, tag}, {by_zone, refused} ->
      with {:ok, {name, args}} <- check_act(world, action, args),
           index when index != nil <- Directory.lookup(world.name, id) do
        act = {id, {name, target, args}, tag}
        {Map.update(by_zone, index, [act], &[act | &1]), refused}
      else
        nil -> {by_zone, [{id, tag, {:rejected, :unknown_entity}} | refused]}
        {:error, reason} -> {by_zone, [{id, tag, {:rejected, reason}} | refused]}
      end
    end)
  end

  @doc false
  # An action and its arguments checked against the game's spec, as
  # `act/6` checks them (a zone checks its residents' the same way).
  @spec check_act(t(), atom() | String.t(), map()) :: {:ok, {atom(), map()}} | {:error, atom()}
  def check_act(%__MODULE__{game: nil}, _action, _args), do: {:error, :disabled}

  def check_act(%__MODULE__{game: spec}, action, args) do
    case Grove.World.Game.Spec.check(spec, action, args) do
      {:ok, name, args} -> {:ok, {name, args}}
      {:error, reason, _text} -> {:error, reason}
    end
  end

  @doc """
  A cell's game layer, `{value, visible_code}`, read from ETS without a
  message; `nil` when the cell has no value. See `Grove.World.Game`.
  """
  @spec cell(name() | t(), Grid.cell()) :: {term(), byte()} | nil
  defdelegate cell(world, cell), to: Grove.World.Game

  @doc """
  An entity's game attributes and look, `{attrs, look}`, read from ETS
  without a message; `nil` when it is not in the world.
  """
  @impl Grove.World.Client
  @spec attrs(name() | t(), Entity.id()) :: {term(), byte()} | nil
  defdelegate attrs(world, id), to: Grove.World.Game

  @doc """
  The game's layer within `radius` of a cell, and where it blocks or frees
  movement, read from ETS without a message; see `Grove.World.Game.near/3`.
  """
  @impl Grove.World.Client
  @spec game_near(name() | t(), Grid.cell(), non_neg_integer()) ::
          {%{Grid.cell() => term()}, %{Grid.cell() => boolean()}}
  defdelegate game_near(world, cell, radius), to: Grove.World.Game, as: :near

  @doc "Removes an entity the calling process owns. Waits for its zone."
  @impl Grove.World.Client
  @spec leave(name() | t(), Entity.id(), timeout()) ::
          :ok | {:error, :unknown_entity | :not_owner | :busy | :timeout}
  def leave(world, id, timeout \\ 5000) when is_integer(id) do
    world = fetch!(world)

    case Directory.lookup(world.name, id) do
      nil ->
        {:error, :unknown_entity}

      index ->
        try do
          GenServer.call(zone_address(world, index), {:leave, id, self(), 0}, timeout)
        catch
          :exit, {:timeout, _} -> {:error, :timeout}
          :exit, {reason, _} when reason in [:noproc, :normal, :shutdown] -> {:error, :busy}
          :exit, {{:nodedown, _node}, _} -> {:error, :busy}
        end
    end
  end

  @doc """
  What a zone published for viewers in `format` after delta `since` (the
  `seq` of a snapshot, or the last number this returned): the deltas,
  oldest first, and the number to read on from. `:gone` when the oldest
  needed is no longer kept; then ask for a snapshot with
  `request_snapshot/3`. Reads ETS; sends nothing.
  """
  @spec view_deltas(name() | t(), Grid.zone_index(), non_neg_integer(), Feed.format()) ::
          {[term()], non_neg_integer()} | :gone
  def view_deltas(world, zone, since, format),
    do: Feed.since(fetch!(world).feed, zone, since, format)

  @doc """
  Asks a zone the calling process watches for a fresh
  `{:grove_view, zone, :snapshot, seq, data}` in `format`. A zone it does
  not watch (any more) ignores it.
  """
  @spec request_snapshot(name() | t(), Grid.zone_index(), Feed.format()) :: :ok
  def request_snapshot(world, zone, format) do
    GenServer.cast(zone_address(fetch!(world), zone), {:snapshot, self(), format})
  end

  @doc """
  Asks a zone the calling process watches in a tiled `format` (one that
  reads zones by view tile, see `Grove.World.ViewFormat`) for fresh
  snapshots of `tiles`, its own of them, in one
  `{:grove_view, zone, :tiles, seq, [{tile, data}]}`. A zone it does not
  watch (any more) ignores it.
  """
  @spec request_tiles(name() | t(), Grid.zone_index(), Feed.format(), [Grid.tile_index()]) :: :ok
  def request_tiles(world, zone, format, tiles) do
    GenServer.cast(zone_address(fetch!(world), zone), {:snapshot, self(), format, tiles})
  end

  @doc """
  An entity's cell, read from ETS without a message (or, in a zone that
  sleeps with its entities in the world's store, from there); `nil` when
  it is not in the world.
  """
  @impl Grove.World.Client
  @spec position(name() | t(), Entity.id()) :: Grid.cell() | nil
  def position(world, id) do
    world = fetch!(world)

    with index when index != nil <- Directory.lookup(world.name, id) do
      case Slots.lookup(world, index, id) do
        [row] -> Entity.row_cell(row)
        [] -> asleep_position(world, index, id)
      end
    end
  end

  @doc """
  The zone an entity is in when nobody watches it (no viewer's viewport
  overlaps the zone), read without a message; nil when someone does, for
  an entity this world does not know, and in a world of several nodes,
  whose zones may be watched from another: `zone_index/2` and
  `zone_watched?/2` in one.
  """
  @spec unseen_zone(name() | t(), Entity.id()) :: Grid.zone_index() | nil
  def unseen_zone(world, id) do
    with %__MODULE__{cluster: nil} = world <- fetch!(world),
         index when index != nil <- zone_index(world, id),
         false <- zone_watched?(world, index) do
      index
    else
      _seen_or_unknown -> nil
    end
  end

  @doc """
  The index of the zone an entity stands in as this node's directory
  says, read without a message; nil for an entity it does not know.
  """
  @impl Grove.World.Client
  @spec zone_index(name() | t() | zones_now(), Entity.id()) :: Grid.zone_index() | nil
  def zone_index(name, id) when is_atom(name), do: Directory.lookup(name, id)
  def zone_index(%__MODULE__{name: name}, id), do: Directory.lookup(name, id)
  def zone_index({%__MODULE__{}, directory}, id), do: Directory.read(directory, id)

  @typedoc "The world as `zones_now/1` reads it for a batch of questions."
  @opaque zones_now :: {t(), Directory.reader()}

  @doc """
  The world read once for a batch of `zone_index/2` and `zone_watched?/2`
  questions, which take it in its place: its settings and its directory's
  chunks are not looked up again at each question (the zones an entity
  stands in and whether they are watched are read as they are at each).
  For one batch (a herd's turns of one slot), not to be kept: settings
  changed since are not seen.
  """
  @impl Grove.World.Client
  @spec zones_now(name() | t()) :: zones_now()
  def zones_now(world) do
    world = fetch!(world)
    {world, Directory.reader(world.name)}
  end

  @doc """
  True when someone may watch a zone: a viewer's viewport overlaps it, or
  the world is of several nodes, whose zones may be watched from another.
  Read without a message. With `zone_index/2`, what herds read to rest
  their actors where nobody sees them (`Grove.Actors`' `:unseen_every`),
  once per zone in a batch of turns.
  """
  @impl Grove.World.Client
  @spec zone_watched?(name() | t() | zones_now(), Grid.zone_index()) :: boolean()
  def zone_watched?({%__MODULE__{} = world, _directory}, index), do: zone_watched?(world, index)

  def zone_watched?(world, index) do
    case fetch!(world) do
      %__MODULE__{cluster: nil} = world -> Slots.watched?(world, index)
      _several_nodes -> true
    end
  end

  # An entity of a zone that sleeps with its entities in the store: read
  # there, the one case where a position costs more than a table lookup.
  defp asleep_position(world, index, id) do
    if Zone.Saves.asleep_in_store?(world, index) do
      Enum.find_value(Zone.Saves.rows(world, index), fn row ->
        if elem(row, 0) == id, do: Entity.row_cell(row)
      end)
    end
  end

  @doc """
  An entity's name and avatar (`:label` at `join/2`), read from ETS
  without a message; `nil` when it has none or is not in the world.
  """
  @spec label(name() | t(), Entity.id()) :: Entity.label() | nil
  def label(world, id) do
    world = fetch!(world)

    with index when index != nil <- Directory.lookup(world.name, id),
         [row] <- Slots.lookup(world, index, id) do
      Entity.row_label(row)
    else
      _ -> nil
    end
  end

  @doc """
  The entities within `radius` cells of `cell` (a square, clipped to the
  grid), as `{id, x, y, kind}`, read from the zones' ETS tables without a
  message: what an actor senses around it (see `Grove.Actor`).

  The world's index of places (`Grove.World.Places`) says which entities
  stand in the blocks of cells the square touches; each one's row in its
  zone's table says where. So the cost grows with the entities in those
  blocks, not with those of the zones around. A reader may see an entity
  in two zones for the instant of a handoff.
  """
  @impl Grove.World.Client
  @spec nearby(name() | t(), Grid.cell(), non_neg_integer()) ::
          [{Entity.id(), non_neg_integer(), non_neg_integer(), byte()}]
  def nearby(world, {x, y}, radius) when is_integer(radius) and radius >= 0 do
    %__MODULE__{grid: %Grid{width: w, height: h}} = world = fetch!(world)

    Places.within(
      world,
      {max(x - radius, 0), max(y - radius, 0), min(x + radius, w - 1), min(y + radius, h - 1)}
    )
  end

  @doc "The world's terrain (no copy: it lives in `:persistent_term`)."
  @impl Grove.World.Client
  @spec terrain(name() | t()) :: Terrain.t()
  def terrain(world), do: fetch!(world).terrain

  @doc "The world's grid."
  @impl Grove.World.Client
  @spec grid(name() | t()) :: Grid.t()
  def grid(world), do: fetch!(world).grid

  @doc """
  The milliseconds between a watched zone's ticks now: `:tick`, stretched
  towards `:tick_max` while the server is busy (`pace_ticks/2`).
  """
  @spec tick_interval(name() | t()) :: pos_integer() | :manual
  def tick_interval(%__MODULE__{tick_pace: nil, tick: tick}), do: tick
  def tick_interval(%__MODULE__{tick_pace: pace}), do: :atomics.get(pace, 1)
  def tick_interval(name) when is_atom(name), do: tick_interval(fetch!(name))

  @doc """
  Stretches the zones' ticks by how busy the server is, `busy` from `0.0`
  (every `:tick`, with room) to `1.0` (every `:tick_max`): a tick is a
  turn of every watched zone, a delta encoded and a row of the feed each
  viewer reads, and a server past its view pace (Grove.Gateway.Pacer)
  sends its players their views once a second at most, so that up to
  ten deltas a second of a zone were read by each of them at once. A
  zone takes the interval at its next tick; one of a world not running,
  or ticked by hand, is left as it is.
  """
  @spec pace_ticks(name() | t(), float()) :: :ok
  def pace_ticks(world, busy) when is_number(busy) do
    case fetch(world) do
      %__MODULE__{tick_pace: pace, tick: tick, tick_max: longest} when pace != nil ->
        busy = busy |> max(0.0) |> min(1.0)
        :atomics.put(pace, 1, tick + round((longest - tick) * busy))

      _other ->
        :ok
    end
  end

  defp fetch(%__MODULE__{} = world), do: world
  defp fetch(name) when is_atom(name), do: lookup(name)

  @doc "Makes every zone that runs tick now; for worlds started with `tick: :manual`."
  @spec tick(name() | t()) :: :ok
  def tick(world) do
    world = fetch!(world)
    for index <- awake_zones(world), do: GenServer.cast(zone_address(world, index), :tick)
    :ok
  end

  @doc """
  Makes every resident actor of every zone that runs take one step now
  (`join/2`'s `:walk`); for worlds started with `tick: :manual`, whose
  zones step their residents only when told. In a cluster, that is every
  zone of the world wherever it runs, but with zones on demand only those
  awake on this node (as `awake_zones/1` and `tick/1`). A resident steps
  once a round, wherever its step takes it: one that crosses into a zone
  the round has not reached yet takes no second step there.
  """
  @spec walk(name() | t()) :: :ok
  def walk(world) do
    world = fetch!(world)
    # One round, whose steps are told apart from the next one's: a
    # resident that crosses into a zone the round has not reached yet
    # steps there no more in it (`Grove.World.Zone`).
    round = System.unique_integer([:monotonic])

    for index <- awake_zones(world),
        do: GenServer.cast(zone_address(world, index), {:walk, round})

    :ok
  end

  @doc """
  Makes every resident actor of every zone that runs stand still from
  now on (a bench stops them so, before it audits the world); returns
  once every zone has.
  """
  @spec halt_walks(name() | t()) :: :ok
  def halt_walks(world) do
    world = fetch!(world)

    for index <- awake_zones(world),
        do: :ok = GenServer.call(zone_address(world, index), :halt_walks, :infinity)

    :ok
  end

  @doc """
  The zones that run now, by index: every zone, but in a world of zones
  on demand (`:zones`), where only those awake run.
  """
  @spec awake_zones(name() | t()) :: [Grid.zone_index()]
  def awake_zones(world) do
    case fetch!(world) do
      %__MODULE__{zones_on_demand: true} = world ->
        # Not a zone's stand-in, which runs nothing (`Grove.World.Zone.wake/3`).
        Registry.select(registry(world), [
          {{:"$1", :_, :"$2"}, [{:"=/=", :"$2", :stand_in}], [:"$1"]}
        ])

      world ->
        Enum.to_list(0..(Grid.zone_count(world.grid) - 1))
    end
  end

  @doc """
  Puts every zone that is idle now to sleep, however short its idle time
  (`:zone_idle`), and returns when they sleep: in a world of zones on
  demand, what an operator (or a test) does instead of waiting. Returns
  the indices of the zones that went to sleep.
  """
  @spec sleep_idle(name() | t(), timeout()) :: [Grid.zone_index()]
  def sleep_idle(world, timeout \\ 5000) do
    world = fetch!(world)

    for index <- awake_zones(world),
        pid = zone_pid(world, index),
        pid != nil,
        :asleep == Zone.sleep_if_idle(pid, timeout),
        do: index
  end

  ## Bacteria: `Grove.World.Bacteria`

  @doc "Seeds a pattern of bacteria in front of an entity; see `Grove.World.Bacteria.seed/5`."
  @spec seed(name() | t(), Entity.id(), atom(), Grid.direction(), term()) :: :ok
  defdelegate seed(world, id, pattern, direction, tag \\ nil), to: Bacteria

  @doc "Asks every zone for one more generation; see `Grove.World.Bacteria.step_life/1`."
  @spec step_life(name() | t()) :: :ok
  defdelegate step_life(world), to: Bacteria

  @doc "The generation every zone has reached; see `Grove.World.Bacteria.generation/1`."
  @spec generation(name() | t()) :: non_neg_integer() | nil
  defdelegate generation(world), to: Bacteria

  @doc "Every live bacterium, per zone; see `Grove.World.Bacteria.bacteria/1`."
  @spec bacteria(name() | t()) :: %{Grid.zone_index() => {non_neg_integer(), [Grid.cell()]}}
  defdelegate bacteria(world), to: Bacteria

  @doc "Times zones took to compute a generation; see `Grove.World.Bacteria.life_times/1`."
  @spec life_times(name() | t()) :: map()
  defdelegate life_times(world), to: Bacteria

  ## What the world counts: `Grove.World.Counts`

  @doc "Entities in the world by kind code; see `Grove.World.Counts.kind_counts/1`."
  @impl Grove.World.Client
  @spec kind_counts(name() | t()) :: %{byte() => pos_integer()}
  defdelegate kind_counts(world), to: Counts

  @doc "How many entities are in the world; see `Grove.World.Counts.entity_count/1`."
  @spec entity_count(name() | t()) :: non_neg_integer()
  defdelegate entity_count(world), to: Counts

  @doc "The world's counters; see `Grove.World.Counts.stats/1`."
  @spec stats(name() | t()) :: map()
  defdelegate stats(world), to: Counts

  @doc "Every zone's load; see `Grove.World.Counts.zone_loads/1`."
  @spec zone_loads(name() | t()) :: [Counts.zone_load()]
  defdelegate zone_loads(world), to: Counts

  @doc "How crowded each block is, for a minimap; see `Grove.World.Counts.density/3`."
  @spec density(name() | t(), pos_integer() | nil, :entities | :bacteria) ::
          %{cols: pos_integer(), rows: pos_integer(), cells: binary()}
  defdelegate density(world, max_side \\ nil, layer \\ :entities), to: Counts

  @doc "The counters of every node the world runs on; see `Grove.World.Counts.node_stats/2`."
  @spec node_stats(name() | t(), timeout()) :: %{node() => map()}
  defdelegate node_stats(world, timeout), to: Counts

  @doc "The minimap of the world on every node; see `Grove.World.Counts.total_density/4`."
  @spec total_density(name() | t(), pos_integer() | nil, :entities | :bacteria, timeout()) ::
          %{cols: pos_integer(), rows: pos_integer(), cells: binary()}
  defdelegate total_density(world, max_side, layer, timeout), to: Counts

  @doc "The busiest zones of the world on every node; see `Grove.World.Counts.total_places/3`."
  @spec total_places(name() | t(), non_neg_integer(), timeout()) ::
          [Grove.World.Minimap.place()]
  defdelegate total_places(world, limit, timeout), to: Counts

  @doc false
  # The process of the zone that holds an entity now, or nil.
  @spec zone_of(name() | t(), Entity.id()) :: pid() | nil
  def zone_of(world, id) do
    world = fetch!(world)

    case Directory.lookup(world.name, id) do
      nil -> nil
      index -> zone_pid(world, index)
    end
  end

  @doc """
  Where to send a zone's messages: its registered name on this node, or
  `{name, node}` on the node that runs it (`Grove.Cluster.Placement`).
  """
  @spec zone_address(t(), Grid.zone_index()) :: atom() | {atom(), node()} | pid()
  def zone_address(%__MODULE__{cluster: nil, zones_on_demand: false} = world, index),
    do: elem(world.zones, index)

  # A zone that does not run (it never ran, or it sleeps) starts first, so
  # that what is sent to it is never sent to nobody. Its process, not its
  # name: a zone that falls asleep gives up its name at once, but its
  # process lingers and passes on what still comes to it.
  def zone_address(%__MODULE__{cluster: nil} = world, index), do: zone_here(world, index)

  # In a cluster, a zone on demand this node owns is woken here; one of
  # another node is reached through that node's door, which wakes it there
  # (`Grove.World.Door`).
  def zone_address(%__MODULE__{zones_on_demand: true} = world, index) do
    case Placer.published(world.name) do
      nil ->
        Zone.name(world, index)

      {locations, nodes, _epochs} ->
        case :atomics.get(locations, index + 1) do
          0 -> zone_here(world, index)
          number -> Door.address(world.name, index, elem(nodes, number))
        end
    end
  end

  def zone_address(%__MODULE__{} = world, index) do
    name = elem(world.zones, index)

    case Placer.published(world.name) do
      nil ->
        name

      {locations, nodes, _epochs} ->
        case :atomics.get(locations, index + 1) do
          0 -> name
          number -> {name, elem(nodes, number)}
        end
    end
  end

  defp zone_here(world, index) do
    case zone_pid(world, index) do
      nil -> Zone.wake(world, index) || Zone.name(world, index)
      pid -> pid
    end
  end

  @doc false
  # A zone on demand's process on this node, woken if it sleeps (what a
  # door asks the zone's owner for, to call it); nil when the world stops.
  @spec zone_process(name(), Grid.zone_index()) :: pid() | nil
  def zone_process(name, index) do
    case zone_address(fetch!(name), index) do
      pid when is_pid(pid) -> pid
      _elsewhere -> nil
    end
  end

  @doc false
  # Sends a message as it is (a `GenServer` message, already wrapped) to a
  # zone, wherever its address says it is.
  @spec send_zone(t(), Grid.zone_index(), term()) :: :ok
  def send_zone(world, index, message) do
    case zone_address(world, index) do
      {:via, Door, name} -> Door.send(name, message)
      # The world stops: no zone runs to take it.
      {:via, Registry, _name} -> :ok
      address -> send(address, message)
    end

    :ok
  end

  @doc false
  # Wakes a zone of a world of zones on demand ahead of an entity that came
  # near it (`:wake_ahead`), unless it runs already, through the door of
  # the node that owns it (`Grove.World.Door`): whoever asks goes on at once.
  @spec wake_zone(t(), Grid.zone_index()) :: :ok
  def wake_zone(%__MODULE__{} = world, index),
    do: wake(world, index, fn -> Door.wake_once(world.name, index) end)

  @doc false
  # What a door does when asked to wake a zone of its node ahead.
  @spec wake_here(t(), Grid.zone_index()) :: :ok
  def wake_here(%__MODULE__{} = world, index),
    do: wake(world, index, fn -> Zone.wake(world, index, :ahead) end)

  # A zone of this node that does not run is woken by `here`; one of
  # another node (or that moved there meanwhile), through that node's door.
  defp wake(world, index, here) do
    case zone_node(world, index) do
      this when this == node() -> if zone_pid(world, index) == nil, do: here.()
      other -> Door.wake(world.name, index, other)
    end

    :ok
  end

  @doc false
  # Where to send a zone's messages, as `zone_address/2`, with the epoch of
  # that placement (0 in a world alone): a zone records it with a handoff,
  # so that the news of a run of the target zone lost with its node, which
  # may come late, settles only the handoffs sent to that run. The placer
  # writes a placement's epoch before its node (`Grove.World.Placer`) and
  # this reads them the other way round: an address of the new placement
  # never comes with the old epoch.
  @spec zone_placement(t(), Grid.zone_index()) ::
          {atom() | {atom(), node()} | pid(), non_neg_integer()}
  def zone_placement(%__MODULE__{cluster: nil} = world, index),
    do: {zone_address(world, index), 0}

  def zone_placement(%__MODULE__{zones_on_demand: true} = world, index) do
    epoch =
      case Placer.published(world.name) do
        nil -> 0
        {_locations, _nodes, epochs} -> :atomics.get(epochs, index + 1)
      end

    {zone_address(world, index), epoch}
  end

  def zone_placement(%__MODULE__{} = world, index) do
    name = elem(world.zones, index)

    case Placer.published(world.name) do
      nil ->
        {name, 0}

      {locations, nodes, epochs} ->
        address =
          case :atomics.get(locations, index + 1) do
            0 -> name
            number -> {name, elem(nodes, number)}
          end

        {address, :atomics.get(epochs, index + 1)}
    end
  end

  @doc "The node that runs a zone."
  @spec zone_node(t(), Grid.zone_index()) :: node()
  def zone_node(%__MODULE__{cluster: nil}, _index), do: node()

  def zone_node(%__MODULE__{} = world, index) do
    case Placer.published(world.name) do
      nil -> node()
      {locations, nodes, _epochs} -> elem(nodes, :atomics.get(locations, index + 1))
    end
  end

  @doc """
  How many of `moves` (`{id, direction, tag}`, as `move_many/2` takes
  them) go to zones another node runs now: what sending them costs in
  distribution. A world alone sends none, and answers without looking.
  """
  @spec remote_moves(name() | t(), [{Entity.id(), Grid.direction(), term()}]) ::
          non_neg_integer()
  def remote_moves(world, moves) when is_atom(world), do: remote_moves(fetch!(world), moves)
  def remote_moves(%__MODULE__{cluster: nil}, _moves), do: 0

  def remote_moves(%__MODULE__{name: name}, moves) do
    case Placer.published(name) do
      nil ->
        0

      {locations, nodes, _epochs} ->
        here = node()

        Enum.count(moves, fn {id, _direction, _tag} ->
          case Directory.lookup(name, id) do
            nil -> false
            index -> elem(nodes, :atomics.get(locations, index + 1)) != here
          end
        end)
    end
  end

  @doc "The pid of a zone process (for tests and tools)."
  @spec zone_pid(name() | t(), Grid.zone_index()) :: pid() | nil
  def zone_pid(world, index) do
    case fetch!(world) do
      # `whereis_name/1`, not `lookup/2`: the registry forgets a zone that
      # died only once it hears of it, and until then `lookup/2` still
      # names the dead process, to which a move would be sent and lost.
      %__MODULE__{zones_on_demand: true} = world ->
        case Registry.whereis_name({registry(world), index}) do
          pid when is_pid(pid) -> pid
          :undefined -> nil
        end

      world ->
        Process.whereis(elem(world.zones, index))
    end
  end

  @doc false
  # The registry of the zones on demand on this node. A description made
  # before it named its registry (one kept across a code reload) has no
  # such key: the registry's name is made again.
  @spec registry(t()) :: atom()
  def registry(world) do
    case world do
      %{registry: registry} when registry != nil -> registry
      _ -> Grove.World.Supervisor.registry(world.name)
    end
  end

  @doc """
  Checks the whole world for consistency: every entity in exactly one zone and
  in the directory, no cell shared, no entity on blocking ground, tables
  agreeing with zones. Asks every zone, so use it in tests and after benches.
  The zones are asked one after the other: in a world whose entities move,
  one that crosses between two answers is reported in both zones (or in
  none); ask again, since a real fault stays.
  """
  @spec audit(name() | t(), timeout()) :: :ok | {:error, [String.t()]}
  def audit(world, timeout \\ 15_000), do: Audit.run(fetch!(world), timeout)

  @doc """
  Every reason a move can be rejected with. The binary protocol encodes
  outcomes by their place in this list, so a new reason goes at its end.
  """
  @spec rejections() :: [rejection()]
  def rejections, do: @rejections

  @doc "The byte views carry for an entity's `:kind` (see `join/2`)."
  @spec kind_code(:actor | :player | byte()) :: byte()
  def kind_code(:actor), do: 0
  def kind_code(:player), do: 1
  def kind_code(code) when is_integer(code) and code in 0..255, do: code

  def kind_code(other),
    do: raise(ArgumentError, ":kind must be :actor, :player or 0..255, got: #{inspect(other)}")

  defp validate_updates(updates) when updates in [:none, :self, :view], do: updates

  defp validate_updates(other),
    do: raise(ArgumentError, ":updates must be :none, :self or :view, got: #{inspect(other)}")

  defp validate_radius(radius) when is_integer(radius) and radius >= 0 and radius <= 64,
    do: radius

  defp validate_radius(other),
    do: raise(ArgumentError, ":view_radius must be an integer in 0..64, got: #{inspect(other)}")

  defp validate_label(nil), do: nil

  defp validate_label({name, avatar} = label) when is_binary(name) and is_binary(avatar),
    do: label

  defp validate_label(other),
    do: raise(ArgumentError, ":label must be {name, avatar}, two strings, got: #{inspect(other)}")

  defp validate_format({module, _name} = format) when is_atom(module) do
    if Code.ensure_loaded?(module) and function_exported?(module, :encode_view, 5),
      do: format,
      else:
        raise(ArgumentError, ":view_format names #{inspect(module)}, which has no encode_view/5")
  end

  defp validate_format(other),
    do: raise(ArgumentError, ":view_format must be {module, format}, got: #{inspect(other)}")
end
