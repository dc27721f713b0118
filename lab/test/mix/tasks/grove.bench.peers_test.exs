defmodule Mix.Tasks.Grove.Bench.PeersTest do
  use ExUnit.Case, async: true

  alias Mix.Tasks.Grove.Bench.Peers

  test "the runner runs at the servers' niceness when one is asked, and as it is otherwise" do
    opts = [stages: "500,5000"]
    niced = Peers.runner_command([nice: -10] ++ opts, :grove, 4000, "terrain", 123, "grove.json")
    plain = Peers.runner_command(opts, :grove, 4000, "terrain", 123, "grove.json")

    assert ["nice", "-n", "-10", "node", runner | rest] = niced

    assert Path.basename(runner) == "runner.mjs"
    assert ["--server", "grove", "--url", "http://127.0.0.1:4000" | _] = rest
    assert "500,5000" in rest

    assert plain == ["node", runner | rest]
  end

  test "the runner is given the task's options that are its own, and no others" do
    opts = [stage_seconds: 30, encoding: "binary", only: "grove", cores: "0,1"]
    command = Peers.runner_command(opts, :colyseus, 1, "t", 2, "j")

    assert Enum.take(command, -4) == ["--stage-seconds", "30", "--encoding", "binary"]
    refute "--only" in command
    refute "--cores" in command
  end
end
