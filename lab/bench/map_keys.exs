# What a map's size costs a read and an update: maps of up to 32 keys are
# flat (sorted keys, a tuple of values), larger ones hash tries. For each
# size, 10 million reads of four fields with literal keys (as a struct's
# fields are read) and 5 million updates of two, less an empty loop's
# time; twice, since the first round warms up. One core:
#
#   taskset -c 1 elixir lab/bench/map_keys.exs
defmodule MapKeys do
  def map(n), do: Map.new(for i <- 1..n, do: {String.to_atom("f#{i}"), i})

  def reads(_m, 0, acc), do: acc
  def reads(m, k, acc), do: reads(m, k - 1, acc + m.f3 + m.f17 + m.f9 + m.f1)

  def updates(m, 0), do: m
  def updates(m, k), do: updates(%{m | f5: k, f12: k}, k - 1)

  def loop(_m, 0, acc), do: acc
  def loop(m, k, acc), do: loop(m, k - 1, acc + k)

  def ns(fun, count), do: elem(:timer.tc(fun), 0) * 1000 / count
end

for round <- 1..2, n <- [24, 31, 32, 33, 37, 49] do
  m = MapKeys.map(n)
  empty_reads = MapKeys.ns(fn -> MapKeys.loop(m, 10_000_000, 0) end, 10_000_000)
  reads = MapKeys.ns(fn -> MapKeys.reads(m, 10_000_000, 0) end, 10_000_000) - empty_reads
  empty_updates = MapKeys.ns(fn -> MapKeys.loop(m, 5_000_000, 0) end, 5_000_000)
  updates = MapKeys.ns(fn -> MapKeys.updates(m, 5_000_000) end, 5_000_000) - empty_updates

  IO.puts(
    "round #{round}, #{n} keys (#{if n <= 32, do: "flat", else: "hash trie"}): " <>
      "4 reads #{Float.round(reads, 1)} ns, an update of 2 fields #{Float.round(updates, 1)} ns"
  )
end
