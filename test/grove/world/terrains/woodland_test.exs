defmodule Grove.World.Terrains.WoodlandTest do
  use ExUnit.Case, async: true
  doctest Grove.World.Terrains.Woodland

  import Grove.PropCase

  alias Grove.World.Terrain
  alias Grove.World.Terrain.Area
  alias Grove.World.Terrains.Woodland

  # The ground Grove made before it made it area by area, as SHA-256 of
  # the cells: the README's world and two small ones keep it exactly.
  @before [
    {1000, 1000, [seed: 1], "3f4d7d6b142758c4be7b262c84af964d6016cdd9f3be7ac5c19e41e479665555"},
    {200, 150, [seed: 7], "708cfab58b21b84a9e9e8cf7303aa30f2990dbfaf4a77e210ba4b1d66e1053ae"},
    {333, 97, [seed: :x, tree_density: 0.3, water_density: 0.1],
     "82c056bcfb2b46c8ec40289fbec9c4d50364041ca27a93ab4c5f83f5eaad474a"}
  ]

  test "the ground of a world made whole is the ground Grove always made" do
    for {width, height, opts, sha} <- @before do
      cells = Terrain.generate(width, height, opts).cells
      assert Base.encode16(:crypto.hash(:sha256, cells), case: :lower) == sha
    end
  end

  test "any rectangle, made on its own, is that part of the whole (property)" do
    property =
      forall(
        {:proper_types.integer(1, 1000), :proper_types.integer(1, 120),
         :proper_types.integer(1, 90), :proper_types.oneof([0.0, 0.12, 0.4]),
         :proper_types.list(
           {:proper_types.float(0.0, 1.0), :proper_types.float(0.0, 1.0),
            :proper_types.float(0.0, 1.0), :proper_types.float(0.0, 1.0)}
         )},
        fn {seed, width, height, trees, rects} ->
          whole = Terrain.generate(width, height, seed: seed, tree_density: trees)

          # Made one after another on the same parameters, and each on
          # parameters made afresh, as another node would.
          for {a, b, c, d} <- rects do
            {x0, x1} = span(a, b, width)
            {y0, y1} = span(c, d, height)
            expected = rows(whole.cells, width, {x0, y0, x1, y1})
            assert Woodland.cells(whole.params, {x0, y0, x1, y1}) == expected

            fresh = Woodland.init(width, height, seed: seed, tree_density: trees)
            assert Woodland.cells(fresh, {x0, y0, x1, y1}) == expected
          end

          true
        end
      )

    check(property, numtests: 20, deep_numtests: 600)
  end

  test "an area's rows that lie on one side of a field's cut, not computed, give the bytes computed ones give (property)" do
    # Made once each: a world this large takes its cuts from a sample.
    worlds =
      for opts <- [
            [seed: 1],
            [seed: 7, tree_density: 0.4, water_density: 0.2],
            [seed: 3, water_density: 0.0],
            [seed: 5, tree_density: 0.0, water_density: 0.1]
          ],
          do: Woodland.init(1_000_000, 1_000_000, opts)

    property =
      forall(
        {:proper_types.oneof(worlds), :proper_types.integer(0, 999_900),
         :proper_types.integer(0, 999_900), :proper_types.integer(1, 100),
         :proper_types.integer(1, 100)},
        fn {params, x0, y0, w, h} ->
          rect = {x0, y0, x0 + w, y0 + h}
          Woodland.cells(params, rect) == Woodland.cells(params, rect, false)
        end
      )

    check(property, numtests: 200, deep_numtests: 5000)
  end

  test "any area is the ground the generator made as it stood before, for any seed, densities and size (property)" do
    # Worlds small enough to be made whole, compared whole; and worlds too
    # large to be, whose cuts come from a sample, long on one side and
    # narrow on the other so that the sample is small and the worlds
    # cheap to make, compared over an area anywhere in them.
    density = fn top -> :proper_types.oneof([0.0, :proper_types.float(0.0, top)]) end

    property =
      forall(
        {:proper_types.oneof([
           :proper_types.integer(),
           :proper_types.elements([:x, :grove, nil]),
           :proper_types.binary()
         ]), density.(0.5), density.(0.3), density.(0.05), density.(1.0),
         :proper_types.oneof([
           {:whole, :proper_types.integer(1, 120), :proper_types.integer(1, 120)},
           {:sampled, :proper_types.integer(1, 8), :proper_types.bool()}
         ]), :proper_types.float(0.0, 1.0), :proper_types.float(0.0, 1.0),
         :proper_types.integer(1, 100), :proper_types.integer(1, 100)},
        fn {seed, trees, water, rocks, flowers, shape, a, b, w, h} ->
          opts = [
            seed: seed,
            tree_density: trees,
            water_density: water,
            rock_density: rocks,
            flower_density: flowers
          ]

          {width, height, rect} =
            case shape do
              {:whole, width, height} ->
                {width, height, {0, 0, width, height}}

              {:sampled, narrow, across?} ->
                long = div(4_194_304, narrow) + 1 + round(a * 4_000_000)
                {width, height} = if across?, do: {long, narrow}, else: {narrow, long}
                x0 = round(b * (width - 1))
                y0 = round(a * (height - 1))
                {width, height, {x0, y0, min(x0 + w, width), min(y0 + h, height)}}
            end

          params = Woodland.init(width, height, opts)
          reference = Grove.WoodlandReference.init(width, height, opts)
          assert Map.from_struct(params) == Map.from_struct(reference)
          assert Woodland.cells(params, rect) == Grove.WoodlandReference.cells(reference, rect)
        end
      )

    check(property, numtests: 60, deep_numtests: 2000)
  end

  test "a world too large to be made whole makes the same areas in any order, on any node" do
    terrain = Terrain.for_world(100_000, 80_000, 50, seed: 3)
    refute Terrain.whole?(terrain)

    zones = for _ <- 1..12, do: {:rand.uniform(1999) * 50, :rand.uniform(1599) * 50}
    first = Map.new(zones, fn {x, y} -> {{x, y}, Terrain.area_of(terrain, x, y)} end)

    # Another node: its own parameters and cache, the areas in another order.
    other = Terrain.for_world(100_000, 80_000, 50, seed: 3)

    for {x, y} <- Enum.reverse(zones) do
      assert Terrain.area_of(other, x, y) == first[{x, y}]
    end

    # The border cells one zone holds of its neighbour are the neighbour's own.
    {x, y} = hd(zones)
    %Area{} = left = Terrain.area_of(terrain, x - 1, y)
    %Area{} = right = Terrain.area_of(terrain, x, y)

    for row <- (y - 1)..(y + 50), col <- [x - 1, x] do
      assert Terrain.code(left, col, row) == Terrain.code(right, col, row)
    end
  end

  test "a lake across the border of two zones is the same lake, whichever zone is made first" do
    terrain = Terrain.for_world(60_000, 60_000, 50, seed: 11, water_density: 0.3)
    # A border cell under water, found from the west side's area.
    {x, y} =
      Enum.find_value(1..1000, fn k ->
        x = k * 50
        y = 25 + k * 50

        if Terrain.at(Terrain.area(terrain, {x - 1, y, x + 1, y + 1}), x, y) == :water,
          do: {x, y}
      end)

    east_first = Terrain.for_world(60_000, 60_000, 50, seed: 11, water_density: 0.3)
    east = Terrain.area_of(east_first, x, y)
    west = Terrain.area_of(east_first, x - 1, y)

    for row <- (y - 10)..(y + 10), col <- [x - 1, x] do
      assert Terrain.code(east, col, row) == Terrain.code(west, col, row)
      assert Terrain.code(east, col, row) == Terrain.code(terrain, col, row)
    end

    assert Terrain.at(east, x, y) == :water and Terrain.at(west, x, y) == :water
  end

  test "a large world's densities are the ones asked for, from a sample" do
    terrain = Terrain.for_world(200_000, 200_000, 50, seed: 5, tree_density: 0.2)

    counts =
      for k <- 0..899, reduce: %{} do
        counts ->
          {x, y} = {rem(k * 7919, 199_990), rem(k * 104_729, 199_990)}
          area = Terrain.area(terrain, {x, y, x + 10, y + 10})
          for <<code <- area.cells>>, reduce: counts, do: (c -> Map.update(c, code, 1, &(&1 + 1)))
      end

    total = 900 * 10 * 10
    assert_in_delta counts[1] / total, 0.2, 0.03
    assert_in_delta counts[3] / total, 0.03, 0.015
  end

  test "a large world's mainland is the largest region of free ground of each area" do
    terrain = Terrain.for_world(100_000, 100_000, 50, seed: 9, tree_density: 0.4)
    %Area{x0: x0, y0: y0, x1: x1, y1: y1} = area = Terrain.area_of(terrain, 5000, 7000)
    cells = for y <- y0..(y1 - 1), x <- x0..(x1 - 1), do: {x, y}
    free = for {x, y} <- cells, not Terrain.blocked?(area, x, y), into: MapSet.new(), do: {x, y}
    largest = free |> regions([]) |> Enum.max_by(&MapSet.size/1)

    # The zone's own cells, read through the world's terrain; the border
    # around them is its neighbours' to tell.
    for x <- 5000..5049, y <- 7000..7049 do
      assert Terrain.mainland?(terrain, x, y) == MapSet.member?(largest, {x, y})
    end
  end

  test "the cache of a large world's areas stays bounded" do
    terrain = Terrain.for_world(1_000_000, 1_000_000, 10, seed: 2)
    for k <- 1..5000, do: Terrain.area_of(terrain, k * 10, k * 7)
    assert :ets.info(terrain.areas, :size) <= 4096
  end

  test "a rectangle at the world's origin or at its far corner is that part of the whole; one that starts left of or above the origin raises" do
    {width, height} = {97, 61}
    whole = Terrain.generate(width, height, seed: 4)

    for rect <- [
          {0, 0, width, height},
          {0, 0, 1, 1},
          {width - 1, height - 1, width, height},
          {0, height - 1, width, height},
          {width - 1, 0, width, height}
        ] do
      assert Woodland.cells(whole.params, rect) == rows(whole.cells, width, rect)
    end

    for rect <- [{-1, 0, 5, 5}, {0, -1, 5, 5}, {-50, -50, -10, -10}] do
      assert_raise ArgumentError, ~r/origin/, fn -> Woodland.cells(whole.params, rect) end
    end
  end

  test "a generator of one's own makes the ground" do
    defmodule Stripes do
      @behaviour Grove.World.Terrain
      def init(_width, _height, opts), do: Keyword.fetch!(opts, :every)

      def cells(every, {x0, y0, x1, y1}) do
        for _y <- y0..(y1 - 1),
            x <- x0..(x1 - 1),
            into: <<>>,
            do: <<if(rem(x, every) == 0, do: 1, else: 0)>>
      end
    end

    whole = Terrain.generate(20, 4, generator: Stripes, every: 5)
    assert Terrain.at(whole, 10, 2) == :tree and Terrain.at(whole, 11, 2) == :meadow
    large = Terrain.for_world(10_000, 10_000, 50, generator: Stripes, every: 5)
    assert Terrain.at(large, 9995, 9000) == :tree

    assert_raise ArgumentError, ~r/:generator/, fn ->
      Terrain.generate(5, 5, generator: Enum)
    end
  end

  defp span(a, b, side) do
    [p, q] = Enum.sort([trunc(a * side), trunc(b * side)])
    p = min(p, side - 1)
    {p, max(q, p + 1) |> min(side)}
  end

  defp rows(cells, width, {x0, y0, x1, y1}),
    do:
      IO.iodata_to_binary(for y <- y0..(y1 - 1), do: binary_part(cells, y * width + x0, x1 - x0))

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
