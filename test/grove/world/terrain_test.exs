defmodule Grove.World.TerrainTest do
  use ExUnit.Case, async: true
  doctest Grove.World.Terrain

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

  test "a cell is shut in when fewer than ten free cells can be reached from it" do
    # A 12 x 12 meadow with a wall of trees at x = 3: the strip to its left
    # has 36 cells. Then a pocket of two cells walled in at the top right.
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

    terrain = %Terrain{width: 12, height: 12, cells: for(y <- 0..11, into: <<>>, do: row.(y))}
    # {9, 0}, {10, 0} and {11, 0}: three cells between the trees and the edge.
    assert Terrain.shut_in?(terrain, 10, 0)
    assert Terrain.shut_in?(terrain, 9, 0)
    refute Terrain.shut_in?(terrain, 0, 0)
    refute Terrain.shut_in?(terrain, 5, 5)

    # A terrain of a few cells is all pocket: nothing there is shut in.
    refute Terrain.shut_in?(
             %Terrain{width: 3, height: 3, cells: <<0, 1, 0, 1, 0, 1, 0, 1, 0>>},
             1,
             1
           )
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
end
