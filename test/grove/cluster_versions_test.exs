defmodule Grove.ClusterVersionsTest do
  # A node of an older release among the members, as in a rolling
  # upgrade: its placer knows a zone a message and a zone a call, and
  # would crash on the forms that came later (many zones in one message or
  # one call). It is sent the forms it knows; a node that says it speaks
  # the later ones is sent those.
  use ExUnit.Case, async: false

  import Grove.ClusterCase
  import Grove.WorldCase, only: [eventually: 2]

  alias Grove.Cluster.{Membership, Placement}

  @moduletag :cluster
  @moduletag :capture_log

  @instance Grove.VersionsT
  @wait 30_000

  setup do
    %{home: distribute!()}
  end

  test "a node of an older release is announced zones one a message and handed them one a call",
       %{home: home} do
    {peer, mine, theirs} = join_release_peer(home, [])

    for index <- theirs,
        do: assert_receive({:release_peer, {:take_over, ^index, _, _, _, _}}, @wait)

    for index <- mine,
        do: assert_receive({:release_peer, {:zone_at, ^index, _at, _epoch, :handed}}, @wait)

    refute_received {:release_peer, {:zones_at, _zones}}
    refute_received {:release_peer, {:take_over_all, _zones}}
    refute Grove.Cluster.speaks?(@instance, peer, :zones_at)
  end

  test "a node that says it speaks them is announced many zones in one message and handed them in one call",
       %{home: home} do
    {peer, mine, theirs} = join_release_peer(home, [:zones_at, :take_over_all])

    assert_receive {:release_peer, {:take_over_all, taken}}, @wait
    assert Enum.map(taken, &elem(&1, 0)) == theirs

    assert_receive {:release_peer, {:zones_at, zones}}, @wait
    assert Enum.map(zones, &elem(&1, 0)) == mine

    refute_received {:release_peer, {:zone_at, _index, _at, _epoch, _how}}
    refute_received {:release_peer, {:take_over, _index, _, _, _, _}}
    assert Grove.Cluster.speaks?(@instance, peer, :take_over_all)
  end

  # A world of 400 zones: more than 100 go to the peer.
  @zones 400
  @many [width: 200, height: 200, zone_size: 10]

  test "zones go to a node that speaks it in calls of 100 at most, each zone once, in order",
       %{home: home} do
    {_peer, _mine, theirs} = join_release_peer(home, [:zones_at, :take_over_all], zones: @zones)
    assert length(theirs) > 100

    calls = take_over_all_calls(length(theirs))
    assert Enum.all?(calls, &(length(&1) <= 100))
    assert length(calls) == div(length(theirs) + 99, 100)
    assert Enum.map(List.flatten(calls), &elem(&1, 0)) == theirs
  end

  test "a node that comes back on an older build while its zones go is handed the rest one a call",
       %{home: home} do
    {peer, _mine, theirs} =
      join_release_peer(home, [:zones_at, :take_over_all], zones: @zones, calls: :downgrade)

    assert_receive {:release_peer, {:take_over_all, first}}, @wait
    assert length(first) == 100
    {taken, rest} = Enum.split(theirs, 100)
    assert Enum.map(first, &elem(&1, 0)) == taken

    for index <- rest,
        do: assert_receive({:release_peer, {:take_over, ^index, _, _, _, _}}, @wait)

    refute_received {:release_peer, {:take_over_all, _zones}}
    refute Grove.Cluster.speaks?(@instance, peer, :take_over_all)
  end

  @fresh [:zones_at, :take_over_all, :take_over_fresh]

  test "a node that stops hands a node that says it speaks it every zone not refused as stale, and does not say it abandons those refused: they run where that node places them",
       %{home: home} do
    {peer, mine, theirs} = join_release_peer(home, @fresh, zones: @zones)
    assert length(mine) > 100
    # A zone in the first call, and one in the last.
    stale = [Enum.at(mine, 1), List.last(mine)]
    calls = stop_refusing!(peer, mine, theirs, stale)

    assert Enum.all?(calls, &match?({:take_over_fresh, _}, &1))
    assert Enum.map(Enum.flat_map(calls, &elem(&1, 1)), &elem(&1, 0)) == mine
    # What the stopped node sent the peer came before this.
    sync_release_peer(peer)
    refute_received {:release_peer, {:abandoned, _index, _from}}
  end

  test "a node that stops goes on handing its zones to a node of an older build that refused a call as stale",
       %{home: home} do
    {peer, mine, theirs} = join_release_peer(home, [:zones_at, :take_over_all], zones: @zones)
    assert length(mine) > 100
    calls = stop_refusing!(peer, mine, theirs, [hd(mine)])

    # The first call refused whole: its zones start again there, empty;
    # the next ones are handed over all the same.
    assert [{:take_over_all, first} | _] = calls
    assert Enum.map(Enum.flat_map(calls, &elem(&1, 1)), &elem(&1, 0)) == mine

    for {index, _, _, _, _} <- first,
        do: assert_receive({:release_peer, {:abandoned, ^index, _}}, @wait)

    refute_received {:release_peer, {:abandoned, _index, _from}}
  end

  # Once every zone of the peer's share (`theirs`) is placed there, the
  # peer refuses the zones `stale` as stale, and this node's world stops:
  # the calls of its handovers, until each of its zones (`mine`) came.
  defp stop_refusing!(peer, mine, theirs, stale) do
    world = Grove.World.fetch!(Grove.world(@instance))

    eventually(
      fn -> for index <- theirs, do: assert(Grove.World.zone_node(world, index) == peer) end,
      @wait
    )

    send(
      {Grove.World.Placer.name(world.name), peer},
      {:release_peer_calls, {:stale, stale}, self()}
    )

    assert_receive :release_peer_calls, @wait
    flush_release_peer()
    :ok = Supervisor.terminate_child(Grove.Application.Supervisor, @instance)
    handover_calls(length(mine))
  end

  # Everything sent to the peer's placer from this node before now has
  # reached the test.
  defp sync_release_peer(peer) do
    world = Grove.world(@instance)
    ref = make_ref()
    send({Grove.World.Placer.name(world), peer}, {:synced, ref})
    assert_receive {:release_peer, {:synced, ^ref}}, @wait
  end

  defp flush_release_peer do
    receive do
      {:release_peer, _} -> flush_release_peer()
    after
      0 -> :ok
    end
  end

  # Calls of many zones the peer got, until `count` zones came.
  defp handover_calls(count) when count <= 0, do: []

  defp handover_calls(count) do
    assert_receive {:release_peer, {form, zones} = call}
                   when form in [:take_over_all, :take_over_fresh],
                   @wait

    [call | handover_calls(count - length(zones))]
  end

  test "a node that does not answer a handover's call is handed nothing more in that run: its zones stay, and are offered again from the first",
       %{home: home} do
    {peer, _mine, theirs} =
      join_release_peer(home, [:zones_at, :take_over_all], zones: @zones, calls: :hold)

    assert length(theirs) > 100
    assert_receive {:release_peer, {:take_over_all, first}}, @wait

    # The call times out after 30 s: the next call offers the same zones
    # again (kept, and tried again), not the next hundred, each held
    # for a timeout in turn behind a node that does not answer.
    assert_receive {:release_peer, {:take_over_all, again}}, 2 * @wait
    assert Enum.map(again, &elem(&1, 0)) == Enum.map(first, &elem(&1, 0))
    world = Grove.World.fetch!(Grove.world(@instance))
    for index <- theirs, do: assert(Grove.World.zone_node(world, index) == node())
    stop_silent!(peer)
  end

  test "a node that pauses stops the handovers under way: none goes on giving its zones",
       %{home: home} do
    # The peer first by name: without it, this node alone has no quorum.
    {peer, _mine, _theirs} =
      join_release_peer(home, [:zones_at, :take_over_all], base: "ahold", calls: :hold)

    assert peer < node()
    assert_receive {:release_peer, {:take_over_all, _zones}}, @wait
    world = Grove.world(@instance)
    %{handovers: handovers} = :sys.get_state(Grove.World.Placer.name(world))
    [handover] = Map.keys(handovers)
    ref = Process.monitor(handover)

    send({Membership.name(@instance), peer}, :leave)
    assert_receive {:DOWN, ^ref, :process, ^handover, :killed}, @wait
    assert Grove.World.Placer.paused?(world)
    stop_silent!(peer)
  end

  test "a node that stops while a batch of its zones is being handed over ends that handover without waiting for its call, and hands every zone over itself as it leaves, each once",
       %{home: home} do
    {peer, _mine, theirs} =
      join_release_peer(home, [:zones_at, :take_over_all], zones: @zones, calls: :step)

    assert length(theirs) > 100
    assert_receive {:release_peer, {:take_over_all, _first}}, @wait
    world = Grove.world(@instance)
    %{handovers: handovers} = :sys.get_state(Grove.World.Placer.name(world))
    [handover] = Map.keys(handovers)
    ref = Process.monitor(handover)

    stopping =
      Task.async(fn -> Supervisor.terminate_child(Grove.Application.Supervisor, @instance) end)

    # Its call not answered yet: ended all the same.
    assert_receive {:DOWN, ^ref, :process, ^handover, :killed}, @wait
    # That call answered, too late for anyone.
    answer(peer, world)

    # Every zone from the node that leaves (the peer is the only member
    # left), those of the call under way again: each once.
    zones = leave_calls(peer, world, @zones)
    assert Enum.sort(Enum.map(zones, &elem(&1, 0))) == Enum.to_list(0..(@zones - 1))
    assert Task.await(stopping, @wait) == :ok
    sync_release_peer(peer)
    refute_received {:release_peer, {:abandoned, _index, _node}}
  end

  test "a node that stops while it hands zones to a node that never answers, and then dies, stops in its own time: the handover under way ends, and what it leaves is abandoned",
       %{home: home} do
    {peer, _mine, _theirs} =
      join_release_peer(home, [:zones_at, :take_over_all], zones: @zones, calls: :hold)

    assert_receive {:release_peer, {:take_over_all, _first}}, @wait
    world = Grove.world(@instance)
    placer = Process.whereis(Grove.World.Placer.name(world))
    %{handovers: handovers} = :sys.get_state(placer)
    [handover] = Map.keys(handovers)
    handover_ref = Process.monitor(handover)
    placer_ref = Process.monitor(placer)

    stopping =
      Task.async(fn -> Supervisor.terminate_child(Grove.Application.Supervisor, @instance) end)

    assert_receive {:DOWN, ^handover_ref, :process, ^handover, :killed}, @wait
    # Its leave's first call waits on the peer, which dies under it.
    assert_receive {:release_peer, {:take_over_all, _zones}}, @wait
    stop_silent!(peer)

    # Stopped, not killed at the end of its shutdown time.
    assert_receive {:DOWN, ^placer_ref, :process, ^placer, :shutdown}, 2 * @wait
    assert Task.await(stopping, @wait) == :ok
  end

  # Calls of `{:take_over_all, zones}` the peer got and was told to
  # answer (`calls: :step`), until `count` zones came; their zones.
  defp leave_calls(_peer, _world, count) when count <= 0, do: []

  defp leave_calls(peer, world, count) do
    assert_receive {:release_peer, {:take_over_all, zones}}, @wait
    answer(peer, world)
    zones ++ leave_calls(peer, world, count - length(zones))
  end

  defp answer(peer, world), do: send({Grove.World.Placer.name(world), peer}, :answer)

  # The placer's module of a build from before its placement was read
  # without a message (`published/1`): its placement (`locations/1`),
  # which every build has, says it placed the zones.
  @older_placer """
  defmodule Grove.World.Placer do
    def name(world), do: :"\#{world}.placer"
    def paused?(_world), do: false
    def locations(_world), do: [{node(), 1}]
  end
  """

  test "a node of a build that lacks what a handover asks it first is asked for its placement instead, and handed its zones",
       %{home: home} do
    {peer, _mine, theirs} = join_release_peer(home, [], placer: @older_placer)
    refute :erpc.call(peer, Kernel, :function_exported?, [Grove.World.Placer, :published, 1])

    for index <- theirs,
        do: assert_receive({:release_peer, {:take_over, ^index, _, _, _, _}}, @wait)
  end

  # A peer whose placer answers no call stops, so that none of this
  # node's calls waits for it as its world stops.
  defp stop_silent!(peer) do
    true = Node.monitor(peer, true)
    Node.spawn(peer, :erlang, :halt, [])
    assert_receive {:nodedown, ^peer}, @wait
  end

  test "what a node speaks is forgotten when it goes down",
       %{home: home} do
    {peer, _mine, _theirs} = join_release_peer(home, [:zones_at, :take_over_all])
    eventually(fn -> assert Grove.Cluster.speaks?(@instance, peer, :take_over_all) end, 3000)

    true = Node.monitor(peer, true)
    true = Node.disconnect(peer)
    assert_receive {:nodedown, ^peer}, @wait
    eventually(fn -> refute Grove.Cluster.speaks?(@instance, peer, :take_over_all) end, 3000)
  end

  test "a membership started again forgets what nodes said they speak before" do
    start_instance!(
      node(),
      small_instance(@instance, peers: [node()], connect_interval: 100, boot_wait: 0)
    )

    name = Membership.name(@instance)
    old = Process.whereis(name)
    :persistent_term.put({Membership, @instance, :speaks}, %{:gone@nowhere => [:zones_at]})
    ref = Process.monitor(old)
    Process.exit(old, :kill)
    assert_receive {:DOWN, ^ref, :process, ^old, :killed}, @wait

    new =
      eventually(
        fn ->
          pid = Process.whereis(name)
          assert is_pid(pid) and pid != old
          pid
        end,
        3000
      )

    # Its start done: what it publishes is read after it.
    _state = :sys.get_state(new)
    refute Grove.Cluster.speaks?(@instance, :gone@nowhere, :zones_at)
  end

  # Calls of `{:take_over_all, zones}` the peer got, until `count` zones came.
  defp take_over_all_calls(count) when count <= 0, do: []

  defp take_over_all_calls(count) do
    assert_receive {:release_peer, {:take_over_all, zones}}, @wait
    [zones | take_over_all_calls(count - length(zones))]
  end

  # This node runs the world alone; then a peer joins it as the stand-in
  # of another release (`Grove.ReleasePeer`), speaking `speaks`. Returns
  # the peer, the zones this node serves and those it hands to the peer.
  # `opts`: the world's `:zones` (16, or `@zones`), the peer's name's
  # `:base`, how its placer answers calls (`:calls`), and the source of
  # the placer's module of its build (`:placer`), loaded there first.
  defp join_release_peer(home, speaks, opts \\ []) do
    zones = Keyword.get(opts, :zones, 16)
    name = peer_name_with_zones(Keyword.get(opts, :base, "vold"), [node()], zones)
    {_peer, peer} = start_peer!(home, name, exact_name: true)

    # The peer not named beforehand: this node alone has a quorum.
    start_instance!(
      node(),
      small_instance(
        @instance,
        [peers: [node()], connect_interval: 100, boot_wait: 0],
        if(zones == 16, do: [], else: @many)
      )
    )

    world = Grove.world(@instance)
    fingerprint = :sys.get_state(Membership.name(@instance)).fingerprint

    # The placer's module of an older build, in place of this one's.
    if source = opts[:placer], do: [_ | _] = :erpc.call(peer, Code, :compile_string, [source])

    :ok =
      :erpc.call(peer, Grove.ReleasePeer, :start, [
        @instance,
        world,
        fingerprint,
        speaks,
        node(),
        self(),
        [calls: Keyword.get(opts, :calls, :answer)]
      ])

    owners = Placement.owners(zones, [node(), peer])
    mine = for index <- 0..(zones - 1), elem(owners, index) == node(), do: index
    theirs = for index <- 0..(zones - 1), elem(owners, index) == peer, do: index
    {peer, mine, theirs}
  end
end
