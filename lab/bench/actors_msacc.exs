# Loaded beside `mix grove.bench.actors` (`actors_perf.sh`): waits
# `MSACC_AFTER` seconds from the start (default 58: at 250,000 actors the
# bench joins for about 25 s, warms up for 5, then measures), then prints
# `:msacc` for `MSACC_SECONDS` (default 5): each thread's time by state
# (the emulator, the collector, other, sleep).
after_s = String.to_integer(System.get_env("MSACC_AFTER", "58"))
secs = String.to_integer(System.get_env("MSACC_SECONDS", "5"))

spawn(fn ->
  Process.sleep(after_s * 1000)
  :msacc.start(secs * 1000)
  IO.puts("== msacc, #{secs} s from #{after_s} s")
  :msacc.print()
end)
