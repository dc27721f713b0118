# What stalls a loaded server for a second at a time: loaded into the
# server, it watches it for `STALL_PROBE_SECONDS` (default 360) with
#
#   * `:erlang.system_monitor/2`: a process scheduled in for more than
#     `STALL_PROBE_SCHEDULE_MS` (default 40) without yielding
#     (`long_schedule`, with where it went in and came out), a garbage
#     collection longer than that (`long_gc`), a heap above 2 M words
#     (`large_heap`), and a busy port;
#   * a sampler every 100 ms: how late it woke (a core taken away, or a
#     scheduler that did not yield), the run queue, the reductions run
#     since the last sample, and the largest mailbox of the processes that
#     are not players' connections (every second: of all);
#   * every second, the reductions of that second by kind of process (a
#     registered name, a gen_server's module, or its initial call).
#
# It prints a line a second (`STALL t=...`: wall-clock seconds, so that
# the load's progress lines can be set beside it) and one line per event
# of the monitor (`STALL monitor ...`). `stall_probe.sh` runs it beside a
# stage of players. A profile, not a benchmark: the scans cost a few per
# cent of the core, and a second of them stretches across a stall (a
# process with signals pending answers when it next runs); with
# `STALL_PROBE_SCANS=0` it asks no process anything (the lateness, the
# run queue, the reductions of the whole VM) and costs next to nothing.
Code.require_file("process_kind.exs", __DIR__)

