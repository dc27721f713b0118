# Where a loaded server's core goes, for finding what bends it at its knee:
# loaded into the server, it waits `KNEE_PROBE_AFTER` seconds (default 60:
# the players joined and settled), then over 10 s samples every 100 ms the
# run queue and the message queues of every process, by what it is (a
# registered name, a gen_server's module, or its initial call), sums their
# reductions by the same, and prints them with the scheduler utilization;
# then over 5 s it counts what reaches up to 200 players' connections (the
# messages by kind, their turns on the scheduler, their garbage
# collections), and over 5 s more what reaches every zone, a
# player-second; then it runs `:eprof` over every process for 3 s and
# prints its 30 costliest functions. Lines start with `PROBE`. `knee_probe.sh` runs it
# beside a stage of players; by hand:
#
#   KNEE_PROBE_AFTER=60 GROVE_PORT=0 taskset -c 0 elixir --erl "+S 1:1" -S mix run --no-halt -r lab/bench/knee_probe.exs
#
# A profile, not a benchmark: eprof slows what it watches, for its 3 s.
Code.require_file("process_kind.exs", __DIR__)
Code.require_file("probe.exs", __DIR__)

spawn(fn ->
  Process.sleep(String.to_integer(System.get_env("KNEE_PROBE_AFTER", "60")) * 1000)
  Process.flag(:priority, :high)

  label = &Grove.Bench.ProcessKind.of/1

  labels = Map.new(Process.list(), &{&1, label.(&1)})
  labelled = fn p -> Map.get_lazy(labels, p, fn -> label.(p) end) end

  reductions = &Grove.Bench.ProcessKind.reductions/0

  :erlang.system_flag(:scheduler_wall_time, true)
  s0 = :scheduler.sample()
  a = reductions.()

  # Every 100 ms: the run queue, and each kind's largest and total queue.
  samples =
    for _ <- 1..100 do
      Process.sleep(100)

      queues =
        Enum.reduce(Process.list(), %{}, fn p, acc ->
          case Process.info(p, :message_queue_len) do
            {:message_queue_len, n} when n > 0 ->
              Map.update(acc, labelled.(p), {n, n}, fn {max, sum} -> {max(max, n), sum + n} end)

            _ ->
              acc
          end
        end)

      {:erlang.statistics(:run_queue), queues}
    end

  b = reductions.()
  util = :scheduler.utilization(s0, :scheduler.sample())

  by =
    Enum.reduce(b, %{}, fn {p, r}, acc ->
      Map.update(acc, labelled.(p), r - Map.get(a, p, 0), &(&1 + r - Map.get(a, p, 0)))
    end)

  total = by |> Map.values() |> Enum.sum()
  IO.puts("PROBE utilization #{inspect(util)}")
  run_queues = Enum.map(samples, &elem(&1, 0))

  IO.puts(
    "PROBE run queue: mean #{Float.round(Enum.sum(run_queues) / length(run_queues), 1)}, max #{Enum.max(run_queues)}"
  )

  for {k, r} <- by |> Enum.sort_by(&(-elem(&1, 1))) |> Enum.take(15),
      do:
        IO.puts(
          "PROBE reductions #{inspect(k)} #{r} #{Float.round(r * 100 / max(total, 1), 1)} %"
        )

  queued =
    Enum.reduce(samples, %{}, fn {_, queues}, acc ->
      Enum.reduce(queues, acc, fn {k, {max, sum}}, acc ->
        Map.update(acc, k, {max, sum}, fn {m, s} -> {max(m, max), s + sum} end)
      end)
    end)

  for {k, {max, sum}} <- queued |> Enum.sort_by(&(-elem(elem(&1, 1), 1))) |> Enum.take(10),
      do:
        IO.puts(
          "PROBE queue #{inspect(k)}: largest #{max}, mean total #{Float.round(sum / 100, 1)}"
        )

  # What a player's connection handles: over 5 s, the messages that reach
  # up to 200 of them, by kind, and their garbage collections, each a
  # player-second.
  connections = for {p, {Grove.Gateway.Connection, :init, 1}} <- labels, Process.alive?(p), do: p

  sample = connections |> Enum.shuffle() |> Enum.take(200)

  kind = fn
    m when is_atom(m) ->
      m

    m when is_tuple(m) and tuple_size(m) > 2 and elem(m, 0) == :grove_view ->
      {:grove_view, elem(m, 2)}

    m when is_tuple(m) and is_atom(elem(m, 0)) ->
      elem(m, 0)

    _other ->
      :other
  end

  count = fn
    {:receive, m}, acc -> Map.update(acc, kind.(m), 1, &(&1 + 1))
    {:in, _}, acc -> Map.update(acc, :scheduled_in, 1, &(&1 + 1))
    {:gc_major_start, _}, acc -> Map.update(acc, :gc, 1, &(&1 + 1))
    {:gc_minor_start, _}, acc -> Map.update(acc, :gc, 1, &(&1 + 1))
    _other, acc -> acc
  end

  counted = Grove.Bench.Probe.trace(sample, 5_000, %{}, count)
  per = max(length(sample), 1) * 5

  for {k, n} <- Enum.sort_by(counted, &(-elem(&1, 1))),
      do: IO.puts("PROBE connection #{inspect(k)}: #{Float.round(n / per, 2)} a player-second")

  # What every zone running now handles over 5 s more (the messages by
  # kind, turns, collections), each a player-second of the players
  # connected: with the connections' above, the turns a player's move
  # costs end to end.
  zones = for p <- Process.list(), label.(p) == {Grove.World.Zone, :init, 1}, do: p
  players = max(length(connections), 1)

  # A timer of `:erlang.start_timer/3` by what it is for (the game's
  # tick, a handoff's expiry, the idle check, the residents' steps).
  zone_kind = fn
    {:timeout, _ref, what} when is_atom(what) -> {:timeout, what}
    {:"$gen_cast", m} when is_tuple(m) -> {:cast, elem(m, 0)}
    {:"$gen_cast", m} -> {:cast, m}
    {:"$gen_call", _from, m} when is_tuple(m) -> {:call, elem(m, 0)}
    {:"$gen_call", _from, m} -> {:call, m}
    m -> kind.(m)
  end

  zone_count = fn
    {:receive, m}, acc -> Map.update(acc, zone_kind.(m), 1, &(&1 + 1))
    other, acc -> count.(other, acc)
  end

  counted = Grove.Bench.Probe.trace(zones, 5_000, %{}, zone_count)

  for {k, n} <- Enum.sort_by(counted, &(-elem(&1, 1))) |> Enum.take(20),
      do:
        IO.puts(
          "PROBE zones (#{length(zones)}) #{inspect(k)}: " <>
            "#{Float.round(n / (players * 5), 2)} a player-second"
        )

  Grove.Bench.Probe.eprof(Process.list(), 3_000, 32, "PROBE eprof")
  IO.puts("PROBE done")
end)
