# Where a herd's time goes, function by function: `mix grove.bench.actors`'
# density at a twenty-fifth of its size (as `actors_alloc.exs`: 10,000
# walkers in a 200 x 200 world, zones of 50, herds of 500), and `:eprof`
# on `HERDS` of the herds (default 4) for `SECONDS` (default 5) once they
# have walked `SETTLE` seconds (default 5). Everything a herd runs is
# counted: its turns, the world's routing of its batches (`move_many`,
# which runs in the herd), the answers read and the counts. eprof's own
# cost inflates every call alike: compare the shares, not the times.
#
#   cd lab && mix run --no-start bench/actors_eprof.exs
alias Grove.Actors

settle = String.to_integer(System.get_env("SETTLE", "5"))
seconds = String.to_integer(System.get_env("SECONDS", "5"))
actors = String.to_integer(System.get_env("ACTORS", "10000"))
profiled = String.to_integer(System.get_env("HERDS", "4"))
world = :actors_eprof_world
name = :actors_eprof_actors

{:ok, _} = Grove.World.start_link(name: world, width: 200, height: 200, zone_size: 50, seed: 1)
{:ok, _} = Actors.start_link(name: name, world: world, count: actors, per_herd: 500)

wait = fn wait ->
  if Actors.joined(name) < actors do
    Process.sleep(200)
    wait.(wait)
  end
end

wait.(wait)
Process.sleep(settle * 1000)

herds =
  for p <- Process.list(),
      {:dictionary, d} <- [Process.info(p, :dictionary)],
      d[:"$initial_call"] == {Grove.Actors.Herd, :init, 1},
      do: p

stats = Actors.stats(name)

answered = fn ->
  counts = Actors.Stats.read(stats).counts
  Enum.sum(for key <- Actors.Stats.outcomes(), do: Map.get(counts, key, 0))
end

traced = Enum.take(herds, profiled)
a0 = answered.()
:eprof.start()
:eprof.start_profiling(traced)
Process.sleep(seconds * 1000)
:eprof.stop_profiling()
moves = answered.() - a0

IO.puts(
  "#{moves} moves answered in #{seconds} s by #{length(herds)} herds; " <>
    "#{length(traced)} of them profiled (about #{div(moves * length(traced), length(herds))} of the moves)"
)

:eprof.analyze(:total, sort: :time)
