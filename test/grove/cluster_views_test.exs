defmodule Grove.ClusterViewsTest do
  # Viewers on one node of zones that run on another: the zone sends each
  # delta once per watching node, to that node's relay, which writes it in
  # the node's own feed, where its viewers read it.
  use ExUnit.Case, async: false

  import Grove.ClusterCase
  import Grove.WorldCase, only: [eventually: 2]

  alias Grove.World
  alias Grove.Cluster.Placement
  alias Grove.World.{Grid, View}

  @moduletag :cluster
  @moduletag :capture_log

  # Nodes meet over real sockets: allow a busy machine half a minute.
  @wait 3000
  # Meadow everywhere and no rate limit, so that every step is taken.
  @open [
    terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
    rules: [move_rate: nil]
  ]

  setup do
    %{home: distribute!()}
  end

  @tag timeout: 120_000
  test "viewers on two other nodes see an entity of the zone's node move, through deltas sent once per node and tick",
       %{home: home} do
    {_, c} = start_peer!(home, "views2")
    {_, b} = start_peer!(home, peer_name_with_zones("views1", [node(), c]), exact_name: true)
    nodes = Enum.sort([node(), b, c])
    world = start_world!(Grove.ViewsT, nodes)

    zone = Enum.find(0..15, &(Placement.owner(&1, nodes) == b))
    {x0, y0} = corner(world, zone)

    # An entity of node b's, in its own zone, and viewers of it on this
    # node (two) and on node c (one).
    {mover, id, {mx, my}} = start_mover!(b, world, at: {x0 + 14, y0 + 12})
    {:ok, _me, _} = World.join(world, at: {x0 + 12, y0 + 12}, updates: :view)
    start_mover!(node(), world, at: {x0 + 10, y0 + 12}, updates: :view)
    start_mover!(c, world, at: {x0 + 12, y0 + 10}, updates: :view)

    view = View.new({x0 + 12, y0 + 12}, 8)
    view = await_view(view, world, &(View.known(&1)[id] == {mx, my, 0}))
    assert %{^zone => seq} = view.seqs

    before = zone_stats(b, world)
    Process.delete(:snapshots)
    assert move!(mover, :e) == {:ok, {mx + 1, my}}
    :ok = World.tick(world)
    assert move!(mover, :s) == {:ok, {mx + 1, my + 1}}
    :ok = World.tick(world)

    view = await_view(view, world, &(View.known(&1)[id] == {mx + 1, my + 1, 0}))
    # Seen through the deltas this node's feed holds: no snapshot since.
    assert Process.get(:snapshots) == nil
    assert view.seqs[zone] == seq + 2

    # Two deltas, each sent once to this node and once to node c, however
    # many viewers each has.
    eventually(
      fn ->
        after_ = zone_stats(b, world)
        assert after_.deltas_published - before.deltas_published == 2
        assert after_.deltas_relayed - before.deltas_relayed == 4
        assert after_.deltas_dropped == 0
      end,
      @wait
    )

    # Node c's feed holds them too, under the zone's numbers, once its
    # relay has handled what was sent to it (counted above when sent).
    eventually(
      fn ->
        assert {[_, _], latest} =
                 :erpc.call(c, World, :view_deltas, [world, zone, seq, {View, :raw}])

        assert latest == seq + 2
      end,
      @wait
    )

    # What crossed the network is counted per node, and exported.
    assert %{sent: sent, received: received} = Grove.Cluster.traffic()[b]
    assert sent > 0 and received > 0

    metrics =
      :erpc.call(b, Grove.Metrics.Prometheus, :render, [Grove.ViewsT]) |> IO.iodata_to_binary()

    assert metrics =~ ~r/grove_view_deltas_relayed_total\{node="[^"]+"\} [1-9]/
    assert metrics =~ ~s(grove_cluster_bytes_total{peer="#{node()}",direction="sent",node="#{b}"})
  end

  @tag timeout: 180_000
  test "a watched zone handed over to a new node carries on from its number, and its viewer elsewhere keeps a true picture",
       %{home: home} do
    # Under names that leave each node zones of its own: a third node could
    # otherwise own none (one run in 200), and then no fourth name leaves
    # every member one.
    [{_, b}, {_, c}] = start_peers_with_zones!(home, ["handover1", "handover2"], [node()])
    nodes = Enum.sort([node(), b, c])
    {_peer, d} = start_peer!(home, peer_name_with_zones("handover3", nodes), exact_name: true)
    all = Enum.sort([d | nodes])

    # A zone of node b or c now that node d will take when it joins (any
    # zone that moves to d, this node's at worst).
    moving = for zone <- 0..15, Placement.owner(zone, all) == d, do: zone

    zone = Enum.find(moving, &(Placement.owner(&1, nodes) != node())) || hd(moving)

    owner = Placement.owner(zone, nodes)
    world = start_world!(Grove.HandoverT, nodes)
    {x0, y0} = corner(world, zone)

    {mover, id, {mx, my}} = start_mover!(owner, world, at: {x0 + 14, y0 + 12})
    {:ok, me, _} = World.join(world, at: {x0 + 12, y0 + 12}, updates: :view)

    view = View.new({x0 + 12, y0 + 12}, 8)
    view = await_view(view, world, &(View.known(&1)[id] == {mx, my, 0}))
    assert move!(mover, :e) == {:ok, {mx + 1, my}}
    :ok = World.tick(world)
    view = await_view(view, world, &(View.known(&1)[id] == {mx + 1, my, 0}))
    seq = view.seqs[zone]
    assert seq > 0

    # Node d joins and takes the zone, with both entities in it.
    start_instance!(
      d,
      small_instance(Grove.HandoverT, [peers: all, connect_interval: 5000], @open)
    )

    eventually(
      fn ->
        assert World.zone_node(World.fetch!(world), zone) == d
        assert :erpc.call(d, World, :zone_pid, [world, zone]) != nil
      end,
      @wait
    )

    # The new owner numbers on from the old one's last delta.
    state = :sys.get_state(:erpc.call(d, World, :zone_pid, [world, zone]))
    assert state.views.seq >= seq
    assert state.views.subscriptions.nodes == %{node() => 1}

    # Moves made there reach the viewer, and its picture is the zone's own.
    assert move!(mover, :w) == {:ok, {mx, my}}
    :ok = World.tick(world)
    assert move!(mover, :n) == {:ok, {mx, my - 1}}
    :ok = World.tick(world)

    view = await_view(view, world, &(View.known(&1)[id] == {mx, my - 1, 0}))
    assert view.seqs[zone] > seq

    truth =
      for row <-
            :erpc.call(d, :ets, :tab2list, [
              elem(:erpc.call(d, World, :fetch!, [world]).tables, zone)
            ]),
          into: %{},
          do: {elem(row, 0), {elem(row, 1), elem(row, 2), elem(row, 4)}}

    assert Map.keys(truth) |> Enum.sort() == Enum.sort([id, me])
    known = View.known(view)
    assert Map.take(known, Map.keys(truth)) == truth
    # Nothing twice, nothing that is not there.
    assert known |> Map.keys() |> Enum.sort() == Enum.sort([id, me])
  end

  @tag timeout: 120_000
  test "a viewer whose view takes in a zone on another node and leaves it at once is left without it",
       %{home: home} do
    # Under a name that gives it such a zone: one in 3,000 drawn at
    # random owns none but in the west column.
    [{_peer, b}] = start_peers_with_zones!(home, ["passing"], [node()], fits: &east_zone?/1)
    nodes = Enum.sort([node(), b])
    world = start_world!(Grove.PassingT, nodes)
    owners = Placement.owners(16, nodes)

    # A zone of node b's with a zone to its west; the viewer stands in the
    # western one, one step short of seeing it.
    zone = Enum.find(0..15, &(elem(owners, &1) == b and rem(&1, 4) > 0))
    {x0, y0} = corner(world, zone)
    {:ok, me, _} = World.join(world, at: {x0 - 9, y0 + 12}, updates: :view)
    zone_pid = :erpc.call(b, World, :zone_pid, [world, zone])
    me_watching = {self(), {View, :raw}}

    subscribed? = fn ->
      Grove.World.Zone.Views.member?(
        :erpc.call(b, :sys, :get_state, [zone_pid]).views,
        me_watching
      )
    end

    # The zone's snapshot and then its word that the viewer is gone: the
    # first comes through this node's relay, held back here, as a busy
    # relay would hold it, while the second is on its way.
    relay = Process.whereis(World.Relay.name(world))
    :ok = :sys.suspend(relay)

    try do
      :ok = World.move(world, me, :e)
      assert_receive {:grove_move, ^me, _, {:ok, _}}, 10_000
      eventually(fn -> assert subscribed?.() end, @wait)
      :ok = World.move(world, me, :w)
      assert_receive {:grove_move, ^me, _, {:ok, _}}, 10_000
      eventually(fn -> refute subscribed?.() end, @wait)
    after
      :ok = :sys.resume(relay)
    end

    # Everything the relay held has reached this process.
    _ = :sys.get_state(relay)
    view = drain(View.new({x0 - 9, y0 + 12}, 8))
    refute Map.has_key?(view.seqs, zone), "the view still holds the zone it left"
  end

  ## Helpers

  # Whether a peer owns a zone with a zone west of it, among this node's
  # and its own.
  defp east_zone?([peer]) do
    owners = Placement.owners(16, [node(), peer])
    Enum.any?(0..15, &(elem(owners, &1) == peer and rem(&1, 4) > 0))
  end

  # A world on `nodes`, once every zone runs where placement puts it.
  defp start_world!(name, nodes) do
    cluster = [peers: nodes, connect_interval: 100]
    start_instances!(for node <- nodes, do: {node, small_instance(name, cluster, @open)})
    world = Grove.world(name)
    owners = Placement.owners(16, nodes)

    eventually(
      fn ->
        for node <- nodes do
          assert :erpc.call(node, Grove.Cluster, :members, [name]) == nodes
          assert :erpc.call(node, World, :ready?, [world])
        end

        for zone <- 0..15,
            do: assert(World.zone_node(World.fetch!(world), zone) == elem(owners, zone))
      end,
      @wait
    )

    world
  end

  defp corner(world, zone) do
    {x0, y0, _x1, _y1} = Grid.zone_bounds(World.grid(world), zone)
    {x0, y0}
  end

  defp zone_stats(node, world), do: :erpc.call(node, World, :stats, [world])

  # Feeds the view what arrives and what its node's feed holds until it
  # shows what `shown?` looks for; snapshots are counted in `:snapshots`.
  defp await_view(view, world, shown?, tries \\ 300) do
    view = view |> drain() |> View.catch_up(world)

    cond do
      shown?.(view) ->
        view

      tries == 0 ->
        flunk("the view never showed it; it holds #{inspect(View.known(view))}")

      true ->
        receive do
          {:grove_view, _, _, _, _} = message ->
            await_view(take(view, message), world, shown?, tries - 1)

          {:grove_view, _, :closed} = message ->
            await_view(take(view, message), world, shown?, tries - 1)
        after
          10 -> await_view(view, world, shown?, tries - 1)
        end
    end
  end

  defp drain(view) do
    receive do
      {:grove_view, _, _, _, _} = message -> drain(take(view, message))
      {:grove_view, _, :closed} = message -> drain(take(view, message))
    after
      0 -> view
    end
  end

  defp take(view, {:grove_view, _zone, :snapshot, _seq, _data} = message) do
    Process.put(:snapshots, Process.get(:snapshots, 0) + 1)
    View.apply_message(view, message)
  end

  defp take(view, message), do: View.apply_message(view, message)
end
