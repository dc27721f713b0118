defmodule Grove.Load.CrowdTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.Load.Crowd
  alias Grove.World.Grid

  doctest Grove.Load.Crowd

  test "corner and middle lie on the zone grid, inside the world" do
    assert Crowd.place(:corner, 1000, 1000, 50) == {500, 500}
    assert Crowd.place(:middle, 1000, 1000, 50) == {525, 525}
    assert Crowd.place(:corner, 120, 80, 50) == {50, 50}
    assert Crowd.place(:middle, 120, 80, 50) == {75, 25}
    assert Crowd.place(:corner, 30, 30, 50) == {0, 0}
    assert Crowd.place({7, 9}, 30, 30, 50) == {7, 9}
  end

  test "a player far away moves at the crowd's pace, one near the point at the run's" do
    crowd = Crowd.new(:mill, {50, 50}, radius: 5, approach_ms: 100)
    assert Crowd.wait(crowd, {0, 0}, 1000) == 100
    assert Crowd.wait(crowd, {54, 46}, 1000) == 1000
    # Not placed yet: it does not know where it stands.
    assert Crowd.wait(crowd, nil, 1000) == 1000
    # Stopped at the crowd's edge: it presses at the run's pace.
    assert Crowd.wait(crowd, {0, 0}, 1000, true) == 1000
    assert Crowd.wait(crowd, {0, 0}, 1000, false) == 100
  end

  test "every player reaches the point's radius, walking as told on open ground" do
    check(
      forall(
        {:proper_types.integer(0, 199), :proper_types.integer(0, 199),
         :proper_types.integer(0, 199), :proper_types.integer(0, 199),
         :proper_types.elements([:press, :mill]), :proper_types.integer(1, 10),
         :proper_types.list(:proper_types.non_neg_integer())},
        fn {x, y, ax, ay, mode, radius, rolls} ->
          crowd = Crowd.new(mode, {ax, ay}, radius: radius)
          distance = max(abs(x - ax), abs(y - ay))
          # A step toward it never takes a player farther, and every other
          # one here goes straight at it.
          rolls = Stream.cycle(Enum.flat_map([6 | rolls], &[&1, 0]))

          end_cell =
            rolls
            |> Enum.take(4 * distance + 8)
            |> Enum.reduce({x, y}, fn roll, cell ->
              if Crowd.within?(crowd, cell),
                do: cell,
                else: Grid.step(cell, Crowd.direction(crowd, cell, roll))
            end)

          Crowd.within?(crowd, end_cell)
        end
      ),
      numtests: 300
    )
  end

  test "milling players go every way; pressing ones head in" do
    crowd = Crowd.new(:mill, {10, 10}, radius: 3)
    assert Enum.map(0..7, &Crowd.direction(crowd, {11, 9}, &1)) == Grid.directions()

    press = Crowd.new(:press, {10, 10}, radius: 3)

    assert Enum.frequencies(Enum.map(0..7, &Crowd.direction(press, {11, 9}, &1))) ==
             %{sw: 6, s: 1, w: 1}
  end
end
