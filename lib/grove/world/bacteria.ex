defmodule Grove.World.Bacteria do
  @moduledoc """
  The bacteria of a running world, for clients and tools: seeding a
  pattern, stepping generations by hand, and reading what lives.

  The automaton itself, its options and how bacteria meet entities are
  `Grove.World.Life`'s; the zones compute it. Everything here either casts
  to zones (a seed's outcome comes back as a message, like a move's) or
  reads ETS and `:atomics` without a message. `Grove.World` delegates to
  these functions, so `Grove.World.seed/5` and the others still work.
  """

  alias Grove.Metrics.Histogram
  alias Grove.World
  alias Grove.World.{Directory, Entity, Grid, Life, Slots, Zone}
  alias Grove.World.Life.Board

  @doc """
  Seeds a pattern of bacteria (one of `Grove.World.Life.patterns/0`) just in
  front of an entity the calling process owns, facing `direction` (see
  `Grove.World.Life.pattern_cells/3`). Returns at once; the outcome arrives
  as `{:grove_seed, id, tag, :ok | {:rejected, reason}}`, where the reason
  is `:out_of_bounds` (off the world), `:zone_edge` (the pattern would
  straddle two zones), `:blocked` (ground that blocks under a cell),
  `:occupied` (an entity or a bacterium on a cell, or cells seeded already),
  `:busy`, `:disabled` (the world has no bacteria), `:not_owner` or
  `:unknown_entity`. An accepted pattern comes alive at the zone's next
  generation, on those of its cells that are still free then.
  """
  @spec seed(World.name() | World.t(), Entity.id(), atom(), Grid.direction(), term()) :: :ok
  def seed(world, id, pattern, direction, tag \\ nil) when is_integer(id) do
    world = World.fetch!(world)
    require Grid

    unless Grid.is_direction(direction),
      do: raise(ArgumentError, "not a direction: #{inspect(direction)}")

    unless pattern in Life.patterns(),
      do: raise(ArgumentError, "not a pattern: #{inspect(pattern)}")

    case {world.life, Directory.lookup(world.name, id)} do
      {nil, _} ->
        send(self(), {:grove_seed, id, tag, {:rejected, :disabled}})

      {_life, nil} ->
        send(self(), {:grove_seed, id, tag, {:rejected, :unknown_entity}})

      {_life, index} ->
        if Slots.load(world, index) > world.mailbox_limit do
          send(self(), {:grove_seed, id, tag, {:rejected, :busy}})
        else
          GenServer.cast(
            World.zone_address(world, index),
            {:seed, id, pattern, direction, self(), tag, 0}
          )
        end
    end

    :ok
  end

  @doc """
  Asks every zone for one more generation; for worlds whose `:life` has
  `interval: :manual`. Zones compute it as soon as their neighbours have
  computed the one before; `generation/1` tells when all have. In a world
  of zones on demand, the zones awake; those asleep stand still.
  """
  @spec step_life(World.name() | World.t()) :: :ok
  def step_life(world) do
    world = World.fetch!(world)

    unless match?(%Life{interval: :manual}, world.life),
      do: raise(ArgumentError, "step_life/1 needs a world with life: [interval: :manual]")

    :atomics.add(world.life_target, 1, 1)

    for index <- World.awake_zones(world),
        do: GenServer.cast(World.zone_address(world, index), :generation)

    :ok
  end

  @doc false
  # A zone's row of another node (its neighbours' there, or its own handed
  # over), into this node's life table, unless the row there is newer: a
  # late row of the zone's run before it moved never overwrites its own.
  # A row without cells says its zone fell asleep on another node: late,
  # it never covers the row of a run of that zone awake here.
  @spec put_row(World.t(), Zone.Bacteria.row()) :: :ok
  def put_row(%World{life_table: table} = world, {index, generation, bits, _, _} = row) do
    case :ets.lookup(table, index) do
      [{_, newer, _, _, _}] when newer > generation ->
        :ok

      _ ->
        if bits == nil and World.zone_node(world, index) == node() and
             World.zone_pid(world, index) != nil,
           do: :ok,
           else: :ets.insert(table, row) && :ok
    end
  end

  @doc false
  # This node's rows of those zones, for the node that starts them again
  # after their node was lost (`Grove.World.Placer`): it may not be the
  # heir they were sent to.
  @spec rows(World.name(), [Grid.zone_index()]) :: [Zone.Bacteria.row()]
  def rows(world, indexes) do
    %World{life_table: table} = World.fetch!(world)
    if table == nil, do: [], else: Enum.flat_map(indexes, &:ets.lookup(table, &1))
  end

  @doc """
  The generation every zone has reached (the slowest zone's), read from
  ETS; `nil` in a world without bacteria or before every zone has started.
  In a world of zones on demand, the slowest zone awake's (`nil` when none
  is).
  """
  @spec generation(World.name() | World.t()) :: non_neg_integer() | nil
  def generation(world), do: slowest(World.fetch!(world))

  defp slowest(%World{zones_on_demand: true, life: %Life{}} = world) do
    rows = for index <- World.awake_zones(world), do: :ets.lookup(world.life_table, index)

    if rows != [] and Enum.all?(rows, &(&1 != [])),
      do: rows |> Enum.map(fn [row] -> elem(row, 1) end) |> Enum.min(),
      else: nil
  end

  defp slowest(world) do
    zones = Grid.zone_count(world.grid)

    with %Life{} <- world.life,
         rows when length(rows) == zones <- :ets.tab2list(world.life_table) do
      rows |> Enum.map(&elem(&1, 1)) |> Enum.min()
    else
      _ -> nil
    end
  end

  @doc """
  Every live bacterium, as `{generation, cells}` per zone, read from ETS
  (for tests and tools: it copies every zone's cells); a zone on demand
  that sleeps gives the board it sleeps with, from the store when its
  cells are there.
  """
  @spec bacteria(World.name() | World.t()) :: %{
          Grid.zone_index() => {non_neg_integer(), [Grid.cell()]}
        }
  def bacteria(world) do
    world = World.fetch!(world)

    case world.life do
      nil ->
        %{}

      _life ->
        for {index, _generation, _bits, _edges, _previous} <- :ets.tab2list(world.life_table),
            {_, generation, bits, _, _} <- [Zone.Saves.life_row(world, index)],
            into: %{} do
          board = %{Board.new(Grid.zone_bounds(world.grid, index)) | bits: bits}
          {index, {generation, Board.cells(board)}}
        end
    end
  end

  @doc """
  Times zones took to compute a generation, in microseconds, since the
  world started: `%{count, p50, p99, max}` (`nil`s before the first).
  """
  @spec life_times(World.name() | World.t()) :: map()
  def life_times(world) do
    world = World.fetch!(world)

    case world.life_time do
      nil ->
        %{count: 0, p50: nil, p99: nil, max: nil}

      histogram ->
        snapshot = Histogram.snapshot(histogram)

        %{
          count: Histogram.count(snapshot),
          p50: Histogram.percentile(snapshot, 50),
          p99: Histogram.percentile(snapshot, 99),
          max: Histogram.max(snapshot)
        }
    end
  end
end
