defmodule Grove.World.Supervisor do
  @moduledoc false
  # How a world starts: its options validated once into a `Grove.World`
  # description, then the processes that run it, in the order they depend
  # on each other. `Grove.World` is the door (`start_link/1`, `new!/1`);
  # this is what stands behind it when it opens.

  use Supervisor

  alias Grove.World
  alias Grove.World.{Grid, Keeper, Life, Rules}

  @defaults [
    name: nil,
    width: 1000,
    height: 1000,
    zone_size: 50,
    seed: 1,
    terrain: [],
    rules: [],
    tick: 100,
    tick_max: nil,
    mailbox_limit: 5000,
    view_history: 32,
    handoff_timeout: 5000,
    density_block: nil,
    chat_log: 200,
    life: false,
    game: nil,
    store: nil,
    cluster: nil,
    zones: :always,
    zone_idle: 60_000,
    view_tile: nil,
    wake_ahead: 4,
    resident_beat: 500,
    resident_phases: 4,
    senses: nil,
    zone_process: []
  ]

  # Coordinates travel as integers below 2^53 (protocol version 3); a
  # billion cells a side leaves room to spare.
  @max_side 1_000_000_000
  # Zones that all run, each with its process, table and counters from
  # the start; a world of zones on demand has them only for the zones it
  # knows (`Grove.World.Slots`), so its size is not bounded by them.
  @max_zones 100_000

  @doc "Validates `opts` and starts the world's supervision tree, registered under its name."
  @spec start_link(keyword()) :: Supervisor.on_start()
  def start_link(opts) do
    world = new!(opts)
    Supervisor.start_link(__MODULE__, world, name: world.name)
  end

  @doc "Validates options into a world description; raises `ArgumentError`."
  @spec new!(keyword()) :: World.t()
  def new!(opts) do
    opts = Keyword.validate!(opts, @defaults)
    name = opts[:name]

    unless is_atom(name) and name != nil do
      raise ArgumentError, "a world needs a :name atom, got: #{inspect(name)}"
    end

    for key <- [
          :width,
          :height,
          :zone_size,
          :mailbox_limit,
          :view_history,
          :handoff_timeout
        ],
        not (is_integer(opts[key]) and opts[key] > 0) do
      raise ArgumentError,
            "#{inspect(key)} must be a positive integer, got: #{inspect(opts[key])}"
    end

    unless is_integer(opts[:chat_log]) and opts[:chat_log] >= 0 do
      raise ArgumentError,
            ":chat_log must be a non-negative integer, got: #{inspect(opts[:chat_log])}"
    end

    if opts[:width] > @max_side or opts[:height] > @max_side do
      raise ArgumentError, "a world is at most #{@max_side} cells wide and high"
    end

    unless opts[:zones] in [:always, :on_demand] do
      raise ArgumentError, ":zones must be :always or :on_demand, got: #{inspect(opts[:zones])}"
    end

    zones = Grid.zone_count(Grid.new(opts[:width], opts[:height], opts[:zone_size]))

    if zones > @max_zones and opts[:zones] == :always do
      raise ArgumentError,
            "a world of #{zones} zones is more than #{@max_zones}, the most that run at once: " <>
              "start it with zones: :on_demand, or make :zone_size larger"
    end

    # A cluster places every zone, awake or not (`Grove.Cluster.Placement`):
    # each node keeps an owner per zone, and walks them all when members change.
    if zones > @max_zones and opts[:cluster] != nil do
      raise ArgumentError,
            "a world of #{zones} zones is more than #{@max_zones}, the most a cluster places: " <>
              "make it smaller (GROVE_WIDTH, GROVE_HEIGHT) or its zones larger (:zone_size), " <>
              "or run it on one node, where zones on demand have no such limit"
    end

    unless opts[:zone_idle] == :manual or (is_integer(opts[:zone_idle]) and opts[:zone_idle] > 0) do
      raise ArgumentError,
            ":zone_idle must be a positive integer (ms) or :manual, got: #{inspect(opts[:zone_idle])}"
    end

    unless is_integer(opts[:wake_ahead]) and opts[:wake_ahead] >= 0 do
      raise ArgumentError,
            ":wake_ahead must be a non-negative integer (cells), got: #{inspect(opts[:wake_ahead])}"
    end

    unless opts[:tick] == :manual or (is_integer(opts[:tick]) and opts[:tick] > 0) do
      raise ArgumentError,
            ":tick must be a positive integer or :manual, got: #{inspect(opts[:tick])}"
    end

    unless is_integer(opts[:resident_beat]) and opts[:resident_beat] > 0 do
      raise ArgumentError,
            ":resident_beat must be a positive integer (ms), got: #{inspect(opts[:resident_beat])}"
    end

    unless is_integer(opts[:resident_phases]) and opts[:resident_phases] > 0 and
             opts[:resident_phases] <= opts[:resident_beat] do
      raise ArgumentError,
            ":resident_phases must be a positive integer, at most :resident_beat " <>
              "(#{inspect(opts[:resident_beat])}), got: #{inspect(opts[:resident_phases])}"
    end

    tick_max = tick_max!(opts[:tick], opts[:tick_max])
    tile = opts[:view_tile] || Grid.default_tile(opts[:zone_size])

    unless is_integer(tile) and tile > 0 and rem(opts[:zone_size], tile) == 0 do
      raise ArgumentError,
            ":view_tile must be a positive divisor of :zone_size (#{opts[:zone_size]}), " <>
              "got: #{inspect(tile)}"
    end

    unless opts[:senses] == nil or
             (is_atom(opts[:senses]) and Code.ensure_loaded?(opts[:senses]) and
                function_exported?(opts[:senses], :from_sight, 1)) do
      raise ArgumentError,
            ":senses must be nil or a module with from_sight/1, got: #{inspect(opts[:senses])}"
    end

    block = opts[:density_block] || density_block(opts[:width], opts[:height])

    unless is_integer(block) and block > 0 do
      raise ArgumentError, ":density_block must be a positive integer, got: #{inspect(block)}"
    end

    %World{
      name: name,
      registry: registry(name),
      grid: Grid.new(opts[:width], opts[:height], opts[:zone_size], tile),
      rules: Rules.new(opts[:rules]),
      tick: opts[:tick],
      tick_max: tick_max,
      tick_pace: tick_pace(opts[:tick]),
      mailbox_limit: opts[:mailbox_limit],
      view_history: opts[:view_history],
      handoff_timeout: opts[:handoff_timeout],
      density_block: block,
      chat_log: opts[:chat_log],
      life: Life.new!(opts[:life]),
      game: Grove.World.Game.Spec.new!(opts[:game]),
      store: store!(opts[:store]),
      density_cols: div(opts[:width] + block - 1, block),
      density_rows: div(opts[:height] + block - 1, block),
      terrain_options: Keyword.put(opts[:terrain], :seed, opts[:seed]),
      cluster: opts[:cluster],
      zones_on_demand: opts[:zones] == :on_demand,
      zone_idle: opts[:zone_idle],
      wake_ahead: opts[:wake_ahead],
      resident_beat: opts[:resident_beat],
      resident_phases: opts[:resident_phases],
      senses: opts[:senses],
      zone_spawn: Grove.SpawnOptions.validate!(:zone_process, opts[:zone_process])
    }
    |> tally()
    |> id_range()
  end

  # The ticks stretch to `:tick_max` under load; not at all unless asked.
  defp tick_max!(:manual, _max), do: nil
  defp tick_max!(tick, nil), do: tick
  defp tick_max!(tick, max) when is_integer(max) and max >= tick, do: max

  defp tick_max!(tick, other),
    do:
      raise(
        ArgumentError,
        ":tick_max must be an integer of at least :tick (#{tick}), got: #{inspect(other)}"
      )

  defp tick_pace(:manual), do: nil

  defp tick_pace(tick) do
    pace = :atomics.new(1, signed: false)
    :atomics.put(pace, 1, tick)
    pace
  end

  defp store!(nil), do: nil
  defp store!({module, _name} = store) when is_atom(module), do: store

  defp store!(other),
    do:
      raise(
        ArgumentError,
        ":store must be {module, name} (see Grove.World.Game.Storage) or nil, got: #{inspect(other)}"
      )

  # A game with a store to keep it has a tally of its own.
  defp tally(%World{game: nil} = world), do: world
  defp tally(%World{store: nil} = world), do: world
  defp tally(world), do: %{world | tally: Grove.World.Game.Tally.name(world.name)}

  # Blocks of 10 cells, but never more than a thousand a side: a million
  # blocks are 8 MB of counters, whatever the world's size.
  defp density_block(width, height), do: max(10, div(max(width, height) + 999, 1000))

  # Entity ids are the wire's 32 bits. A world alone counts them from 1; a
  # world of a cluster draws them from its node's own range of 2^22
  # (`Grove.Cluster.id_slot/0`), so that no two nodes hand out the same.
  @id_bits 22
  defp id_range(%World{cluster: nil} = world), do: world

  defp id_range(world) do
    case Grove.Cluster.id_slot() do
      0 ->
        world

      slot ->
        %{world | id_base: Bitwise.bsl(slot, @id_bits), id_span: Bitwise.bsl(1, @id_bits) - 1}
    end
  end

  @impl true
  def init(%World{} = world) do
    children =
      [
        # Owns the tables and the terrain, so they outlive any zone.
        {Keeper, world},
        # Writes this node's directory for zones on other nodes.
        %{id: :relay, start: {Grove.World.Relay, :start_link, [world]}},
        # Wakes zones on demand ahead of whoever comes near them, and lets
        # the other nodes reach this node's zones on demand, asleep or not.
        %{id: :door, start: {Grove.World.Door, :start_link, [world]}},
        # The zones this node runs; a zone rebuilds itself from its table,
        # so restarting one alone is always safe.
        %{
          id: :zones,
          type: :supervisor,
          start:
            {Supervisor, :start_link,
             [
               [],
               [
                 strategy: :one_for_one,
                 max_restarts: 100,
                 max_seconds: 5,
                 name: zones_supervisor(world.name)
               ]
             ]}
        },
        # The names of the zones of a world whose zones start on demand: no
        # atom is made for a zone, however many a world has.
        {Registry,
         keys: :unique, name: registry(world.name), partitions: System.schedulers_online()},
        # The zones of a world whose zones start on demand: each starts when
        # first needed (`Grove.World.Zone.wake/2`) and stops when idle.
        {DynamicSupervisor,
         strategy: :one_for_one,
         max_restarts: 100,
         max_seconds: 5,
         name: awake_supervisor(world.name)},
        # Starts this node's zones there (all of them, unless in a cluster),
        # and moves them when the cluster changes.
        # A node that stops on purpose hands its zones over first: room for it.
        %{
          id: :placer,
          start: {Grove.World.Placer, :start_link, [world.name]},
          shutdown: 60_000
        }
      ] ++
        if(world.tally != nil,
          # After the zones, which cast to it (none before a client joins), so
          # that a crash of one of these restarts no zone; the saver reads the
          # zones' tables, and stops first, with a last save.
          do: [{Grove.World.Game.Tally, world.name}, {Grove.World.Game.Saver, world.name}],
          else: []
        )

    # If the keeper goes, the tables go: the zones must start again after it.
    Supervisor.init(children, strategy: :rest_for_one)
  end

  @doc "The name of the supervisor of a world's zones that start on demand."
  @spec awake_supervisor(World.name()) :: atom()
  def awake_supervisor(name), do: :"#{name}.awake"

  @doc "The registry of the names of a world's zones that start on demand."
  @spec registry(World.name()) :: atom()
  def registry(name), do: :"#{name}.registry"

  @doc "The name of the supervisor of a world's zones on this node."
  @spec zones_supervisor(World.name()) :: atom()
  def zones_supervisor(name), do: :"#{name}.zones"
end
