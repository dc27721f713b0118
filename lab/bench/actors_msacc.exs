# Loaded beside `mix grove.bench.actors` (`actors_perf.sh`): waits for the
# bench's first line of its measure in its log, `MSACC_LOG` (the file the
# bench's output goes to), then `MSACC_AFTER` seconds more (default 5),
# then prints `:msacc` for `MSACC_SECONDS` (default 5): each thread's time
# by state (the emulator, the collector, other, sleep). Timed from the
# measure, not from the start, since how long the actors take to join
# depends on how many there are.
log = System.fetch_env!("MSACC_LOG")
after_s = String.to_integer(System.get_env("MSACC_AFTER", "5"))
secs = String.to_integer(System.get_env("MSACC_SECONDS", "5"))

measuring? = fn ->
  case File.read(log) do
    {:ok, text} -> String.contains?(text, " measure ")
    {:error, _} -> false
  end
end

await_measure = fn await_measure ->
  unless measuring?.() do
    Process.sleep(500)
    await_measure.(await_measure)
  end
end

spawn(fn ->
  await_measure.(await_measure)
  Process.sleep(after_s * 1000)
  :msacc.start(secs * 1000)
  IO.puts("== msacc, #{secs} s from #{after_s} s after the measure's first line")
  :msacc.print()
end)
