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
    {_peer, first} = start_peer!(home, "demand1")
    nodes = Enum.sort([node(), first])
    # The node to come, named now, under a name that takes a zone of the
    # other node when it joins: the zones it will take are known.
    {third, {index, ^first}} = joining_with_zone(nodes, first)
    all = Enum.sort([third | nodes])
    grid = Grid.new(100, 100, 25)
    {x0, y0, _x1, _y1} = Grid.zone_bounds(grid, index)
    server = Grove.PostgresServer.info()

    store = [
      adapter: :postgres,
      host: server.host,
      port: server.port,
      username: server.username,
      database: Grove.PostgresServer.create_database()
    ]

    opts = fn cluster ->
      small_instance(Grove.DemandT, cluster,
        zones: :on_demand,
        zone_idle: :manual,
        wake_ahead: 0,
        rules: [move_rate: nil],
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]
      )
      |> Keyword.merge(
        store: store,
        accounts: [secret: "one key for the whole cluster, in a test"]
      )
    end

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

  defp third_node(home, third) do
    {_peer, ^third} = start_peer!(home, Atom.to_string(node_name(third)), exact_name: true)
    third
  end

  defp awake(node, world), do: :erpc.call(node, World, :awake_zones, [world])

  defp zone_node(node, world, index),
    do: :erpc.call(node, World, :zone_node, [:erpc.call(node, World, :fetch!, [world]), index])

  # Zones go to nodes by their names (`Placement.owner/2`), and not every
  # name of a node that joins takes a zone of `owner`: a name that does,
  # with that zone.
  defp joining_with_zone(nodes, owner) do
    joining = :"#{peer_name("demand3")}@#{host()}"

    case moving_zone(nodes, Enum.sort([joining | nodes]), owner) do
      nil -> joining_with_zone(nodes, owner)
      found -> {joining, found}
    end
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

  defp host, do: node() |> Atom.to_string() |> String.split("@") |> List.last()

  defp node_name(node),
    do: node |> Atom.to_string() |> String.split("@") |> hd() |> String.to_atom()
end
