# What a zone's batch of moves allocates and costs, counted rather than
# timed, for comparing two builds (run it in each checkout; the figures
# are counts, so it needs no quiet machine):
#
#   cd lab && mix run --no-start bench/batch_alloc.exs
#
# A world of 200 x 200 cells in zones of 50 (16 zones, the default
# terrain and rules) with 625 walkers a zone, as 250,000 actors fill
# `mix grove.bench.actors`' world; the script's process owns them all and
# moves each once a round, in a random direction (a seeded draw), in
# batches of 500 through `Grove.World.move_many/2`, as a herd sends a
# slot's moves, and waits for every outcome before the next round. The
# zones' garbage collections are traced throughout: the words a zone
# allocated (what each collection found in its young heap and heap
# fragments, less what the one before left there), its collections, and
# its reductions, each over the moves the zones answered. Prints one
# line; `ROUNDS` (default 40) and `SEED` (default 1) change the run.
alias Grove.World

rounds = String.to_integer(System.get_env("ROUNDS", "40"))
seed = String.to_integer(System.get_env("SEED", "1"))
name = :batch_alloc_world

{:ok, _} =
  World.start_link(name: name, width: 200, height: 200, zone_size: 50, seed: seed, tick: :manual)

# Each on a cell of a seeded draw, the next draw where it is taken.
:rand.seed(:exsss, {seed, 2, 3})

join = fn join ->
  case World.join(name, at: {:rand.uniform(200) - 1, :rand.uniform(200) - 1}, updates: :none) do
    {:ok, id, _} -> id
    {:error, _} -> join.(join)
  end
end

ids = for _ <- 1..10_000, do: join.(join)

zones = for i <- 0..15, do: World.zone_pid(name, i)
directions = List.to_tuple(World.Grid.directions())

defmodule Bench.BatchAlloc do
  # Waits for `left` outcomes; returns how many were refused and moved.
  def drain(0, counts), do: counts

  def drain(left, counts) do
    receive do
      {:grove_moves, outcomes} ->
        drain(left - length(outcomes), Enum.reduce(outcomes, counts, &count/2))

      {:grove_move, id, tag, outcome} ->
        drain(left - 1, count({id, tag, outcome}, counts))
    end
  end

  defp count({_id, _tag, {:ok, _}}, {ok, no}), do: {ok + 1, no}
  defp count({_id, _tag, {_, reason}}, {ok, no}), do: {ok, Map.update(no, reason, 1, &(&1 + 1))}

  # The trace's collections of every zone, summed: words allocated,
  # minor and major collections.
  def collect(acc) do
    receive do
      {:trace, pid, :gc_minor_start, info} ->
        collect(start(acc, pid, info, :minor))

      {:trace, pid, :gc_major_start, info} ->
        collect(start(acc, pid, info, :major))

      {:trace, pid, end_tag, info} when end_tag in [:gc_minor_end, :gc_major_end] ->
        collect(Map.update!(acc, :left, &Map.put(&1, pid, info[:heap_size])))
    after
      0 -> acc
    end
  end

  defp start(acc, pid, info, kind) do
    left = Map.get(acc.left, pid, 0)
    words = info[:heap_size] + info[:mbuf_size] - left

    acc
    |> Map.update!(:words, &(&1 + words))
    |> Map.update!(kind, &(&1 + 1))
  end
end

round = fn ->
  moves = for id <- ids, do: {id, elem(directions, :rand.uniform(8) - 1), 0}
  for batch <- Enum.chunk_every(moves, 500), do: World.move_many(name, batch)
  Bench.BatchAlloc.drain(length(moves), {0, %{}})
end

# Settled: two rounds unmeasured, then every zone collected once, so
# the trace starts from an empty young heap.
round.()
round.()
for z <- zones, do: :erlang.garbage_collect(z)

acc0 = %{words: 0, minor: 0, major: 0, left: Map.new(zones, &{&1, 0})}

for z <- zones,
    do: :erlang.trace(z, true, [:garbage_collection])

reds0 = Enum.map(zones, &elem(Process.info(&1, :reductions), 1))

{acc, {ok, refused}} =
  Enum.reduce(1..rounds, {acc0, {0, %{}}}, fn _, {acc, {ok, no}} ->
    {ok1, no1} = round.()
    {Bench.BatchAlloc.collect(acc), {ok + ok1, Map.merge(no, no1, fn _, a, b -> a + b end)}}
  end)

reds =
  Enum.zip(zones, reds0) |> Enum.map(fn {z, r} -> elem(Process.info(z, :reductions), 1) - r end)

# What each zone allocated since its last collection, collected now.
for z <- zones, do: :erlang.garbage_collect(z)
Process.sleep(100)
acc = Bench.BatchAlloc.collect(acc)
for z <- zones, do: :erlang.trace(z, false, [:garbage_collection])
moves = ok + (refused |> Map.values() |> Enum.sum())

IO.puts(
  "#{moves} moves (#{ok} taken, refused #{inspect(Enum.sort(refused))}) in #{rounds} rounds: zones' words allocated a move " <>
    "#{Float.round(acc.words / moves, 1)}, reductions a move #{Float.round(Enum.sum(reds) / moves, 1)}, " <>
    "minor collections a 1000 moves #{Float.round(acc.minor * 1000 / moves, 2)} (major #{acc.major})"
)
