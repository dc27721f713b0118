defmodule Grove.ClusterOnDemandTest do
  @moduledoc "Zones on demand in a world of several nodes, their sleeping state in a shared PostgreSQL."
  use ExUnit.Case, async: false

  import Grove.ClusterCase
  import Grove.WorldCase, only: [eventually: 2]

  alias Grove.Cluster.Placement
  alias Grove.World
  alias Grove.World.Grid

  @moduletag :cluster
  @moduletag :capture_log

  # Nodes meet over real sockets: allow a busy machine half a minute.
  @wait 3000

  @tag timeout: 240_000
  @tag :postgres
  test "a zone asleep in the store goes with its entities to the node that owns it now; a move into a sleeping zone of another node wakes it there" do
    home = distribute!()
    [{_peer, first}] = start_peers_with_zones!(home, ["demand1"], [node()], fits: &west_zone?/1)
    nodes = Enum.sort([node(), first])
    # The node to come, named now, under a name that takes a zone of the
    # other node when it joins: the zones it will take are known.
    {third, {index, ^first}} = joining_with_zone(nodes, first)
    all = Enum.sort([third | nodes])
    grid = Grid.new(100, 100, 25)
    {x0, y0, _x1, _y1} = Grid.zone_bounds(grid, index)
    # One database for every node, the third one's too.
    store = Grove.PostgresServer.store()
    opts = &demand_instance(&1, store)

    for node <- nodes, do: start_instance!(node, opts.(peers: nodes, connect_interval: 100))
    world = Grove.world(Grove.DemandT)

    eventually(
      fn ->
        for n <- nodes, do: assert(zone_node(n, world, index) == first)
      end,
      @wait
    )

    # No zone runs until one is needed.
    assert awake(first, world) == [] and awake(node(), world) == []

    # A client of this node joins into the other node's zone: it wakes there.
    {mover, id, cell} = start_mover!(node(), world, at: {x0 + 5, y0 + 5}, updates: :none)
    assert cell == {x0 + 5, y0 + 5}
    assert awake(first, world) == [index]
    assert awake(node(), world) == []

    # Put to sleep there: its entity goes to the shared store.
    assert :erpc.call(first, World, :sleep_idle, [world]) == [index]
    assert :erpc.call(first, World, :stats, [world]).zone_saves >= 1
    assert :erpc.call(first, World, :position, [world, id]) == {x0 + 5, y0 + 5}

    # A third node joins and now owns the zone: read back from the store on
    # its old owner, it is handed over as a zone that runs would be.
    start_instance!(third_node(home, third), opts.(peers: all, connect_interval: 100))

    eventually(
      fn ->
        for n <- all, do: assert(zone_node(n, world, index) == third)
      end,
      @wait
    )

    assert move!(mover, :e) == {:ok, {x0 + 6, y0 + 5}}
    eventually(fn -> assert serving?(third, world, index) end, @wait)
    refute serving?(first, world, index)
    assert :erpc.call(first, World, :stats, [world]).zone_loads == 1
    assert :erpc.call(third, World, :position, [world, id]) == {x0 + 6, y0 + 5}

    # Walked across into the zone east of it, which sleeps on whichever
    # node owns it: the move wakes it there.
    east = index + 1
    owner = zone_node(node(), world, east)
    refute east in awake(owner, world)
    for _ <- (x0 + 7)..(x0 + 25), do: assert({:ok, _} = move!(mover, :e))
    assert east in awake(owner, world)
    assert :erpc.call(owner, World, :position, [world, id]) == {x0 + 25, y0 + 5}
    assert :ok = World.audit(world)
  end

  @tag timeout: 240_000
  @tag :postgres
  test "a zone that never ran, woken on its owner while that hands it to a node that joins, runs once, on the new owner, with what came to it" do
    home = distribute!()
    [{_peer, first}] = start_peers_with_zones!(home, ["never1"], [node()], fits: &west_zone?/1)
    nodes = Enum.sort([node(), first])
    {third, {index, ^first}} = joining_with_zone(nodes, first)
    all = Enum.sort([third | nodes])
    {x0, y0, _x1, _y1} = Grid.zone_bounds(Grid.new(100, 100, 25), index)
    opts = demand_instance(peers: all, connect_interval: 100)
    for node <- nodes, do: start_instance!(node, opts)
    world = Grove.world(Grove.DemandT)
    placer = World.Placer.name(world)

    eventually(
      fn -> for n <- nodes, do: assert(zone_node(n, world, index) == first) end,
      @wait
    )

    assert awake(first, world) == []

    # The owner hears of the node that joins only once that node runs, and
    # that node takes nothing until the owner has looked at the zone and
    # asks it to: the owner starts the handover, and it waits there.
    :ok = :erpc.call(first, :sys, :suspend, [placer])
    start_instance!(third_node(home, third), opts)
    :ok = :erpc.call(third, :sys, :suspend, [placer])
    :ok = :erpc.call(first, :sys, :resume, [placer])

    handover =
      eventually(
        fn ->
          %{handovers: handovers} = :erpc.call(first, :sys, :get_state, [placer])
          # One process hands over every zone going to that node.
          [pid] = for {pid, indexes} <- handovers, index in indexes, do: pid

          assert :erpc.call(first, Process, :info, [pid, :current_function]) ==
                   {:current_function, {:gen, :do_call, 4}}

          pid
        end,
        @wait
      )

    assert is_pid(handover)

    # Now an entity joins into it on the owner, where it is still placed.
    joining =
      Task.async(fn ->
        start_mover!(first, world, at: {x0 + 5, y0 + 5}, updates: :none, link: false)
      end)

    # The join reaches a process of the zone on the owner before the new
    # owner takes the zone: held there, or taken by a run of the zone that
    # would then be a second beside the new owner's.
    eventually(fn -> assert reached?(first, world, index) end, @wait)

    :ok = :erpc.call(third, :sys, :resume, [placer])
    {mover, id, cell} = Task.await(joining, 15_000)
    assert cell == {x0 + 5, y0 + 5}

    eventually(
      fn -> for n <- all, do: assert(zone_node(n, world, index) == third) end,
      @wait
    )

    # One run of it, on the new owner, holding the entity that came.
    eventually(fn -> assert serving?(third, world, index) end, @wait)
    refute serving?(first, world, index)
    assert :erpc.call(third, World, :position, [world, id]) == cell
    assert move!(mover, :e) == {:ok, {x0 + 6, y0 + 5}}
    assert :erpc.call(third, World, :position, [world, id]) == {x0 + 6, y0 + 5}
    assert :ok = World.audit(world)
  end

  for how <- [:killed, :stopped] do
    @tag timeout: 240_000
    @tag :postgres
    test "a zone asleep on a node #{how} wakes on the node that owns it now, reading what it saved from the store: each entity whose owner lives, where it stood, once, and none told it was lost" do
      home = distribute!()
      peers = start_peers_with_zones!(home, ["asleep1", "asleep2"], [node()])
      nodes = Enum.sort([node() | Enum.map(peers, &elem(&1, 1))])
      opts = demand_instance(peers: nodes, connect_interval: 100)
      for node <- nodes, do: start_instance!(node, opts)
      world = Grove.world(Grove.DemandT)

      # A zone of a node to go (not this one, which runs the test), and who
      # owns it once that node has gone.
      {index, first} =
        Enum.find_value(0..15, fn index ->
          owner = Placement.owner(index, nodes)
          if owner != node(), do: {index, owner}
        end)

      {peer, ^first} = List.keyfind(peers, first, 1)
      [second] = nodes -- [node(), first]
      survivors = nodes -- [first]
      heir = Placement.owner(index, survivors)

      eventually(
        fn -> for n <- nodes, do: assert(zone_node(n, world, index) == first) end,
        @wait
      )

      {x0, y0, _x1, _y1} = Grid.zone_bounds(Grid.new(100, 100, 25), index)

      # Entities of a client of each node stand in it; it falls asleep there.
      movers =
        for {node, dx} <- [{node(), 5}, {second, 6}, {first, 7}] do
          {mover, id, cell} =
            start_mover!(node, world,
              at: {x0 + dx, y0 + 5},
              updates: :none,
              # The one on the node to go goes with it, not with the test.
              link: node != first
            )

          assert cell == {x0 + dx, y0 + 5}
          {node, mover, id, cell}
        end

      assert :erpc.call(first, World, :sleep_idle, [world]) == [index]
      assert :erpc.call(first, World, :stats, [world]).zone_saves >= 1
      assert awake(first, world) == []

      case unquote(how) do
        :killed ->
          kill!(first)

        :stopped ->
          :ok =
            :erpc.call(first, Supervisor, :terminate_child, [
              Grove.Application.Supervisor,
              Grove.DemandT
            ])

          :peer.stop(peer)
      end

      # Every zone of the node gone runs on a survivor, as each survivor
      # sees it: the audits below ask every zone.
      for n <- survivors do
        eventually(
          fn ->
            refute first in :erpc.call(n, Node, :list, [])
            assert zone_node(n, world, index) == heir
            for i <- 0..15, do: assert(zone_node(n, world, i) in survivors)
          end,
          @wait
        )
      end

      # Woken on its heir from the store, before anyone was told it runs.
      assert index in awake(heir, world)
      assert :erpc.call(heir, World, :stats, [world]).zone_loads == 1

      # The entities of the clients that live are where they stood; the
      # one whose client went with its node goes too.
      [
        {_, home_mover, home_id, home_cell},
        {_, second_mover, second_id, second_cell},
        {_, _, gone_id, _}
      ] = movers

      assert :erpc.call(heir, World, :position, [world, home_id]) == home_cell
      assert :erpc.call(heir, World, :position, [world, second_id]) == second_cell

      eventually(
        fn ->
          residents =
            :erpc.call(heir, World.Audit, :residents, [:erpc.call(heir, World, :fetch!, [world])])

          assert Enum.sort(residents) == Enum.sort([home_id, second_id])
          refute gone_id in residents
        end,
        @wait
      )

      # Every node has settled what it lost; nobody was told its entity was.
      for n <- survivors do
        :erpc.call(n, :sys, :get_state, [World.Placer.name(world)])
        :erpc.call(n, :sys, :get_state, [World.Relay.name(world)])
      end

      {hx, hy} = home_cell
      {sx, sy} = second_cell
      assert move!(home_mover, :n) == {:ok, {hx, hy - 1}}
      assert move!(second_mover, :s) == {:ok, {sx, sy + 1}}
      refute_received {:mover_lost, _, _}

      # Awake on its heir, its save is no longer in the store.
      refute :erpc.call(heir, World.Zone.Saves, :saved?, [
               :erpc.call(heir, World, :fetch!, [world]),
               index
             ])

      assert :ok = World.audit(world)
    end
  end

  # The instance each node of a test runs: zones on demand that sleep when
  # told, their saves in one PostgreSQL database (a new one unless given).
  defp demand_instance(cluster, store \\ Grove.PostgresServer.store()) do
    on_demand_instance(Grove.DemandT, cluster, store,
      terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]
    )
  end

  defp third_node(home, third) do
    {_peer, ^third} = start_peer_as!(home, third)
    third
  end

  # Whether a message came to the process under zone `index`'s name on
  # `node`: held there while the zone is handed over, or an entity placed.
  defp reached?(node, world, index) do
    case :erpc.call(node, World, :zone_pid, [world, index]) do
      nil ->
        false

      zone ->
        case :erpc.call(node, :sys, :get_state, [zone]) do
          %{handed_over: {:holding, [_ | _]}} -> true
          %{core: %{entities: entities}} -> map_size(entities) > 0
          _zone -> false
        end
    end
  end

  defp awake(node, world), do: :erpc.call(node, World, :awake_zones, [world])

  defp zone_node(node, world, index),
    do: :erpc.call(node, World, :zone_node, [:erpc.call(node, World, :fetch!, [world]), index])

  # Whether a peer owns a zone with a zone east of it, among this node's
  # and its own: a name that owns none (one in 4,000 drawn at random) has
  # no zone `joining_with_zone/2` could find, however long it draws.
  defp west_zone?([peer]) do
    owners = Placement.owners(16, [node(), peer])
    Enum.any?(0..14, &(elem(owners, &1) == peer and rem(&1, 4) != 3))
  end

  # Zones go to nodes by their names (`Placement.owner/2`), and not every
  # name of a node that joins takes a zone of `owner`: a name that does,
  # with that zone.
  defp joining_with_zone(nodes, owner) do
    moving = &moving_zone(nodes, Enum.sort([&1 | nodes]), owner)
    joining = on_host(peer_name("demand3", moving))
    {joining, moving.(joining)}
  end

  # A zone of `owner` among `before`'s nodes that goes to the new one in `all`.
  defp moving_zone(before, all, owner) do
    was = Placement.owners(16, before)
    now = Placement.owners(16, all)
    new = all -- before

    Enum.find_value(0..14, fn index ->
      if elem(was, index) == owner and elem(now, index) in new and rem(index, 4) != 3,
        do: {index, owner}
    end)
  end
end
