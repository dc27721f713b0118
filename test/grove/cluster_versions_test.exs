defmodule Grove.ClusterVersionsTest do
  # A node of an older release among the members, as in a rolling
  # upgrade: its placer knows a zone a message and a zone a call, and
  # would crash on the forms that came later (many zones in one message or
  # one call). It is sent the forms it knows; a node that says it speaks
  # the later ones is sent those.
  use ExUnit.Case, async: false

  import Grove.ClusterCase

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

  # This node runs the world alone; then a peer joins it as the stand-in
  # of another release (`Grove.ReleasePeer`), speaking `speaks`. Returns
  # the peer, the zones this node serves and those it hands to the peer.
  defp join_release_peer(home, speaks) do
    {_peer, peer} = start_peer!(home, peer_name_with_zones("vold", [node()]), exact_name: true)

    start_instance!(
      node(),
      small_instance(@instance, peers: [node(), peer], connect_interval: 100, boot_wait: 0)
    )

    world = Grove.world(@instance)
    fingerprint = :sys.get_state(Membership.name(@instance)).fingerprint

    :ok =
      :erpc.call(peer, Grove.ReleasePeer, :start, [
        @instance,
        world,
        fingerprint,
        speaks,
        node(),
        self()
      ])

    owners = Placement.owners(16, [node(), peer])
    mine = for index <- 0..15, elem(owners, index) == node(), do: index
    theirs = for index <- 0..15, elem(owners, index) == peer, do: index
    {peer, mine, theirs}
  end
end
