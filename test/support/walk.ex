defmodule Grove.Walk do
  @moduledoc """
  Walks a test's player to a cell over a real connection: straight on where
  it can, else around whoever stands in the way (sideways too, along a
  world's edge). `move` sends one move and answers `{cell_or_nil, conn}`:
  the cell it reached, or nil when the move was refused.
  """

  import ExUnit.Assertions, only: [flunk: 1]

  def walk(conn, from, target, move, steps \\ 100)
  def walk(conn, cell, cell, _move, _steps), do: conn
  def walk(_conn, cell, _target, _move, 0), do: flunk("no way found from #{inspect(cell)}")

  def walk(conn, {x, y} = cell, {tx, ty} = target, move, steps) do
    {dx, dy} = {sign(tx - x), sign(ty - y)}

    tries =
      [{dx, dy}, {dx, 0}, {0, dy}, {dx, 1}, {dx, -1}, {1, dy}, {-1, dy}, {1, 0}, {-1, 0}]
      |> Enum.reject(&(&1 == {0, 0}))
      |> Enum.uniq()

    {next, conn} = step(conn, cell, tries, move)
    walk(conn, next, target, move, steps - 1)
  end

  defp step(_conn, cell, [], _move), do: flunk("stuck at #{inspect(cell)}")

  defp step(conn, cell, [{dx, dy} | rest], move) do
    case move.(conn, direction(dx, dy)) do
      {nil, conn} -> step(conn, cell, rest, move)
      {next, conn} -> {next, conn}
    end
  end

  defp direction(0, -1), do: :n
  defp direction(1, -1), do: :ne
  defp direction(1, 0), do: :e
  defp direction(1, 1), do: :se
  defp direction(0, 1), do: :s
  defp direction(-1, 1), do: :sw
  defp direction(-1, 0), do: :w
  defp direction(-1, -1), do: :nw

  defp sign(0), do: 0
  defp sign(n) when n > 0, do: 1
  defp sign(_), do: -1
end
