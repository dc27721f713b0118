defmodule Grove.Gateway.RestoreTest do
  # Yaws runs one server per node, so these tests run alone.
  use ExUnit.Case, async: false

  alias Grove.{Protocol, World}
  alias Grove.World.{Directory, Entity}

  import Grove.WorldCase, only: [eventually: 1]
  import Grove.WsConn, only: [connect: 1, push: 2, expect: 2]

  @moduletag :gateway

  setup do
    Grove.TestInstance.start!("restore",
      world: [
        width: 40,
        height: 40,
        zone_size: 40,
        tick: 50,
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]
      ],
      actors: [count: 0]
    )
  end

  test "a player told its entity was lost is placed again under its id, its move in flight answered, once",
       %{port: port, world: world} do
    conn = connect(port)

    push(conn, %{type: :join, protocol: Protocol.version(), view_radius: 2, name: "", token: ""})

    {%{id: id, x: x, y: y}, conn} = expect(conn, :welcome)

    # The move waits in the zone's mailbox while the session hears its
    # entity was lost (as when the zone it moved into went with a node).
    zone = World.zone_pid(world, 0)
    :ok = :sys.suspend(zone)
    push(conn, %{type: :move, seq: 1, dir: if(x > 0, do: :w, else: :e)})
    # Its own timers may queue beside it: the move is looked for by its id.
    eventually(fn ->
      {:messages, messages} = Process.info(zone, :messages)
      assert Enum.any?(messages, &match?({:"$gen_cast", {:move, ^id, _, _, _, _}}, &1))
    end)

    send(owner(world, id), {:grove_lost, id})
    :ok = :sys.resume(zone)

    # The player is welcomed again and the move settled, `interrupted`:
    # the zone still held the entity (and took the move first), so it
    # stays where the zone has it, once.
    {welcome, conn} = expect(conn, [:welcome, :outcome])
    assert welcome.type == :welcome
    {outcome, conn} = expect(conn, :outcome)
    assert %{seq: 1, result: :interrupted} = outcome
    assert welcome.id == id
    assert {welcome.x, welcome.y} == World.position(world, id)
    assert {outcome.x, outcome.y} == {welcome.x, welcome.y}
    assert abs(welcome.x - x) + abs(welcome.y - y) <= 1
    assert World.entity_count(world) == 1

    # The zone's own answer to the move, later, is not a second outcome.
    push(conn, %{type: :ping, t: 7})
    {pong, _conn} = expect(conn, [:pong, :outcome])
    assert pong.type == :pong
  end

  test "an entity placed again under its id where its zone still holds it is not placed twice",
       %{world: world} do
    {:ok, id, cell} = World.join(world, at: {3, 3})
    assert {:ok, ^id, ^cell} = World.join(world, id: id, at: {10, 10})
    assert World.entity_count(world) == 1

    # Another client cannot claim it.
    task = Task.async(fn -> World.join(world, id: id, at: {12, 12}) end)
    assert {:error, :occupied} = Task.await(task)
    assert World.entity_count(world) == 1
  end

  defp owner(world, id) do
    w = World.fetch!(world)
    [row] = :ets.lookup(elem(w.tables, Directory.lookup(w.name, id)), id)
    Entity.from_row(row).owner
  end
end
