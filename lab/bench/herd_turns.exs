# How long the herds and zones of `mix grove.bench.actors` hold a
# scheduler, and how long the run queue gets, counted rather than timed.
# Loaded beside the bench, it waits `HERD_TURNS_AFTER` seconds (default
# 40: the actors joined and walking), then
#
#   * samples the run queue (`:erlang.statistics(:total_run_queue_lengths)`)
#     every 5 ms for 10 s: mean, p50, p99 and max;
#   * sums the herds', the zones' and every other process's reductions
#     over the same 10 s, a move answered;
#   * traces the herds' and the zones' scheduling and the messages
#     arriving at them for 2 s (`:running`, `:receive`): how often each
#     was put out with work left (preempted: its reductions' quantum
#     spent), a message arrived; and the most times one was put out
#     between two waits in its receive.
#
#   cd lab && HERD_TURNS_AFTER=40 mix run --no-start -r bench/herd_turns.exs \
#     -e 'Mix.Task.run("grove.bench.actors", ~w(--actors 250000 --duration 60))'
#
# A profile, not a benchmark: the trace slows what it watches for its 2 s.
defmodule Grove.Bench.HerdTurns do
  @moduledoc false

  def start do
    spawn(fn ->
      Process.sleep(String.to_integer(System.get_env("HERD_TURNS_AFTER", "40")) * 1000)
      Process.flag(:priority, :max)
      run()
    end)
  end

  defp run do
    herds = of_call({Grove.Actors.Herd, :init, 1})
    zones = of_call({Grove.World.Zone, :init, 1})
    phases(herds)
    answered = answered(herds)
    r0 = reductions()
    a0 = answered.()
    queue = sample_queue(System.monotonic_time(:millisecond) + 10_000, [])
    a1 = answered.()
    r1 = reductions()
    moves = max(a1 - a0, 1)
    sorted = Enum.sort(queue)
    n = length(sorted)

    out(
      "run queue each 5 ms over 10 s: mean #{Float.round(Enum.sum(sorted) / n, 1)}, " <>
        "p50 #{Enum.at(sorted, div(n, 2))}, p99 #{Enum.at(sorted, div(n * 99, 100))}, " <>
        "max #{List.last(sorted)} (#{n} samples)"
    )

    herd_set = MapSet.new(herds)
    zone_set = MapSet.new(zones)

    {h, z, o} =
      Enum.reduce(r1, {0, 0, 0}, fn {pid, r}, {h, z, o} ->
        d = r - Map.get(r0, pid, 0)

        cond do
          MapSet.member?(herd_set, pid) -> {h + d, z, o}
          MapSet.member?(zone_set, pid) -> {h, z + d, o}
          true -> {h, z, o + d}
        end
      end)

    out(
      "#{moves} moves answered in the 10 s (#{length(herds)} herds, #{length(zones)} zones); " <>
        "reductions a move: herds #{per(h, moves)}, zones #{per(z, moves)}, others #{per(o, moves)}"
    )

    trace(herds, zones)
  end

  # Where in a slot the herds' timers fall: the most herds due within
  # any 5 ms of the slot (of all of them, evenly spread, about
  # 5 / resolution).
  defp phases(herds) do
    wheels = for herd <- herds, do: :sys.get_state(herd).wheel
    resolution = hd(wheels).resolution
    phases = wheels |> Enum.map(&Integer.mod(&1.phase, resolution)) |> Enum.sort()
    wrapped = phases ++ Enum.map(phases, &(&1 + resolution))

    most = Enum.max(for p <- phases, do: Enum.count(wrapped, &(&1 >= p and &1 < p + 5)))

    even = Float.round(length(herds) * 5 / resolution, 1)

    out(
      "herds' phases in slots of #{resolution} ms: at most #{most} herds due within 5 ms " <>
        "(#{even} evenly spread)"
    )
  end

  defp of_call(call) do
    for pid <- Process.list(),
        {:dictionary, d} <- [Process.info(pid, :dictionary)],
        d[:"$initial_call"] == call,
        do: pid
  end

  defp answered([herd | _]) do
    %{kinds: kinds} = :sys.get_state(herd)
    stats = elem(kinds, 0).stats

    fn ->
      counts = Grove.Actors.Stats.read(stats).counts
      Enum.sum(for key <- Grove.Actors.Stats.outcomes(), do: Map.get(counts, key, 0))
    end
  end

  defp reductions do
    Map.new(Process.list(), fn pid ->
      {pid, (Process.info(pid, :reductions) || {:reductions, 0}) |> elem(1)}
    end)
  end

  defp sample_queue(until, acc) do
    if System.monotonic_time(:millisecond) >= until do
      acc
    else
      Process.sleep(5)
      sample_queue(until, [:erlang.statistics(:total_run_queue_lengths) | acc])
    end
  end

  # Each process's runs between two waits in its receive: the times it
  # was put out with work left (preempted), and the messages that arrived
  # at it (`:receive`: a message put in its queue, not one handled).
  defp trace(herds, zones) do
    kinds = Map.new(herds, &{&1, :herds}) |> Map.merge(Map.new(zones, &{&1, :zones}))
    for pid <- herds ++ zones, do: :erlang.trace(pid, true, [:running, :receive])
    Process.sleep(2000)
    for pid <- herds ++ zones, do: :erlang.trace(pid, false, [:running, :receive])
    acc = collect(%{}, kinds)

    for kind <- [:herds, :zones] do
      runs = for {{^kind, _pid}, s} <- acc, do: s
      messages = Enum.sum(for s <- runs, do: s.messages)
      preempted = Enum.sum(for s <- runs, do: s.preempted)
      most = Enum.max(for(s <- runs, do: s.most), fn -> 0 end)

      out(
        "#{kind} over 2 s traced: #{messages} messages arrived, #{preempted} times put out " <>
          "with work left (#{per(preempted, max(messages, 1))} a message), at most #{most} " <>
          "times in one wait-to-wait"
      )
    end
  end

  defp collect(acc, kinds) do
    receive do
      {:trace, pid, :receive, _msg} ->
        acc |> bump(kinds, pid, :messages) |> collect(kinds)

      {:trace, pid, :out, mfa} ->
        kind = Map.fetch!(kinds, pid)
        s = Map.get(acc, {kind, pid}, fresh())

        s =
          if waiting?(mfa),
            do: %{s | most: max(s.most, s.now), now: 0},
            else: %{s | preempted: s.preempted + 1, now: s.now + 1}

        acc |> Map.put({kind, pid}, s) |> collect(kinds)

      {:trace, _pid, :in, _mfa} ->
        collect(acc, kinds)
    after
      100 -> acc
    end
  end

  defp waiting?({:gen_server, :loop, _}), do: true
  defp waiting?({:erts_internal, _, _}), do: false
  defp waiting?({:gen, _, _}), do: true
  defp waiting?(0), do: false
  defp waiting?(_mfa), do: false

  defp fresh, do: %{messages: 0, preempted: 0, most: 0, now: 0}

  defp bump(acc, kinds, pid, key) do
    kind = Map.fetch!(kinds, pid)

    Map.update(
      acc,
      {kind, pid},
      %{fresh() | messages: 1},
      &Map.update!(&1, key, fn n -> n + 1 end)
    )
  end

  defp per(n, d), do: Float.round(n / d, 2)
  defp out(line), do: IO.puts("HERD_TURNS " <> line)
end

Grove.Bench.HerdTurns.start()
