defmodule Grove.World.SeenTest do
  # Whether anyone watches where an entity stands: what herds read to rest
  # their actors where nobody does (`Grove.Actors`' `:unseen_every`).
  use Grove.WorldCase, async: true

  alias Grove.World

  test "an entity's zone is unseen until a viewer's viewport overlaps it, and again after", %{
    world: world
  } do
    {:ok, actor, _} = World.join(world, at: {35, 35})
    {:ok, far, _} = World.join(world, at: {5, 5})
    # The world is 40 x 40 in zones of 10: {35, 35} is in zone 15.
    zone = 15
    assert World.unseen_zone(world, actor) == zone

    {:ok, viewer, _} = World.join(world, at: {33, 33}, updates: :view, view_radius: 2)
    eventually(fn -> assert World.unseen_zone(world, actor) == nil end)
    assert {World.zone_index(world, actor), World.zone_watched?(world, zone)} == {zone, true}
    # A zone the viewport does not reach is not seen.
    assert World.unseen_zone(world, far) == 0

    :ok = World.leave(world, viewer)
    eventually(fn -> assert World.unseen_zone(world, actor) == zone end)
  end

  test "an entity the world does not know counts as seen", %{world: world} do
    assert World.unseen_zone(world, 987_654_321) == nil
    assert World.zone_index(world, 987_654_321) == nil
  end
end
