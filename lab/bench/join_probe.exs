# Where a join storm's core goes: loaded into the server (as
# `knee_probe.sh` loads its probe, `PROBE=lab/bench/join_probe.exs`), it
# waits for the first player's connection, then, until `JOIN_PROBE_PLAYERS`
# connections have joined (or 30 s), sums every process's reductions by
# kind and reads the scheduler's utilization and the VM's runtime, so that
# a join's share of the core is read over the storm itself. With
# `JOIN_PROBE_EPROF=1` it runs `:eprof` over every process (and those they
# spawn: the connections) for the storm's first 3 s instead, and prints
# its 40 costliest functions. With `JOIN_PROBE_PERF=FILE` it also records
# `perf` (on core 1) over the storm's first 8 s into FILE. Lines start with
# `PROBE`:
#
#   WORLD=default PROBE=lab/bench/join_probe.exs JOIN_PROBE_PLAYERS=3000 \
#     LOAD_ARGS="--move-every 3600000" lab/bench/knee_probe.sh 3000 10 10
#
# A profile, not a benchmark: eprof slows what it watches.
Code.require_file("process_kind.exs", __DIR__)
Code.require_file("probe.exs", __DIR__)

defmodule Grove.Bench.JoinProbe do
  @moduledoc false

  def connections do
    for p <- Process.list(),
        Process.info(p, :dictionary)
        |> then(fn
          {:dictionary, d} -> Keyword.get(d, :"$initial_call")
          nil -> nil
        end) == {Grove.Gateway.Connection, :init, 1},
        do: p
  end

  def joins, do: Grove.World.Stats.get(Grove.World.fetch!(Grove.World).stats, :joins)

  # The functions timed by `JOIN_PROBE_TIME=1`: a join's steps, and what
  # else runs in the storm (the zones' ticks, the herds, the views sent).
  def timed do
    [
      {:yaws_server, :acceptor0, 2},
      {Grove.Gateway.Socket, :out, 1},
      {DynamicSupervisor, :handle_call, 3},
      {Grove.Gateway.Connection, :init, 1},
      {Grove.Gateway.Connection, :handle_info, 2},
      {Grove.Gateway.Session, :handle_frame, 4},
      {Grove.Gateway.Session, :handle_info, 2},
      {Grove.Gateway.Session, :views, 2},
      {Grove.World.Zone, :handle_call, 3},
      {Grove.World.Zone, :handle_cast, 2},
      {Grove.World.Zone, :handle_info, 2},
      {Grove.World.Zone.Views, :subscribe, 5},
      {Grove.World.Zone.Views, :snapshot_tiles, 5},
      {Grove.World.Zone.Views, :follow, 4},
      {Grove.World.Zone.State, :place, 4},
      {Grove.World.Zone, :tick, 1},
      {Grove.Actors.Herd, :handle_info, 2},
      {Grove.Gateway.Broadcaster, :handle_info, 2}
    ]
  end

  def sample(acc) do
    receive do
      :stop -> Enum.reverse(acc)
    after
      100 ->
        supervisors =
          for {_, p, _, _} <- PartitionSupervisor.which_children(Grove.Gateway.config().sessions),
              do: elem(Process.info(p, :message_queue_len), 1)

        {yaws, zones, conns} =
          Enum.reduce(Process.list(), {0, [], 0}, fn p, {y, z, c} ->
            case Process.info(p, [:dictionary, :message_queue_len]) do
              [{:dictionary, d}, {:message_queue_len, q}] ->
                case Keyword.get(d, :"$initial_call") do
                  {Grove.World.Zone, :init, 1} -> {y, [q | z], c}
                  {Grove.Gateway.Connection, :init, 1} -> {y, z, c + q}
                  _ -> if Keyword.has_key?(d, :gserv_pid), do: {y + 1, z, c}, else: {y, z, c}
                end

              nil ->
                {y, z, c}
            end
          end)

        sample([
          {:erlang.statistics(:run_queue), Enum.sum(supervisors), yaws,
           Enum.max(zones, fn -> 0 end), Enum.sum(zones), conns}
          | acc
        ])
    end
  end

  # A probe's start, ahead of the server's processes: the number of
  # players it waits for (`JOIN_PROBE_PLAYERS`), once the first player's
  # connection is there.
  def start do
    Process.flag(:priority, :high)
    players = String.to_integer(System.get_env("JOIN_PROBE_PLAYERS", "3000"))
    wait_first()
    players
  end

  defp wait_first do
    if connections() == [] do
      Process.sleep(20)
      wait_first()
    else
      :ok
    end
  end

  def wait_joined(n, deadline) do
    count = joins()

    cond do
      count >= n -> count
      System.monotonic_time(:millisecond) > deadline -> count
      true -> Process.sleep(50) && wait_joined(n, deadline)
    end
  end
end

