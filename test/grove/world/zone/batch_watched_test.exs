defmodule Grove.World.Zone.BatchWatchedTest do
  @moduledoc """
  A batch of moves (`World.move_many/2`) in a zone somebody watches: its
  steps reach the viewers' deltas, and an entity that watches, moved in a
  batch, has its view follow it. A zone nobody watches takes a batch's
  steps apart from its state (`State.plain?/1`); these are the cases that
  must not.
  """
  use Grove.WorldCase, async: true

  alias Grove.World
  alias Grove.World.{Grid, View}

  test "a batch's steps in a watched zone are in its viewers' delta", %{world: world} do
    # The entity's radius keeps it to zone 0; the view read here holds
    # all of that zone.
    {:ok, _me, _} = World.join(world, at: {5, 5}, updates: :view, view_radius: 1)
    view = receive_view(View.new({5, 5}, 9), 1)
    {_snapshot, view} = View.take_changes(view)
    {:ok, a, _} = World.join(world, at: {2, 2})
    {:ok, b, _} = World.join(world, at: {3, 7})
    {:ok, c, _} = World.join(world, at: {4, 7})

    # Zone 0 (x and y 0..9) alone, one batch: `c` steps onto the cell `b`
    # left.
    :ok = World.move_many(world, [{a, :e, 1}, {b, :s, 2}, {c, :w, 3}])
    assert_receive {:grove_moves, outcomes}

    assert Enum.sort(outcomes) ==
             Enum.sort([
               {a, 1, {:ok, {3, 2}}},
               {b, 2, {:ok, {3, 8}}},
               {c, 3, {:ok, {3, 7}}}
             ])

    tick(world)
    view = View.catch_up(view, world)
    {%{shown: shown, gone: []}, _view} = View.take_changes(view)
    assert Enum.sort(shown) == Enum.sort([{a, 3, 2, 0}, {b, 3, 8, 0}, {c, 3, 7, 0}])
  end

  test "an entity that watches, moved in a batch, has its view follow it", %{world: world} do
    # Radius 1 around {8, 5} stays in zone 0; around {9, 5} it reaches zone 1.
    {:ok, me, _} = World.join(world, at: {8, 5}, updates: :view, view_radius: 1)
    view = receive_view(View.new({8, 5}, 9), 1)
    {_snapshot, view} = View.take_changes(view)
    {:ok, other, _} = World.join(world, at: {11, 5})

    :ok = World.move_many(world, [{me, :e, 1}])
    assert_receive {:grove_moves, [{^me, 1, {:ok, {9, 5}}}]}

    assert_receive {:grove_view, 1, :snapshot, _seq, _entries} = snapshot
    view = View.apply_message(view, snapshot)
    tick(world)
    view = View.catch_up(view, world)
    {%{shown: shown}, _view} = View.take_changes(view)
    assert {me, 9, 5, 0} in shown
    assert {other, 11, 5, 0} in shown
  end

  defp receive_view(view, 0), do: view

  defp receive_view(view, zones) do
    assert_receive {:grove_view, _zone, :snapshot, _seq, _entries} = message
    receive_view(View.apply_message(view, message), zones - 1)
  end

  # Ticks every zone and waits until each has handled it.
  defp tick(world) do
    :ok = World.tick(world)
    grid = World.grid(world)
    for zone <- 0..(Grid.zone_count(grid) - 1), do: :sys.get_state(World.zone_pid(world, zone))
    :ok
  end
end
