defmodule Grove.ClusterResidentsTest do
  @moduledoc """
  Resident actors (`Grove.World.join/2`'s `:walk`) in a world of several
  nodes: a resident crosses into a zone another node runs by the same
  handoff as a client's move, with its kind's state, goes onto that
  zone's schedule and walks on from there; with zones on demand, its step
  wakes a zone of another node that sleeps, which stays awake while it
  has a resident and sleeps once it has none.
  """
  use ExUnit.Case, async: false

  import Grove.ClusterCase
  import Grove.WorldCase, only: [eventually: 2]

  alias Grove.Cluster.Placement
  alias Grove.World
  alias Grove.World.Grid
  alias Grove.World.Zone.Residents

  @moduletag :cluster
  @moduletag :capture_log

  # Nodes meet over real sockets: allow a busy machine half a minute.
  @wait 3000

  @open [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]

  @tag timeout: 180_000
  test "a resident crosses into a zone another node runs, with its kind's state, walks on there and back, and goes with its owner" do
    home = distribute!()
    [{_peer, other}] = start_peers_with_zones!(home, ["residents1"], [node()])
    nodes = Enum.sort([node(), other])

    start_instances!(
      for node <- nodes,
          do:
            {node,
             small_instance(Grove.ResidentsT, [peers: nodes, connect_interval: 100],
               rules: [move_rate: nil],
               terrain: @open
             )}
    )

    world = Grove.world(Grove.ResidentsT)
    eventually(fn -> assert placed?(nodes, world) end, @wait)

    # A zone of this node beside one of the other's, and the cell by their border.
    {here, there, direction, from, to} = border(world, node(), other)

    owner = spawn(fn -> receive(do: (:never -> :ok)) end)

    {:ok, id, ^from} =
      World.join(world,
        at: from,
        updates: :none,
        owner: owner,
        walk: {Grove.Shuttle, direction, 1000}
      )

    assert resident?(node(), world, here, id)

    # One step: across the border, into the other node's zone and onto its schedule.
    walk(world)
    eventually(fn -> assert :erpc.call(other, World, :position, [world, id]) == to end, @wait)
    eventually(fn -> assert resident?(other, world, there, id) end, @wait)
    refute resident?(node(), world, here, id)
    eventually(fn -> assert World.stats(world).handoffs == 1 end, @wait)

    # Its kind's state came with it: stepped by the other node's zone, it goes back.
    walk(world)
    eventually(fn -> assert World.position(world, id) == from end, @wait)
    eventually(fn -> assert resident?(node(), world, here, id) end, @wait)
    refute resident?(other, world, there, id)

    # And out again: the other node's zone holds it when its owner dies.
    walk(world)
    eventually(fn -> assert resident?(other, world, there, id) end, @wait)
    Process.exit(owner, :kill)

    eventually(
      fn ->
        assert :erpc.call(other, World, :position, [world, id]) == nil
        refute resident?(other, world, there, id)
      end,
      @wait
    )

    assert World.position(world, id) == nil
    assert :ok = World.audit(world)
  end

  @tag timeout: 240_000
  @tag :postgres
  test "with zones on demand, a resident's step wakes a sleeping zone of another node, which stays awake while it has a resident and sleeps once it has none" do
    home = distribute!()
    [{_peer, other}] = start_peers_with_zones!(home, ["residents2"], [node()])
    nodes = Enum.sort([node(), other])
    store = Grove.PostgresServer.store()

    start_instances!(
      for node <- nodes,
          do: {node, demand_instance([peers: nodes, connect_interval: 100], store)}
    )

    world = Grove.world(Grove.ResidentsDemandT)
    eventually(fn -> assert placed?(nodes, world) end, @wait)
    {here, there, direction, from, to} = border(world, node(), other)

    {:ok, id, ^from} =
      World.join(world, at: from, updates: :none, walk: {Grove.Shuttle, direction, 1000})

    # The zone it joined wakes and stays awake with it; the other node's sleeps.
    assert World.awake_zones(world) == [here]
    assert :erpc.call(other, World, :awake_zones, [world]) == []
    assert World.sleep_idle(world) == []

    # Its step wakes the zone there, on the other node, and it resides there.
    walk_on(node(), world)
    eventually(fn -> assert :erpc.call(other, World, :position, [world, id]) == to end, @wait)
    assert :erpc.call(other, World, :awake_zones, [world]) == [there]
    eventually(fn -> assert resident?(other, world, there, id) end, @wait)

    # The zone it left has no resident now, and sleeps; the one it is in does not.
    eventually(fn -> assert World.sleep_idle(world) == [here] end, @wait)
    assert :erpc.call(other, World, :sleep_idle, [world]) == []
    assert World.awake_zones(world) == []

    # Stepped back by the other node's zone, it wakes this node's zone again.
    walk_on(other, world)
    eventually(fn -> assert World.position(world, id) == from end, @wait)
    assert World.awake_zones(world) == [here]
    eventually(fn -> assert resident?(node(), world, here, id) end, @wait)
    eventually(fn -> assert :erpc.call(other, World, :sleep_idle, [world]) == [there] end, @wait)

    :ok = World.leave(world, id)
    eventually(fn -> assert World.sleep_idle(world) == [here] end, @wait)
    assert :ok = World.audit(world)
  end

  # A world that ticks by hand walks its residents by hand: every zone of
  # the cluster steps its residents once, told by this node (told by
  # every node, a zone would step them once for each)...
  defp walk(world), do: :ok = World.walk(world)

  # ...but zones on demand by the node where they are awake (`World.walk/1`
  # walks the zones awake on its node as it is called), and by that node
  # alone: the resident's step wakes its next zone on another node, which
  # that node's walk, were it told next, would find awake with the
  # resident just arrived, and step back again.
  defp walk_on(node, world), do: :ok = :erpc.call(node, World, :walk, [world])

  # Every node runs each zone where the members' placement puts it. The
  # first node starts the world alone and hands the other its share zone
  # by zone: both may agree on a placement with both of them in it while
  # the handovers are under way, and a zone taken for this node's could
  # then go to the other one, resident and all, under the test.
  defp placed?(nodes, world) do
    placement = Tuple.to_list(Placement.owners(Grid.zone_count(World.grid(world)), nodes))
    Enum.all?(nodes, &(owners(&1, world) == placement))
  end

  defp owners(node, world) do
    described = :erpc.call(node, World, :fetch!, [world])
    for index <- 0..(Grid.zone_count(described.grid) - 1), do: World.zone_node(described, index)
  end

  # A zone run by `here_node` beside one run by `there_node`: their
  # indexes, the direction from the first to the second, and the cells on
  # either side of their border, across from the first zone's middle.
  defp border(world, here_node, there_node) do
    grid = World.grid(world)
    owners = owners(node(), world)

    candidates =
      for here <- 0..(Grid.zone_count(grid) - 1),
          Enum.at(owners, here) == here_node,
          direction <- [:n, :e, :s, :w],
          {from, {x, y} = to} = cells_across(grid, here, direction),
          Grid.in_bounds?(grid, x, y),
          there = Grid.zone_of(grid, x, y),
          Enum.at(owners, there) == there_node,
          do: {here, there, direction, from, to}

    List.first(candidates) || flunk("no zone of #{here_node} borders one of #{there_node}")
  end

  # The last cell of a zone in a direction, across from its middle, and the next one.
  defp cells_across(grid, index, direction) do
    {x0, y0, x1, y1} = Grid.zone_bounds(grid, index)
    {mx, my} = {div(x0 + x1, 2), div(y0 + y1, 2)}

    from =
      case direction do
        :e -> {x1 - 1, my}
        :w -> {x0, my}
        :n -> {mx, y0}
        :s -> {mx, y1 - 1}
      end

    {from, Grid.step(from, direction)}
  end

  defp resident?(node, world, index, id) do
    case :erpc.call(node, World, :zone_pid, [world, index]) do
      nil ->
        false

      pid ->
        case :erpc.call(node, :sys, :get_state, [pid]) do
          %{residents: nil} -> false
          %{residents: residents} -> id in Residents.all(residents)
        end
    end
  end

  # Zones on demand that sleep when told, their saves in one PostgreSQL database.
  defp demand_instance(cluster, store),
    do: on_demand_instance(Grove.ResidentsDemandT, cluster, store, terrain: @open)
end
