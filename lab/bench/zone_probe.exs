# A trace of one zone of a running server (or of several: ZONE is a comma
# list, the first traced in full, the others' mailboxes, reductions and
# collections beside it), to see whether it stalls: every 10 ms, its
# mailbox, reductions, heap, current function, status and garbage
# collections, with the node's run queue; the system monitor's
# long garbage collections, long schedules and busy ports (over 20 ms) of
# any process; and the scheduler utilization over the whole trace. The
# sampler runs on the server's node (evaluated there, so the server needs
# no code of the lab's), which must be distributed (`elixir --sname NAME
# -S mix run --no-halt`, the cookie in `$HOME/.erlang.cookie`):
#
#   elixir --sname probe lab/bench/zone_probe.exs NAME@HOST SECONDS ZONE[,ZONE...] OUT
#
# It writes one Erlang term a line to OUT and prints a summary: the largest
# mailbox and heap, the gaps in its own sampling (the core busy elsewhere),
# the functions the zone was seen in, the monitor's events and the
# utilization. `lab/bench/crowd_probe.sh` runs it across a crowd.

[server, seconds, zone_index, out] = System.argv()
server = String.to_atom(server)
seconds = String.to_integer(seconds)
Node.connect(server) || raise "cannot reach #{server}"

sampler = ~S"""
[pid | _] = pids = Enum.map(zone_names, &(Process.whereis(&1) || raise "no zone #{&1}"))
# Above every process of the server, so that it samples through a stall.
Process.flag(:priority, :max)

:erlang.system_monitor(self(), [
  {:long_gc, 20},
  {:long_schedule, 20},
  :busy_port,
  :busy_dist_port,
  {:large_heap, 4_000_000}
])

t0 = System.monotonic_time(:millisecond)
sample0 = :scheduler.sample()
epoch = Grove.World.fetch!(Grove.World).life_epoch

# What is runnable at a moment the run queue is long, by what it is: a
# registered name, a gen_server's module, or its initial call.
label = fn p ->
  case Process.info(p, [:registered_name, :dictionary, :initial_call]) do
    nil -> :gone
    [{:registered_name, name} | _] when name != [] -> name |> Atom.to_string() |> String.replace(~r/\.\d+$/, ".N")
    [_, {:dictionary, d}, {:initial_call, i}] -> Keyword.get(d, :"$initial_call", i)
  end
end

runnable = fn ->
  for p <- Process.list(), Process.info(p, :status) == {:status, :runnable}, reduce: %{} do
    acc -> Map.update(acc, label.(p), 1, &(&1 + 1))
  end
  |> Enum.sort_by(&(-elem(&1, 1)))
  |> Enum.take(8)
end

loop = fn loop, acc, n ->
  receive do
    {:monitor, p, what, info} ->
      at = System.monotonic_time(:millisecond) - t0
      who = if is_pid(p), do: Process.info(p, [:registered_name, :current_function, :initial_call]), else: Port.info(p, :name)
      loop.(loop, [{:monitor, at, p == pid, what, inspect(info, limit: 30), inspect(who)} | acc], n)
  after
    10 ->
      at = System.monotonic_time(:millisecond) - t0
      keys = [:message_queue_len, :reductions, :total_heap_size, :current_function, :status, :garbage_collection]
      i = Process.info(pid, keys)

      entry =
        {:sample, at, i[:message_queue_len], i[:reductions], i[:total_heap_size],
         i[:current_function], i[:status], i[:garbage_collection][:minor_gcs],
         :erlang.statistics(:run_queue)}

      zones =
        for p <- pids do
          z = Process.info(p, [:message_queue_len, :reductions, :garbage_collection])
          {z[:message_queue_len], z[:reductions], z[:garbage_collection][:minor_gcs]}
        end

      acc = [{:zones, at, zones} | acc]

      acc =
        if elem(entry, 8) > 100 and Enum.count(acc, &(elem(&1, 0) == :runnable)) < 40,
          do: [{:runnable, at, rem(System.monotonic_time(:millisecond) - epoch, 1000), elem(entry, 8), runnable.()}, entry | acc],
          else: [entry | acc]

      if n > 0, do: loop.(loop, acc, n - 1), else: Enum.reverse(acc)
  end
end

trace = loop.(loop, [], div(seconds * 1000, 10))
:erlang.system_monitor(:undefined)
trace ++ [{:utilization, :scheduler.utilization(sample0, :scheduler.sample())}]
"""

