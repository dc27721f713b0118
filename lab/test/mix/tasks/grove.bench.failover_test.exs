defmodule Mix.Tasks.Grove.Bench.FailoverTest do
  # The bench at a tiny size: three real nodes, one killed. It starts
  # gateways on its nodes and makes this node distributed: not async. Its
  # load runs for a fixed time after the kill, most of a minute: in
  # `make test-deep` (the recovery it measures is tested in `make test` by
  # Grove.ClusterRecoveryTest).
  use ExUnit.Case, async: false

  @moduletag :cluster
  @moduletag :deep
  @moduletag :capture_log

  setup do
    level = Logger.level()
    on_exit(fn -> Logger.configure(level: level) end)
  end

  @tag timeout: 300_000
  test "kills a node under load and reports its zones serving again, the players restored and nothing lost" do
    output =
      ExUnit.CaptureIO.capture_io(fn ->
        Mix.Tasks.Grove.Bench.Failover.run(
          ~w(--actors 60 --players 8 --ramp 8 --width 200 --height 200 --zone-size 25 --steady 2 --observe 30)
        )
      end)

    assert output =~ "killing"
    assert output =~ ~r/\| its zones serving \(a join into each answered\) \| \d+ ms \|/
    assert output =~ "| zones not serving after the run | 0 |"
    assert output =~ ~r/\| actors back to 60 \| \d+ ms \|/
    assert output =~ "| players in the world after / connected | 8 / 8 (0 lost) |"
    assert output =~ "| entities resident twice | 0 |"
    assert output =~ "| correctness failures (oracle) | 0 |"
    assert output =~ ~r"\| audit \(asked again[^|]*\| ok \(\d asked\) \|"

    # The players whose entities were lost were welcomed again: the
    # gateways and the load lab's oracle count the same.
    [_, welcomed] =
      Regex.run(~r/\| players welcomed again \(gateways\) \| (\d+), all by \d+ ms \|/, output)

    [_, oracle] = Regex.run(~r/\| players restored \(load lab's oracle\) \| (\d+) \|/, output)
    assert oracle == welcomed

    # No node of its own outlives it, and this node is not left distributed.
    refute Node.alive?()
  end
end
