# What a zone's wake is made of, part by part, on the world of
# `zone_wake.exs` (a million cells a side in zones of 50, on demand, the
# orchard, the default ground, no store): for 400 zones spread over it, the
# ground of each with its border (`Terrain.area/2`), the game's layer laid
# on it (`Zone.Game.setup/3` with `:generate`: `cell/3` at every cell), its
# rows, and the rows written to a table of their own as a zone's are;
# then 400 other zones woken whole (`Zone.wake/2`, `Zone.recovered/2`) and
# put to sleep; three rounds. The VM's CPU time
# (`:erlang.statistics(:runtime)`) per zone, so run it with one
# scheduler, from the checkout to measure:
#
#     cd lab && elixir --erl "+S 1:1" -S mix run --no-start bench/zone_wake_parts.exs
#
# The parts are made in this process, the whole wakes in the zones' own.

alias Grove.Bench.ZoneWakeWorld
alias Grove.World
alias Grove.World.{Zone, Terrain, Grid}
alias Grove.World.Zone.{State}
alias Grove.World.Zone.Game, as: GameRules

name = :bench_zone_wake
{sup, world} = ZoneWakeWorld.start(name)
grid = world.grid
count = 400

zones = fn r -> ZoneWakeWorld.zones(grid, r, count) end

t = fn f ->
  {_, _} = :erlang.statistics(:runtime)
  f.()
  {_, ms} = :erlang.statistics(:runtime)
  ms * 1000 / count
end

for r <- 1..3 do
  zs = zones.(r)
  rects = for i <- zs, do: Grid.zone_bounds(grid, i)

  ground =
    t.(fn ->
      for {x0, y0, x1, y1} <- rects,
          do: Terrain.area(world.terrain, {max(x0 - 1, 0), max(y0 - 1, 0), x1 + 1, y1 + 1})
    end)

  areas =
    for {x0, y0, x1, y1} <- rects,
        do: Terrain.area(world.terrain, {max(x0 - 1, 0), max(y0 - 1, 0), x1 + 1, y1 + 1})

  states = for {i, a} <- Enum.zip(zs, areas), do: State.new(i, grid, a, world.rules)
  layer = t.(fn -> for s <- states, do: GameRules.setup(s, world.game, :generate) end)
  laid = for s <- states, do: GameRules.setup(s, world.game, :generate)
  rows = t.(fn -> for s <- laid, do: GameRules.rows(s) end)

  ets =
    t.(fn ->
      for s <- laid do
        tab = :ets.new(:x, [:ordered_set, :public, read_concurrency: true])
        :ets.insert(tab, GameRules.rows(s))
        :ets.delete(tab)
      end
    end)

  whole =
    t.(fn ->
      for i <- zones.(r + 10) do
        Zone.wake(world, i)
        Zone.recovered(world, i)
      end
    end)

  sleep = t.(fn -> World.sleep_idle(name, 600_000) end)
  Process.sleep(300)

  IO.puts(
    "round #{r}: us per zone: ground #{ground} layer #{layer} rows #{rows} rows+ets #{ets} | whole wake #{whole} sleep #{sleep}; layer values #{div(Enum.sum(for s <- laid, do: map_size(s.game.layer)), count)}"
  )
end

Supervisor.stop(sup)
