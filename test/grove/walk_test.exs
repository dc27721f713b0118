defmodule Grove.WalkTest do
  @moduledoc """
  The tests' walk to a cell, over a make-believe world of 40 x 10 cells
  where some cells are held: it reaches its cell around whoever stands
  in the way, along the world's edge too.
  """
  use ExUnit.Case, async: true

  alias Grove.Walk

  @steps %{
    n: {0, -1},
    ne: {1, -1},
    e: {1, 0},
    se: {1, 1},
    s: {0, 1},
    sw: {-1, 1},
    w: {-1, 0},
    nw: {-1, -1}
  }

  # The "connection" is the cell the player stands on.
  defp mover(held) do
    fn {x, y}, dir ->
      {dx, dy} = Map.fetch!(@steps, dir)
      next = {x + dx, y + dy}
      {nx, ny} = next

      if nx in 0..39 and ny in 0..9 and next not in held,
        do: {next, next},
        else: {nil, {x, y}}
    end
  end

  test "a player standing in the column is passed beside, not backed away from" do
    assert Walk.walk({15, 0}, {15, 0}, {15, 7}, mover([{15, 2}])) == {15, 7}
  end

  test "a row of players across the way is walked along and around" do
    row = for x <- 22..38, do: {x, 5}
    assert Walk.walk({30, 0}, {30, 0}, {30, 9}, mover(row)) == {30, 9}
  end

  test "along the world's edge, around a player on it" do
    assert Walk.walk({0, 0}, {0, 0}, {39, 0}, mover([{20, 0}, {20, 1}])) == {39, 0}
  end

  test "a cell nobody can reach is said so" do
    ring = for dx <- -1..1, dy <- -1..1, {dx, dy} != {0, 0}, do: {20 + dx, 5 + dy}

    assert_raise ExUnit.AssertionError, ~r/no way found/, fn ->
      Walk.walk({0, 0}, {0, 0}, {20, 5}, mover(ring))
    end
  end
end
