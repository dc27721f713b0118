defmodule Grove.Gateway.SessionZoneTest do
  @moduledoc """
  A player's session keeps the process of its entity's zone from move to
  move in a world of zones on demand, where looking the zone up costs a
  registry's read and its row's: every move still gets its outcome from
  the zone that holds the entity, after that zone died, after the entity
  crossed into another, and after the zone kept fell asleep; and a zone
  kept whose mailbox is past its limit still refuses the move as busy.
  """
  use ExUnit.Case, async: true

  import Grove.WorldCase, only: [with_world: 2]

  alias Grove.Gateway.Session
  alias Grove.{Protocol, World}
  alias Grove.World.{Grid, Slots}

  # Two zones side by side: west (x < 10) and east.
  @world [width: 20, height: 10, zone_size: 10, zones: :on_demand, zone_idle: :manual]

  test "the zone is kept from move to move: the next move goes to it, and is answered" do
    with_player({8, 5}, fn name, session ->
      {session, {:ok, {7, 5}}} = move(session, 1, :w)
      assert {0, pid, _slot} = session.zone
      assert pid == World.zone_pid(name, 0)

      {session, {:ok, {6, 5}}} = move(session, 2, :w)
      assert {0, ^pid, _slot} = session.zone
    end)
  end

  test "a zone kept that died: the move goes to its next run, and is answered" do
    with_player({8, 5}, fn name, session ->
      {session, {:ok, {7, 5}}} = move(session, 1, :w)
      {0, pid, _slot} = session.zone
      ref = Process.monitor(pid)
      Process.exit(pid, :kill)
      assert_receive {:DOWN, ^ref, :process, ^pid, :killed}

      {session, {:ok, {6, 5}}} = move(session, 2, :w)
      assert {0, again, _slot} = session.zone
      assert again != pid
      assert again == World.zone_pid(name, 0)
    end)
  end

  test "an entity that crossed into another zone: its moves go to that zone, and are answered" do
    with_player({8, 5}, fn name, session ->
      {session, {:ok, {9, 5}}} = move(session, 1, :e)
      {session, {:ok, {10, 5}}} = move(session, 2, :e)
      {session, {:ok, {11, 5}}} = move(session, 3, :e)
      assert {1, pid, _slot} = session.zone
      assert pid == World.zone_pid(name, 1)

      # And back, where the zone first kept still runs.
      {session, {:ok, {10, 5}}} = move(session, 4, :w)
      {session, {:ok, {9, 5}}} = move(session, 5, :w)
      {session, {:ok, {8, 5}}} = move(session, 6, :w)
      assert {0, _pid, _slot} = session.zone
      assert World.audit(name) == :ok
    end)
  end

  test "a zone kept that fell asleep: the move reaches its next run, while the process lingers and after it stopped" do
    # An actor's entity, which lets its zone sleep (a player's keeps it
    # awake), moved as a session moves its player's.
    # It lingers until told its time is up: the test ends it.
    with_world(@world ++ [handoff_timeout: 60_000], fn name ->
      {:ok, id, {8, 5}} = World.join(name, at: {8, 5}, updates: :none)
      {pid, kept} = move_by(name, id, :w, :a, nil, {:ok, {7, 5}})
      assert {0, ^pid, _slot} = kept

      # Asleep, its process lingering: the move it is sent is passed on.
      assert World.sleep_idle(name) == [0]
      assert Process.alive?(pid)
      {_pid, kept} = move_by(name, id, :w, :b, kept, {:ok, {6, 5}})

      # Stopped: the move goes to the run it woke.
      ref = Process.monitor(pid)
      send(pid, :linger_over)
      assert_receive {:DOWN, ^ref, :process, ^pid, :normal}
      {woken, kept} = move_by(name, id, :w, :c, kept, {:ok, {5, 5}})
      assert woken != pid
      assert {0, ^woken, _slot} = kept
      assert World.audit(name) == :ok
    end)
  end

  test "a zone kept whose mailbox is past its limit: the move is refused as busy, and goes once it is not" do
    with_player({8, 5}, fn name, session ->
      {session, {:ok, {7, 5}}} = move(session, 1, :w)
      assert {0, _pid, _slot} = session.zone

      world = World.fetch!(name)
      :ok = Slots.put_load(world, 0, world.mailbox_limit + 1)
      {session, {:rejected, :busy}} = move(session, 2, :w)

      :ok = Slots.put_load(world, 0, 0)
      {_session, {:ok, {6, 5}}} = move(session, 3, :w)
    end)
  end

  # A session joined at `cell` (version 7, binary) in a world of two zones.
  defp with_player(cell, fun) do
    with_world(@world, fn name ->
      {x, y} = cell
      config = %{Grove.SessionConfig.loose() | spawn: {x, y, x + 1, y + 1}}
      session = Session.new(name, :binary, config, 0)
      join = Protocol.encode(%{type: :join, protocol: 7, view_radius: 2}, :binary)
      {session, [{:send, _welcome}]} = Session.handle_frame(session, :binary, bin(join), 0)
      assert session.cell == cell
      assert Grid.zone_of(World.grid(name), x, y) == 0
      fun.(name, session)
    end)
  end

  # A move sent through the session and its outcome taken by it: the
  # session, and the outcome the zone gave.
  defp move(session, seq, dir) do
    frame = bin(Protocol.encode(%{type: :move, seq: seq, dir: dir}, :binary))
    {session, []} = Session.handle_frame(session, :binary, frame, seq * 1000)
    id = session.id
    assert_receive {:grove_move, ^id, ^seq, outcome} = message, 2000
    {session, [{:send, _frame}]} = Session.handle_info(session, message)
    {session, outcome}
  end

  defp move_by(name, id, dir, tag, kept, outcome) do
    {pid, kept, :acc} = World.move_by(name, id, dir, tag, :acc, & &1, kept)
    assert_receive {:grove_move, ^id, ^tag, ^outcome}, 2000
    {pid, kept}
  end

  defp bin(iodata), do: IO.iodata_to_binary(iodata)
end
