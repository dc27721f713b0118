defmodule Grove.World.Keeper do
  @moduledoc false
  # Owns what must outlive any zone: the terrain, the zones' ETS tables, the
  # directory, the feed of published views and the counters. It generates them once, publishes the world's
  # description in `:persistent_term` (read by every client call without a
  # message) and then does nothing but exist.

  use GenServer

  alias Grove.World
  alias Grove.World.{ChatLog, Directory, Feed, Grid, Places, Slots, Stats, Terrain}

  require Logger

  @spec start_link(World.t()) :: GenServer.on_start()
  def start_link(%World{} = world),
    do: GenServer.start_link(__MODULE__, world, name: keeper_name(world.name))

  @impl true
  def init(%World{} = world) do
    # Trapping exits makes `terminate/2` run on shutdown, to unpublish the world.
    Process.flag(:trap_exit, true)
    %Grid{width: w, height: h} = grid = world.grid
    started = System.monotonic_time(:millisecond)
    terrain = Terrain.for_world(w, h, grid.zone_size, world.terrain_options)
    count = Grid.zone_count(grid)

    world =
      %{
        world
        | terrain: terrain,
          keeper: keeper_name(world.name),
          subscriptions: :ets.new(:grove_subscriptions, [:bag, :public]),
          away: :ets.new(:grove_away, [:set, :public]),
          ids: :atomics.new(1, signed: false),
          kind_counts: :counters.new(256, [:write_concurrency]),
          density: :atomics.new(world.density_cols * world.density_rows, signed: true),
          places: Places.new(),
          stats: Stats.new(),
          # The zones' ticks, in microseconds, for the world's metrics.
          tick_time: Grove.Metrics.Histogram.new(),
          # Resident actors' steps: how late each came, in microseconds.
          resident_lateness: Grove.Metrics.Histogram.new(),
          # The option's size, until here: the log itself.
          chat_log: ChatLog.new(world.chat_log)
      }
      |> with_zones(count)

    world = if world.life, do: with_life(world), else: world
    world = if world.game, do: with_game(world, count), else: world

    World.publish(world)

    Logger.info(
      "world #{inspect(world.name)}: #{w}x#{h} cells in #{count} zones#{on_demand(world)}, " <>
        "terrain in #{System.monotonic_time(:millisecond) - started} ms"
    )

    # Generating the terrain left a large heap behind; hibernating drops it.
    {:ok, world.name, :hibernate}
  end

  defp on_demand(%World{zones_on_demand: true}),
    do: " started on demand (each when first needed, asleep when idle)"

  defp on_demand(_world), do: ""

  # Directory chunks are made here, one at a time, so two joins never race
  # to publish the same one.
  @impl true
  def handle_call({:directory_chunk, id}, _from, name) do
    {:reply, Directory.ensure_chunk(name, id), name}
  end

  # A zone that crashed leaves its tables here (`Grove.World.Slots`), for
  # its next run.
  @impl true
  def handle_info({:"ETS-TRANSFER", _table, _from, _index}, name), do: {:noreply, name}

  @impl true
  def terminate(_reason, name) do
    Directory.erase(name)
    Grove.World.Placer.forget(name)
    World.unpublish(name)
    :ok
  end

  # Each zone's name, tables and counters (`Grove.World.Slots`): for every
  # zone from the start when they all run, else for each as it wakes.
  defp with_zones(%World{zones_on_demand: true} = world, _count) do
    slots = Slots.new()
    %{world | slots: slots, feed: Feed.new({:slots, slots}, world.view_history)}
  end

  defp with_zones(world, count) do
    %{
      world
      | zones: List.to_tuple(for(i <- 0..(count - 1), do: zone_name(world.name, i))),
        tables:
          List.to_tuple(
            for _ <- 1..count, do: :ets.new(:grove_zone, [:set, :public, read_concurrency: true])
          ),
        feed: Feed.new(count, world.view_history),
        load: :atomics.new(count, signed: false),
        zone_moves: :counters.new(count, [:write_concurrency]),
        zone_entities: :atomics.new(count, signed: false),
        zone_watched: :atomics.new(count, signed: false)
    }
  end

  # The automaton's shared parts: the table where each zone publishes its
  # cells and borders per generation, the moment generation 0 began (the
  # zones count generations from it), the target of manual stepping, the
  # bacteria per block for minimaps, and the histogram of generation times.
  # Alone, generations count from the world's start; in a cluster, from the
  # system clock's epoch, which every node shares as far as their clocks
  # agree: generation `g` is due at the same moment on each, however late
  # a node started, and its zones start at the generation the others are
  # at (`Grove.World.Zone`), rather than holding them up while they owe it.
  # In the monotonic time that the zones' timers count in.
  defp life_epoch(%World{cluster: nil}), do: System.monotonic_time(:millisecond)

  defp life_epoch(_world),
    do: System.monotonic_time(:millisecond) - System.system_time(:millisecond)

  defp with_life(world) do
    %{
      world
      | life_table: :ets.new(:grove_life, [:set, :public, read_concurrency: true]),
        life_epoch: life_epoch(world),
        life_target: :atomics.new(1, signed: false),
        life_density: :atomics.new(world.density_cols * world.density_rows, signed: true),
        life_time: Grove.Metrics.Histogram.new()
    }
  end

  # The game's shared parts: a table per zone for its cell layer (rows
  # `{key, value, code, walk}`, and `{:ready, version, 0, nil}` once laid;
  # ordered by key, so that what lies around a cell is a few ranges of
  # keys, `Grove.World.Game.near/3`), each
  # zone's count of layer changes (for the saver), and the log's pace.
  defp with_game(%World{zones_on_demand: true} = world, _count) do
    # Each zone's table is in its slot; one counter: when the saver last wrote.
    %{
      world
      | game_changes: :atomics.new(1, signed: false),
        game_log: game_log(),
        game_saves: Grove.World.Game.known_saves(world)
    }
  end

  defp with_game(world, count) do
    %{
      world
      | game_tables:
          List.to_tuple(
            for _ <- 1..count,
                do: :ets.new(:grove_game_cells, [:ordered_set, :public, read_concurrency: true])
          ),
        # One more: when the saver last wrote (system time, ms).
        game_changes: :atomics.new(count + 1, signed: false),
        game_log: game_log()
    }
  end

  # [when a failure was last logged, failures not logged since]; the first
  # is logged at once.
  defp game_log do
    log = :atomics.new(2, signed: true)
    :atomics.put(log, 1, System.monotonic_time(:millisecond) - 3_600_000)
    log
  end

  defp zone_name(world, index), do: :"#{world}.zone.#{index}"
  defp keeper_name(world), do: :"#{world}.keeper"
end
