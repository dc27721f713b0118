defmodule Grove.Load.WalkTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.Load.Walk
  alias Grove.World.Grid

  doctest Grove.Load.Walk

  # Walks `steps` steps from `cell` on a world of `size` whose `blocked`
  # cells (a set) refuse a step, as the world would: a step off the world
  # or onto a blocked cell leaves the player where it stood. Returns the
  # cells it stood on, first to last, and the directions it asked for.
  defp walk(walk, cell, size, blocked, steps) do
    {cells, dirs, _walk, _cell} =
      Enum.reduce(1..steps//1, {[cell], [], walk, cell}, fn _, {cells, dirs, walk, cell} ->
        {dir, walk} = Walk.next(walk, cell, size)
        {x, y} = to = Grid.step(cell, dir)
        {w, h} = size
        free? = x >= 0 and y >= 0 and x < w and y < h and not MapSet.member?(blocked, to)
        cell = if free?, do: to, else: cell
        {[cell | cells], [dir | dirs], walk, cell}
      end)

    {Enum.reverse(cells), Enum.reverse(dirs)}
  end

  test "on open ground away from the edges it goes straight along its heading" do
    for dir <- Grid.directions() do
      {cells, dirs} = walk(Walk.new(dir), {500, 500}, {1000, 1000}, MapSet.new(), 100)
      assert Enum.uniq(dirs) == [dir]
      assert List.last(cells) == Enum.reduce(1..100, {500, 500}, fn _, c -> Grid.step(c, dir) end)
    end
  end

  test "at an edge the heading's part toward it is reversed, and it keeps going" do
    {_cells, dirs} = walk(Walk.new(:e), {97, 10}, {100, 50}, MapSet.new(), 6)
    assert dirs == [:e, :e, :w, :w, :w, :w]

    # Into a corner: both parts reversed.
    {cells, dirs} = walk(Walk.new(:se), {98, 48}, {100, 50}, MapSet.new(), 3)
    assert dirs == [:se, :nw, :nw]
    assert List.last(cells) == {97, 47}
  end

  test "a wall across its way turns it along the wall, and it walks on straight that way" do
    # A wall of 7 cells at x = 20, from y = 10 to 16; the walker heads east at y = 12.
    wall = MapSet.new(for y <- 10..16, do: {20, y})
    {cells, dirs} = walk(Walk.new(:e), {15, 12}, {100, 100}, wall, 40)

    refute Enum.any?(cells, &MapSet.member?(wall, &1))
    # East to the wall, three refusals (east, south-east, north-east), then south for good.
    assert Enum.take(dirs, 8) == [:e, :e, :e, :e, :e, :se, :ne, :s]
    assert Enum.drop(dirs, 8) == List.duplicate(:s, 32)
    assert List.last(cells) == {19, 12 + 33}
    # Three refused of forty.
    refused = cells |> Enum.chunk_every(2, 1, :discard) |> Enum.count(fn [a, b] -> a == b end)
    assert refused == 3
  end

  test "every step is taken on open ground, whatever the world, the cell and the heading" do
    check(
      forall(
        {:proper_types.integer(2, 40), :proper_types.integer(2, 40), :proper_types.integer(0, 7),
         :proper_types.integer(0, 10_000), :proper_types.integer(1, 200)},
        fn {w, h, heading, at, steps} ->
          cell = {rem(at, w), rem(div(at, w), h)}
          {cells, _dirs} = walk(Walk.new(heading), cell, {w, h}, MapSet.new(), steps)
          # Nothing refuses it: it never stands on one cell twice in a row.
          cells |> Enum.chunk_every(2, 1, :discard) |> Enum.all?(fn [a, b] -> a != b end)
        end
      ),
      numtests: 300
    )
  end

  test "a player with a free cell next to it moves on, whatever blocks the rest" do
    check(
      forall(
        {:proper_types.integer(0, 7), :proper_types.list(:proper_types.integer(0, 7)),
         :proper_types.integer(0, 7), :proper_types.integer(0, 3)},
        fn {heading, blocked_dirs, free_dir, refused_before} ->
          cell = {10, 10}
          free = Grid.step(cell, Grove.Actor.direction(free_dir))

          blocked =
            blocked_dirs
            |> Enum.map(&Grid.step(cell, Grove.Actor.direction(&1)))
            |> MapSet.new()
            |> MapSet.delete(free)

          moves_within? = fn walk, tries ->
            {cells, _dirs} = walk(walk, cell, {30, 30}, blocked, tries)
            Enum.any?(cells, &(&1 != cell))
          end

          # Every direction is tried once in eight tries from its first
          # refusal; met here after some refusals already, within fifteen.
          moves_within?.(Walk.new(heading), 8) and
            moves_within?.(%{Walk.new(heading) | last: cell, refused: refused_before}, 15)
        end
      ),
      numtests: 300
    )
  end
end
