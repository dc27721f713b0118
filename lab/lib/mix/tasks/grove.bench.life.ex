defmodule Mix.Tasks.Grove.Bench.Life do
  @shortdoc "Measures the bacteria's Game of Life under a crowd of walkers (in-VM)"

  @moduledoc """
  The actor bench (`mix grove.bench.actors`) on a world full of bacteria:
  walkers and a dense soup of live cells from generation 0, the zones
  computing a generation every `--life-ms`. Besides the actor bench's
  curve and report (the walkers' moves, the probe that moves like a
  player), it reports generations a second (the world's, and zone
  generations summed over zones), cells updated a second (every cell of a
  zone counts at each of its generations), births and deaths, the time a
  zone takes for one generation (p50, p99, max) and the probe's round
  trip while all this runs.

      mix grove.bench.life
      mix grove.bench.life --actors 200000 --duration 60 --soup 1.0 --life-ms 1000
      mix grove.bench.life --rule B36/S23 --json bench/life.json

  Options: `--actors N` (default 200000), `--duration S` (default 60),
  `--life-ms MS` (default 1000), `--soup F` and `--soup-density F` (the
  share of the world in soup at generation 0, default 1.0, and the chance
  a cell of it is alive, default 0.4), `--rule` (default B3/S23), `--json
  PATH`, and the world's `--width`, `--height`, `--zone-size`, `--seed`,
  `--every`, `--warmup` as for `mix grove.bench.actors`.
  """

  use Mix.Task

  alias Grove.Bench.Actors, as: Bench
  alias Grove.Load.Report

  @switches [
    actors: :integer,
    duration: :integer,
    life_ms: :integer,
    soup: :float,
    soup_density: :float,
    rule: :string,
    json: :string,
    width: :integer,
    height: :integer,
    zone_size: :integer,
    seed: :integer,
    every: :integer,
    warmup: :integer
  ]

  @impl true
  def run(args) do
    opts = Mix.Grove.parse!(args, @switches, "grove.bench.life")

    Application.put_env(:grove, :start, false)
    Mix.Task.run("app.start")
    Logger.configure(level: :warning)

    {life_ms, opts} = Keyword.pop(opts, :life_ms, 1000)
    {soup, opts} = Keyword.pop(opts, :soup, 1.0)
    {density, opts} = Keyword.pop(opts, :soup_density, 0.4)
    {rule, opts} = Keyword.pop(opts, :rule, "B3/S23")
    {json, opts} = Keyword.pop(opts, :json)

    life = [rule: rule, interval: life_ms, soup: soup, soup_density: density]
    # Fail with the option's name before a world is started.
    Grove.World.Life.new!(life)

    Mix.shell().info(
      "machine: #{System.schedulers_online()} schedulers, OTP #{System.otp_release()}, " <>
        "Elixir #{System.version()}; life #{rule} every #{life_ms} ms, soup #{soup} at #{density}"
    )

    report =
      Bench.run(:grove, opts |> Keyword.put_new(:actors, 200_000) |> Keyword.put(:life, life))

    if json do
      File.mkdir_p!(Path.dirname(json))
      File.write!(json, :jiffy.encode(Report.to_json(report), [:pretty]))
      Mix.shell().info("report written to #{Path.expand(json)}")
    end
  end
end
