# Where a roaming walker's own turns go, by function: required with
# `roam_inproc.exs` (before it), it waits `ROAM_EPROF_AFTER` seconds
# (default 45: the walkers joined and walked 20 s), then runs `:eprof`
# over `ROAM_EPROF_WALKERS` of the walkers (default 100) for 5 s and
# prints its costliest functions as lines that start with `EPROF`. A
# profile, not a benchmark: eprof slows what it watches (shares, not
# speeds). From the repository's root:
#
#   GROVE_ACTORS=0 GROVE_WIDTH=1000000 GROVE_HEIGHT=1000000 GROVE_ZONES=on_demand \
#     GROVE_ZONE_IDLE_MS=20000 GROVE_PORT=0 ELIXIR_ERL_OPTIONS="+S 1:1 +sbwt none" \
#     taskset -c 0 mix run -r lab/bench/roam_eprof.exs lab/bench/roam_inproc.exs 500
Code.require_file("probe.exs", __DIR__)

spawn(fn ->
  Process.sleep(String.to_integer(System.get_env("ROAM_EPROF_AFTER", "45")) * 1000)
  count = String.to_integer(System.get_env("ROAM_EPROF_WALKERS", "100"))

  walkers =
    for pid <- Process.list(),
        Process.info(pid, :current_function) == {:current_function, {Bench.RoamInproc, :loop, 1}},
        do: pid

  IO.puts("EPROF #{length(walkers)} walkers, #{min(count, length(walkers))} profiled for 5 s")
  Grove.Bench.Probe.eprof(Enum.take(walkers, count), 5_000, 60, "EPROF")
end)
