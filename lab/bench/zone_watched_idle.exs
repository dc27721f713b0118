# What a watched zone costs where nothing changes: the world of
# `zone_wake.exs` (a million cells a side in zones of 50, on demand, the
# orchard with no ticks of its own, views ticking every 100 ms), 400
# viewers placed anywhere on it that never move, each watching the zones
# its viewport of radius 1 overlaps (one, nearly always); then the VM's
# CPU time (`:erlang.statistics(:runtime)`) over 10 s, twice, per viewer
# and second and per tick at ten a second. Run it with one scheduler,
# from the checkout to measure:
#
#     cd lab && taskset -c 1 elixir --erl "+S 1:1" -S mix run --no-start bench/zone_watched_idle.exs

alias Grove.Bench.ZoneWakeWorld
alias Grove.World
{sup, _world} = ZoneWakeWorld.start(:bench_watched_idle)

for _ <- 1..400 do
  {:ok, _id, _} = World.join(:bench_watched_idle, updates: :view, view_radius: 1)
end

Process.sleep(2000)

flush = fn f ->
  receive do
    _ -> f.(f)
  after
    0 -> :ok
  end
end

flush.(flush)

for round <- 1..2 do
  {_, _} = :erlang.statistics(:runtime)
  t0 = System.monotonic_time(:millisecond)
  Process.sleep(10_000)
  {_, ms} = :erlang.statistics(:runtime)
  t1 = System.monotonic_time(:millisecond)
  flush.(flush)
  per_viewer_s = ms * 1000 / (400 * (t1 - t0) / 1000)

  IO.puts(
    "round #{round}: CPU #{ms} ms in #{t1 - t0} ms for 400 still viewers (view radius 1), nothing moving: #{Float.round(per_viewer_s, 1)} us a viewer-second, #{Float.round(per_viewer_s / 10, 2)} us a tick at ten a second (one zone a viewer)"
  )
end

Supervisor.stop(sup)
