defmodule Grove.Bench.ActorsTest do
  use ExUnit.Case, async: true

  alias Grove.Bench.Actors, as: Bench

  test "a small run reports its curve from the first join, the probe's round trips and the audit" do
    {:ok, lines} = Agent.start_link(fn -> [] end)

    report =
      Bench.run(:grove,
        actors: 300,
        duration: 2,
        warmup: 1,
        every: 1,
        width: 100,
        height: 100,
        zone_size: 25,
        out: fn line -> Agent.update(lines, &[line | &1]) end
      )

    assert report.audit == :ok and report.entities == 300
    assert report.errors == 0 and report.startup_probe.timeouts == 0
    assert [_, _ | _] = report.windows
    assert Enum.map(report.windows, & &1.t) == Enum.sort(Enum.map(report.windows, & &1.t))
    assert List.last(report.windows).joined == 300
    assert Enum.all?(report.windows, &(&1.hog == false))
    assert %{unanswered: _, full: _, late: _} = report.skipped

    # The same curve closes the report, as a Markdown table.
    printed = lines |> Agent.get(& &1) |> Enum.reverse()
    assert Enum.any?(printed, &String.starts_with?(&1, "| t s | phase | hog |"))

    assert Enum.count(printed, &String.match?(&1, ~r/^\| \d+ \| (joining|warmup|measure) \|/)) ==
             length(report.windows)
  end

  test "the action design walks actors that act instead of moving, answered and counted as steps" do
    # No turn skipped as late (`:late_ms`, half the 1 s interval by
    # default): on a machine loaded many times over, a herd half a second
    # late at each turn of the two measured seconds would act none.
    report =
      Bench.run(:act,
        actors: 200,
        duration: 2,
        warmup: 1,
        every: 1,
        width: 100,
        height: 100,
        zone_size: 25,
        late_ms: 600_000,
        out: fn _line -> :ok end
      )

    assert report.design == :act
    assert report.audit == :ok and report.entities == 200 and report.errors == 0
    assert report.outcomes.acted > 0 and Map.get(report.outcomes, :ok, 0) == 0
    assert report.moves_per_s > 0
  end

  test "resident walkers are walked by their zones, their lateness reported beside the probe's round trip" do
    {:ok, lines} = Agent.start_link(fn -> [] end)

    report =
      Bench.run(:grove,
        actors: 200,
        duration: 2,
        warmup: 1,
        every: 1,
        width: 100,
        height: 100,
        zone_size: 25,
        resident: true,
        out: fn line -> Agent.update(lines, &[line | &1]) end
      )

    assert report.audit == :ok and report.entities == 200 and report.errors == 0
    assert report.outcomes.ok > 0
    assert is_float(report.resident_lateness_p99_ms)
    printed = lines |> Agent.get(& &1) |> Enum.reverse()
    assert Enum.any?(printed, &String.starts_with?(&1, "resident steps late ms"))
  end
end
