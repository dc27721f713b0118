defmodule Grove.ClusterLifeTest do
  @moduledoc "Bacteria in a world of several nodes: zones beside each other on two nodes read each other's borders."
  use ExUnit.Case, async: false

  import Grove.ClusterCase
  import Grove.WorldCase, only: [eventually: 2]

  alias Grove.Cluster.Placement
  alias Grove.LifeReference
  alias Grove.World
  alias Grove.World.Grid
  alias Grove.World.Life.Rule

  @moduletag :cluster
  @moduletag :capture_log

  # Nodes meet over real sockets: allow a busy machine half a minute.
  @wait 3000
  @zones 16

  @tag timeout: 180_000
  test "a glider crosses a zone border into a zone another node runs and lives on there, as on one grid" do
    home = distribute!()
    {_peer, other} = start_peer!(home, "life1")
    nodes = Enum.sort([node(), other])
    owners = Placement.owners(@zones, nodes)
    grid = Grid.new(100, 100, 25)

    # A zone whose east neighbour another node runs.
    {west, east} =
      Enum.find_value(0..(@zones - 1), fn index ->
        east = index + 1

        if rem(east, 4) != 0 and elem(owners, index) != elem(owners, east),
          do: {index, east}
      end)

    cluster = [peers: nodes, connect_interval: 100]

    start_instances!(
      for node <- nodes,
          do:
            {node,
             small_instance(Grove.LifeT, cluster,
               life: [rule: "B3/S23", interval: :manual, soup: 0.0],
               terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]
             )}
    )

    world = Grove.world(Grove.LifeT)

    eventually(
      fn ->
        for n <- nodes,
            index <- [west, east],
            do: assert(zone_node(n, world, index) == elem(owners, index))
      end,
      @wait
    )

    # A player near the west zone's east border seeds a glider heading
    # south-east, across that border, with a few cells to go.
    {x0, y0, x1, _y1} = Grid.zone_bounds(grid, west)
    assert x1 - x0 == 25
    {:ok, id, {sx, sy} = seeder} = World.join(world, at: {x1 - 8, y0 + 4})
    :ok = World.seed(world, id, :glider, :se, :glider)
    assert_receive {:grove_seed, ^id, :glider, :ok}

    step_to(nodes, world, 1)
    start = live(nodes, world)
    assert MapSet.size(start) == 5
    assert Enum.all?(start, fn {x, y} -> Grid.zone_of(grid, x, y) == west end)

    # Nothing is born under the player, who stands behind the glider.
    expected = LifeReference.run(start, Rule.conway(), 100, 100, 40, MapSet.new([{sx, sy}]))

    for {cells, generation} <- Enum.with_index(expected, 1), generation > 1 do
      step_to(nodes, world, generation)
      assert live(nodes, world) == cells, "generation #{generation}"
    end

    # It crossed whole: five cells, all in the zone of the other node.
    final = List.last(expected)
    assert MapSet.size(final) == 5
    assert Enum.all?(final, fn {x, y} -> Grid.zone_of(grid, x, y) == east end)
    assert elem(owners, east) != elem(owners, west)
    assert :erpc.call(elem(owners, west), World, :position, [world, id]) == seeder
  end

  @tag timeout: 240_000
  test "zones handed to a node that joins carry their bacteria there, which go on as on one grid" do
    home = distribute!()
    {_peer, other} = start_peer!(home, "life2")
    nodes = Enum.sort([node(), other])
    # The node to come, named now: the cluster knows it from the start.
    third =
      :"#{peer_name("life3")}@#{node() |> Atom.to_string() |> String.split("@") |> List.last()}"

    all = Enum.sort([third | nodes])

    opts =
      small_instance(Grove.LifeT, [peers: all, connect_interval: 100],
        life: [rule: "B3/S23", interval: :manual, soup: 0.5],
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]
      )

    for node <- nodes, do: start_instance!(node, opts)
    world = Grove.world(Grove.LifeT)
    settled!(nodes, world)
    step_to(nodes, world, 0)
    start = live(nodes, world)
    assert MapSet.size(start) > 100
    expected = LifeReference.run(start, Rule.conway(), 100, 100, 8)

    for generation <- 1..3 do
      step_to(nodes, world, generation)
      assert live(nodes, world) == Enum.at(expected, generation), "generation \#{generation}"
    end

    # The third node joins and takes its share of the zones, bacteria and all.
    {_peer, ^third} =
      start_peer!(home, third |> Atom.to_string() |> String.split("@") |> hd(), exact_name: true)

    start_instance!(third, opts)
    # Steps by hand count on each node: the new one's to where the others are.
    for _ <- 1..3, do: :ok = :erpc.call(third, World, :step_life, [world])
    settled!(all, world)
    owners = Placement.owners(@zones, all)
    assert Enum.any?(Tuple.to_list(owners), &(&1 == third))

    for generation <- 4..8 do
      step_to(all, world, generation)
      assert live(all, world) == Enum.at(expected, generation), "generation \#{generation}"
    end
  end

  # Every node runs the zones the placement gives it, and no other.
  defp settled!(nodes, world) do
    owners = Placement.owners(@zones, nodes)

    eventually(
      fn ->
        for n <- nodes, index <- 0..(@zones - 1) do
          assert zone_node(n, world, index) == elem(owners, index)
          assert serving?(n, world, index) == (elem(owners, index) == n)
        end
      end,
      @wait
    )
  end

  # Every node steps its own zones: the target of manual stepping is each node's.
  defp step_to(nodes, world, generation) do
    if generation > 0, do: for(n <- nodes, do: :ok = :erpc.call(n, World, :step_life, [world]))

    eventually(
      fn ->
        for n <- nodes,
            {_index, {at, _cells}} <- running_bacteria(n, world),
            do: assert(at == generation)
      end,
      @wait
    )
  end

  # The live cells of the whole world, each zone's read on the node that runs it.
  defp live(nodes, world) do
    for n <- nodes,
        {_index, {_generation, cells}} <- running_bacteria(n, world),
        cell <- cells,
        into: MapSet.new(),
        do: cell
  end

  # The bacteria of the zones a node runs (its life table holds rows of
  # its zones' neighbours on other nodes too).
  defp running_bacteria(node, world) do
    w = :erpc.call(node, World, :fetch!, [world])

    for {index, row} <- :erpc.call(node, World, :bacteria, [world]),
        :erpc.call(node, World, :zone_node, [w, index]) == node,
        do: {index, row}
  end

  defp zone_node(node, world, index),
    do: :erpc.call(node, World, :zone_node, [:erpc.call(node, World, :fetch!, [world]), index])
end
