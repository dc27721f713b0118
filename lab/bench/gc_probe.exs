# Where a loaded server's schedulers go, by the garbage collector: loaded
# into the actor bench's VM (`mix run -r`), it waits `GC_PROBE_AFTER`
# seconds (default 30), then reads `:msacc` over 10 s (the schedulers'
# time by state: emulator, gc, sleep, ...) and the VM's collections over
# the same 10 s, then traces the collections of every zone and every herd
# for 2 s, with timestamps, and prints their count, time and heaps by kind
# of process. Lines start with `GCP`. From lab/:
#
#   GC_PROBE_AFTER=40 mix run --no-start -r bench/gc_probe.exs \
#     -e 'Mix.Task.run("grove.bench.actors", ~w(--actors 250000 --duration 40))'
#
# A profile, not a benchmark: the trace slows the collections it times.
Code.require_file("process_kind.exs", __DIR__)

spawn(fn ->
  Process.sleep(String.to_integer(System.get_env("GC_PROBE_AFTER", "30")) * 1000)
  Process.flag(:priority, :high)
  kind = &Grove.Bench.ProcessKind.of/1
  labels = Map.new(Process.list(), &{&1, kind.(&1)})

  counts =
    labels |> Map.values() |> Enum.frequencies() |> Enum.sort_by(&(-elem(&1, 1))) |> Enum.take(8)

  IO.puts("GCP kinds #{inspect(counts)}")
  {g0, w0, _} = :erlang.statistics(:garbage_collection)
  :msacc.start(10_000)
  {g1, w1, _} = :erlang.statistics(:garbage_collection)
  stats = :msacc.stats()

  sched =
    for %{type: :scheduler, counters: c} <- stats, reduce: %{} do
      acc -> Enum.reduce(c, acc, fn {k, v}, a -> Map.update(a, k, v, &(&1 + v)) end)
    end

  tot = sched |> Map.values() |> Enum.sum()

  IO.puts(
    "GCP msacc schedulers: " <>
      (sched
       |> Enum.sort_by(&(-elem(&1, 1)))
       |> Enum.map(fn {k, v} -> "#{k} #{Float.round(v * 100 / tot, 1)}%" end)
       |> Enum.join(", "))
  )

  busy = tot - Map.get(sched, :sleep, 0)

  IO.puts(
    "GCP msacc of busy: gc #{Float.round(Map.get(sched, :gc, 0) * 100 / busy, 1)}% emulator #{Float.round(Map.get(sched, :emulator, 0) * 100 / busy, 1)}%"
  )

  IO.puts("GCP gcs in 10 s: #{g1 - g0}, words reclaimed #{w1 - w0}")
  # Per process: trace GC with timestamps of every zone and herd for 2 s.
  by_kind = Enum.group_by(Map.keys(labels), &Map.get(labels, &1))
  pick = fn k -> Map.get(by_kind, k, []) end

  zones =
    Enum.flat_map(by_kind, fn {k, ps} ->
      if is_binary(k) and String.ends_with?(k, ".N"), do: ps, else: []
    end)

  herds = pick.({Grove.Actors.Herd, :init, 1})
  IO.puts("GCP zones #{length(zones)} herds #{length(herds)}")
  me = self()
  all = zones ++ herds

  for p <- all,
      do:
        (try do
           :erlang.trace(p, true, [:garbage_collection, :monotonic_timestamp, {:tracer, me}])
         rescue
           _ -> 0
         end)

  until = System.monotonic_time(:millisecond) + 2000

  fold = fn fold, acc ->
    receive do
      {:trace_ts, p, tag, info, ts} -> fold.(fold, [{p, tag, info, ts} | acc])
      _ -> fold.(fold, acc)
    after
      max(until - System.monotonic_time(:millisecond), 0) -> acc
    end
  end

  events = fold.(fold, [])

  for p <- all,
      do:
        (try do
           :erlang.trace(p, false, [:all])
         rescue
           _ -> 0
         end)

  zset = MapSet.new(zones)
  evs = Enum.reverse(events)

  {_, res} =
    Enum.reduce(evs, {%{}, %{}}, fn {p, tag, info, ts}, {open, res} ->
      k = if MapSet.member?(zset, p), do: :zone, else: :herd

      case tag do
        t when t in [:gc_minor_start, :gc_major_start] ->
          {Map.put(open, p, {t, ts, info}), res}

        t when t in [:gc_minor_end, :gc_major_end] ->
          case Map.pop(open, p) do
            {{_, t0, i0}, open} ->
              d = System.convert_time_unit(ts - t0, :native, :microsecond)

              reclaimed =
                i0[:heap_size] + i0[:old_heap_size] - (info[:heap_size] + info[:old_heap_size])

              key = {k, t}

              {open,
               Map.update(
                 res,
                 key,
                 {1, d, info[:heap_size] + info[:old_heap_size], reclaimed},
                 fn {n, dd, h, r} ->
                   {n + 1, dd + d, h + info[:heap_size] + info[:old_heap_size], r + reclaimed}
                 end
               )}

            {nil, open} ->
              {open, res}
          end

        _ ->
          {open, res}
      end
    end)

  for {{k, t}, {n, d, h, r}} <- Enum.sort(res),
      do:
        IO.puts(
          "GCP trace 2s #{k} #{t}: #{n} collections, #{d} us total (#{Float.round(d / max(n, 1), 1)} us each), mean heap after #{div(h, max(n, 1))} words, reclaimed #{r} words"
        )

  heaps = fn ps ->
    ps
    |> Enum.map(&((Process.info(&1, :total_heap_size) || {:x, 0}) |> elem(1)))
    |> then(&{Enum.sum(&1), Enum.max(&1, fn -> 0 end)})
  end

  IO.puts(
    "GCP heap words zones (sum, max) #{inspect(heaps.(zones))} herds #{inspect(heaps.(herds))}"
  )

  z = List.first(zones)
  h = List.first(herds)

  IO.puts(
    "GCP zone gc #{inspect(Process.info(z, [:garbage_collection, :heap_size, :min_heap_size, :message_queue_data]))}"
  )

  IO.puts(
    "GCP herd gc #{inspect(Process.info(h, [:garbage_collection, :heap_size, :min_heap_size, :message_queue_data]))}"
  )
end)
