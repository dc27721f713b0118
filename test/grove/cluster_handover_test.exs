defmodule Grove.ClusterHandoverTest do
  @moduledoc "A zone's handover to a node that joins, whose process is killed in the middle of its call."
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
  test "a handover killed in its call keeps the zone here, with what it held; the new owner, which takes the call all the same, runs it from the rows it was given" do
    home = distribute!()
    [{_peer, first}] = start_peers_with_zones!(home, ["cut1"], [node()])
    nodes = Enum.sort([node(), first])
    # The node to come, named now, under a name that takes a zone of this
    # node when it joins.
    moving = &moving_zone(nodes, Enum.sort([&1 | nodes]))
    third = on_host(peer_name("cut3", moving))
    index = moving.(third)
    all = Enum.sort([third | nodes])
    {x0, y0, _x1, _y1} = Grid.zone_bounds(Grid.new(100, 100, 25), index)

    opts =
      small_instance(Grove.CutT, [peers: all, connect_interval: 100],
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
        rules: [move_rate: nil]
      )

    start_instances!(for node <- nodes, do: {node, opts})
    world = Grove.world(Grove.CutT)
    placer = World.Placer.name(world)
    eventually(fn -> assert World.zone_node(World.fetch!(world), index) == node() end, @wait)
    eventually(fn -> assert serving?(node(), world, index) end, @wait)

    # An entity of a client of this node in the zone.
    {:ok, id, cell} = World.join(world, at: {x0 + 5, y0 + 5}, updates: :none)
    assert cell == {x0 + 5, y0 + 5}

    # The node joins; its placer, held once it has placed the zones,
    # takes no call: this node's handover of the zone waits in its call.
    :ok = :sys.suspend(placer)
    {_peer, ^third} = start_peer_as!(home, third)
    start_instance!(third, opts)

    eventually(
      fn -> assert :erpc.call(third, World.Placer, :published, [world]) != nil end,
      @wait
    )

    :ok = :erpc.call(third, :sys, :suspend, [placer])
    :ok = :sys.resume(placer)

    handover =
      eventually(
        fn ->
          %{handovers: handovers} = :sys.get_state(placer)
          [pid] = for {pid, indexes} <- handovers, index in indexes, do: pid
          assert Process.info(pid, :current_function) == {:current_function, {:gen, :do_call, 4}}
          pid
        end,
        @wait
      )

    # The zone gave its rows, and holds what comes: a move of the entity.
    zone = World.zone_pid(world, index)
    assert {:holding, []} = :sys.get_state(zone).handed_over
    :ok = World.move(world, id, :e, :held)
    eventually(fn -> assert {:holding, [_]} = :sys.get_state(zone).handed_over end, @wait)

    # The handover is killed in its call: the zone is kept here, and takes
    # the move it held.
    Process.exit(handover, :kill)
    assert_receive {:grove_move, ^id, :held, {:ok, {x, y}}}, @wait
    assert {x, y} == {x0 + 6, y0 + 5}
    assert World.position(world, id) == {x, y}

    # The call was on its way: the node that joins takes it when it goes
    # on, with the rows the zone gave, and runs the zone.
    :ok = :erpc.call(third, :sys, :resume, [placer])

    eventually(
      fn ->
        for n <- all, do: assert(zone_node(n, world, index) == third)

        assert serving?(third, world, index)
        refute serving?(node(), world, index)
      end,
      @wait
    )

    # What the copy kept here took is lost with it: the entity stands
    # where the rows given in the call put it, though its move was
    # answered `ok`, and its client is not told. Its next step east lands
    # on the cell the lost one was answered with.
    eventually(fn -> assert :erpc.call(third, World, :position, [world, id]) == cell end, @wait)
    :ok = World.move(world, id, :e, :after)
    assert_receive {:grove_move, ^id, :after, {:ok, stepped}}, @wait
    assert stepped == {x0 + 6, y0 + 5}
    refute_received {:grove_lost, ^id}
  end

  defp zone_node(node, world, index),
    do: :erpc.call(node, World, :zone_node, [:erpc.call(node, World, :fetch!, [world]), index])

  # A zone of this node among `before`'s nodes that goes to the new one in `all`.
  defp moving_zone(before, all) do
    was = Placement.owners(16, before)
    now = Placement.owners(16, all)
    [new] = all -- before

    Enum.find(0..15, &(elem(was, &1) == node() and elem(now, &1) == new))
  end
end
