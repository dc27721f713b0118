# Where a server's processes wait for a scheduler: loaded into a running
# server, it prints once a second the run queue (processes and ports
# waiting for a scheduler), its mean and its maximum per 50 ms of the
# second of the world's bacteria (0 is when their generation is due in
# every zone), sampled every 2 ms at max priority; when the queue is over
# 30, now and then, which processes are runnable, by priority and by what
# they run (a registered name, else the function they are in); and any
# process that ran 8 ms or more without yielding, or collected garbage as
# long (`:erlang.system_monitor/2`).
#
#   GROVE_PORT=0 mix run --no-halt -r lab/bench/run_queue.exs
#
# It adds a few per cent of a core; a profile, not a benchmark.
defmodule RunQueue do
  @every_ms 2
  @snapshots 60

  def start do
    {_, world} =
      Enum.find(:persistent_term.get(), fn {key, value} ->
        match?({Grove.World, _}, key) and is_struct(value, Grove.World)
      end)

    epoch = if world.life_epoch, do: world.life_epoch + System.time_offset(:millisecond), else: 0
    IO.puts("run_queue: epoch (system ms) #{epoch}")
    spawn(fn -> monitor(epoch) end)

    spawn(fn ->
      Process.flag(:priority, :max)
      sample(epoch, %{}, 0, System.monotonic_time(:millisecond))
    end)
  end

  defp phase(epoch), do: Integer.mod(System.system_time(:millisecond) - epoch, 1000)

  defp monitor(epoch) do
    :erlang.system_monitor(self(), [{:long_schedule, 8}, {:long_gc, 8}])
    monitor_loop(epoch)
  end

  defp monitor_loop(epoch) do
    receive do
      {:monitor, who, kind, info} ->
        about =
          if is_pid(who),
            do: Process.info(who, [:registered_name, :initial_call, :priority]),
            else: who

        IO.puts("run_queue: phase #{phase(epoch)} #{kind} #{inspect(info)} #{inspect(about)}")
    end

    monitor_loop(epoch)
  end

  defp sample(epoch, buckets, snapshots, last) do
    queued = :erlang.statistics(:total_run_queue_lengths)
    bucket = div(phase(epoch), 50)

    buckets =
      Map.update(buckets, bucket, {queued, 1, queued}, fn {sum, n, max} ->
        {sum + queued, n + 1, max(max, queued)}
      end)

    snapshots =
      if queued > 30 and snapshots < @snapshots and
           rem(System.monotonic_time(:millisecond), 7) == 0 do
        snapshot(epoch, queued)
        snapshots + 1
      else
        snapshots
      end

    now = System.monotonic_time(:millisecond)

    {buckets, last} =
      if now - last >= 1000 do
        line =
          for b <- 0..19 do
            case buckets[b] do
              {sum, n, max} -> "#{div(sum, n)}/#{max}"
              nil -> "-"
            end
          end

        IO.puts("run_queue: mean/max per 50 ms of the second: " <> Enum.join(line, " "))
        {%{}, now}
      else
        {buckets, last}
      end

    receive do
    after
      @every_ms -> :ok
    end

    sample(epoch, buckets, snapshots, last)
  end

  # A process by its name, all of a world's zones as one; else by where it is.
  defp what([], function), do: function

  defp what(name, _function) do
    if String.contains?(Atom.to_string(name), ".zone."), do: :zones, else: name
  end

  defp snapshot(epoch, queued) do
    runnable =
      for pid <- Process.list(),
          info = Process.info(pid, [:status, :priority, :current_function, :registered_name]),
          info != nil,
          info[:status] in [:runnable, :running] do
        what =
          if info[:registered_name] == [],
            do: info[:current_function],
            else: info[:registered_name]

        {info[:priority], what}
      end

    top =
      runnable
      |> Enum.frequencies()
      |> Enum.sort_by(&(-elem(&1, 1)))
      |> Enum.take(8)

    IO.puts(
      "run_queue: phase #{phase(epoch)} queue #{queued}, #{length(runnable)} runnable: #{inspect(top)}"
    )
  end
end

RunQueue.start()
