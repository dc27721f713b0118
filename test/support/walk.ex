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

  alias Grove.{Protocol, WsConn}
  alias Grove.World.Grid

  @doc """
  A player joined over a connection of its own to the gateway at `port`,
  with a viewport of `view_radius`, and walked to `cell` by its moves:
  its id and the connection.
  """
  def player_at(port, encoding, cell, view_radius) do
    conn = WsConn.connect(port, encoding)
    WsConn.push(conn, %{type: :join, protocol: Protocol.version(), view_radius: view_radius})
    {welcome, conn} = WsConn.expect(conn, :welcome)
    {welcome.id, walk(conn, {welcome.x, welcome.y}, cell, &move/2)}
  end

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

  # One move of a walk over a connection: the cell reached, or nil when
  # the move was refused.
  defp move(conn, dir) do
    seq = System.unique_integer([:positive])
    WsConn.push(conn, %{type: :move, seq: seq, dir: dir})
    {outcome, conn} = WsConn.expect(conn, :outcome, where: &(&1.seq == seq))
    {if(outcome.result == :ok, do: {outcome.x, outcome.y}), conn}
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
