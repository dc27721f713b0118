defmodule Grove.ClusterTest do
  use ExUnit.Case, async: false

  import Grove.ClusterCase
  import Grove.WorldCase, only: [eventually: 2]

  # Nodes meet over real sockets: allow a busy machine half a minute.
  @wait 3000

  alias Grove.Cluster
  alias Grove.Cluster.Fingerprint
  alias Grove.World.Placement

  @moduletag :cluster
  # Refusals are logged as errors, as an operator must see them.
  @moduletag :capture_log

  describe "options" do
    test "a named node needs a cookie, and nodes are name@host" do
      assert_raise ArgumentError, ~r/needs a cookie.*no default/, fn ->
        Cluster.validate!(node: "grove1@127.0.0.1")
      end

      assert_raise ArgumentError, ~r/:peers: a node is name@host/, fn ->
        Cluster.validate!(peers: ["grove2"])
      end

      assert Cluster.validate!(peers: ["a@h", :b@h])[:peers] == [:a@h, :b@h]
    end

    test "a cluster of several nodes refuses SQLite and a key each node would make, and says why" do
      assert_raise ArgumentError, ~r/needs PostgreSQL.*SQLite/, fn ->
        Grove.Config.new(store: [path: "x.db"], cluster: [peers: ["grove2@127.0.0.1"]])
      end

      postgres = [adapter: :postgres, host: "db", database: "grove"]

      assert_raise ArgumentError, ~r/one token key made once for all of them/, fn ->
        Grove.Config.new(
          store: postgres,
          accounts: [secret_path: "/nonexistent/key"],
          cluster: [peers: ["grove2@127.0.0.1"]]
        )
      end

      assert %Grove.Config{} =
               Grove.Config.new(
                 store: postgres,
                 accounts: [secret: String.duplicate("k", 32)],
                 cluster: [peers: ["grove2@127.0.0.1"]]
               )

      # One node with SQLite is as before.
      assert %Grove.Config{} = Grove.Config.new(store: [path: "x.db"])
    end

    test "the cookie is wrapped, so the configuration cannot print it" do
      config = Grove.Config.new(cluster: [node: "grove1@127.0.0.1", cookie: "sesame-cookie"])
      refute inspect(config) =~ "sesame-cookie"
    end
  end

  describe "fingerprints" do
    test "name every setting that differs, and never the token key" do
      here = Fingerprint.new(Grove.Config.new(world: [seed: 1, width: 200]))
      there = Fingerprint.new(Grove.Config.new(world: [seed: 2, width: 200]))

      assert Fingerprint.differences(here, here) == []
      assert [difference] = Fingerprint.differences(here, there)
      assert difference =~ "terrain differs"
      assert difference =~ "seed: 1"
      assert Fingerprint.group(here) != Fingerprint.group(there)

      keyed = fn key ->
        Fingerprint.new(
          Grove.Config.new(store: [path: "x.db"], accounts: [secret: String.duplicate(key, 32)])
        )
      end

      assert [difference] = Fingerprint.differences(keyed.("a"), keyed.("b"))
      assert difference =~ "token key differs"
      refute difference =~ String.duplicate("a", 32)
    end
  end

  describe "three nodes" do
    setup do
      %{home: distribute!()}
    end

    test "join, agree on where every zone runs, refuse a node whose world differs, and see one go",
         %{home: home} do
      peers = for n <- 1..2, do: start_peer!(home, "grove#{n}")
      nodes = [node() | Enum.map(peers, &elem(&1, 1))]
      cluster = [peers: nodes, connect_interval: 100]

      for node <- nodes, do: start_instance!(node, small_instance(Grove.ClusterT, cluster))

      expected = Enum.sort(nodes)

      eventually(
        fn ->
          for node <- nodes,
              do: assert(:erpc.call(node, Cluster, :members, [Grove.ClusterT]) == expected)
        end,
        @wait
      )

      # The status line names the node and the cluster's size.
      {line, _} = :erpc.call(hd(tl(nodes)), Grove.Status, :line, [Grove.ClusterT])
      assert line =~ "grove #{hd(tl(nodes))} (cluster of 3):"

      # Its metrics carry its name, so one Prometheus can scrape them all.
      metrics =
        :erpc.call(hd(tl(nodes)), Grove.Metrics.Prometheus, :render, [Grove.ClusterT])
        |> IO.iodata_to_binary()

      assert metrics =~ ~s(grove_entities{node="#{hd(tl(nodes))}"} )

      owners = Placement.owners(16, expected)

      for node <- nodes,
          do: assert(:erpc.call(node, Cluster, :owners, [Grove.ClusterT]) == owners)

      # Every member owns some of the 16 zones of a 100 x 100 world of 25 x 25 zones.
      assert Map.keys(Placement.shares(owners)) |> Enum.sort() == expected

      # A fourth node with another seed connects but is never a member.
      {_peer, odd} = start_peer!(home, "odd")

      start_instance!(
        odd,
        small_instance(Grove.ClusterT, [peers: nodes, connect_interval: 100], seed: 99)
      )

      eventually(
        fn ->
          assert [difference] = Cluster.refused(Grove.ClusterT)[odd]
          assert difference =~ "seed: 99"
        end,
        @wait
      )

      assert Cluster.members(Grove.ClusterT) == expected
      assert :erpc.call(odd, Cluster, :members, [Grove.ClusterT]) == [odd]

      # A member that goes is gone from everyone's list, and its zones with it.
      [{gone_peer, gone} | _] = peers
      :peer.stop(gone_peer)
      left = expected -- [gone]

      eventually(fn -> assert Cluster.members(Grove.ClusterT) == left end, @wait)
      assert Cluster.owners(Grove.ClusterT) == Placement.owners(16, left)
    end
  end
end
