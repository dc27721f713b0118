# A join storm's probe (`join_probe.exs`, loaded with it) and, beside it,
# the seats' keeper (Grove.Gateway.Seats), which every upgrade asks for
# its seat: from the first player's connection until
# `JOIN_PROBE_PLAYERS` have joined (or 30 s), its message queue sampled
# every 10 ms, its reductions, and the gateway's refusals (503s among
# them) over the storm. Lines start with `PROBE keeper`:
#
#   WORLD=default PROBE=lab/bench/join_keeper_probe.exs JOIN_PROBE_PLAYERS=3000 \
#     LOAD_ARGS="--move-every 3600000" lab/bench/knee_probe.sh 3000 10 10
Code.require_file("join_probe.exs", __DIR__)

defmodule Grove.Bench.JoinKeeperProbe do
  @moduledoc false

  def sample(keeper, until, deadline, acc) do
    cond do
      Grove.Bench.JoinProbe.joins() >= until -> Enum.reverse(acc)
      System.monotonic_time(:millisecond) > deadline -> Enum.reverse(acc)
      true -> sample_once(keeper, until, deadline, acc)
    end
  end

  defp sample_once(keeper, until, deadline, acc) do
    Process.sleep(10)
    {:message_queue_len, queue} = Process.info(keeper, :message_queue_len)
    sample(keeper, until, deadline, [queue | acc])
  end

  def percentile(values, p) do
    sorted = Enum.sort(values)
    Enum.at(sorted, min(length(sorted) - 1, div(length(sorted) * p, 100)), 0)
  end
end

spawn(fn ->
  players = Grove.Bench.JoinProbe.start()
  keeper = Process.whereis(Grove.Gateway.config().seat_keeper)
  {:reductions, r0} = Process.info(keeper, :reductions)
  stats0 = Grove.Gateway.stats()
  t0 = System.monotonic_time(:millisecond)
  in0 = Grove.Bench.JoinProbe.joins()
  queues = Grove.Bench.JoinKeeperProbe.sample(keeper, in0 + players, t0 + 30_000, [])
  t1 = System.monotonic_time(:millisecond)
  n = max(Grove.Bench.JoinProbe.joins() - in0, 1)
  {:reductions, r1} = Process.info(keeper, :reductions)
  stats1 = Grove.Gateway.stats()

  IO.puts(
    "PROBE keeper: #{n} joined in #{t1 - t0} ms (#{round(n * 1000 / max(t1 - t0, 1))} a second); " <>
      "the keeper's queue each 10 ms: mean #{Float.round(Enum.sum(queues) / max(length(queues), 1), 2)}, " <>
      "p99 #{Grove.Bench.JoinKeeperProbe.percentile(queues, 99)}, max #{Enum.max(queues, fn -> 0 end)} " <>
      "(#{length(queues)} samples); its reductions #{r1 - r0} (#{div(r1 - r0, n)} a join)"
  )

  changed =
    for {key, value} <- stats1,
        is_integer(value),
        value != Map.get(stats0, key),
        do: {key, value - Map.get(stats0, key, 0)}

  IO.puts("PROBE keeper: the gateway's stats over the storm: #{inspect(Enum.sort(changed))}")
  IO.puts("PROBE keeper done")
end)
