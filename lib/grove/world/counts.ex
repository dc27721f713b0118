defmodule Grove.World.Counts do
  @moduledoc """
  What the world counts, for status lines, metrics, minimaps and tests:
  entities in all and by kind, the world's counters, each zone's load and
  how crowded each block is.

  Zones and the client API keep these in `:counters` and `:atomics` as
  they go; every function here reads them without sending a message, so a
  reader never queues behind a move. `Grove.World` delegates to these functions, so
  `Grove.World.stats/1` and the others still work.
  """

  alias Grove.World
  alias Grove.World.{Grid, Minimap, Slots, Stats}

  # A world of zones on demand with more zones than this (more than could
  # all run) shows the loads of the zones it knows only.
  @pictured 100_000

  @typedoc "A zone's load, see `zone_loads/1`."
  @type zone_load :: %{
          zone: Grid.zone_index(),
          moves: non_neg_integer(),
          entities: non_neg_integer(),
          mailbox: non_neg_integer()
        }

  @doc """
  How many entities of each kind code (see `Grove.World.join/2`'s `:kind`) are in the
  world now, codes with none left out. Read from counters the zones keep.
  """
  @spec kind_counts(World.name() | World.t()) :: %{byte() => pos_integer()}
  def kind_counts(world) do
    world = World.fetch!(world)

    for code <- 0..255,
        count = :counters.get(world.kind_counts, code + 1),
        count > 0,
        into: %{},
        do: {code, count}
  end

  @doc "How many entities are in the world."
  @spec entity_count(World.name() | World.t()) :: non_neg_integer()
  def entity_count(world) do
    world = World.fetch!(world)
    Stats.get(world.stats, :players) + Stats.get(world.stats, :actors)
  end

  @doc "The world's counters, entity count and the longest zone mailbox last measured."
  @spec stats(World.name() | World.t()) :: map()
  def stats(world) do
    world = World.fetch!(world)
    loads = [0 | for({_index, load, _moves, _entities} <- Slots.counts(world), do: load)]

    world.stats
    |> Stats.read()
    |> Map.merge(%{
      entities: entity_count(world),
      zone_mailbox_max: Enum.max(loads),
      zones_awake: zones_awake(world)
    })
  end

  # Every zone runs, but in a world of zones on demand.
  defp zones_awake(%World{zones_on_demand: false} = world), do: Grid.zone_count(world.grid)

  defp zones_awake(world), do: Registry.count(World.Supervisor.registry(world.name))

  @doc """
  Every zone's load, for heat maps and metrics: moves handled since start,
  entities (as of its last tick) and mailbox length (as last measured),
  read without a message. In zone order, every zone of the world; but a
  world of zones on demand of more than 100,000 zones, which gives only
  the zones it knows (awake, or asleep with entities: `Grove.World.Slots`),
  by zone number. A zone on demand counts its moves from when it last woke
  with nothing kept.
  """
  @spec zone_loads(World.name() | World.t()) :: [zone_load()]
  def zone_loads(world) do
    world = World.fetch!(world)

    counts =
      if world.zones_on_demand and Grid.zone_count(world.grid) > @pictured do
        Enum.sort(Slots.counts(world))
      else
        for index <- 0..(Grid.zone_count(world.grid) - 1),
            do:
              {index, Slots.load(world, index), Slots.moves(world, index),
               Slots.entities(world, index)}
      end

    for {index, mailbox, moves, entities} <- counts,
        do: %{zone: index, moves: moves, entities: entities, mailbox: mailbox}
  end

  @doc """
  How crowded each block of the world is, for a minimap: `cols` x `rows`
  bytes, row by row, each the share of the block's cells that hold an
  entity, from 0 (empty) to 255 (full). With `max_side`, blocks are merged
  so that neither side exceeds it. Read from `:atomics` the zones keep
  up to date; no message is sent. (A zone that crashes in the middle of a
  handoff can leave a block off by one; it is a picture, not a count.)

  `layer` is `:entities` (players and actors) or `:bacteria` (live cells of
  `Grove.World.Life`, all zero in a world without them).
  """
  @spec density(World.name() | World.t(), pos_integer() | nil, :entities | :bacteria) ::
          %{cols: pos_integer(), rows: pos_integer(), cells: binary()}
  def density(world, max_side \\ nil, layer \\ :entities),
    do: Minimap.density(World.fetch!(world), max_side, layer)

  @doc """
  `stats/1` of every node the world runs on, by node, each read where it
  runs: the other members of its cluster are asked at once, in one
  `:erpc.multicall/5`, and given `timeout` ms; one that does not answer
  is left out. A world alone is `stats/1` of this node, no message sent.
  """
  @spec node_stats(World.name() | World.t(), timeout()) :: %{node() => map()}
  def node_stats(world, timeout) do
    world = World.fetch!(world)
    others = others(world)

    others
    |> Enum.zip(:erpc.multicall(others, __MODULE__, :stats, [world.name], timeout))
    |> Enum.flat_map(fn
      {node, {:ok, stats}} -> [{node, stats}]
      _ -> []
    end)
    |> Map.new()
    |> Map.put(node(), stats(world))
  end

  @doc """
  Several nodes' `stats/1` (those of `node_stats/2`) as one, for the whole
  world: counters added up, the longest mailbox the longest.
  """
  @spec sum([map()]) :: map()
  def sum(stats) do
    Enum.reduce(stats, fn theirs, ours ->
      Map.merge(ours, theirs, fn
        :zone_mailbox_max, a, b -> max(a, b)
        _key, a, b when is_integer(a) and is_integer(b) -> a + b
        _key, a, _b -> a
      end)
    end)
  end

  @doc """
  `density/3` for the whole world when its zones run on several nodes:
  each member's blocks counted where its zones run, added up before they
  are scaled; asked as `node_stats/2` asks.
  """
  @spec total_density(
          World.name() | World.t(),
          pos_integer() | nil,
          :entities | :bacteria,
          timeout()
        ) ::
          %{cols: pos_integer(), rows: pos_integer(), cells: binary()}
  def total_density(world, max_side, layer, timeout) do
    world = World.fetch!(world)
    args = [world.name, max_side, layer]

    sums =
      for {:ok, theirs} <- :erpc.multicall(others(world), Minimap, :sums, args, timeout),
          reduce: Minimap.sums(world, max_side, layer),
          do: (ours -> Minimap.merge(ours, theirs))

    Minimap.cells(sums)
  end

  @doc """
  The entities of every zone that runs on this node and holds any, as
  `{zone index, entities}` (as of each zone's last tick): the sparse
  counts `total_places/3` picks the busiest of. Read without a message.
  """
  @spec zone_counts(World.name() | World.t()) :: [{Grid.zone_index(), pos_integer()}]
  def zone_counts(world) do
    world = World.fetch!(world)

    for index <- World.awake_zones(world),
        count = Slots.entities(world, index),
        count > 0,
        do: {index, count}
  end

  @doc """
  The world's populated places, for the minimap of a world too large to
  picture whole: its `limit` busiest zones on every node, busiest first,
  as `{column, row, entities}` (`Grove.World.Minimap.places/3`); the other
  nodes asked as `node_stats/2` asks them.
  """
  @spec total_places(World.name() | World.t(), non_neg_integer(), timeout()) ::
          [Minimap.place()]
  def total_places(world, limit, timeout) do
    world = World.fetch!(world)

    counts =
      for {:ok, theirs} <-
            :erpc.multicall(others(world), __MODULE__, :zone_counts, [world.name], timeout),
          reduce: zone_counts(world),
          do: (ours -> theirs ++ ours)

    Minimap.places(counts, world.grid.zones_x, limit)
  end

  # The other members of the world's cluster; none for a world alone.
  defp others(%World{cluster: nil}), do: []
  defp others(%World{cluster: instance}), do: Grove.Cluster.members(instance) -- [node()]
end
