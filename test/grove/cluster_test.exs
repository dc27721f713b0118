defmodule Grove.ClusterTest do
  use ExUnit.Case, async: false

  import Grove.ClusterCase
  import Grove.WorldCase, only: [eventually: 2]

  # Nodes meet over real sockets: allow a busy machine half a minute.
  @wait 3000

  alias Grove.Cluster
  alias Grove.Cluster.Fingerprint
  alias Grove.Cluster.Placement

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

      assert_raise ArgumentError, ~r/:boot_wait must be a non-negative integer/, fn ->
        Cluster.validate!(boot_wait: -1)
      end
    end

    test "a cluster of several nodes refuses SQLite and a key each node would make, and says why; it takes bacteria" do
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

      # Bacteria span the nodes of a cluster, whose zones run always or on demand.
      for zones <- [:always, :on_demand] do
        assert %Grove.Config{} =
                 Grove.Config.new(
                   world: [life: [interval: 1000], zones: zones],
                   store: postgres,
                   accounts: [secret: String.duplicate("k", 32)],
                   cluster: [peers: ["grove2@127.0.0.1"]]
                 )
      end

      assert %Grove.Config{} = Grove.Config.new(world: [life: [interval: 1000]])

      # A cluster places every zone, awake or not: a world of more than
      # 100,000 is refused before anything starts, saying what to change.
      assert_raise ArgumentError,
                   ~r/400000000 zones.*the most a cluster places.*GROVE_WIDTH/,
                   fn ->
                     Grove.Config.new(
                       world: [width: 1_000_000, height: 1_000_000, zones: :on_demand],
                       cluster: [peers: ["grove2@127.0.0.1"]]
                     )
                   end

      assert %Grove.Config{} =
               Grove.Config.new(world: [width: 1_000_000, height: 1_000_000, zones: :on_demand])
    end

    test "the cookie is wrapped, so the configuration cannot print it" do
      config = Grove.Config.new(cluster: [node: "grove1@127.0.0.1", cookie: "sesame-cookie"])
      refute inspect(config) =~ "sesame-cookie"
    end
  end

  defp fingerprint(config), do: Grove.Config.fingerprint(config, Grove.World.new!(config.world))

  describe "fingerprints" do
    test "name every setting that differs, and never the token key" do
      here = fingerprint(Grove.Config.new(world: [seed: 1, width: 200]))
      there = fingerprint(Grove.Config.new(world: [seed: 2, width: 200]))

      assert Fingerprint.differences(here, here) == []
      assert [difference] = Fingerprint.differences(here, there)
      assert difference =~ "terrain differs"
      assert difference =~ "seed: 1"
      assert Fingerprint.group(here) != Fingerprint.group(there)

      # Bacteria too: zones beside each other on two nodes compute one automaton.
      assert [difference] =
               Fingerprint.differences(
                 fingerprint(Grove.Config.new(world: [life: [rule: "B3/S23"]])),
                 fingerprint(Grove.Config.new(world: [life: [rule: "B36/S23"]]))
               )

      assert difference =~ "life differs"

      keyed = fn key ->
        fingerprint(
          Grove.Config.new(store: [path: "x.db"], accounts: [secret: String.duplicate(key, 32)])
        )
      end

      assert [difference] = Fingerprint.differences(keyed.("a"), keyed.("b"))
      assert difference =~ "token key differs"
      refute difference =~ String.duplicate("a", 32)
    end
  end

  describe "one world on three nodes" do
    setup do
      %{home: distribute!()}
    end

    @tag timeout: 180_000
    test "runs each zone on one node; actors of every node move through all of them; a fourth node takes its zones and nothing is lost",
         %{home: home} do
      # Each of the three nodes, and the fourth that joins them, runs zones;
      # the three, three at least, for their actors to walk into.
      peers = start_peers_with_zones!(home, ["zones1", "zones2"], [node()], least_zones: 3)
      nodes = Enum.sort([node() | Enum.map(peers, &elem(&1, 1))])
      cluster = [peers: nodes, connect_interval: 100]
      # The cluster's total: 40 on each node.
      actors = [count: 120, interval: 200, settle: 300]

      start_instances!(
        for node <- nodes,
            do: {node, Keyword.put(small_instance(Grove.ZonesT, cluster), :actors, actors)}
      )

      world = Grove.world(Grove.ZonesT)
      eventually(fn -> assert_one_owner(nodes, world) end, @wait)

      # Every node's actors join and move, wherever their zones run.
      eventually(
        fn ->
          for node <- nodes do
            assert running(node, Grove.ZonesT) == 40
            assert actor_counts(node).ok > 200
          end
        end,
        @wait
      )

      # Zones of every node hold actors of every other node, once they have
      # walked far enough: they go where their steps take them.
      eventually(
        fn ->
          owners = for node <- nodes, into: %{}, do: {node, owner_nodes(node, world)}

          unless Enum.all?(nodes, fn node -> Enum.sort(Map.get(owners, node)) == nodes end) do
            flunk(
              "the nodes whose actors stand in each node's zones: #{inspect(owners)}; " <>
                "zones by node: #{inspect(zones_by_node(nodes, world))}"
            )
          end
        end,
        @wait
      )

      # The zones are asked one after the other while the actors walk: an
      # entity that crosses between two answers is seen in both once. A
      # real duplicate stays, and fails every reading.
      eventually(
        fn ->
          assert :ok = :erpc.call(node(), Grove.World, :audit, [world])
          assert length(Grove.World.Audit.residents(Grove.World.fetch!(world))) == 120
        end,
        @wait
      )

      # A fourth node joins: the zones it now owns are handed to it, with their entities.
      {_peer, fourth} = start_peer!(home, peer_name_with_zones("zones4", nodes), exact_name: true)

      all = Enum.sort([fourth | nodes])

      start_instance!(
        fourth,
        Keyword.put(
          small_instance(Grove.ZonesT, peers: all, connect_interval: 5000),
          :actors,
          actors
        )
      )

      eventually(
        fn ->
          assert_one_owner(all, world)

          zone_nodes =
            Enum.map(
              0..15,
              &:erpc.call(node(), Grove.World, :zone_node, [Grove.World.fetch!(world), &1])
            )

          # Only once it fails: what each node saw, asked of every node.
          unless fourth in zone_nodes do
            flunk(
              "the fourth node runs no zone: the members each node sees: " <>
                inspect(
                  for node <- all, do: {node, :erpc.call(node, Cluster, :members, [Grove.ZonesT])}
                )
            )
          end
        end,
        @wait
      )

      # It takes its share of the actors too; the total stays what it was.
      eventually(
        fn ->
          assert Enum.map(all, &running(&1, Grove.ZonesT)) == [30, 30, 30, 30]
          assert length(Grove.World.Audit.residents(Grove.World.fetch!(world))) == 120
        end,
        @wait
      )

      eventually(fn -> assert :ok = Grove.World.audit(world) end, @wait)

      # Every move got its outcome: none was given up on for want of one.
      for node <- all do
        assert actor_counts(node).expired == 0
      end
    end
  end

  # Every zone runs on exactly one node, the one every node names for it
  # (a zone handed away lingers for a while, passing on what comes late).
  defp assert_one_owner(nodes, world) do
    running =
      for node <- nodes,
          index <- 0..15,
          pid = :erpc.call(node, Grove.World, :zone_pid, [world, index]),
          pid != nil,
          :erpc.call(node, :sys, :get_state, [pid]).handed_over == nil,
          do: {index, node}

    assert Enum.sort(Enum.map(running, &elem(&1, 0))) == Enum.to_list(0..15)

    for node <- nodes, {index, at} <- running do
      assert :erpc.call(node, Grove.World, :zone_node, [Grove.World.fetch!(world), index]) == at
    end

    # And where placement puts it: a node that joined late (or waited for a
    # quorum) has been handed its share.
    assert Enum.sort(running) ==
             Enum.with_index(Tuple.to_list(Placement.owners(16, nodes)), &{&2, &1})
  end

  # How many of a node's actors are in the world, by its own count.
  defp running(node, instance),
    do: :erpc.call(node, Grove.Actors, :running, [Grove.actors(instance)])

  # What a node's actors counted (read there: counters are the node's own).
  defp actor_counts(node) do
    stats = :erpc.call(node, Grove.Actors, :stats, [Grove.actors(Grove.ZonesT)])
    :erpc.call(node, Grove.Actors.Stats, :read, [stats]).counts
  end

  # The nodes of the owners of the entities in one node's zones.
  defp zones_by_node(nodes, world) do
    for node <- nodes, into: %{} do
      w = :erpc.call(node, Grove.World, :fetch!, [world])

      {node,
       for(
         index <- 0..15,
         :erpc.call(node, Grove.World, :zone_node, [w, index]) == node,
         do: index
       )}
    end
  end

  defp owner_nodes(node, world) do
    w = :erpc.call(node, Grove.World, :fetch!, [world])

    for index <- 0..15,
        :erpc.call(node, Grove.World, :zone_node, [w, index]) == node,
        row <- :erpc.call(node, :ets, :tab2list, [elem(w.tables, index)]),
        uniq: true,
        do: node(elem(row, 3))
  end

  describe "a zone handed over at an epoch no newer than the one known" do
    setup do
      distribute!()
      :ok
    end

    # What a node taken for lost, whose zones were started again since,
    # hands over of its old copies, or a call that came again after one
    # taken whose answer was lost.
    test "is refused, with its reason, counted and logged once a call, and the zone runs on as placed" do
      instance = Grove.StaleTakeT

      start_instance!(
        node(),
        small_instance(instance, peers: [node()], connect_interval: 100, boot_wait: 0)
      )

      world = Grove.World.fetch!(Grove.world(instance))
      placer = Grove.World.Placer.name(world.name)

      placed =
        eventually(fn -> assert [_ | _] = Grove.World.Placer.locations(world.name) end, @wait)

      [{here, epoch} | _] = placed
      assert here == node()
      given = {[], [], []}

      log =
        ExUnit.CaptureLog.capture_log(fn ->
          assert {:error, :stale} =
                   GenServer.call(
                     placer,
                     {:take_over_all, [{0, given, [], 0, epoch}, {1, given, [], 0, epoch}]}
                   )

          assert {:error, :stale} = GenServer.call(placer, {:take_over, 2, given, [], 0, epoch})
        end)

      assert length(Regex.scan(~r/no newer than those known here; refused/, log)) == 2
      assert Grove.World.Stats.get(world.stats, :zone_handovers_stale) == 3
      assert Grove.World.Placer.locations(world.name) == placed
      assert :sys.get_state(placer).core.handing == %{}
      for index <- 0..2, do: assert(Grove.World.zone_pid(world, index))
    end
  end

  describe "a node made distributed after its instance started" do
    test "neither greets nor refuses itself, and is a member under its new name" do
      start_instance!(node(), small_instance(Grove.LateT, []))
      assert Cluster.members(Grove.LateT) == [node()]

      distribute!()

      eventually(fn -> assert Cluster.members(Grove.LateT) == [node()] end, @wait)
      # Whatever it sent itself on the way has been handled after this call.
      Cluster.subscribe(Grove.LateT)
      assert Cluster.refused(Grove.LateT) == %{}
    end
  end

  describe "the cluster at a glance" do
    setup do
      %{home: distribute!()}
    end

    test "each member's zones add up to the zone count, with the players and actors in them, and where each zone runs",
         %{home: home} do
      # Each member owns zones, as asserted below.
      [{_peer, other}] = start_peers_with_zones!(home, ["glance"], [node()])
      nodes = Enum.sort([node(), other])
      cluster = [peers: nodes, connect_interval: 100]
      instance = Grove.GlanceT

      # Ten actors in all, the cluster's total: five on each node.
      start_instances!(
        for node <- nodes,
            do:
              {node,
               Keyword.put(small_instance(instance, cluster), :actors, count: 10, interval: 200)}
      )

      world = Grove.world(instance)

      # Every zone where placement puts it, on both nodes' word: a zone
      # still to be handed over would take the players in it along after
      # they are counted below.
      eventually(
        fn ->
          for node <- nodes do
            assert :erpc.call(node, Cluster, :members, [instance]) == nodes
            w = :erpc.call(node, Grove.World, :fetch!, [world])
            ran = Enum.map(0..15, &:erpc.call(node, Grove.World, :zone_node, [w, &1]))
            assert ran == Tuple.to_list(Placement.owners(16, nodes))
          end
        end,
        @wait
      )

      # Players from this node, on cells whose zones run on either node.
      players =
        for _ <- 1..8 do
          {:ok, _id, {x, y}} = Grove.World.join(world, kind: :player)
          {x, y}
        end

      w = Grove.World.fetch!(world)

      expected =
        Enum.frequencies_by(players, fn {x, y} ->
          Grove.World.zone_node(w, Grove.World.Grid.zone_of(w.grid, x, y))
        end)

      eventually(
        fn ->
          summary = Grove.summary(instance, 5000)
          assert summary.node == node()
          assert summary.zone_count == 16
          assert Enum.map(summary.members, & &1.node) == nodes
          assert Enum.sum(Enum.map(summary.members, & &1.zones)) == 16
          assert summary.placement == Enum.map(0..15, &Grove.World.zone_node(w, &1))
          # Ten actors in the cluster (its total), five from each node, in
          # whichever zones they joined.
          assert Enum.sum(Enum.map(summary.members, & &1.actors)) == 10

          for member <- summary.members do
            assert member.member and member.reachable
            assert member.self == (member.node == node())
            assert member.zones > 0
            assert member.players == Map.get(expected, member.node, 0)

            assert member.zones ==
                     Enum.count(0..15, &(Grove.World.zone_node(w, &1) == member.node))
          end

          # Every zone's load, each from the node that runs it: the actors
          # move in zones of the other node too.
          assert length(summary.zone_mailbox) == 16

          assert Enum.any?(
                   Enum.zip(summary.placement, summary.zone_moves_per_s),
                   fn {at, rate} -> at == other and rate > 0 end
                 )

          # The other node sees the same cluster.
          theirs = :erpc.call(other, Grove, :summary, [instance, 5000])

          assert Enum.map(theirs.members, &Map.take(&1, [:node, :zones, :players, :actors])) ==
                   Enum.map(summary.members, &Map.take(&1, [:node, :zones, :players, :actors]))
        end,
        @wait
      )

      # A player who walks into a zone of the other node is counted there:
      # on the last column of a zone whose east neighbour runs elsewhere,
      # where the cell east of it is open ground.
      {from, to, id, x1} =
        Enum.find_value(0..15, fn from ->
          to = from + 1
          {_x0, y0, x1, _y1} = Grove.World.Grid.zone_bounds(w.grid, from)

          if rem(to, 4) != 0 and Grove.World.zone_node(w, from) != Grove.World.zone_node(w, to) do
            Enum.find_value(y0..(y0 + 24), fn y ->
              open = fn x -> not Grove.World.Terrain.blocked?(w.terrain, x, y) end

              with true <- open.(x1 - 1) and open.(x1),
                   {:ok, id, _cell} <- Grove.World.join(world, kind: :player, at: {x1 - 1, y}) do
                {from, to, id, x1}
              else
                _ -> nil
              end
            end)
          end
        end)

      node_of = fn index -> Grove.World.zone_node(w, index) end
      counts = fn -> Map.new(Grove.summary(instance, 5000).members, &{&1.node, &1.players}) end

      eventually(
        fn -> assert counts.()[node_of.(from)] == Map.get(expected, node_of.(from), 0) + 1 end,
        @wait
      )

      before = counts.()
      assert {:ok, {^x1, _}} = cross_east(world, id, 20)

      eventually(
        fn ->
          now = counts.()
          assert now[node_of.(from)] == before[node_of.(from)] - 1
          assert now[node_of.(to)] == before[node_of.(to)] + 1
        end,
        @wait
      )
    end
  end

  describe "a world restarted in part by its supervisor" do
    setup do
      %{home: distribute!()}
    end

    test "stays in the cluster: its placer, stopped as a node that leaves is, joins again and takes its share",
         %{home: home} do
      {_peer, other} = start_peer!(home, "restarted")
      nodes = Enum.sort([node(), other])
      instance = Grove.RestartedT

      start_instances!(
        for node <- nodes,
            do: {node, small_instance(instance, peers: nodes, connect_interval: 100)}
      )

      world = Grove.world(instance)
      eventually(fn -> assert_one_owner(nodes, world) end, @wait)

      # The zones' supervisor dies: the world's supervisor starts it again
      # and, after it, the placer, which it stops first (`:shutdown`).
      zones = :erpc.call(other, Grove.World.Supervisor, :zones_supervisor, [world])
      placer = :erpc.call(other, Process, :whereis, [Grove.World.Placer.name(world)])
      :erpc.call(other, Process, :exit, [:erpc.call(other, Process, :whereis, [zones]), :kill])

      eventually(
        fn ->
          assert :erpc.call(other, Process, :whereis, [Grove.World.Placer.name(world)]) not in [
                   nil,
                   placer
                 ]

          for node <- nodes, do: assert(:erpc.call(node, Cluster, :members, [instance]) == nodes)
          assert_one_owner(nodes, world)
        end,
        @wait
      )

      assert :ok = Grove.World.audit(world)
    end
  end

  describe "what every player is sent" do
    setup do
      %{home: distribute!()}
    end

    test "a player on one node is sent the counts and the minimap of the whole world, not of its node's zones",
         %{home: home} do
      # Each node owns zones for players to join into.
      [{_peer, other}] = start_peers_with_zones!(home, ["whole"], [node()])
      nodes = Enum.sort([node(), other])
      instance = Grove.WholeT

      start_instances!(
        for node <- nodes do
          opts = small_instance(instance, peers: nodes, connect_interval: 100)

          gateway =
            if node == other,
              do: [port: 0, stats_interval: 100, density_interval: 100],
              else: false

          {node, Keyword.put(opts, :gateway, gateway)}
        end
      )

      world = Grove.world(instance)

      # Every zone run by the node placement gives it, and handed over
      # there: a join into a zone still on its way would be counted by the
      # node it leaves.
      eventually(fn -> assert_one_owner(nodes, world) end, @wait)

      w = Grove.World.fetch!(world)

      # Four players from this node in zones of each node (a zone mostly
      # water may have no room: the next one does; a node that runs fewer
      # than four zones, as placement by the nodes' names may have it,
      # gets two in one).
      cells =
        Enum.flat_map(nodes, fn node ->
          0..15
          |> Enum.filter(&(Grove.World.zone_node(w, &1) == node))
          |> Stream.cycle()
          |> Stream.flat_map(fn index ->
            area = Grove.World.Grid.zone_bounds(w.grid, index)

            case Grove.World.join(world, kind: :player, at: {:within, area}) do
              {:ok, _id, cell} -> [cell]
              {:error, :no_free_cell} -> []
            end
          end)
          |> Enum.take(4)
        end)

      assert length(cells) == 8

      block = fn {x, y} -> div(y, w.density_block) * w.density_cols + div(x, w.density_block) end

      # Each node counts the players in its own zones: four each.
      for node <- nodes, do: assert(:erpc.call(node, Grove.World, :stats, [world]).players == 4)

      port = :erpc.call(other, Grove.Gateway, :port, [])
      {:ok, client} = Grove.WsClient.connect("127.0.0.1", port, "/ws")

      push(client, %{
        type: :join,
        protocol: Grove.Protocol.version(),
        view_radius: 2,
        name: "",
        token: ""
      })

      {welcome, client} = expect(client, &(&1.type == :welcome))

      # The eight, and the player itself.
      {_stats, client} = expect(client, &(&1.type == :stats and &1.players == 9))

      blocks = MapSet.new([block.({welcome.x, welcome.y}) | Enum.map(cells, block)])

      {density, _client} =
        expect(client, fn message ->
          message.type == :density and
            MapSet.new(
              for({c, i} <- Enum.with_index(:binary.bin_to_list(message.cells)), c > 0, do: i)
            ) ==
              blocks
        end)

      assert {density.cols, density.rows} == {w.density_cols, w.density_rows}
    end
  end

  defp push(client, message) do
    data = IO.iodata_to_binary(Grove.Protocol.encode(message, :json))
    :ok = Grove.WsClient.send_frame(client, {:text, data})
  end

  # The next message `match?` accepts, skipping others, within 10 s each.
  defp expect(client, match?) do
    case Grove.WsClient.recv(client, 10_000) do
      {:ok, {:text, data}, client} ->
        {:ok, message} = Grove.Protocol.decode(data, :json)
        if match?.(message), do: {message, client}, else: expect(client, match?)

      other ->
        flunk("no message arrived: #{inspect(other)}")
    end
  end

  # A step east, tried again while an actor stands in the way.
  defp cross_east(world, id, tries) do
    :ok = Grove.World.move(world, id, :e, tries)

    receive do
      {:grove_move, ^id, ^tries, {:rejected, :occupied}} when tries > 1 ->
        cross_east(world, id, tries - 1)

      {:grove_move, ^id, ^tries, outcome} ->
        outcome
    after
      5000 -> flunk("no outcome for a move east")
    end
  end

  describe "accounts on two nodes sharing one PostgreSQL and one token key" do
    setup do
      %{home: distribute!()}
    end

    @tag :postgres
    @tag timeout: 120_000
    test "a token made on one node is good on the other, until it is revoked on either; another key's is refused",
         %{home: home} do
      key = Path.join(home, "token-key")
      File.write!(key, :crypto.strong_rand_bytes(32))

      [{_, a}, {_, b}] = peers = for n <- 1..2, do: start_peer!(home, "accounts#{n}")
      nodes = Enum.sort(Enum.map(peers, &elem(&1, 1)))

      opts =
        small_instance(Grove.AccountsT, peers: nodes, connect_interval: 100)
        |> Keyword.merge(
          store: Grove.PostgresServer.store(pool_size: 2),
          accounts: [secret_path: key, password_cost: 1000],
          gateway: [port: 0]
        )

      # One after the other: the first creates the schema.
      start_instances!([{a, opts}, {b, opts}])

      eventually(
        fn ->
          for node <- nodes,
              do: assert(:erpc.call(node, Cluster, :members, [Grove.AccountsT]) == nodes)
        end,
        @wait
      )

      [port_a, port_b] = for node <- [a, b], do: :erpc.call(node, Grove.Gateway, :port, [])

      assert {201, %{"token" => registered}} =
               http(port_a, :post, "/api/register", %{
                 "name" => "rowan",
                 "password" => "a long secret"
               })

      assert {200, %{"token" => token}} =
               http(port_a, :post, "/api/login", %{
                 "name" => "rowan",
                 "password" => "a long secret"
               })

      # Both tokens, signed on A, are good on B, which reads the account from the shared database.
      for t <- [registered, token] do
        assert {200, %{"account" => %{"name" => "rowan"}}} = http(port_b, :get, "/api/me", nil, t)
      end

      # A token for the same account, signed with another key, is refused on both.
      {:ok, %{"account" => %{"id" => id}}} =
        {:ok, elem(http(port_b, :get, "/api/me", nil, token), 1)}

      {forged, _} =
        Grove.Accounts.Token.sign(
          :crypto.strong_rand_bytes(32),
          id,
          System.system_time(:second) + 3600
        )

      for port <- [port_a, port_b] do
        assert {401, %{"error" => "invalid_token"}} = http(port, :get, "/api/me", nil, forged)
      end

      # A change on A shows on B, which had the account cached.
      assert {200, _} = http(port_a, :patch, "/api/me", %{"avatar" => "🦊"}, token)

      eventually(
        fn ->
          assert {200, %{"account" => %{"avatar" => "🦊"}}} =
                   http(port_b, :get, "/api/me", nil, token)
        end,
        @wait
      )

      # Logging out on A ends the token on B too, though B had it cached as good.
      assert {status, _} = http(port_a, :post, "/api/logout", %{}, token)
      assert status in 200..204

      eventually(
        fn ->
          assert {401, %{"error" => "revoked"}} = http(port_b, :get, "/api/me", nil, token)
        end,
        @wait
      )

      assert {200, _} = http(port_b, :get, "/api/me", nil, registered)
    end
  end

  defp http(port, method, path, body, token \\ nil) do
    url = ~c"http://127.0.0.1:#{port}#{path}"
    headers = if token, do: [{~c"authorization", ~c"Bearer #{token}"}], else: []

    request =
      if body,
        do: {url, headers, ~c"application/json", :jiffy.encode(body)},
        else: {url, headers}

    {:ok, {{_, status, _}, _, reply}} = :httpc.request(method, request, [], body_format: :binary)
    {status, if(reply == "", do: nil, else: :jiffy.decode(reply, [:return_maps]))}
  end

  describe "three nodes" do
    setup do
      %{home: distribute!()}
    end

    test "join, agree on where every zone runs, refuse a node whose world differs, and see one go",
         %{home: home} do
      peers = start_peers_with_zones!(home, ["grove1", "grove2"], [node()])
      nodes = [node() | Enum.map(peers, &elem(&1, 1))]
      cluster = [peers: nodes, connect_interval: 100]

      start_instances!(for node <- nodes, do: {node, small_instance(Grove.ClusterT, cluster)})

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

      # Refused by all, it waits for none of them.
      start_instance!(
        odd,
        small_instance(
          Grove.ClusterT,
          [peers: nodes, connect_interval: 100, boot_wait: 0],
          seed: 99
        )
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

  describe "actors shared by a cluster" do
    setup do
      %{home: distribute!()}
    end

    @tag timeout: 180_000
    test "each member runs its share of the total, when a node joins and when one is lost", %{
      home: home
    } do
      peers = for n <- 1..2, do: start_peer!(home, "share#{n}")
      nodes = Enum.sort([node() | Enum.map(peers, &elem(&1, 1))])
      actors = [count: 90, interval: 200, settle: 300]

      start = fn node, cluster ->
        {node, Keyword.put(small_instance(Grove.ShareT, cluster), :actors, actors)}
      end

      start_instances!(for node <- nodes, do: start.(node, peers: nodes, connect_interval: 100))

      assert_shares(nodes, 90)

      # A fourth node: 23, 23, 22 and 22, still 90 in all.
      {_peer, fourth} = start_peer!(home, "share4")
      all = Enum.sort([fourth | nodes])
      start_instances!([start.(fourth, peers: all, connect_interval: 100)])
      assert_shares(all, 90)

      # Those who gave actors up retired them: they left the world, none lingers.
      counts = for node <- all, kind <- by_kind(node), do: kind.counts
      assert Enum.sum(Enum.map(counts, & &1.left)) > 0
      assert Enum.sum(Enum.map(counts, & &1.joined)) - Enum.sum(Enum.map(counts, & &1.left)) == 90
      world = Grove.World.fetch!(Grove.world(Grove.ShareT))
      eventually(fn -> assert length(Grove.World.Audit.residents(world)) == 90 end, @wait)

      # A node is lost: the survivors start its share again.
      {lost_peer, lost} = Enum.find(peers, fn {_, node} -> node != fourth end)
      :peer.stop(lost_peer)
      assert_shares(all -- [lost], 90)
    end
  end

  describe "actors of a node whose peers never answer" do
    setup do
      Logger.configure(level: :info)
      on_exit(fn -> Logger.configure(level: :warning) end)
    end

    test "all run on it, and the log says so once" do
      log =
        ExUnit.CaptureLog.capture_log(fn ->
          start_instance!(
            node(),
            Keyword.put(
              # One node is a quorum of a cluster of one: it need not wait for the others.
              small_instance(Grove.AloneT,
                peers: [:nobody@nowhere],
                connect_interval: 60_000,
                boot_wait: 0,
                size: 1
              ),
              :actors,
              count: 20,
              settle: 50
            )
          )

          eventually(fn -> assert running(node(), Grove.AloneT) == 20 end, @wait)
          assert [%{share: 20, total: 20}] = Grove.Actors.by_kind(Grove.actors(Grove.AloneT))
        end)

      assert [_line] = Regex.scan(~r/actors: this node now runs 20 of 20 \(1 members\)/, log)
    end
  end

  # Every node owes the share the members' ranks give it, says so, and runs it.
  defp assert_shares(nodes, total) do
    expected = Grove.Actors.Share.all(total, nodes)

    eventually(
      fn ->
        for node <- nodes do
          assert :erpc.call(node, Cluster, :members, [Grove.ShareT]) == nodes
          assert [%{share: share, total: ^total}] = by_kind(node)
          assert share == expected[node]
          assert running(node, Grove.ShareT) == share
        end
      end,
      @wait
    )

    assert Enum.sum(for node <- nodes, do: running(node, Grove.ShareT)) == total
  end

  defp by_kind(node), do: :erpc.call(node, Grove.Actors, :by_kind, [Grove.actors(Grove.ShareT)])
end
