defmodule Grove.World.MinimapTest do
  @moduledoc "A world too large to picture whole is told as its populated places: its busiest zones."
  use Grove.WorldCase, async: true

  alias Grove.World
  alias Grove.World.Minimap

  describe "places/3" do
    test "the busiest zones first, by column and row, zones without entities left out" do
      counts = [{0, 2}, {7, 0}, {5, 9}, {12, 2}, {3, 4}]

      assert Minimap.places(counts, 5, 10) == [{0, 1, 9}, {3, 0, 4}, {0, 0, 2}, {2, 2, 2}]
    end

    test "no more than the limit, and none from nothing" do
      counts = for index <- 0..99, do: {index, index}

      assert Minimap.places(counts, 10, 3) == [{9, 9, 99}, {8, 9, 98}, {7, 9, 97}]
      assert Minimap.places([], 10, 3) == []
      assert Minimap.places(counts, 10, 0) == []
    end

    test "a zone counted on two nodes at once keeps its larger count, once" do
      assert Minimap.places([{4, 1}, {4, 3}, {2, 2}], 4, 10) == [{0, 1, 3}, {2, 0, 2}]
    end
  end

  describe "the places of a world of zones on demand" do
    @describetag world: [
                   width: 400,
                   height: 400,
                   zone_size: 10,
                   zones: :on_demand,
                   zone_idle: :manual
                 ]

    test "are the zones that hold entities, read sparsely, busiest first", %{world: world} do
      assert World.total_places(world, 10, 1000) == []

      for cell <- [{15, 15}, {16, 15}, {17, 15}, {393, 205}],
          do: {:ok, _id, _} = World.join(world, at: cell, updates: :none)

      assert World.total_places(world, 10, 1000) == [{1, 1, 3}, {39, 20, 1}]
      assert World.total_places(world, 1, 1000) == [{1, 1, 3}]
    end
  end
end