spawn(fn ->
  seconds = String.to_integer(System.get_env("STALL_PROBE_SECONDS", "360"))
  limit = String.to_integer(System.get_env("STALL_PROBE_SCHEDULE_MS", "40"))
  Process.flag(:priority, :max)
  me = self()

  # A gen_server's kind by its module alone.
  label = fn p ->
    case Grove.Bench.ProcessKind.of(p) do
      {m, _f, _a} -> m
      other -> other
    end
  end

  relabel = fn labels ->
    Map.new(Process.list(), fn p -> {p, Map.get_lazy(labels, p, fn -> label.(p) end)} end)
  end

  wall = fn -> System.os_time(:millisecond) / 1000 end

  # The monitor's events go to a process of their own, which prints them.
  printer =
    spawn(fn ->
      Process.flag(:priority, :high)

      loop = fn loop ->
        receive do
          {:monitor, p, what, info} ->
            # A port too can be scheduled too long; a zone is named with its index.
            name =
              cond do
                is_port(p) ->
                  inspect(Port.info(p, :name))

                Process.info(p, :registered_name) in [nil, {:registered_name, []}] ->
                  inspect(label.(p))

                true ->
                  inspect(elem(Process.info(p, :registered_name), 1))
              end

            info =
              case info do
                list when is_list(list) ->
                  Keyword.take(list, [:timeout, :in, :out, :heap_size, :old_heap_size, :mbuf_size])

                other ->
                  other
              end

            IO.puts("STALL monitor #{Float.round(wall.(), 3)} #{what} #{name} #{inspect(info)}")
            loop.(loop)

          :stop ->
            :ok
        end
      end

      loop.(loop)
    end)

  :erlang.system_monitor(printer, [
    {:long_schedule, limit},
    {:long_gc, limit},
    {:large_heap, 2_000_000},
    :busy_port,
    :busy_dist_port
  ])

  :erlang.system_flag(:scheduler_wall_time, true)

  reductions = fn labels ->
    Enum.reduce(labels, %{}, fn {p, _}, acc ->
      case Process.info(p, :reductions) do
        {:reductions, r} -> Map.put(acc, p, r)
        nil -> acc
      end
    end)
  end

  top_queue = fn pids, labels ->
    Enum.reduce(pids, {0, nil}, fn p, {n, _} = best ->
      case Process.info(p, :message_queue_len) do
        {:message_queue_len, m} when m > n -> {m, Map.get(labels, p)}
        _ -> best
      end
    end)
  end

  scans = System.get_env("STALL_PROBE_SCANS", "1") != "0"

  # Without scans (`STALL_PROBE_SCANS=0`): only how late the sampler woke,
  # the run queue and the reductions of the whole VM, which cost nothing
  # however many processes there are (a scan asks every process, and a
  # process with signals pending answers only when it next runs, which
  # stretches a scan across a stall).
  light = fn light, k ->
    {_, r0} = :erlang.statistics(:exact_reductions)

    {late, runs, _} =
      Enum.reduce(1..10, {[], [], System.monotonic_time(:millisecond)}, fn _, {late, runs, at} ->
        Process.sleep(100)
        now = System.monotonic_time(:millisecond)
        {[now - at - 100 | late], [:erlang.statistics(:run_queue) | runs], now}
      end)

    {_, r1} = :erlang.statistics(:exact_reductions)

    IO.puts(
      "STALL t=#{Float.round(wall.(), 1)} k=#{k} late_max=#{Enum.max(late)} " <>
        "late=#{Enum.sum(late)} run_queue_max=#{Enum.max(runs)} reductions=#{r1 - r0} " <>
        "mem=#{div(:erlang.memory(:total), 1_000_000)}MB"
    )

    if k < seconds, do: light.(light, k + 1), else: :ok
  end

  second = fn second, k, labels, reds, sched ->
    labels = if rem(k, 10) == 0, do: relabel.(labels), else: labels

    others = for {p, l} <- labels, l != Grove.Gateway.Connection, do: p

    # Ten samples, 100 ms apart.
    {late, queues, runs, _} =
      Enum.reduce(1..10, {[], [], [], System.monotonic_time(:millisecond)}, fn _,
                                                                               {late, qs, runs,
                                                                                at} ->
        Process.sleep(100)
        now = System.monotonic_time(:millisecond)
        {q, who} = top_queue.(others, labels)
        {[now - at - 100 | late], [{q, who} | qs], [:erlang.statistics(:run_queue) | runs], now}
      end)

    {all_q, all_who} = top_queue.(Map.keys(labels), labels)
    sched2 = :scheduler.sample()
    [{:total, util, _} | _] = :scheduler.utilization(sched, sched2)
    reds2 = reductions.(labels)

    by =
      Enum.reduce(reds2, %{}, fn {p, r}, acc ->
        Map.update(
          acc,
          Map.get(labels, p),
          r - Map.get(reds, p, r),
          &(&1 + r - Map.get(reds, p, r))
        )
      end)

    total = by |> Map.values() |> Enum.sum()

    top =
      by
      |> Enum.sort_by(&(-elem(&1, 1)))
      |> Enum.take(5)
      |> Enum.map_join(" ", fn {k, r} -> "#{inspect(k)}=#{round(r * 100 / max(total, 1))}%" end)

    {q, who} = Enum.max_by(queues, &elem(&1, 0))
    mem = :erlang.memory()

    IO.puts(
      "STALL t=#{Float.round(wall.(), 1)} k=#{k} util=#{Float.round(util * 100, 1)} " <>
        "late_max=#{Enum.max(late)} run_queue_max=#{Enum.max(runs)} reductions=#{total} " <>
        "queue=#{q}:#{inspect(who)} all_queue=#{all_q}:#{inspect(all_who)} " <>
        "procs=#{map_size(labels)} mem=#{div(mem[:total], 1_000_000)}MB bin=#{div(mem[:binary], 1_000_000)}MB " <>
        "ets=#{div(mem[:ets], 1_000_000)}MB top: #{top}"
    )

    if k < seconds, do: second.(second, k + 1, labels, reds2, sched2), else: :ok
  end

  if scans do
    labels = relabel.(%{})
    second.(second, 1, labels, reductions.(labels), :scheduler.sample())
  else
    light.(light, 1)
  end

  :erlang.system_monitor(:undefined)
  send(printer, :stop)
  IO.puts("STALL done")
  send(me, :done)
end)
