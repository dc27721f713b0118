defmodule Mix.Tasks.Grove.Soak.Zones do
  @shortdoc "One zone put to sleep and woken N times, checked each time: nothing lost"

  @moduledoc """
  Puts one zone of a world of a million cells a side to sleep and wakes it
  `--cycles` times (default 1,000,000), with its actors and its game's
  layer going to a store and back each time, and checks every cycle that
  it comes back with exactly what it held (`Grove.Bench.ZoneSoak`).
  Prints a progress line every tenth of the run, then the counts: any
  count of lost, changed or kept tables, or a failed audit, is a failure,
  and the task exits non-zero.

      mix grove.soak.zones --cycles 1000000
  """

  use Mix.Task

  @switches [cycles: :integer, actors: :integer]

  @impl true
  def run(args) do
    opts = Mix.Grove.parse!(args, @switches, "grove.soak.zones")
    Application.put_env(:grove, :start, false)
    Mix.Task.run("app.start")
    Logger.configure(level: :warning)
    cycles = Keyword.get(opts, :cycles, 1_000_000)

    Mix.shell().info("one zone, #{cycles} times asleep and awake, checked each time")

    result =
      Grove.Bench.ZoneSoak.run(
        cycles,
        fn done, so_far ->
          Mix.shell().info(
            "#{done} cycles: #{so_far.lost} lost, #{so_far.changed} changed, " <>
              "#{so_far.kept_tables} kept tables, #{so_far.audit_failures} failed audits"
          )
        end,
        actors: Keyword.get(opts, :actors, 6)
      )

    Mix.shell().info(
      "#{result.cycles} cycles in #{result.millis} ms " <>
        "(#{Float.round(result.millis * 1000 / max(result.cycles, 1), 1)} us each): " <>
        "entities lost #{result.lost}, zones woken with other than they held #{result.changed}, " <>
        "tables kept asleep #{result.kept_tables}, audits #{result.audits} " <>
        "(#{result.audit_failures} failed), actors' steps #{result.moves}, " <>
        "layers an action changed, saved #{result.layer_saves}"
    )

    if result.lost + result.changed + result.kept_tables + result.audit_failures > 0,
      do: Mix.raise("the zone did not come back as it slept")
  end
end