spawn(fn ->
  players = Grove.Bench.JoinProbe.start()

  perf = System.get_env("JOIN_PROBE_PERF")

  # perf on the other core, over the storm, the server's JIT'd code named
  # (the server started with `+JPperf true`: `SERVER_ERL_MORE="+JPperf true"`).
  if perf,
    do:
      spawn(fn ->
        System.cmd(
          "taskset",
          ~w(-c 1 perf record -F 999 -g -p #{System.pid()} -o #{perf} -- sleep 8),
          stderr_to_stdout: true
        )

        IO.puts("PROBE perf written to #{perf}")
      end)

  if System.get_env("JOIN_PROBE_TIME") == "1" do
    # The time each process spends in a few functions over the storm
    # (`call_time`: only while it runs; a traced function's time excludes
    # that of the traced functions it calls), summed over processes.
    mfas = Grove.Bench.JoinProbe.timed()
    :erlang.trace(:all, true, [:call])
    for mfa <- mfas, do: :erlang.trace_pattern(mfa, true, [:call_time, :local])
    {runtime0, _} = :erlang.statistics(:runtime)
    t0 = System.monotonic_time(:millisecond)
    in0 = Grove.Bench.JoinProbe.joins()
    joined = Grove.Bench.JoinProbe.wait_joined(in0 + players, t0 + 30_000)
    t1 = System.monotonic_time(:millisecond)
    {runtime1, _} = :erlang.statistics(:runtime)
    n = max(joined - in0, 1)

    times =
      for mfa <- mfas do
        case :erlang.trace_info(mfa, :call_time) do
          {:call_time, list} when is_list(list) ->
            {calls, us} =
              Enum.reduce(list, {0, 0}, fn {_pid, c, s, u}, {cs, us} ->
                {cs + c, us + s * 1_000_000 + u}
              end)

            {mfa, calls, us}

          _ ->
            {mfa, 0, 0}
        end
      end

    :erlang.trace_pattern({:_, :_, :_}, false, [:call_time, :local])
    :erlang.trace(:all, false, [:call])
    total = runtime1 - runtime0

    IO.puts(
      "PROBE timed storm: #{n} joined in #{t1 - t0} ms, runtime #{total} ms " <>
        "(#{Float.round(total / n, 3)} ms a join, all included)"
    )

    for {{m, f, a}, calls, us} <- Enum.sort_by(times, &(-elem(&1, 2))),
        do:
          IO.puts(
            "PROBE time #{inspect(m)}.#{f}/#{a}: #{calls} calls, #{div(us, 1000)} ms " <>
              "(#{Float.round(us / 1000 * 100 / max(total, 1), 1)} % of the runtime, " <>
              "#{Float.round(us / n, 1)} us a join)"
          )
  else
    if System.get_env("JOIN_PROBE_EPROF") == "1" do
      IO.puts("PROBE eprof over the storm's first 3 s")
      Grove.Bench.Probe.eprof(Process.list(), 3_000, 40, "PROBE eprof")
    else
      label = &Grove.Bench.ProcessKind.of/1
      :erlang.system_flag(:scheduler_wall_time, true)
      s0 = :scheduler.sample()
      a = Grove.Bench.ProcessKind.reductions()
      {runtime0, _} = :erlang.statistics(:runtime)
      t0 = System.monotonic_time(:millisecond)
      in0 = Grove.Bench.JoinProbe.joins()

      # Beside it, every 100 ms: the run queue, the sessions' supervisors'
      # queue, the Yaws processes serving a request, and the zones' queues.
      sampler = Task.async(fn -> Grove.Bench.JoinProbe.sample([]) end)
      joined = Grove.Bench.JoinProbe.wait_joined(in0 + players, t0 + 30_000)
      send(sampler.pid, :stop)
      samples = Task.await(sampler)
      t1 = System.monotonic_time(:millisecond)
      {runtime1, _} = :erlang.statistics(:runtime)
      b = Grove.Bench.ProcessKind.reductions()
      util = :scheduler.utilization(s0, :scheduler.sample())

      by =
        Enum.reduce(b, %{}, fn {p, r}, acc ->
          Map.update(acc, label.(p), r - Map.get(a, p, 0), &(&1 + r - Map.get(a, p, 0)))
        end)

      total = by |> Map.values() |> Enum.sum()
      n = max(joined - in0, 1)

      IO.puts(
        "PROBE storm: #{n} joined in #{t1 - t0} ms, runtime #{runtime1 - runtime0} ms " <>
          "(#{Float.round((runtime1 - runtime0) / n, 3)} ms a join, the rest included), " <>
          "utilization #{inspect(Enum.find(util, &(elem(&1, 0) == :total)))}"
      )

      IO.puts("PROBE reductions all #{total} (#{div(total, n)} a join)")

      for {what, k} <- [
            {"run queue", 0},
            {"sessions' supervisors' queue", 1},
            {"Yaws processes", 2},
            {"zones' largest queue", 3},
            {"zones' queues summed", 4},
            {"connections' queues summed", 5}
          ] do
        values = Enum.map(samples, &elem(&1, k))

        IO.puts(
          "PROBE #{what} each 100 ms: mean #{Float.round(Enum.sum(values) / max(length(values), 1), 1)}, " <>
            "max #{Enum.max(values, fn -> 0 end)}; #{values |> Enum.take_every(5) |> Enum.join(" ")}"
        )
      end

      for {k, r} <- by |> Enum.sort_by(&(-elem(&1, 1))) |> Enum.take(15),
          do:
            IO.puts(
              "PROBE reductions #{inspect(k)} #{r} #{Float.round(r * 100 / max(total, 1), 1)} % " <>
                "(#{div(r, n)} a join)"
            )
    end
  end

  IO.puts("PROBE done")
end)
