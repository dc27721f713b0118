# What a timer's wake-up costs a process, when the processes of a world
# wake at phases spread over their period and when they wake together: the
# floor under a zone's periodic work (a generation, a tick) that does
# little. N processes, each with a small state it walks at every wake-up,
# each woken by its own timer HZ times a second; spread, process i's timer
# is offset by i/N of the period; together, every timer fires at the same
# millisecond. Run on one core with one scheduler that does not spin, as
# the benches run the server:
#
#   taskset -c 0 elixir --erl "+S 1:1 +sbwt none +sbwtdcpu none +sbwtdio none" lab/bench/wakeups.exs
#   ... lab/bench/wakeups.exs 400 10 200 10     # N, HZ, state size, seconds
#
# It prints the CPU time of the VM (user and system, from
# `:erlang.statistics(:runtime)`) per wake-up, spread then together, and
# the ratio.

[n, hz, work, seconds] =
  case System.argv() do
    [] -> [400, 1, 200, 10]
    args -> Enum.map(args, &String.to_integer/1)
  end

period = div(1000, hz)

measure = fn together? ->
  start = System.monotonic_time(:millisecond) + 100

  pids =
    for i <- 1..n do
      spawn(fn ->
        phase = if together?, do: 0, else: div(i * period, n)

        loop = fn loop, due, state ->
          Process.send_after(self(), :wake, due, abs: true)

          receive do
            :wake -> loop.(loop, due + period, Enum.map(state, &(&1 + 1)))
            :stop -> :ok
          end
        end

        loop.(loop, start + phase, Enum.to_list(1..work))
      end)
    end

  Process.sleep(3000)
  {cpu0, _} = :erlang.statistics(:runtime)
  Process.sleep(seconds * 1000)
  {cpu1, _} = :erlang.statistics(:runtime)
  for pid <- pids, do: send(pid, :stop)
  (cpu1 - cpu0) * 1000 / (seconds * n * hz)
end

spread = measure.(false)
together = measure.(true)

IO.puts(
  "#{n} processes, #{hz} wake-ups a second each, a state of #{work} to walk: " <>
    "#{Float.round(spread, 1)} us of CPU per wake-up spread over the period, " <>
    "#{Float.round(together, 1)} us together (#{Float.round(together / spread, 2)})"
)
