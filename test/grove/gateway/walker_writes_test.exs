defmodule Grove.Gateway.WalkerWritesTest do
  # A gateway of its own: Yaws allows one per node, so not async.
  use ExUnit.Case, async: false

  import Grove.WorldCase, only: [eventually: 2]
  import Grove.WsConn, only: [connect: 1, push: 2, expect: 2]

  alias Grove.{Gateway, World}
  alias Grove.World.Grid

  @moduletag :gateway

  # Views of a player who does not move, and pings, far apart: every write
  # while the test walks answers something.
  setup do
    Grove.TestInstance.start!("walker",
      world: [
        width: 60,
        height: 60,
        zone_size: 20,
        tick: 50,
        rules: [move_rate: nil],
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]
      ],
      actors: [count: 0],
      gateway: [
        port: 0,
        view_ms: 60_000,
        view_ms_max: 60_000,
        keepalive: 600_000,
        move_rate: 1000,
        move_burst: 1000
      ]
    )
  end

  test "a walker's snapshots and closings ride with its outcomes: one write a move, no tile lost",
       %{port: port, world: world} do
    {conn, welcome, grid, _start, shown} = joined(port, world)

    # Across the world's middle: through a zone's border, out of one
    # zone's tiles and into another's.
    direction = if welcome.x < 30, do: :e, else: :w
    before = Gateway.stats().writes_json

    {cell, opened, closed, conn} =
      Enum.reduce(1..24, {nil, shown, MapSet.new(), conn}, fn seq,
                                                              {_cell, opened, closed, conn} ->
        push(conn, %{type: :move, seq: seq, dir: direction})
        {outcome, conn, opened, closed} = outcome(conn, opened, closed)
        assert outcome.result == :ok
        {{outcome.x, outcome.y}, opened, closed, conn}
      end)

    # One write an outcome: none for a snapshot or a closing alone.
    assert Gateway.stats().writes_json - before == 24
    assert MapSet.size(closed) > 0

    # Every tile in view at the end is shown, the last steps' with the
    # answer to anything (here a ping).
    wanted = MapSet.new(Grid.view_tiles(grid, cell, 8))
    push(conn, %{type: :ping, t: 1})
    {_shown, _conn} = snapshots(conn, MapSet.difference(wanted, opened), opened)
  end

  # The socket behind (where outcomes go out and held views wait), a zone
  # closed while the player moved, and back in view: were the new
  # snapshot written at once, the closing held before it would follow it
  # and undo it. Here a closing that writes nothing stands for the held one.
  test "a snapshot that comes while a closing is held waits behind it, then goes with the next write",
       %{port: port, world: world} do
    {conn, _welcome, grid, start, _shown} = joined(port, world)
    zones = start |> Enum.map(&Grid.tile_zone(grid, &1)) |> Enum.uniq()
    [connection] = Gateway.sessions()

    :sys.replace_state(connection, &%{&1 | closings: [[] | ""]})
    push(conn, %{type: :resync})

    # Every zone's snapshots held, though the player does not move.
    eventually(fn -> assert length(:sys.get_state(connection).held) == length(zones) end, 1000)

    push(conn, %{type: :ping, t: 1})
    {_shown, _conn} = snapshots(conn, MapSet.new(start), MapSet.new())
    state = :sys.get_state(connection)
    assert {state.held, state.closings} == {[], []}
  end

  # A player joined, with every tile of its first view shown.
  defp joined(port, world) do
    conn = connect(port)
    push(conn, %{type: :join, protocol: 3, view_radius: 8, name: "", token: ""})
    {welcome, conn} = expect(conn, :welcome)
    grid = World.grid(world)
    start = Grid.view_tiles(grid, {welcome.x, welcome.y}, 8)
    {shown, conn} = snapshots(conn, MapSet.new(start), MapSet.new())
    {conn, welcome, grid, start, shown}
  end

  # Reads until the outcome, noting the snapshots and closings before it.
  defp outcome(conn, opened, closed) do
    case expect(conn, [:outcome, :area, :area_closed]) do
      {%{type: :outcome} = outcome, conn} ->
        {outcome, conn, opened, closed}

      {%{type: :area, full: true, area: tile}, conn} ->
        outcome(conn, MapSet.put(opened, tile), MapSet.delete(closed, tile))

      {%{type: :area_closed, area: tile}, conn} ->
        outcome(conn, MapSet.delete(opened, tile), MapSet.put(closed, tile))

      {_delta, conn} ->
        outcome(conn, opened, closed)
    end
  end

  # Reads until every tile of `wanted` came as a snapshot.
  defp snapshots(conn, wanted, shown) do
    if MapSet.size(wanted) == 0 do
      {shown, conn}
    else
      case expect(conn, [:area, :pong]) do
        {%{type: :area, full: true, area: tile}, conn} ->
          snapshots(conn, MapSet.delete(wanted, tile), MapSet.put(shown, tile))

        {_other, conn} ->
          snapshots(conn, wanted, shown)
      end
    end
  end
end
