defmodule Mix.Tasks.Grove.Bench.Actors do
  @shortdoc "Measures N actors walking a world (in-VM), optionally against the one-GenServer baseline"

  @moduledoc """
  The in-VM actor bench: N actors walk a fresh world through the public
  client API; the bench prints a progress line every few seconds, then a
  report. See `Grove.Bench.Actors` for what is measured.

      mix grove.bench.actors --actors 250000 --duration 60
      mix grove.bench.actors --actors 50000 --duration 30 --baseline --json bench.json
      mix grove.bench.actors --ramp --baseline
      mix grove.bench.actors --ramp --act
      mix grove.bench.actors --actors 250000 --duration 90 --hog 1 --hog-from 20 --hog-for 40

  Options:

    * `--actors N` - actors to run (default 250000)
    * `--duration S` - seconds measured once all have joined (default 60)
    * `--ramp` - raise the actors stage by stage from `--start` by `--step`
      (defaults 25000 and 25000), `--stage S` seconds each (default 10), until
      the p99 round trip passes `--limit-ms` (default 100) or errors appear;
      report the knee
    * `--baseline` - also run the baseline (the whole world in one GenServer,
      a synchronous call per move, a process per actor) in the same run, and
      print the ratio
    * `--act` - also run the same with a game whose one action is as cheap
      as an action gets, every actor acting instead of moving (each step
      a `poke` of its own cell, `Grove.Bench.Actors.Poke`), in the same
      run, and print the ratio: what an action costs beside a move
    * `--resident` - walkers that live in their zones (`Grove.Actors`'
      `:resident`): stepped by their zones, no message per move; the
      round trip reported is then the probe's, a player's move beside them,
      and beside it the p99 of how late the residents' steps came against
      their beats (`grove_resident_step_lateness_seconds`)
    * `--json PATH` - write the report as JSON
    * `--width`, `--height`, `--zone-size`, `--seed` - the world (defaults
      1000, 1000, 50, 1)
    * `--interval MS` - milliseconds between an actor's moves (default 1000)
    * `--per-herd N` - actors per process (default 500); `--no-batch` sends
      one message per move instead of one per zone and herd slot
    * `--hog N` - N other OS processes that spin, each pinned to a core of
      its own (`Grove.Load.Hog`), to take CPU from the world: from
      `--hog-from S` seconds after the actors start joining (default 0) for
      `--hog-for S` seconds (default to the end); always stopped at the end
    * `--max-in-flight N`, `--target-ms MS`, `--late-ms MS` - the herds'
      overload bounds, and `--resolution MS` their slots (see
      `Grove.Actors` for the defaults)
    * `--zone-min-heap WORDS`, `--herd-min-heap WORDS` - the first heap of
      each zone's and each herd's process (`Grove.World`'s `:zone_process`,
      `Grove.Actors`' `:herd_process`; default the VM's)
    * `--every S` - seconds between the lines of the curve (default 5)
    * `--warmup S` - seconds between the last join and the measure (default
      5; 3 for each stage of a ramp), so that the catching up after a slow
      join is not measured
    * `--max N`, `--join-timeout S`

  The VM needs room for the baseline's processes, and runs as the
  release does with the release's flags (`rel/vm.args.eex`: a process's
  heap in the heap allocator's kept carriers): run with
  `ERL_AFLAGS="+P 5000000 -args_file ../rel/vm.args.eex"` (`make bench`
  sets both).
  """

  use Mix.Task

  alias Grove.Bench.Actors, as: Bench
  alias Grove.Load.Report

  @switches [
    actors: :integer,
    duration: :integer,
    ramp: :boolean,
    baseline: :boolean,
    act: :boolean,
    resident: :boolean,
    json: :string,
    width: :integer,
    height: :integer,
    zone_size: :integer,
    seed: :integer,
    interval: :integer,
    per_herd: :integer,
    batch: :boolean,
    warmup: :integer,
    every: :integer,
    start: :integer,
    step: :integer,
    stage: :integer,
    max: :integer,
    limit_ms: :integer,
    join_timeout: :integer,
    hog: :integer,
    hog_from: :integer,
    hog_for: :integer,
    max_in_flight: :integer,
    target_ms: :integer,
    late_ms: :integer,
    resolution: :integer,
    zone_min_heap: :integer,
    herd_min_heap: :integer
  ]

  @impl true
  def run(args) do
    opts = Mix.Grove.parse!(args, @switches, "grove.bench.actors")

    for {key, value} <- opts, is_integer(value) and value <= 0, key != :hog_from or value < 0 do
      Mix.raise("--#{String.replace(to_string(key), "_", "-")} must be positive, got #{value}")
    end

    # The bench starts its own worlds; the application's default one would only add noise.
    Application.put_env(:grove, :start, false)
    Mix.Task.run("app.start")
    Logger.configure(level: :warning)

    {ramp?, opts} = Keyword.pop(opts, :ramp, false)
    {baseline?, opts} = Keyword.pop(opts, :baseline, false)
    {act?, opts} = Keyword.pop(opts, :act, false)
    {json, opts} = Keyword.pop(opts, :json)

    # A ramp's stages settle 3 s after their actors joined, unless told.
    opts =
      if ramp? and opts[:warmup],
        do: Keyword.put(opts, :ramp_warmup, opts[:warmup]),
        else: opts

    describe_machine()

    if ramp? and opts[:hog], do: Mix.raise("--hog goes with a number of actors, not --ramp")

    report =
      if ramp? do
        ramp(opts, baseline?)
      else
        single(opts, baseline?)
      end

    report = if act?, do: with_act(report, ramp?, opts), else: report

    if json do
      File.mkdir_p!(Path.dirname(json))
      File.write!(json, :jiffy.encode(Report.to_json(report), [:pretty]))
      Mix.shell().info("report written to #{Path.expand(json)}")
    end
  end

  defp single(opts, baseline?) do
    grove = Bench.run(:grove, opts)

    if baseline? do
      baseline = Bench.run(:baseline, opts)
      ratio("p99 round trip, baseline / grove", baseline.p99_ms, grove.p99_ms)
      ratio("achieved moves/s, grove / baseline", grove.moves_per_s, baseline.moves_per_s)
      Map.put(grove, :baseline, baseline)
    else
      grove
    end
  end

  defp ramp(opts, baseline?) do
    grove = Bench.ramp(:grove, opts)

    if baseline? do
      baseline = Bench.ramp(:baseline, opts)
      ratio("knee, grove / baseline", grove.knee, baseline.knee)
      Map.merge(grove, %{baseline: baseline, knee_ratio: safe_ratio(grove.knee, baseline.knee)})
    else
      grove
    end
  end

  # The same with actions in place of moves, side by side.
  defp with_act(grove, true, opts) do
    act = Bench.ramp(:act, opts)
    ratio("knee, act / move", act.knee, grove.knee)
    Map.merge(grove, %{act: act, act_knee_ratio: safe_ratio(act.knee, grove.knee)})
  end

  defp with_act(grove, false, opts) do
    act = Bench.run(:act, opts)
    ratio("p99 round trip, act / move", act.p99_ms, grove.p99_ms)
    ratio("achieved steps/s, act / move", act.moves_per_s, grove.moves_per_s)
    Map.put(grove, :act, act)
  end

  defp ratio(label, a, b) do
    case safe_ratio(a, b) do
      nil -> Mix.shell().info("#{label}: -")
      r -> Mix.shell().info("#{label}: #{r}x")
    end
  end

  defp safe_ratio(a, b) when is_number(a) and is_number(b) and b > 0, do: Float.round(a / b, 2)
  defp safe_ratio(_a, _b), do: nil

  defp describe_machine do
    Mix.shell().info(
      "machine: #{System.schedulers_online()} schedulers, OTP #{System.otp_release()}, " <>
        "Elixir #{System.version()}, #{div(:erlang.memory(:total), 1_000_000)} MB in use at start"
    )
  end
end
