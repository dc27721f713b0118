defmodule Mix.Tasks.Grove.Bench.Cluster do
  @shortdoc "Measures the actor bench on one node and on two nodes sharing the world, side by side"

  @moduledoc """
  The cost of distribution in one run: the actor bench with the same
  actors on one node (a scheduler per core), then on two nodes (one
  scheduler each, each pinned to one of the cores) that share the world,
  and the two side by side: moves a second, the round trip's p50 and p99,
  the share of the moves sent to a zone on the other node, the bytes a
  second between the nodes, and the ratios. See `Grove.Bench.Cluster`.

      mix grove.bench.cluster --actors 20000 --duration 30
      mix grove.bench.cluster --actors 100000 --duration 30 --json cluster.json

  Options:

    * `--actors N` - actors in all, on either side (default 20000)
    * `--duration S` - seconds measured in each phase (default 30)
    * `--cores A,B` - the two cores (default `0,1`)
    * `--json PATH` - write both reports as JSON
    * `--width`, `--height`, `--zone-size`, `--seed` - the world (defaults
      1000, 1000, 50, 1)
    * `--interval MS`, `--per-herd N`, `--warmup S`, `--every S`,
      `--join-timeout S` - as for `mix grove.bench.actors`

  Needs Linux's `taskset`, two cores and epmd (started if it is not
  running, and stopped again then).
  """

  use Mix.Task

  alias Grove.Bench.Cluster
  alias Grove.Load.Report

  @switches [
    actors: :integer,
    duration: :integer,
    cores: :string,
    json: :string,
    width: :integer,
    height: :integer,
    zone_size: :integer,
    seed: :integer,
    interval: :integer,
    per_herd: :integer,
    warmup: :integer,
    every: :integer,
    join_timeout: :integer
  ]

  @impl true
  def run(args) do
    opts = Mix.Grove.parse!(args, @switches, "grove.bench.cluster")

    for {key, value} <- opts, is_integer(value) and value <= 0 do
      Mix.raise("--#{String.replace(to_string(key), "_", "-")} must be positive, got #{value}")
    end

    System.find_executable("taskset") || Mix.raise("needs taskset (util-linux)")

    if System.schedulers_online() < 2,
      do: Mix.raise("needs two cores, one for each node of the second phase")

    {cores, opts} = Keyword.pop(opts, :cores, "0,1")
    {json, opts} = Keyword.pop(opts, :json)

    # The bench starts its own nodes and worlds; this VM only drives them.
    Application.put_env(:grove, :start, false)
    Mix.Task.run("app.start")
    Logger.configure(level: :warning)

    Mix.shell().info(
      "machine: #{System.schedulers_online()} schedulers, OTP #{System.otp_release()}, " <>
        "Elixir #{System.version()}"
    )

    opts = Keyword.merge([actors: 20_000, duration: 30], opts)
    report = Cluster.run(Keyword.put(opts, :cores, parse_cores!(cores)))

    if json do
      File.mkdir_p!(Path.dirname(json))
      File.write!(json, :jiffy.encode(Report.to_json(report), [:pretty]))
      Mix.shell().info("report written to #{Path.expand(json)}")
    end
  end

  defp parse_cores!(text) do
    case text |> String.split(",") |> Enum.map(&Integer.parse/1) do
      [{a, ""}, {b, ""}] when a >= 0 and b >= 0 and a != b -> {a, b}
      _ -> Mix.raise("--cores takes two different cores, as 0,1; got #{text}")
    end
  end
end
