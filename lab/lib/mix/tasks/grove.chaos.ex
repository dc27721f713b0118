defmodule Mix.Tasks.Grove.Chaos do
  @shortdoc "Chaos lab: players against a server while its processes are killed, then the invariants"

  @moduledoc """
  Starts a server (as `make run` does, in a temporary folder), runs players
  with accounts against it, injects faults at a steady rate, restarts the
  server once with SIGTERM, and checks the invariants at the end; exits
  non-zero if any is violated. See `Grove.Load.ChaosRun` for what is
  injected and what is checked.

      mix grove.chaos
      mix grove.chaos --players 300 --duration 600 --fault-every 1000 --fuzz-every 30
      mix grove.chaos --faults zone,session --duration 60 --seed 42

  Options:

    * `--players N` - players, each with an account (default 200)
    * `--duration S` - seconds of the run (default 600)
    * `--fault-every MS` - milliseconds between faults (default 2000)
    * `--faults K,K,...` - among `zone`, `session`, `broadcaster`, `saver`,
      `store` and `restart` (default all)
    * `--store-stall MS` - how long a stall of the store lasts (default 4000;
      the store's deadline is 2000)
    * `--restart-at S` - when the SIGTERM restart happens (default half the run)
    * `--fuzz-every S`, `--fuzz-count N` - fuzz the HTTP and WebSocket front
      doors this often with N hostile inputs (`Grove.Load.Fuzz`; default:
      not, and 20)
    * `--move-every MS`, `--encoding json|binary`, `--check-views N` - as
      for `mix grove.load ws` (defaults 1000, json, 50)
    * `--actors N`, `--width N`, `--height N` - the server's world (default
      as `make run`: 20,000 actors on 1000 x 1000)
    * `--seed N` - the seed of the faults' schedule and victims
    * `--json PATH` - also write the report as JSON
    * `--server-log PATH` - keep what the server printed there (by default
      it goes with the temporary folder)
  """

  use Mix.Task

  alias Grove.Load.{ChaosRun, Report}

  @switches [
    players: :integer,
    duration: :integer,
    fault_every: :integer,
    faults: :string,
    store_stall: :integer,
    restart_at: :integer,
    fuzz_every: :integer,
    fuzz_count: :integer,
    move_every: :integer,
    encoding: :string,
    check_views: :integer,
    actors: :integer,
    width: :integer,
    height: :integer,
    seed: :integer,
    json: :string,
    server_log: :string
  ]

  @faults ~w(zone session broadcaster saver store restart)

  @impl true
  def run(args) do
    opts = Mix.Grove.parse!(args, @switches, "grove.chaos")

    Mix.Task.run("compile")
    {json, opts} = Keyword.pop(opts, :json)

    opts =
      opts
      |> Keyword.replace_lazy(:faults, &faults/1)
      |> Keyword.replace_lazy(:encoding, &encoding/1)

    report = ChaosRun.run(opts)

    if json do
      File.write!(json, :jiffy.encode(Report.to_json(json_safe(report)), [:pretty]))
      Mix.shell().info("chaos: report written to #{Path.expand(json)}")
    end

    if report.violations > 0,
      do: Mix.raise("chaos: #{report.violations} invariants violated")
  end

  defp faults(text) do
    kinds = String.split(text, ",", trim: true)

    case kinds -- @faults do
      [] ->
        Enum.map(kinds, &String.to_atom/1)

      unknown ->
        Mix.raise("unknown faults #{inspect(unknown)}; known: #{Enum.join(@faults, ", ")}")
    end
  end

  defp encoding("json"), do: :json
  defp encoding("binary"), do: :binary
  defp encoding(other), do: Mix.raise("--encoding is json or binary, got: #{inspect(other)}")

  # Tuple keys (came back where, after what) as strings, for JSON.
  defp json_safe(report) do
    Map.new(report, fn
      {key, map} when is_map(map) -> {key, Map.new(map, fn {k, v} -> {label(k), v} end)}
      pair -> pair
    end)
  end

  defp label(key) when is_tuple(key), do: key |> Tuple.to_list() |> Enum.map_join(" ", &label/1)
  defp label(key), do: to_string(key)
end
