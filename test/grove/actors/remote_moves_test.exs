defmodule Grove.Actors.RemoteMovesTest do
  # Starts distribution and peer nodes: one test at a time.
  use ExUnit.Case, async: false

  import Grove.ClusterCase
  import Grove.WorldCase, only: [eventually: 2]

  alias Grove.Actors
  alias Grove.World

  # Tries 10 ms apart: nodes meet over real sockets, so allow a busy
  # machine half a minute.
  @wait 3000

  describe "a herd on one node walking actors in zones another node runs" do
    @describetag :cluster
    setup do
      %{home: distribute!()}
    end

    @tag timeout: 120_000
    test "counts their moves as sent to another node, in its stats and its metrics",
         %{home: home} do
      # Each node owns zones, as asserted below.
      [{_peer, other}] = start_peers_with_zones!(home, ["remote_moves"], [node()])
      nodes = Enum.sort([node(), other])
      cluster = [peers: nodes, connect_interval: 100]
      instance = Grove.RemoteMovesT

      start_instances!(for node <- nodes, do: {node, small_instance(instance, cluster)})

      world = Grove.world(instance)

      # Both nodes agree where every zone runs, and each runs some.
      eventually(
        fn ->
          described = World.fetch!(world)
          owners = for index <- 0..15, do: World.zone_node(described, index)
          assert Enum.sort(Enum.uniq(owners)) == nodes
          assert :erpc.call(other, World, :ready?, [world])
          assert World.ready?(world)
        end,
        @wait
      )

      # Actors of this node, all in the middle of a zone the other node runs.
      described = World.fetch!(world)
      zone = Enum.find(0..15, &(World.zone_node(described, &1) == other))
      {x0, y0, x1, y1} = World.Grid.zone_bounds(described.grid, zone)
      center = {div(x0 + x1, 2), div(y0 + y1, 2)}
      actors = Grove.actors(instance)
      Actors.add(actors, 20, spawn: {:blob, center, 2}, interval: 200)

      eventually(
        fn ->
          counts = Actors.Stats.read(Actors.stats(actors)).counts
          assert counts.joined == 20
          assert counts.sent_remote >= 20
          assert counts.sent_remote <= counts.sent
        end,
        @wait
      )

      # The other node's actors sent nothing at all.
      stats = :erpc.call(other, Actors, :stats, [Grove.actors(instance)])
      assert :erpc.call(other, Actors.Stats, :read, [stats]).counts.sent_remote == 0

      text = IO.iodata_to_binary(Grove.Metrics.Prometheus.render(instance))
      [_, value] = Regex.run(~r/^grove_actor_moves_sent_remote_total\S* (\d+)$/m, text)
      assert String.to_integer(value) >= 20
    end
  end

  test "a world alone counts none of its actors' moves as sent to another node" do
    world = :"world_#{System.unique_integer([:positive])}"
    actors = :"actors_#{System.unique_integer([:positive])}"
    start_supervised!({World, name: world, width: 40, height: 40, zone_size: 10, tick: :manual})

    start_supervised!(
      {Actors, name: actors, world: world, count: 20, interval: 100, resolution: 10}
    )

    eventually(fn -> assert Actors.Stats.read(Actors.stats(actors)).counts.sent >= 40 end, 1000)
    assert Actors.Stats.read(Actors.stats(actors)).counts.sent_remote == 0
  end
end
