defmodule Grove.World.TerrainTest do
  use ExUnit.Case, async: true
  doctest Grove.World.Terrain

  import Grove.PropCase

  alias Grove.World.Terrain

  test "the same seed gives the same world; another seed another" do
    a = Terrain.generate(120, 90, seed: 42)
    assert a == Terrain.generate(120, 90, seed: 42)
    refute a.cells == Terrain.generate(120, 90, seed: 43).cells
  end

  test "densities are the ones asked for" do
    terrain =
      Terrain.generate(300, 300,
        seed: 3,
        tree_density: 0.2,
        water_density: 0.05,
        rock_density: 0.01
      )

    census = Terrain.census(terrain)
    total = 300 * 300
    assert_in_delta census.tree / total, 0.2, 0.02
    assert_in_delta census.water / total, 0.05, 0.01
    assert_in_delta census.rock / total, 0.01, 0.005
    assert census.meadow + census.flowers > 0.6 * total
  end

  test "forests are clumped, not uniform noise" do
    # In a forest world, a tree's neighbours are trees far more often than the density alone would make them.
    terrain = Terrain.generate(200, 200, seed: 9, tree_density: 0.15, water_density: 0.0)

    {trees, tree_neighbours} =
      for y <- 1..198, x <- 1..198, Terrain.at(terrain, x, y) == :tree, reduce: {0, 0} do
        {trees, neighbours} ->
          around =
            for {dx, dy} <- [{1, 0}, {-1, 0}, {0, 1}, {0, -1}],
                Terrain.at(terrain, x + dx, y + dy) == :tree,
                do: 1

          {trees + 1, neighbours + length(around)}
      end

    assert tree_neighbours / (4 * trees) > 0.4
  end

  test "no trees, no water, no rocks when asked" do
    terrain = Terrain.generate(50, 50, tree_density: 0.0, water_density: 0.0, rock_density: 0.0)
    census = Terrain.census(terrain)
    assert census.tree == 0 and census.water == 0 and census.rock == 0
    refute Terrain.blocked?(terrain, 10, 10)
  end

  test "the mainland is the largest region of free ground joined by steps north, east, south and west" do
    # A 12 x 12 meadow with a wall of trees at x = 3: the strip to its left
    # has 36 cells, the right side 93. Then a pocket of three cells walled
    # in at the top right, and a diagonal gap in the wall, which the arrow
    # keys cannot pass.
    row = fn y ->
      for x <- 0..11, into: <<>> do
        cond do
          x == 3 -> <<1>>
          y == 1 and x in 8..11 -> <<1>>
          y == 0 and x == 8 -> <<1>>
          true -> <<0>>
        end
      end
    end

    terrain = Terrain.new(12, 12, for(y <- 0..11, into: <<>>, do: row.(y)))
    assert Terrain.mainland?(terrain, 5, 5)
    assert Terrain.mainland?(terrain, 11, 11)
    assert Terrain.mainland?(terrain, 7, 0)
    refute Terrain.mainland?(terrain, 0, 0), "the strip left of the wall"
    refute Terrain.mainland?(terrain, 2, 11)
    refute Terrain.mainland?(terrain, 10, 0), "the pocket"
    refute Terrain.mainland?(terrain, 3, 3), "a tree"

    # A terrain of one region is all mainland; one without free ground has none.
    assert Terrain.mainland?(Terrain.new(2, 1, <<0, 4>>), 1, 0)
    refute Terrain.mainland?(Terrain.new(2, 2, <<1, 2, 3, 1>>), 0, 0)
  end

  test "the mainland is exactly one region of free ground, and no region is larger (property)" do
    property =
      forall(
        {:proper_types.integer(1, 10_000), :proper_types.integer(1, 40),
         :proper_types.integer(1, 40), :proper_types.oneof([0.0, 0.2, 0.5, 0.8])},
        fn {seed, width, height, trees} ->
          mainland_is_largest_region?(seed, width, height, trees)
        end
      )

    check(property, numtests: 200)
  end

  test "walkable cells are counted per rectangle" do
    terrain = Terrain.generate(60, 40, seed: 5)
    whole = Terrain.walkable_count(terrain, 0, 0, 60, 40)
    census = Terrain.census(terrain)
    assert whole == census.meadow + census.flowers

    assert Terrain.walkable_count(terrain, 0, 0, 30, 40) +
             Terrain.walkable_count(terrain, 30, 0, 60, 40) == whole
  end

  test "bad options get a clear error" do
    assert_raise ArgumentError, ~r/tree_density/, fn ->
      Terrain.generate(10, 10, tree_density: 2)
    end

    assert_raise ArgumentError, ~r/no room to walk/, fn ->
      Terrain.generate(10, 10, tree_density: 0.5, water_density: 0.5)
    end

    assert_raise ArgumentError, fn -> Terrain.generate(10, 10, actors: 5) end
  end

  # A plain flood fill, as the reference: the mainland must be one of the
  # regions it finds, and as large as the largest.
  defp mainland_is_largest_region?(seed, width, height, trees) do
    terrain = Terrain.generate(width, height, seed: seed, tree_density: trees)
    cells = for y <- 0..(height - 1), x <- 0..(width - 1), do: {x, y}

    free =
      for {x, y} <- cells, not Terrain.blocked?(terrain, x, y), into: MapSet.new(), do: {x, y}

    mainland =
      for {x, y} <- cells, Terrain.mainland?(terrain, x, y), into: MapSet.new(), do: {x, y}

    regions = regions(free, [])
    largest = regions |> Enum.map(&MapSet.size/1) |> Enum.max(fn -> 0 end)
    MapSet.size(mainland) == largest and (largest == 0 or mainland in regions)
  end

  # A generator that tells the test which process made each area, and
  # at which priority, and raises for the rectangles asked to.
  defmodule Telling do
    @behaviour Terrain

    @impl true
    def init(_width, _height, opts), do: Map.new(opts)

    @impl true
    def cells(%{test: test, raise_at: raise_at}, {x0, y0, x1, y1} = rect) do
      if x0 == raise_at, do: raise(ArgumentError, "no ground here")
      {:priority, priority} = Process.info(self(), :priority)
      send(test, {:made, rect, self(), priority})
      :binary.copy(<<0>>, (x1 - x0) * (y1 - y0))
    end
  end

  test "a large world's area is made in a process of its own, at its caller's priority, and a generator's error raised in the caller" do
    terrain =
      Terrain.for_world(100_000, 100_000, 50,
        generator: Telling,
        whole_limit: 0,
        test: self(),
        raise_at: 999
      )

    area = Terrain.area_of(terrain, 120, 70)
    assert_received {:made, {99, 49, 151, 101}, maker, :normal}
    assert maker != self()
    refute Process.alive?(maker)
    assert area == Terrain.area(terrain, {99, 49, 151, 101})
    assert_received {:made, {99, 49, 151, 101}, _caller, :normal}

    # Read again from the cache, made once.
    assert Terrain.area_of(terrain, 101, 99) == area
    refute_received {:made, _, _, _}

    previous = Process.flag(:priority, :low)
    Terrain.area_of(terrain, 5000, 5000)
    Process.flag(:priority, previous)
    assert_received {:made, {4999, 4999, 5051, 5051}, _maker, :low}

    assert_raise ArgumentError, "no ground here", fn -> Terrain.area_of(terrain, 1000, 0) end
    refute_received {:DOWN, _, _, _, _}
  end

  defp regions(free, found) do
    case Enum.take(free, 1) do
      [] ->
        found

      [cell] ->
        region = flood([cell], MapSet.new([cell]), free)
        regions(MapSet.difference(free, region), [region | found])
    end
  end

  defp flood([], region, _free), do: region

  defp flood([{x, y} | rest], region, free) do
    next =
      for cell <- [{x, y - 1}, {x + 1, y}, {x, y + 1}, {x - 1, y}],
          MapSet.member?(free, cell) and not MapSet.member?(region, cell),
          do: cell

    flood(next ++ rest, Enum.reduce(next, region, &MapSet.put(&2, &1)), free)
  end
end
