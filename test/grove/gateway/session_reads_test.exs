defmodule Grove.Gateway.SessionReadsTest do
  @moduledoc """
  A session reads a zone's feed only when the zone's number moved since
  it last read it, or when the tiles it holds of it changed since: a
  tile's snapshot older than what the zone published since is read on
  from that snapshot, though the zone's number has not moved.
  """
  use ExUnit.Case, async: true

  import Grove.WorldCase, only: [with_world: 2]

  alias Grove.Gateway.Session
  alias Grove.{Protocol, World}
  alias Grove.World.{Grid, Zone}

  test "a zone whose number has not moved gives nothing; a tile's snapshot older than its feed is read on from it" do
    with_world([width: 20, height: 10, zone_size: 10, view_tile: 5], fn name ->
      config = %{Grove.SessionConfig.loose() | spawn: {2, 2, 3, 3}}
      session = Session.new(name, :binary, config, 0)
      join = Protocol.encode(%{type: :join, protocol: 5, view_radius: 2}, :binary)
      {session, [{:send, _welcome}]} = Session.handle_frame(session, :binary, bin(join), 0)
      assert session.cell == {2, 2}
      session = quiet(name, session)

      # Something in view comes: the zone's next delta, read.
      {:ok, _actor, _cell} = World.join(name, at: {3, 3}, updates: :none)
      :ok = World.tick(name)
      :ok = Zone.recovered(World.fetch!(name), 0)
      {session, frames} = Session.views(session)
      assert IO.iodata_length(frames) > 0

      # Nothing since: nothing.
      assert {session, []} = Session.views(session)

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

  # The session with every view message its zone sent it taken, and read.
  defp quiet(name, session) do
    :ok = Zone.recovered(World.fetch!(name), 0)

    receive do
      {:grove_view, _, _, _, _} = message -> quiet(name, take(session, message))
      {:grove_view, _, _, _} = message -> quiet(name, take(session, message))
      {:grove_view, _, _} = message -> quiet(name, take(session, message))
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
