# What a move costs the zones and the herds of `mix grove.bench.actors`'
# world, counted rather than timed, for comparing two builds (run it in
# each checkout; counts need no quiet machine, though a starved run
# answers fewer moves):
#
#   cd lab && mix run --no-start bench/actors_alloc.exs
#
# The bench's density at a twenty-fifth of its size: a world of 200 x 200
# cells in zones of 50 (16 zones, the default terrain and rules, seed 1)
# with 10,000 walkers (625 a zone, as 250,000 fill the bench's
# 1000 x 1000), in herds of 500, a move a second each. Once they have all
# joined and walked for `SETTLE` seconds (default 5), the garbage
# collections of every zone and every herd are traced for `SECONDS`
# (default 10), and their reductions read before and after; the moves are
# those the herds got answers for meanwhile. By kind of process, over the
# moves answered: the words allocated (what each collection found in the
# young heap and heap fragments, less what the one before left there),
# the words the collections copied (what survived them: the collector's
# work), the reductions, and the collections; and, from `:msacc`, the
# schedulers' busy time a move and the collector's part of it (times:
# on a busy machine, compare them within one sitting only).
alias Grove.Actors

settle = String.to_integer(System.get_env("SETTLE", "5"))
seconds = String.to_integer(System.get_env("SECONDS", "10"))
actors = String.to_integer(System.get_env("ACTORS", "10000"))
world = :actors_alloc_world
name = :actors_alloc_actors

zone_process =
  case System.get_env("ZONE_MIN_HEAP") do
    nil -> []
    words -> [zone_process: [min_heap_size: String.to_integer(words)]]
  end

{:ok, _} =
  Grove.World.start_link(
    [name: world, width: 200, height: 200, zone_size: 50, seed: 1] ++ zone_process
  )

herd_process =
  case System.get_env("HERD_MIN_HEAP") do
    nil -> []
    words -> [herd_process: [min_heap_size: String.to_integer(words)]]
  end

{:ok, _} =
  Actors.start_link([name: name, world: world, count: actors, per_herd: 500] ++ herd_process)

wait = fn wait ->
  if Actors.joined(name) < actors do
    Process.sleep(200)
    wait.(wait)
  end
end

wait.(wait)
Process.sleep(settle * 1000)

zones = for i <- 0..15, do: Grove.World.zone_pid(world, i)

herds =
  for p <- Process.list(),
      match?({:dictionary, _}, Process.info(p, :dictionary)),
      {:dictionary, d} = Process.info(p, :dictionary),
      d[:"$initial_call"] == {Grove.Actors.Herd, :init, 1},
      do: p

defmodule Bench.ActorsAlloc do
  # Every traced collection, summed by kind of process: words allocated
  # and copied, minor and major collections.
  def collect(acc, kind_of) do
    receive do
      {:trace, pid, start, info} when start in [:gc_minor_start, :gc_major_start] ->
        kind = kind_of.(pid)
        left = Map.get(acc.left, pid, 0)
        words = info[:heap_size] + info[:mbuf_size] - left
        which = if start == :gc_minor_start, do: :minor, else: :major

        acc
        |> add(kind, :words, words)
        |> add(kind, which, 1)
        |> put_in([:old, pid], info[:old_heap_size])
        |> collect(kind_of)

      {:trace, pid, end_tag, info} when end_tag in [:gc_minor_end, :gc_major_end] ->
        kind = kind_of.(pid)

        copied =
          if end_tag == :gc_minor_end,
            do: info[:heap_size] + info[:old_heap_size] - Map.get(acc.old, pid, 0),
            else: info[:heap_size]

        acc
        |> add(kind, :copied, copied)
        |> put_in([:left, pid], info[:heap_size])
        |> collect(kind_of)
    after
      0 -> acc
    end
  end

  defp add(acc, kind, key, n), do: update_in(acc, [kind, key], &(&1 + n))
end

kinds = Map.new(zones, &{&1, :zones}) |> Map.merge(Map.new(herds, &{&1, :herds}))
kind_of = &Map.fetch!(kinds, &1)
traced = zones ++ herds
reductions = fn -> Map.new(traced, &{&1, elem(Process.info(&1, :reductions), 1)}) end
stats = Actors.stats(name)

answered = fn ->
  counts = Actors.Stats.read(stats).counts
  Enum.sum(for key <- Actors.Stats.outcomes(), do: Map.get(counts, key, 0))
end

# Each traced process collected first, so the trace starts from an empty
# young heap.
for p <- traced, do: :erlang.garbage_collect(p)
for p <- traced, do: :erlang.trace(p, true, [:garbage_collection])
zero = %{words: 0, copied: 0, minor: 0, major: 0}
acc = %{zones: zero, herds: zero, left: Map.new(traced, &{&1, 0}), old: %{}}
r0 = reductions.()
a0 = answered.()

# The schedulers' time by state over the same seconds (a timing, so
# only as steady as the machine), while the trace's messages wait.
:msacc.start(seconds * 1000)
moves = answered.() - a0
r1 = reductions.()
for p <- traced, do: :erlang.trace(p, false, [:garbage_collection])
acc = Bench.ActorsAlloc.collect(acc, kind_of)

msacc =
  for %{type: :scheduler, counters: counters} <- :msacc.stats(),
      {state, us} <- counters,
      reduce: %{} do
    sum -> Map.update(sum, state, us, &(&1 + us))
  end

busy = msacc |> Map.delete(:sleep) |> Map.values() |> Enum.sum()
reds = fn ps -> Enum.sum(for p <- ps, do: r1[p] - r0[p]) end
per = fn n -> Float.round(n / moves, 1) end

IO.puts(
  "#{moves} moves answered in #{seconds} s (#{length(zones)} zones, #{length(herds)} herds); " <>
    "the schedulers #{per.(busy)} us busy a move, #{per.(Map.get(msacc, :gc, 0))} of it collecting"
)

for {kind, ps} <- [zones: zones, herds: herds] do
  k = acc[kind]

  IO.puts(
    "#{kind}: a move #{per.(k.words)} words allocated, #{per.(k.copied)} copied by the collector, " <>
      "#{per.(reds.(ps))} reductions; collections a 1000 moves #{Float.round(k.minor * 1000 / moves, 2)} minor, " <>
      "#{Float.round(k.major * 1000 / moves, 2)} major"
  )
end
