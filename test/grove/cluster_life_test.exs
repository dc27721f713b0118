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
    [{_peer, other}] = across_nodes_peer!(home, "life1")
    nodes = Enum.sort([node(), other])
    owners = Placement.owners(@zones, nodes)
    grid = Grid.new(100, 100, 25)

    {west, east} = across_nodes(owners)

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
    # Under a name that gives it zones to take.
    third = on_host(peer_name_with_zones("life3", nodes, @zones))

    all = Enum.sort([third | nodes])

    opts = soup_instance(all)

    for node <- nodes, do: start_instance!(node, opts)
    world = Grove.world(Grove.LifeT)
    settled!(nodes, world)
    step_to(nodes, world, 0)
    start = live(nodes, world)
    assert MapSet.size(start) > 100
    expected = LifeReference.run(start, Rule.conway(), 100, 100, 8)

    for generation <- 1..3 do
      step_to(nodes, world, generation)
      assert live(nodes, world) == Enum.at(expected, generation), "generation #{generation}"
    end

    # The third node joins and takes its share of the zones, bacteria and all.
    {_peer, ^third} = start_peer_as!(home, third)

    start_instance!(third, opts)
    # Steps by hand count on each node, as each node's clock would: the new
    # one's runs two generations ahead of the others'. The zones handed to
    # it carry on from the rows they carry, never skipping a generation,
    # and wait for their neighbours there.
    for _ <- 1..5, do: :ok = :erpc.call(third, World, :step_life, [world])
    settled!(all, world)
    owners = Placement.owners(@zones, all)
    assert Enum.any?(Tuple.to_list(owners), &(&1 == third))
    for n <- nodes, _ <- 1..2, do: :ok = :erpc.call(n, World, :step_life, [world])
    reached!(all, world, 5)
    assert live(all, world) == Enum.at(expected, 5)

    for generation <- 6..8 do
      step_to(all, world, generation)
      assert live(all, world) == Enum.at(expected, generation), "generation #{generation}"
    end
  end

  @tag timeout: 240_000
  test "the zones of a node killed start again on the survivors with their bacteria, from the rows their heirs hold" do
    home = distribute!()
    # Each peer owns zones: placement by the nodes' names, which are new
    # each run, can give one of three nodes none of the 16.
    peers = start_peers_with_zones!(home, ["lost1", "lost2"], [node()])
    nodes = Enum.sort([node() | Enum.map(peers, &elem(&1, 1))])

    opts = soup_instance(nodes)

    for node <- nodes, do: start_instance!(node, opts)
    world = Grove.world(Grove.LifeT)
    settled!(nodes, world)
    step_to(nodes, world, 0)
    soup = live(nodes, world)
    for generation <- 1..3, do: step_to(nodes, world, generation)
    before = live(nodes, world)
    assert before != soup

    # Each zone of the node to go has its row on its heir, as sent each generation.
    owners = indexed(Placement.owners(@zones, nodes))
    first = Enum.find(nodes, &(&1 != node() and List.keymember?(owners, &1, 1)))
    survivors = nodes -- [first]
    lost = for {index, ^first} <- owners, do: index
    assert lost != []

    for index <- lost, do: row_on_heir!(world, index, Placement.owner(index, survivors))

    kill!(first)
    settled!(survivors, world)

    owners = Placement.owners(@zones, survivors)

    assert_restored!(survivors, world, owners, before)
  end

  @tag timeout: 240_000
  test "two zones side by side of a node killed, started again on two nodes that each hear of the other only after theirs sent its row, step on" do
    home = distribute!()
    {peers, lost} = border_race_names()

    for name <- peers, do: {_peer, ^name} = start_peer_as!(home, name)

    nodes = Enum.sort([node() | peers])
    survivors = nodes -- [lost]

    opts = soup_instance(nodes)

    start_instances!(for node <- nodes, do: {node, opts})
    world = Grove.world(Grove.LifeT)
    settled!(nodes, world)

    for generation <- 0..3, do: step_to(nodes, world, generation)
    before = live(nodes, world)

    for {index, ^lost} <- indexed(Placement.owners(@zones, nodes)),
        do: row_on_heir!(world, index, Placement.owner(index, survivors))

    # Every survivor hears the node go before it hears of any zone another
    # started again, and hears of those only once its own have started and
    # sent their rows: to the node lost, for a zone beside them that it
    # still runs as far as they know.
    for node <- survivors, do: hold_placer!(node, world)
    kill!(lost)

    for node <- survivors do
      eventually(
        fn ->
          messages = placer_messages(node, world)
          assert {:nodedown, lost} in messages

          assert Enum.any?(messages, fn
                   {:grove_cluster, _instance, members} -> lost not in members
                   _other -> false
                 end)
        end,
        @wait
      )
    end

    for node <- survivors, do: release_placer!(node, world)
    settled!(survivors, world)

    assert_restored!(survivors, world, Placement.owners(@zones, survivors), before)
  end

  @tag timeout: 180_000
  test "four nodes started at once settle: every node places each zone where that node says it runs, at the same epoch" do
    home = distribute!()
    peers = start_peers_with_zones!(home, ["four1", "four2", "four3"], [node()])
    nodes = Enum.sort([node() | Enum.map(peers, &elem(&1, 1))])

    start_instances!(for node <- nodes, do: {node, soup_instance(nodes)})
    world = Grove.world(Grove.LifeT)

    # Zones handed on as the members grew, one node's word on where one
    # went reaching another before the end of its own handover, or sent
    # before that node's world ran, left a node placing a zone where it
    # no longer ran, for good.
    eventually(fn -> placed_alike!(nodes, world) end, @wait)
    settled!(nodes, world)
  end

  @tag timeout: 240_000
  test "a zone of a node killed after another joined starts again from its row, though the heir its rows went to is not its owner now" do
    home = distribute!()
    # The node to go owns zones: with none (a name drawn at random left it
    # none once in 800 runs), no fourth name has a zone of it to wait for.
    peers = start_peers_with_zones!(home, ["gap1", "gap2"], [node()])
    nodes = Enum.sort([node() | Enum.map(peers, &elem(&1, 1))])
    first = Enum.find(nodes, &(&1 != node()))
    # The node to join, named now: a zone of the node to go stays there as
    # it joins, and would be its own were that node lost, where the heir
    # its rows went to before it joined is another.
    {fourth, index} = heir_gap(nodes, first)
    all = Enum.sort([fourth | nodes])
    survivors = all -- [first]

    opts = soup_instance(all)

    for node <- nodes, do: start_instance!(node, opts)
    world = Grove.world(Grove.LifeT)
    settled!(nodes, world)
    for generation <- 0..3, do: step_to(nodes, world, generation)

    row_on_heir!(world, index, Placement.owner(index, nodes -- [first]))

    {_peer, ^fourth} = start_peer_as!(home, fourth)

    start_instance!(fourth, opts)
    # Its clock to the others' (steps by hand count on each node).
    for _ <- 1..3, do: :ok = :erpc.call(fourth, World, :step_life, [world])
    settled!(all, world)
    reached!(all, world, 3)
    before = live(all, world)

    # No generation since it joined: the zone's row went nowhere new, and
    # the node that joined holds none of it.
    table = :erpc.call(fourth, World, :fetch!, [world]).life_table
    assert :erpc.call(fourth, :ets, :lookup, [table, index]) == []

    kill!(first)
    settled!(survivors, world)
    owners = Placement.owners(@zones, survivors)
    assert elem(owners, index) == fourth

    assert_restored!(survivors, world, owners, before)
  end

  @tag timeout: 180_000
  test "generations by the clock: the zones of two nodes step them together, and the whole is one grid's" do
    home = distribute!()
    # Each node owns zones, as asserted below.
    [{_peer, other}] = start_peers_with_zones!(home, ["clock1"], [node()])
    nodes = Enum.sort([node(), other])

    opts = soup_instance(nodes, 200)

    start_instances!(for node <- nodes, do: {node, opts})
    world = Grove.world(Grove.LifeT)
    settled!(nodes, world)
    owners = Placement.owners(@zones, nodes)
    assert owners |> Tuple.to_list() |> Enum.uniq() |> length() == 2

    # Every zone at one generation, read on the node that runs it: the
    # same moment on both nodes' clocks, whenever each started.
    {generation, start} = eventually(fn -> snapshot!(nodes, world, owners, nil) end, 1000)
    assert MapSet.size(start) > 100
    {later, cells} = eventually(fn -> snapshot!(nodes, world, owners, generation + 5) end, 1000)

    assert cells ==
             List.last(LifeReference.run(start, Rule.conway(), 100, 100, later - generation))
  end

  @tag timeout: 180_000
  test "a node whose clock runs ahead waits for the other's rows: neighbours stay one generation apart, and the whole is one grid's" do
    home = distribute!()
    # Each node owns zones, or the one ahead has no neighbour to wait for.
    [{_peer, other}] = start_peers_with_zones!(home, ["skew1"], [node()])
    nodes = Enum.sort([node(), other])

    opts = soup_instance(nodes)

    start_instances!(for node <- nodes, do: {node, opts})
    world = Grove.world(Grove.LifeT)
    settled!(nodes, world)
    owners = Placement.owners(@zones, nodes)
    step_to(nodes, world, 0)
    start = live(nodes, world)
    expected = LifeReference.run(start, Rule.conway(), 100, 100, 5)

    # Stepped by hand, each node's target is its own, as each node's clock
    # is: this one's says generation 5, the other's still 0.
    [ahead, behind] = [node(), other]
    for _ <- 1..5, do: :ok = World.step_life(world)

    along_border =
      for {index, ^ahead} <- indexed(owners), borders?(owners, index, behind), do: index

    eventually(
      fn ->
        rows = generations(nodes, world, owners)
        for index <- along_border, do: assert(rows[index] == 1)
        for {index, ^behind} <- indexed(owners), do: assert(rows[index] == 0)

        for {index, generation} <- rows,
            {_direction, neighbour} <- World.Life.neighbours(Grid.new(100, 100, 25), index),
            neighbour != nil,
            do: assert(abs(generation - rows[neighbour]) <= 1)
      end,
      @wait
    )

    # Waits its operators see.
    eventually(fn -> assert World.stats(world).life_waits > 0 end, @wait)

    # The other node's clock comes to generation 5 too: every zone gets there.
    for _ <- 1..5, do: :ok = :erpc.call(behind, World, :step_life, [world])

    eventually(
      fn -> assert Enum.all?(generations(nodes, world, owners), &(elem(&1, 1) == 5)) end,
      @wait
    )

    assert live(nodes, world) == List.last(expected)
  end

  @tag timeout: 240_000
  @tag :postgres
  test "zones on demand: a glider crosses into a zone another node runs; asleep there, its neighbours read it frozen, and it wakes with every cell" do
    home = distribute!()
    [{_peer, other}] = across_nodes_peer!(home, "demandlife1")
    nodes = Enum.sort([node(), other])
    owners = Placement.owners(@zones, nodes)
    grid = Grid.new(100, 100, 25)

    {west, east} = across_nodes(owners)

    [west_node, east_node] = [elem(owners, west), elem(owners, east)]
    opts = demand_instance([peers: nodes, connect_interval: 100], soup: 0.0)
    start_instances!(for node <- nodes, do: {node, opts})
    world = Grove.world(Grove.LifeT)

    eventually(
      fn ->
        for n <- nodes,
            index <- [west, east],
            do: assert(zone_node(n, world, index) == elem(owners, index))
      end,
      @wait
    )

    # No zone runs until one is needed: an entity in each of the two wakes them.
    {_x0, y0, x1, _y1} = Grid.zone_bounds(grid, west)
    {:ok, id, seeder} = World.join(world, at: {x1 - 8, y0 + 4})
    {:ok, still, {kx, _ky} = keeper} = World.join(world, at: {x1 + 20, y0 + 22})
    assert awake(west_node, world) == [west] and awake(east_node, world) == [east]

    :ok = World.seed(world, id, :glider, :se, :glider)
    assert_receive {:grove_seed, ^id, :glider, :ok}
    step_to(nodes, world, 1, &awake_bacteria/2)
    start = live(nodes, world, &awake_bacteria/2)
    assert MapSet.size(start) == 5
    expected = LifeReference.run(start, Rule.conway(), 100, 100, 45, MapSet.new([seeder, keeper]))

    for generation <- 2..40 do
      step_to(nodes, world, generation, &awake_bacteria/2)

      assert live(nodes, world, &awake_bacteria/2) == Enum.at(expected, generation - 1),
             "generation #{generation}"
    end

    crossed = Enum.at(expected, 39)
    assert Enum.all?(crossed, fn {x, y} -> Grid.zone_of(grid, x, y) == east end)

    # The east zone falls asleep on its node, its cells into the store; the
    # west zone's node is told, and reads its borders frozen: it goes on.
    assert :erpc.call(east_node, World, :sleep_idle, [world]) == [east]
    w = :erpc.call(west_node, World, :fetch!, [world])

    eventually(
      fn ->
        assert [{^east, 40, nil, _edges, _}] =
                 :erpc.call(west_node, :ets, :lookup, [w.life_table, east])
      end,
      @wait
    )

    for generation <- 41..43, do: step_to(nodes, world, generation, &awake_bacteria/2)
    assert :erpc.call(west_node, World, :bacteria, [world])[west] == {43, []}
    assert {40, cells} = :erpc.call(east_node, World, :bacteria, [world])[east]
    assert MapSet.new(cells) == crossed

    # Woken, it resumes at the world's generation with the board it slept
    # with, and the glider goes on from there.
    :ok = World.move(world, still, :n, :wake)
    assert_receive {:grove_move, ^still, :wake, {:ok, {^kx, _}}}
    assert east in awake(east_node, world)
    step_to(nodes, world, 44, &awake_bacteria/2)
    assert live(nodes, world, &awake_bacteria/2) == Enum.at(expected, 40)
  end

  @tag timeout: 240_000
  @tag :postgres
  test "zones on demand: a node that joins holds the row of a zone asleep beside one of its own, its borders frozen as they stand" do
    home = distribute!()
    {_peer, other} = start_peer!(home, "asleepjoin1")
    nodes = Enum.sort([node(), other])
    {third, asleep, beside} = joining_beside(nodes)
    all = Enum.sort([third | nodes])
    opts = demand_instance([peers: all, connect_interval: 100], soup: 0.5)
    for node <- nodes, do: start_instance!(node, opts)
    world = Grove.world(Grove.LifeT)
    owner = Placement.owner(asleep, nodes)
    eventually(fn -> for n <- nodes, do: assert(zone_node(n, world, asleep) == owner) end, @wait)

    # Woken by an actor, two generations on, asleep with its board.
    {x0, y0, _, _} = Grid.zone_bounds(Grid.new(100, 100, 25), asleep)
    {:ok, _, _} = World.join(world, at: {:within, {x0, y0, x0 + 25, y0 + 25}})
    for generation <- 1..2, do: step_to(nodes, world, generation, &awake_bacteria/2)
    assert :erpc.call(owner, World, :sleep_idle, [world]) == [asleep]
    table = :erpc.call(owner, World, :fetch!, [world]).life_table
    assert [{^asleep, 2, nil, edges, _}] = :erpc.call(owner, :ets, :lookup, [table, asleep])

    # The node that joins takes the zone beside it, and is told of it.
    {_peer, ^third} = start_peer_as!(home, third)

    start_instance!(third, opts)
    eventually(fn -> assert zone_node(third, world, beside) == third end, @wait)
    table = :erpc.call(third, World, :fetch!, [world]).life_table

    eventually(
      fn ->
        assert [{^asleep, 2, nil, ^edges, _}] = :erpc.call(third, :ets, :lookup, [table, asleep])
      end,
      @wait
    )
  end

  @tag timeout: 240_000
  @tag :postgres
  test "zones on demand of a node killed start again on the survivors with their bacteria: a sleeping zone's from its save, an awake one's from its heir's copy" do
    home = distribute!()
    # Every node owns two zones at least, whatever names they drew: the
    # test takes two of the first peer's, which a drawn name once left one.
    peers = start_peers_with_zones!(home, ["lostlife1", "lostlife2"], [node()], least_zones: 2)
    nodes = Enum.sort([node() | Enum.map(peers, &elem(&1, 1))])
    opts = demand_instance([peers: nodes, connect_interval: 100], soup: 0.5)
    for node <- nodes, do: start_instance!(node, opts)
    world = Grove.world(Grove.LifeT)
    grid = Grid.new(100, 100, 25)

    # Two zones of a node to go (not this one, which runs the test).
    first = Enum.find(nodes, &(&1 != node()))

    [asleep, alive | _] =
      for index <- 0..(@zones - 1), Placement.owner(index, nodes) == first, do: index

    survivors = nodes -- [first]

    eventually(
      fn -> for n <- nodes, i <- [asleep, alive], do: assert(zone_node(n, world, i) == first) end,
      @wait
    )

    # An actor wakes one, a player keeps the other awake; three generations
    # on, their boards are no longer the soup they were laid with.
    {ax, ay, _, _} = Grid.zone_bounds(grid, asleep)
    {px, py, _, _} = Grid.zone_bounds(grid, alive)
    {:ok, _, _} = World.join(world, at: {:within, {ax, ay, ax + 25, ay + 25}})
    {:ok, _, _} = World.join(world, at: {:within, {px, py, px + 25, py + 25}}, kind: :player)
    assert Enum.sort(awake(first, world)) == Enum.sort([asleep, alive])
    soup = :erpc.call(first, World, :bacteria, [world])
    for generation <- 1..3, do: step_to(nodes, world, generation, &awake_bacteria/2)
    before = :erpc.call(first, World, :bacteria, [world])

    for index <- [asleep, alive] do
      assert {3, [_ | _] = cells} = before[index]
      assert cells != elem(soup[index], 1)
    end

    assert :erpc.call(first, World, :sleep_idle, [world]) == [asleep]

    # The heir of the awake one holds its row, as it was sent each generation.
    heir = Placement.owner(alive, survivors)
    h = :erpc.call(heir, World, :fetch!, [world])

    eventually(
      fn ->
        assert [{^alive, 3, bits, _, _}] = :erpc.call(heir, :ets, :lookup, [h.life_table, alive])
        assert bits != nil
      end,
      @wait
    )

    kill!(first)

    for n <- survivors do
      eventually(
        fn ->
          refute first in :erpc.call(n, Node, :list, [])

          for i <- [asleep, alive],
              do: assert(zone_node(n, world, i) == Placement.owner(i, survivors))
        end,
        @wait
      )
    end

    # Each runs on its new owner with the board it had, not a new soup.
    for index <- [asleep, alive] do
      owner = Placement.owner(index, survivors)
      eventually(fn -> assert index in awake(owner, world) end, @wait)
      assert :erpc.call(owner, World, :bacteria, [world])[index] == before[index]
    end
  end

  # Every node runs the zones the placement gives it, and no other.

  # The survivors run the lost node's zones again from the rows kept for
  # them: every zone reaches generation 3 with the board as it was (none
  # laid a new soup), and steps on from it as one grid would.
  defp assert_restored!(survivors, world, owners, before) do
    eventually(
      fn ->
        assert Map.values(generations(survivors, world, owners)) == List.duplicate(3, @zones)
      end,
      @wait
    )

    assert live(survivors, world) == before
    step_to(survivors, world, 4)

    assert live(survivors, world) ==
             List.last(LifeReference.run(before, Rule.conway(), 100, 100, 1))
  end

  # The zone's row at generation 3 on its heir, as sent each generation.
  defp row_on_heir!(world, index, heir) do
    table = :erpc.call(heir, World, :fetch!, [world]).life_table

    eventually(
      fn -> assert [{^index, 3, _, _, _}] = :erpc.call(heir, :ets, :lookup, [table, index]) end,
      @wait
    )
  end

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

  # Where each node places every zone, and at which epoch, is where the
  # node it names places it itself.
  defp placed_alike!(nodes, world) do
    placements = Map.new(nodes, &{&1, World.Placer.locations(world, &1)})

    for {node, placed} <- placements do
      assert is_list(placed), "#{node} is not placed"

      for {{at, epoch}, index} <- Enum.with_index(placed) do
        assert is_list(placements[at]) and Enum.at(placements[at], index) == {at, epoch},
               "#{node} places zone #{index} on #{at} at epoch #{epoch}, " <>
                 "where #{at} places it: #{inspect(is_list(placements[at]) && Enum.at(placements[at], index))}"
      end
    end
  end

  # A peer under a name that gives it a zone beside one of this node's, in
  # a row of zones: a name drawn at random leaves each row of the 4 x 4
  # zones to one node once in 4,000 runs.
  defp across_nodes_peer!(home, base) do
    start_peers_with_zones!(home, [base], [node()],
      fits: fn [other] -> across_nodes(Placement.owners(@zones, [node(), other])) != nil end
    )
  end

  # A zone, and its east neighbour in the same row of the 4 x 4 zones,
  # that different nodes own.
  defp across_nodes(owners) do
    Enum.find_value(0..(@zones - 1), fn index ->
      east = index + 1
      if rem(east, 4) != 0 and elem(owners, index) != elem(owners, east), do: {index, east}
    end)
  end

  # Every node steps its own zones: the target of manual stepping is each
  # node's. `zones` reads the bacteria of a node's zones: those it runs, or
  # (`&awake_bacteria/2`) those it has awake.
  defp step_to(nodes, world, generation, zones \\ &running_bacteria/2) do
    if generation > 0, do: for(n <- nodes, do: :ok = :erpc.call(n, World, :step_life, [world]))
    reached!(nodes, world, generation, zones)
  end

  # Every zone of the nodes at `generation`.
  defp reached!(nodes, world, generation, zones \\ &running_bacteria/2) do
    eventually(
      fn ->
        for n <- nodes, {_index, {at, _cells}} <- zones.(n, world), do: assert(at == generation)
      end,
      @wait
    )
  end

  # The live cells of the whole world, each zone's read on the node that runs it.
  defp live(nodes, world, zones \\ &running_bacteria/2) do
    for n <- nodes,
        {_index, {_generation, cells}} <- zones.(n, world),
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

  # The instance of a cluster of `members` on a meadow, its bacteria a
  # random soup, stepped by hand unless `interval` (ms) says otherwise.
  defp soup_instance(members, interval \\ :manual) do
    small_instance(Grove.LifeT, [peers: members, connect_interval: 100],
      life: [rule: "B3/S23", interval: interval, soup: 0.5],
      terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]
    )
  end

  # The instance of a test of zones on demand: they sleep when told, their
  # saves in one PostgreSQL database.
  defp demand_instance(cluster, life) do
    on_demand_instance(Grove.LifeT, cluster, Grove.PostgresServer.store(),
      life: Keyword.merge([rule: "B3/S23", interval: :manual], life),
      terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]
    )
  end

  defp awake_bacteria(node, world) do
    bacteria = :erpc.call(node, World, :bacteria, [world])
    for index <- awake(node, world), do: {index, Map.fetch!(bacteria, index)}
  end

  defp awake(node, world), do: :erpc.call(node, World, :awake_zones, [world])

  # The live cells of every zone, read on the node that runs it, when all
  # are at one generation (`at_least` or later): `{generation, cells}`.
  defp snapshot!(nodes, world, owners, at_least) do
    rows =
      for n <- nodes,
          {index, row} <- :erpc.call(n, World, :bacteria, [world]),
          elem(owners, index) == n,
          do: {index, row}

    assert length(rows) == @zones
    [generation] = rows |> Enum.map(fn {_, {generation, _}} -> generation end) |> Enum.uniq()
    if at_least, do: assert(generation >= at_least)
    {generation, for({_, {_, cells}} <- rows, cell <- cells, into: MapSet.new(), do: cell)}
  end

  # The generation of every zone, read on the node that runs it.
  defp generations(nodes, world, owners) do
    for n <- nodes,
        {index, {generation, _cells}} <- :erpc.call(n, World, :bacteria, [world]),
        elem(owners, index) == n,
        into: %{},
        do: {index, generation}
  end

  defp indexed(owners),
    do: owners |> Tuple.to_list() |> Enum.with_index(fn node, index -> {index, node} end)

  # Whether a zone has a neighbour (of the eight) that `node` runs.
  defp borders?(owners, index, node) do
    Enum.any?(World.Life.neighbours(Grid.new(100, 100, 25), index), fn
      {_direction, nil} -> false
      {_direction, neighbour} -> elem(owners, neighbour) == node
    end)
  end

  # Three peers to come, named now, and the one of them to kill, under
  # which two zones side by side of that node start again on two others,
  # neither of which holds the other's row as it stands: no zone beside
  # either runs on the other's node, and the heir of each (where its row
  # goes as it starts again) is the third: `{peers, lost}`.
  defp border_race_names do
    slots = Process.get(:grove_cluster_slots)
    peers = for base <- ["race1", "race2", "race3"], do: on_host(peer_name(base))
    nodes = Enum.sort([node() | peers])

    case Enum.find(peers, &rows_missed?(nodes, &1)) do
      nil ->
        # Their ranges of ids are free again for the next names.
        if slots,
          do: Process.put(:grove_cluster_slots, slots),
          else: Process.delete(:grove_cluster_slots)

        border_race_names()

      lost ->
        {peers, lost}
    end
  end

  defp rows_missed?(nodes, lost) do
    survivors = nodes -- [lost]
    grid = Grid.new(100, 100, 25)
    beside = fn index -> for {_direction, n} <- World.Life.neighbours(grid, index), n, do: n end
    owner = &Placement.owner(&1, survivors)

    missed? = fn index, node ->
      node != Placement.owner(index, survivors -- [owner.(index)]) and
        not Enum.any?(beside.(index), &(Placement.owner(&1, nodes) == node))
    end

    zones = for index <- 0..(@zones - 1), Placement.owner(index, nodes) == lost, do: index

    Enum.any?(zones, fn a ->
      Enum.any?(beside.(a), fn b ->
        b in zones and owner.(a) != owner.(b) and missed?.(a, owner.(b)) and
          missed?.(b, owner.(a))
      end)
    end)
  end

  # A node to come, named now, and a zone of `lost` that stays there when
  # it joins `nodes`, whose owner it would be were `lost` gone then, where
  # the heir of the zone's rows before it joined is another node, and
  # beside none of the zones it takes (whose rows of the zones beside them
  # are sent to it as it takes them): `{node, zone}`.
  defp heir_gap(nodes, lost) do
    fourth = on_host(peer_name("gap4", &heir_gap_zone(nodes, lost, &1)))
    {fourth, heir_gap_zone(nodes, lost, fourth)}
  end

  defp heir_gap_zone(nodes, lost, fourth) do
    all = Enum.sort([fourth | nodes])

    Enum.find(0..(@zones - 1), fn index ->
      Placement.owner(index, nodes) == lost and Placement.owner(index, all) == lost and
        Placement.owner(index, all -- [lost]) == fourth and
        not Enum.any?(World.Life.neighbours(Grid.new(100, 100, 25), index), fn
          {_direction, nil} -> false
          {_direction, beside} -> Placement.owner(beside, all) == fourth
        end)
    end)
  end

  # A node to come, named now, that takes a zone beside one that stays
  # where it is: `{node, the zone that stays, the zone it takes}`.
  defp joining_beside(nodes) do
    third = on_host(peer_name("asleepjoin3", &beside_joining(nodes, &1)))
    beside_joining(nodes, third)
  end

  defp beside_joining(nodes, third) do
    before = Placement.owners(@zones, nodes)
    later = Placement.owners(@zones, Enum.sort([third | nodes]))

    Enum.find_value(0..(@zones - 1), fn index ->
      beside =
        for {_direction, neighbour} <- World.Life.neighbours(Grid.new(100, 100, 25), index),
            neighbour != nil,
            elem(later, neighbour) == third,
            do: neighbour

      if elem(before, index) == elem(later, index) and beside != [],
        do: {third, index, hd(beside)}
    end)
  end

  defp zone_node(node, world, index),
    do: :erpc.call(node, World, :zone_node, [:erpc.call(node, World, :fetch!, [world]), index])
end
