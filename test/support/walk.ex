defmodule Grove.Walk do
  @moduledoc """
  Walks a test's player to a cell over a real connection, around whoever
  stands in the way: each step tries first the direction whose cell seems
  nearest the target, and learns as it goes how far a cell it stood on
  really is, so a player standing in its column is passed beside and a
  wall walked along, rather than walked back and forth under. `move`
  sends one move and answers `{cell_or_nil, conn}`: the cell it reached,
  or nil when the move was refused.
  """

  import ExUnit.Assertions, only: [flunk: 1]

  alias Grove.World.Grid

  def walk(conn, from, target, move, steps \\ 200),
    do: walk(conn, from, target, move, steps, %{})

  defp walk(conn, cell, cell, _move, _steps, _learnt), do: conn

  defp walk(_conn, cell, target, _move, 0, _learnt),
    do: flunk("no way found from #{inspect(cell)} to #{inspect(target)}")

  # Learning real-time search: each cell's estimate of its distance to the
  # target starts as the straight count of steps and grows as the walk
  # learns that way is held, so it never walks back and forth for ever.
  defp walk(conn, cell, target, move, steps, learnt) do
    tries = Enum.sort_by(Grid.directions(), &(1 + cost(learnt, Grid.step(cell, &1), target)))
    {reached, conn} = step(conn, cell, tries, move)
    learnt = Map.put(learnt, cell, 1 + cost(learnt, reached, target))
    walk(conn, reached, target, move, steps - 1, learnt)
  end

  defp cost(learnt, {x, y} = cell, {tx, ty}),
    do: Map.get_lazy(learnt, cell, fn -> max(abs(tx - x), abs(ty - y)) end)

  defp step(_conn, cell, [], _move), do: flunk("stuck at #{inspect(cell)}")

  defp step(conn, cell, [direction | rest], move) do
    case move.(conn, direction) do
      {nil, conn} -> step(conn, cell, rest, move)
      {next, conn} -> {next, conn}
    end
  end
end
