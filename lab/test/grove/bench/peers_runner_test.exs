defmodule Grove.Bench.PeersRunnerTest do
  # The peers' load runner (bench/peers/runner.mjs, Node) against a Grove
  # instance alone: it needs no npm package for Grove. Starts its own
  # gateway: Yaws allows one per node, so not async.
  use ExUnit.Case, async: false

  alias Grove.World.Terrain

  @moduletag :gateway
  @moduletag :tmp_dir

  @world [width: 60, height: 60, zone_size: 20, seed: 5]

  setup %{tmp_dir: dir} do
    unless System.find_executable("node"), do: flunk("needs node on the PATH")
    %{port: port} = Grove.TestInstance.start!("peers", world: @world, actors: [count: 40])
    %{port: port, dir: dir}
  end

  test "drives Grove's players and checks every outcome against the exported world", ctx do
    terrain = write_terrain(ctx.dir, 5)
    json = Path.join(ctx.dir, "grove.json")

    # No bound on the round trip nor on time: the stage lasts until 30
    # outcomes were counted, whatever the machine's speed.
    {output, status} =
      runner(ctx.port, terrain, ~w(--stages 5 --stage-outcomes 30 --json #{json}))

    assert status == 0, output
    assert output =~ "the server's terrain is the file's"
    report = :jiffy.decode(File.read!(json), [:return_maps])
    assert [stage] = report["stages"]
    assert stage["players"] == 5
    assert stage["outcomes"] >= 30
    assert stage["errors"] == 0
    assert stage["correctness_failures"] == 0
    assert report["failures"] == %{"position" => 0, "rules" => 0, "unexpected_outcome" => 0}
    assert report["knee"] == 5
  end

  test "refuses to measure a server whose world is not the file's", ctx do
    terrain = write_terrain(ctx.dir, 6)
    {output, status} = runner(ctx.port, terrain, ~w(--stages 5))
    assert status != 0
    assert output =~ "not the same world"
  end

  defp write_terrain(dir, seed) do
    path = Path.join(dir, "terrain-#{seed}.bin")
    File.write!(path, Terrain.to_file(Terrain.generate(60, 60, seed: seed)))
    path
  end

  defp runner(port, terrain, args) do
    System.cmd(
      "node",
      [
        "bench/peers/runner.mjs",
        "--server",
        "grove",
        "--url",
        "http://127.0.0.1:#{port}",
        "--terrain",
        terrain,
        "--stage-seconds",
        "0",
        "--settle",
        "0",
        "--baseline-seconds",
        "0",
        "--limit-ms",
        "3600000",
        "--timeout-ms",
        "3600000"
        | args
      ],
      stderr_to_stdout: true
    )
  end
end
