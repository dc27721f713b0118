# Where a running server's CPU goes, by kind of process: loaded into it,
# it waits 20 s (the world settles), sums every process's reductions over
# 10 s by what it is (a registered name, a gen_server's module, or its
# initial call), prints them with the scheduler utilization, then runs
# `:eprof` over every process for 3 s and prints its functions by time,
# then stops the server.
# For the default world with no player, on one pinned core:
#
#   GROVE_PORT=0 taskset -c 0 elixir --erl "+S 1:1" -S mix run --no-halt -r lab/bench/world_profile.exs
#
# A profile, not a benchmark: eprof slows what it watches.
Code.require_file("process_kind.exs", __DIR__)

spawn(fn ->
  Process.sleep(20_000)

  label = &Grove.Bench.ProcessKind.of/1

  snap = &Grove.Bench.ProcessKind.reductions/0

  :erlang.system_flag(:scheduler_wall_time, true)
  s0 = :scheduler.sample()
  a = snap.()
  Process.sleep(10_000)
  b = snap.()
  util = :scheduler.utilization(s0, :scheduler.sample())

  by =
    Enum.reduce(b, %{}, fn {p, r}, acc ->
      Map.update(acc, label.(p), r - Map.get(a, p, 0), &(&1 + r - Map.get(a, p, 0)))
    end)

  total = by |> Map.values() |> Enum.sum()
  IO.puts("PROFILE utilization #{inspect(util)}")

  for {k, r} <- by |> Enum.sort_by(&(-elem(&1, 1))) |> Enum.take(15),
      do: IO.puts("PROFILE #{inspect(k)} #{r} #{Float.round(r * 100 / total, 1)} %")

  :eprof.start()
  :eprof.start_profiling(Process.list())
  Process.sleep(3_000)
  :eprof.stop_profiling()

  :eprof.analyze(:total, [{:sort, :time}])
  IO.puts("PROFILE done")
  System.halt(0)
end)
