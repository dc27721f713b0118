# What the zones do with players in them, per move: loaded into a loaded
# server as `knee_probe.exs` is (`PROBE=lab/bench/zone_knee_probe.exs
# lab/bench/knee_probe.sh 2800`), it waits `KNEE_PROBE_AFTER` seconds,
# then over 5 s traces every zone of the world `Grove.World`:
# the messages that reach them by kind (a batch of moves counted by its
# moves), their turns on the scheduler, their garbage collections and
# their reductions; and prints each a move (a step asked of a zone, an
# actor's or a player's). Then it runs `:eprof` over the zones alone for
# 3 s and prints their 40 costliest functions. Lines start with `PROBE`.
#
# A profile, not a benchmark: the trace and eprof slow what they watch.
Code.require_file("probe.exs", __DIR__)

spawn(fn ->
  Process.sleep(String.to_integer(System.get_env("KNEE_PROBE_AFTER", "60")) * 1000)
  Process.flag(:priority, :high)

  world = Grove.World.fetch!(Grove.World)

  zones =
    for index <- 0..(Grove.World.Grid.zone_count(world.grid) - 1),
        pid = GenServer.whereis(Grove.World.Zone.name(world, index)),
        is_pid(pid),
        do: pid

  IO.puts("PROBE zones traced: #{length(zones)}")

  # A message's kind, and the moves in it.
  kind = fn
    {:"$gen_cast", {:moves, _owner, moves}} -> {{:cast, :moves}, length(moves)}
    {:"$gen_cast", {:moves_tallied, _owner, moves}} -> {{:cast, :moves_tallied}, length(moves)}
    {:"$gen_cast", {:steps, _owner, moves, _acts}} -> {{:cast, :steps}, length(moves)}
    {:"$gen_cast", {:move, _, _, _, _, _}} -> {{:cast, :move}, 1}
    {:"$gen_cast", m} when is_tuple(m) -> {{:cast, elem(m, 0)}, 0}
    {:"$gen_cast", m} -> {{:cast, m}, 0}
    {:"$gen_call", _, m} when is_tuple(m) -> {{:call, elem(m, 0)}, 0}
    {:"$gen_call", _, m} -> {{:call, m}, 0}
    {:timeout, _, m} -> {{:timeout, m}, 0}
    m when is_atom(m) -> {m, 0}
    m when is_tuple(m) and is_atom(elem(m, 0)) -> {elem(m, 0), 0}
    _ -> {:other, 0}
  end

  reds = fn ->
    Enum.sum(for p <- zones, {:reductions, r} <- [Process.info(p, :reductions)], do: r)
  end

  r0 = reds.()
  all0 = :erlang.statistics(:exact_reductions) |> elem(0)

  count = fn
    {:receive, m}, acc ->
      {k, moves} = kind.(m)
      acc = Map.update(acc, k, 1, &(&1 + 1))
      Map.update(acc, :moves, moves, &(&1 + moves))

    {:in, _}, acc ->
      Map.update(acc, :scheduled_in, 1, &(&1 + 1))

    {:gc_major_start, _}, acc ->
      Map.update(acc, :gc_major, 1, &(&1 + 1))

    {:gc_minor_start, _}, acc ->
      Map.update(acc, :gc_minor, 1, &(&1 + 1))

    _other, acc ->
      acc
  end

  counted = Grove.Bench.Probe.trace(zones, 5_000, %{}, count)
  r1 = reds.()
  all1 = :erlang.statistics(:exact_reductions) |> elem(0)
  moves = max(Map.get(counted, :moves, 0), 1)

  IO.puts(
    "PROBE zones: #{Map.get(counted, :moves, 0)} moves in 5 s; reductions #{r1 - r0} " <>
      "(#{Float.round((r1 - r0) * 100 / max(all1 - all0, 1), 1)} % of all), " <>
      "#{Float.round((r1 - r0) / moves, 1)} a move"
  )

  for {k, n} <- Enum.sort_by(counted, &(-elem(&1, 1))),
      k != :moves,
      do: IO.puts("PROBE zone #{inspect(k)}: #{n} in 5 s, #{Float.round(n / moves, 3)} a move")

  heaps = for p <- zones, {:total_heap_size, h} <- [Process.info(p, :total_heap_size)], do: h

  IO.puts(
    "PROBE zone heaps (words): median #{Enum.at(Enum.sort(heaps), div(length(heaps), 2))}, max #{Enum.max(heaps, fn -> 0 end)}"
  )

  Grove.Bench.Probe.eprof(zones, 3_000, 42, "PROBE eprof")
  IO.puts("PROBE done")
end)