:rpc.call(server, :erlang, :system_flag, [:scheduler_wall_time, true])
zones = zone_index |> String.split(",") |> Enum.map(&String.to_integer/1)
zone_names = Enum.map(zones, &:"Elixir.Grove.World.zone.#{&1}")

trace =
  case :rpc.call(
         server,
         Code,
         :eval_string,
         [sampler, [zone_names: zone_names, seconds: seconds]],
         :infinity
       ) do
    {trace, _binding} when is_list(trace) -> trace
    other -> raise "the probe failed on #{server}: #{inspect(other, limit: 20)}"
  end

File.write!(out, Enum.map(trace, &[inspect(&1, limit: :infinity), "\n"]))

samples =
  for {:sample, at, queued, _r, heap, function, status, _gcs, run_queue} <- trace,
      do: {at, queued, heap, function, status, run_queue}

gaps =
  samples
  |> Enum.map(&elem(&1, 0))
  |> Enum.chunk_every(2, 1, :discard)
  |> Enum.map(fn [a, b] -> {b - a, a} end)
  |> Enum.filter(fn {gap, _} -> gap > 40 end)
  |> Enum.sort(:desc)

IO.puts("zone #{hd(zones)}: #{length(samples)} samples over #{seconds} s")

IO.puts(
  "largest mailbox #{samples |> Enum.map(&elem(&1, 1)) |> Enum.max()}, " <>
    "largest heap #{samples |> Enum.map(&elem(&1, 2)) |> Enum.max()} words, " <>
    "longest run queue #{samples |> Enum.map(&elem(&1, 5)) |> Enum.max()}"
)

IO.puts(
  "gaps in the sampling over 40 ms (ms, at ms): #{inspect(Enum.take(gaps, 10))} of #{length(gaps)}"
)

IO.puts(
  "seen in: #{inspect(samples |> Enum.frequencies_by(&elem(&1, 3)) |> Enum.sort_by(&(-elem(&1, 1))) |> Enum.take(6))}"
)

events = for {:monitor, _, _, _, _, _} = event <- trace, do: event
IO.puts("system monitor: #{length(events)} events")

for event <- Enum.take(events, 20),
    do: IO.puts("  " <> inspect(event, limit: 12, printable_limit: 300))

stalls = for {:runnable, _, _, _, _} = stall <- trace, do: stall

IO.puts(
  "run queue over 100: #{length(stalls)} snapshots {at ms, ms into the bacteria's second, run queue, runnable by kind}"
)

for stall <- stalls, do: IO.puts("  " <> inspect(stall, limit: 20))

# Every zone traced: its largest mailbox, its reductions and collections
# over the trace, and the moments the zones' mailboxes held most together.
rows = for {:zones, at, zs} <- trace, do: {at, zs}

if rows != [] do
  {_, first} = hd(rows)
  {_, last} = List.last(rows)

  for {{zone, i}, {{_, r0, g0}, {_, r1, g1}}} <-
        Enum.zip(Enum.with_index(zones), Enum.zip(first, last)) do
    largest = rows |> Enum.map(fn {_, zs} -> zs |> Enum.at(i) |> elem(0) end) |> Enum.max()

    IO.puts(
      "zone #{zone}: largest mailbox #{largest}, #{div(r1 - r0, seconds)} reductions/s, " <>
        "#{div(g1 - g0, seconds)} minor collections/s"
    )
  end

  fullest =
    rows
    |> Enum.map(fn {at, zs} ->
      {Enum.sum(Enum.map(zs, &elem(&1, 0))), at, Enum.map(zs, &elem(&1, 0))}
    end)
    |> Enum.sort(:desc)
    |> Enum.take(10)

  IO.puts("zones' mailboxes at their fullest {sum, at ms, each}: #{inspect(fullest)}")
end

IO.puts("utilization: #{inspect(List.keyfind(trace, :utilization, 0))}")
