defmodule Grove.Gateway.SessionReadsTest do
  @moduledoc """
  A session reads a zone's feed only when the zone's number moved since
  it last read it, or when the tiles it holds of it changed since: the
  feed's reads (`Feed.since_at/5`) are traced in the session's process,
  none on a zone unchanged; a tile's snapshot older than what the zone
  published since is read on from that snapshot, though the zone's
  number has not moved; and a zone whose number is kept nowhere is not
  remembered.
  """
  use ExUnit.Case, async: true

  import Grove.WorldCase, only: [with_world: 2]

  alias Grove.Gateway.Session
  alias Grove.{Protocol, World}
  alias Grove.World.{Feed, Grid, Zone}

  test "a zone whose number has not moved gives nothing; a tile's snapshot older than its feed is read on from it" do
    with_world([width: 20, height: 10, zone_size: 10, view_tile: 5], fn name ->
      session = name |> joined() |> quiet(name)

      # Something in view comes: the zone's next delta, read.
      {:ok, _actor, _cell} = World.join(name, at: {3, 3}, updates: :none)
      :ok = World.tick(name)
      :ok = Zone.recovered(World.fetch!(name), 0)
      {{session, frames}, reads} = feed_reads(fn -> Session.views(session) end)
      assert IO.iodata_length(frames) > 0
      assert reads > 0

      # Nothing since: nothing, and the feed is not read.
      assert {{session, []}, 0} = feed_reads(fn -> Session.views(session) end)

      # A snapshot of the actor's tile from before that delta (one asked
      # for earlier, answered late): the delta goes out again, read on
      # from the snapshot's number.
      tile = Grid.tile_of(World.grid(name), 3, 3)

      {session, [{:send, _snapshot}]} =
        Session.handle_info(session, {:grove_view, 0, :tiles, 0, [{tile, "snapshot"}]})

      {session, frames} = Session.views(session)
      assert IO.iodata_length(frames) > 0
      assert {_session, []} = Session.views(session)
    end)
  end

  test "a zone watched whose number is kept nowhere (asleep, its close on the way) is not remembered" do
    world = [width: 20, height: 10, zone_size: 10, view_tile: 5]

    with_world(world ++ [zones: :on_demand, zone_idle: :manual], fn name ->
      session = name |> joined() |> quiet(name)
      assert Map.has_key?(session.reads, 0)

      # The east zone never woke: it has no row, and no number kept.
      tile = Grid.tile_of(World.grid(name), 12, 2)
      session = %{session | areas: Map.put(session.areas, 1, %{tile => 0})}
      assert {session, []} = Session.views(session)
      refute Map.has_key?(session.reads, 1)
      assert Map.has_key?(session.reads, 0)
    end)
  end

  # A session joined at {2, 2} (version 5, binary).
  defp joined(name) do
    config = %{Grove.SessionConfig.loose() | spawn: {2, 2, 3, 3}}
    session = Session.new(name, :binary, config, 0)
    join = Protocol.encode(%{type: :join, protocol: 5, view_radius: 2}, :binary)
    {session, [{:send, _welcome}]} = Session.handle_frame(session, :binary, bin(join), 0)
    assert session.cell == {2, 2}
    session
  end

  # What `fun` gives, and how many times it read the feed
  # (`Feed.since_at/5`, traced) as it ran, in a process of its own (a
  # process is not its own tracer).
  defp feed_reads(fun) do
    since_at = {Feed, :since_at, 5}
    test = self()
    {pid, ref} = spawn_monitor(fn -> receive(do: (:go -> send(test, {:ran, fun.()}))) end)
    1 = :erlang.trace_pattern(since_at, true, [:local])
    1 = :erlang.trace(pid, true, [:call])

    try do
      send(pid, :go)
      assert_receive {:ran, result}
      assert_receive {:DOWN, ^ref, :process, ^pid, :normal}
      delivered = :erlang.trace_delivered(pid)
      assert_receive {:trace_delivered, ^pid, ^delivered}
      {result, count_reads(pid, 0)}
    after
      :erlang.trace_pattern(since_at, false, [:local])
    end
  end

  defp count_reads(pid, count) do
    receive do
      {:trace, ^pid, :call, {Feed, :since_at, _args}} -> count_reads(pid, count + 1)
    after
      0 -> count
    end
  end

  # The session with every view message its zone sent it taken, and read.
  defp quiet(session, name) do
    :ok = Zone.recovered(World.fetch!(name), 0)

    receive do
      {:grove_view, _, _, _, _} = message -> quiet(take(session, message), name)
      {:grove_view, _, _, _} = message -> quiet(take(session, message), name)
      {:grove_view, _, _} = message -> quiet(take(session, message), name)
    after
      0 ->
        {session, _frames} = Session.views(session)
        session
    end
  end

  defp take(session, message) do
    {session, _actions} = Session.handle_info(session, message)
    session
  end

  defp bin(iodata), do: IO.iodata_to_binary(iodata)
end
