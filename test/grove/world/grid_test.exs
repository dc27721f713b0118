defmodule Grove.World.GridTest do
  use ExUnit.Case, async: true
  doctest Grove.World.Grid

  import Grove.PropCase

  alias Grove.World.Grid

  test "zones cover the grid exactly once, edges cut short" do
    grid = Grid.new(23, 17, 5)
    assert Grid.zone_count(grid) == 5 * 4

    owners =
      for y <- 0..16, x <- 0..22 do
        index = Grid.zone_of(grid, x, y)
        {x0, y0, x1, y1} = Grid.zone_bounds(grid, index)
        assert x in x0..(x1 - 1) and y in y0..(y1 - 1)
        index
      end

    assert Enum.uniq(owners) |> length() == 20
    assert Grid.zone_bounds(grid, 19) == {20, 15, 23, 17}
  end

  test "a viewport's zones are exactly those holding one of its cells" do
    grid = Grid.new(60, 45, 10)

    property =
      forall(
        {:proper_types.integer(0, 59), :proper_types.integer(0, 44),
         :proper_types.integer(0, 12)},
        fn {x, y, r} ->
          expected =
            for vy <- max(y - r, 0)..min(y + r, 44),
                vx <- max(x - r, 0)..min(x + r, 59),
                uniq: true do
              Grid.zone_of(grid, vx, vy)
            end

          assert Grid.view_zones(grid, {x, y}, r) == Enum.sort(expected)
        end
      )

    check(property, numtests: 300)
  end

  test "a step's column and row, apart, are its cell's" do
    for d <- Grid.directions(), cell <- [{10, 10}, {0, 0}, {-3, 7}] do
      {x, y} = cell
      assert {Grid.step_x(x, d), Grid.step_y(y, d)} == Grid.step(cell, d)
    end
  end

  test "eight distinct steps, each of one cell" do
    steps = for d <- Grid.directions(), do: Grid.step({10, 10}, d)
    assert length(Enum.uniq(steps)) == 8
    assert Enum.all?(steps, fn {x, y} -> max(abs(x - 10), abs(y - 10)) == 1 end)
  end

  test "wrap keeps cells on a torus" do
    grid = Grid.new(10, 8, 5)
    assert Grid.wrap(grid, -1, 8) == {9, 0}
    assert Grid.wrap(grid, 10, -1) == {0, 7}
  end
end
