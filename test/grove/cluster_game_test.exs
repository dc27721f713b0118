defmodule Grove.ClusterGameTest do
  @moduledoc "A game in a world of several nodes: its state goes with a zone handed to another node."
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

  @tag timeout: 180_000
  test "a zone handed to a node that joins takes its game's layer and its entities' attributes along",
       %{} do
    home = distribute!()
    {_peer, first} = start_peer!(home, "game1")
    nodes = Enum.sort([node(), first])
    # The node to come, named now: the zones it will take are known (some:
    # placement leaves a node none now and then).
    third = on_host(peer_name_with_zones("game3", nodes))
    all = Enum.sort([third | nodes])
    grid = Grid.new(100, 100, 25)
    {index, _owner} = moving_zone(nodes, all)
    {x0, y0, _x1, _y1} = Grid.zone_bounds(grid, index)
    tree = {x0 + 10, y0 + 10}

    opts = fn cluster ->
      small_instance(Grove.GameT, cluster,
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
        game: {Grove.AppleGame, trees: [tree], tick: :manual}
      )
    end

    for node <- nodes, do: start_instance!(node, opts.(peers: nodes, connect_interval: 100))
    world = World.fetch!(Grove.world(Grove.GameT))
    eventually(fn -> assert World.zone_node(world, index) in nodes end, @wait)

    # This process's entity picks the tree's one apple, in a zone of one of the two nodes.
    {tx, ty} = tree
    {:ok, id, _} = World.join(world, at: {tx + 1, ty}, info: %{account: 5})
    tag = make_ref()
    :ok = World.act(world, id, :pick, :w, %{}, tag)
    assert_receive {:grove_act, ^id, ^tag, {:ok, %{carrying: 1}}}, 5000

    # A third node joins and is handed that zone, rows and layer.
    {_peer, ^third} = start_peer_as!(home, third)
    start_instance!(third, opts.(peers: all, connect_interval: 100))

    eventually(
      fn ->
        assert World.zone_node(World.fetch!(world), index) == third
        assert serving?(third, world.name, index)
      end,
      @wait
    )

    assert :erpc.call(third, World, :cell, [world.name, tree]) == {{:tree, 0}, 0}
    assert {%{carrying: 1, account: 5}, 1} = :erpc.call(third, World, :attrs, [world.name, id])

    # Played there: the tree is still bare, the entity still carries its apple.
    tag = make_ref()
    :ok = World.act(world, id, :pick, :w, %{}, tag)
    assert_receive {:grove_act, ^id, ^tag, {:refused, :no_apples}}, 5000
  end

  @tag timeout: 240_000
  @tag :postgres
  test "a node killed with kill -9: its zones come back on the survivors from their last save",
       %{} do
    home = distribute!()
    # The node killed runs zones of its own.
    peers = start_peers_with_zones!(home, ["saves1", "saves2", "saves3"])
    nodes = peers |> Enum.map(&elem(&1, 1)) |> Enum.sort()
    [a, b, c] = nodes
    grid = Grid.new(100, 100, 25)
    owners = Placement.owners(16, nodes)
    # Two trees in a zone of the node to be killed.
    index = Enum.find(0..15, &(elem(owners, &1) == c))
    {x0, y0, _, _} = Grid.zone_bounds(grid, index)
    [saved, unsaved] = [{x0 + 5, y0 + 5}, {x0 + 5, y0 + 15}]

    store = Grove.PostgresServer.store()

    for node <- nodes do
      instance =
        small_instance(Grove.SavesT, [peers: nodes, connect_interval: 100],
          terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
          # Saved only when asked: the test says when the last save was.
          game: {Grove.AppleGame, trees: [saved, unsaved], tick: :manual, save: 3_600_000}
        )
        |> Keyword.merge(
          store: store,
          accounts: [secret: "one key for the whole cluster, in a test"]
        )

      start_instance!(node, instance)
    end

    world = Grove.world(Grove.SavesT)

    eventually(
      fn ->
        for n <- nodes,
            do: assert(:erpc.call(n, Grove.ClusterGame, :zone_node, [world, index]) == c)
      end,
      @wait
    )

    eventually(fn -> assert serving?(c, world, index) end, @wait)

    # A client on a survivor picks the first tree's apple; the zone is saved;
    # then it picks the second's, which no save holds when the node dies.
    picker = Node.spawn_link(a, Grove.ClusterGame, :picker, [self(), world, saved, unsaved])
    assert_receive {:picked, ^picker, :saved, {:ok, %{carrying: 1}}}, 10_000
    :ok = :erpc.call(c, Grove.ClusterGame, :save_now, [world])
    send(picker, :pick_again)
    assert_receive {:picked, ^picker, :unsaved, {:ok, %{carrying: 1}}}, 10_000
    assert :erpc.call(c, World, :cell, [world, unsaved]) == {{:tree, 0}, 0}

    kill!(c)

    # The zone starts again on a survivor, from its save: the first tree
    # bare, the second with the apple the save never knew was picked.
    eventually(
      fn ->
        at = :erpc.call(a, Grove.ClusterGame, :zone_node, [world, index])
        assert at in [a, b] and serving?(at, world, index)
        assert :erpc.call(at, World, :cell, [world, saved]) == {{:tree, 0}, 0}
        assert :erpc.call(at, World, :cell, [world, unsaved]) == {{:tree, 1}, 1}
        assert :erpc.call(at, World, :stats, [world]).game_zones_loaded >= 1
      end,
      @wait
    )
  end

  # A zone that runs on one of `before`'s nodes and on the new one after.
  defp moving_zone(before, all) do
    was = Placement.owners(16, before)
    now = Placement.owners(16, all)
    new = all -- before

    Enum.find_value(0..15, fn index ->
      if elem(now, index) in new, do: {index, elem(was, index)}
    end)
  end
end
