defmodule Grove.HugeWorldTest do
  @moduledoc """
  A whole instance of a world of a million cells a side (400 million zones,
  on demand): what it reports about its zones reads the zones it knows,
  never one entry per zone of the world.
  """
  use ExUnit.Case, async: false

  @moduletag :capture_log

  setup do
    instance = :"huge_test_#{System.unique_integer([:positive])}"

    start_supervised!(
      {Grove,
       name: instance,
       gateway: false,
       store: false,
       status_interval: false,
       world: [
         width: 1_000_000,
         height: 1_000_000,
         zones: :on_demand,
         life: false,
         game: nil,
         tick: :manual,
         terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]
       ],
       actors: [count: 0]}
    )

    %{instance: instance}
  end

  test "its summary counts its zones awake, with no picture zone by zone", %{instance: instance} do
    world = Grove.world(instance)
    {:ok, _id, _} = Grove.World.join(world, at: {123_456, 654_321}, updates: :none)

    summary = Grove.summary(instance)
    assert summary.zone_count == 400_000_000
    assert summary.placement == [] and summary.zone_moves_per_s == []
    assert [%{zones: 1, self: true}] = summary.members
    assert Grove.World.ready?(world)
  end
end
