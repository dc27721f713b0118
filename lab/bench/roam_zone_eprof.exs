# Where a roaming walker's zones' turns go, by function: required with
# `roam_inproc.exs` (before it), it waits `ROAM_EPROF_AFTER` seconds
# (default 45: the walkers joined and walked 20 s), then runs `:eprof`
# for 5 s over the zones that hold an entity (`ROAM_EPROF_ZONES=held`,
# the default) or over the zones awake that hold none, those a walker's
# viewport reaches (`empty`), and prints their costliest functions as
# lines that start with `ZEPROF`, with the zones' reductions over the 5 s
# a move. It runs inside the bench's measured 30 s: that run's `INPROC`
# figures are not the bench's. A profile, not a benchmark: eprof slows
# what it watches, the most its shortest calls (shares, not speeds).
# From the repository's root:
#
#   GROVE_ACTORS=0 GROVE_WIDTH=1000000 GROVE_HEIGHT=1000000 GROVE_ZONES=on_demand \
#     GROVE_ZONE_IDLE_MS=20000 GROVE_PORT=0 ELIXIR_ERL_OPTIONS="+S 1:1 +sbwt none" \
#     taskset -c 0 mix run -r lab/bench/roam_zone_eprof.exs lab/bench/roam_inproc.exs 500
Code.require_file("probe.exs", __DIR__)

defmodule Bench.RoamZoneEprof do
  @moduledoc false

  def zones do
    for pid <- Process.list(),
        {:dictionary, d} <- [Process.info(pid, :dictionary)],
        Keyword.get(d, :"$initial_call") == {Grove.World.Zone, :init, 1},
        do: pid
  end

  def holds_entity?(pid) do
    case :sys.get_state(pid, 1000) do
      %{core: %{entities: entities}} -> map_size(entities) > 0
      _ -> false
    end
  catch
    _, _ -> false
  end

  def reductions(pids),
    do: Enum.sum(for pid <- pids, {:reductions, r} <- [Process.info(pid, :reductions)], do: r)

  def profile(label, pids) do
    r0 = reductions(pids)
    moves0 = moves()
    Grove.Bench.Probe.eprof(pids, 5_000, 45, "ZEPROF #{label}")
    r1 = reductions(pids)
    moves = moves() - moves0

    IO.puts(
      "ZEPROF #{label}: #{length(pids)} zones, #{moves} moves, " <>
        "#{round((r1 - r0) / max(moves, 1))} reductions a move (some read after the profile)"
    )
  end

  defp moves do
    world = Grove.World.fetch!(Grove.Gateway.config().world)
    Grove.World.Stats.get(world.stats, :moves_ok)
  end
end

spawn(fn ->
  Process.sleep(String.to_integer(System.get_env("ROAM_EPROF_AFTER", "45")) * 1000)
  zones = Bench.RoamZoneEprof.zones()
  {held, empty} = Enum.split_with(zones, &Bench.RoamZoneEprof.holds_entity?/1)

  case System.get_env("ROAM_EPROF_ZONES", "held") do
    "held" -> Bench.RoamZoneEprof.profile("held", held)
    "empty" -> Bench.RoamZoneEprof.profile("empty", empty)
  end
end)
