# What a world costs with nobody connected, measured from inside the
# server: loaded into it (`mix run --no-halt -r`), it waits WARM seconds
# (the actors join and settle), then over SECS seconds reads the one
# scheduler's utilization, the OS process's CPU time (every thread, as
# `/proc/self/stat` counts it, what `mix grove.bench.peers` calls the
# server's CPU) and the moves the world answered, prints one line and
# stops the server. `bench/world_alone.sh` runs it for two builds side
# by side; by hand, for the default world on one pinned core:
#
#   GROVE_PORT=0 taskset -c 0 elixir --erl "+S 1:1 +sbwt none +sbwtdcpu none +sbwtdio none" \
#     -S mix run --no-halt -r ../lab/bench/world_alone.exs
warm = String.to_integer(System.get_env("WARM", "20"))
secs = String.to_integer(System.get_env("SECS", "20"))

spawn(fn ->
  Process.sleep(warm * 1000)

  # utime + stime, in clock ticks (fields 14 and 15, after the command's
  # closing parenthesis).
  cpu_ticks = fn ->
    [_, rest] = "/proc/self/stat" |> File.read!() |> String.split(") ", parts: 2)
    fields = String.split(rest, " ")
    String.to_integer(Enum.at(fields, 11)) + String.to_integer(Enum.at(fields, 12))
  end

  moves = fn ->
    counts = Grove.World.Stats.read(Grove.World.fetch!(Grove.World).stats)
    counts.moves_ok + Enum.sum(for reason <- Grove.World.rejections(), do: counts[reason] || 0)
  end

  :erlang.system_flag(:scheduler_wall_time, true)
  s0 = :scheduler.sample()
  {c0, m0, t0} = {cpu_ticks.(), moves.(), System.monotonic_time(:millisecond)}
  Process.sleep(secs * 1000)
  {c1, m1, t1} = {cpu_ticks.(), moves.(), System.monotonic_time(:millisecond)}
  util = :scheduler.utilization(s0, :scheduler.sample())
  {:normal, 1, scheduler, _} = List.keyfind(util, :normal, 0)
  elapsed = (t1 - t0) / 1000
  # Clock ticks are 100 a second on Linux.
  process = (c1 - c0) / 100 / elapsed

  IO.puts(
    "WORLD_ALONE scheduler #{Float.round(scheduler * 100, 1)} % process #{Float.round(process * 100, 1)} % " <>
      "moves/s #{round((m1 - m0) / elapsed)} memory #{div(:erlang.memory(:total), 1_000_000)} MB"
  )

  System.halt(0)
end)
