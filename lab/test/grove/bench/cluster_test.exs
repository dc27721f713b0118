defmodule Grove.Bench.ClusterTest do
  # Makes this node distributed and starts nodes: one test at a time. Two
  # phases of nodes of their own, a quarter of a minute: in `make
  # test-deep` (what it measures, actors moving across two nodes, is tested
  # in `make test` by Grove.Actors.RemoteMovesTest and Grove.ClusterTest).
  use ExUnit.Case, async: false

  import ExUnit.CaptureIO

  @moduletag :cluster
  @moduletag :deep

  @tag timeout: 180_000
  test "a tiny run measures one node, then two sharing the world, and compares them" do
    {report, printed} =
      with_io(fn ->
        Grove.Bench.Cluster.run(
          actors: 200,
          duration: 2,
          warmup: 1,
          every: 1,
          width: 100,
          height: 100,
          zone_size: 25
        )
      end)

    %{one: one, two: two, ratios: ratios} = report

    for phase <- [one, two] do
      assert phase.audit == :ok and phase.entities == 200 and phase.errors == 0
      assert phase.moves_per_s > 0
    end

    # One node sends nothing over the network; two share zones and actors.
    assert one.sent_remote_percent == 0.0 and one.network_bytes_per_s == nil
    assert two.sent_remote_percent > 0 and two.network_bytes_per_s > 0
    assert map_size(two.node_utilization) == 2
    assert is_float(ratios.moves_per_s)

    # A line per phase, then the side-by-side table.
    assert printed =~ "[cluster] phase 1/2"
    assert printed =~ "[cluster] phase 2/2"
    assert printed =~ "| moves sent to a zone on the other node | 0.0 % |"

    # Nothing outlives the run: the nodes are stopped, distribution too.
    assert Node.list() == []
    refute Node.alive?()
  end
end
