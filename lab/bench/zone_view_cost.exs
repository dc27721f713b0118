# What a watched zone of the default world costs at its game's tick and at
# a viewer's request for tiles, alone: one zone of `make run`'s world
# (1000 x 1000, seed 1, zones of 50 cells in view tiles of 10; the zone
# whose game layer is the median's of the 400) with the orchard laid on
# its ground and one bearing tree in two picked short of three apples, 50
# entities (every other one a named player), a tenth of its cells alive
# as bacteria, watched. Prints the CPU time and the reductions of
#
#   * a game tick (`Zone.Game.tick/2`, the orchard's `tick/2`; the state
#     is the same at every tick, so each draws for as many trees);
#   * a snapshot of five view tiles for a player's binary format
#     (`Zone.Views.snapshot_tiles/5`, a row of tiles entering its margin),
#     asked of the zone as a first snapshot of them left it (what it
#     keeps between snapshots, their ground encoded, kept);
#   * a view tick's delta for that format (`Zone.Views.publish/5`) of 4
#     and of 16 entities that moved within their tiles (a tick's moves in
#     a zone under players: 4 on average at 2,500), and of a generation
#     of bacteria, 15 born and 15 dead.
#
# Each over three rounds. Run it in each checkout to compare builds:
#
#   cd lab && taskset -c 1 mix run --no-start bench/zone_view_cost.exs
alias Grove.World.{Entity, Grid, Rules, Terrain}
alias Grove.World.Life.Board
alias Grove.World.Zone.{Game, State, Views}

defmodule Bench.ZoneViewCost do
  # CPU time (µs) and reductions of `fun` run `n` times, each.
  def each(n, fun) do
    {reductions0, _} = :erlang.statistics(:exact_reductions)
    {started, _} = :erlang.statistics(:runtime)
    Enum.each(1..n, fn i -> fun.(i) end)
    {stopped, _} = :erlang.statistics(:runtime)
    {reductions1, _} = :erlang.statistics(:exact_reductions)
    {(stopped - started) * 1000 / n, div(reductions1 - reductions0, n)}
  end
end

grid = Grid.new(1000, 1000, 50, 10)
terrain = Terrain.generate(1000, 1000, seed: 1)
spec = Grove.World.Game.Spec.new!({Grove.Games.Orchard, [tick: :manual]})
laid = fn index -> Game.setup(State.new(index, grid, terrain, Rules.new()), spec, :generate) end

# The zone whose layer is the median's of the world's 400.
index =
  0..399
  |> Enum.sort_by(&{map_size(laid.(&1).game.layer), &1})
  |> Enum.at(200)

{x0, y0, x1, y1} = bounds = Grid.zone_bounds(grid, index)

# Its trees as a running world's pickers keep them: one in two picked
# short of three apples (the orchard lays a bearing tree with 0 to 3).
rows =
  laid.(index).game.layer
  |> Enum.with_index()
  |> Enum.map(fn
    {{key, {:tree, _}}, k} when rem(k, 2) == 0 -> {key, {:tree, rem(k, 3)}}
    {row, _k} -> row
  end)

core =
  State.new(index, grid, terrain, Rules.new(move_rate: nil))
  |> Game.setup(spec, rows)
  |> State.watch(true)

# Fifty entities on the zone's first free cells, spread over it.
free = for y <- y0..(y1 - 1)//3, x <- x0..(x1 - 1)//5, do: {x, y}

core =
  Enum.reduce(Enum.take(free, 50) |> Enum.with_index(1), core, fn {cell, id}, core ->
    label = if rem(id, 2) == 0, do: {"p#{id}", "🙂"}

    case State.place(core, %Entity{id: id, owner: self(), label: label}, [cell], %{}) do
      {:ok, _entity, core} -> core
      {:rejected, _reason, core} -> core
    end
  end)

live = for y <- y0..(y1 - 1), x <- x0..(x1 - 1), :erlang.phash2({x, y}, 10) == 0, do: {x, y}
core = State.put_bacteria(core, Board.put(Board.new(bounds), live))

{changes, departed, labels, core} = State.flush(core)
{_extra, core} = State.flush_extra(core, labels)
_ = {changes, departed}

format = Grove.Gateway.Frames.view_format(:binary, Grove.Protocol.version(), grid)

{_effects, views} = Views.subscribe(Views.new(index, grid, node(), 0), core, self(), 1, format)

first = Grid.tile_of(grid, x0, y0)
tiles = for k <- 0..4, do: first + 2 * grid.tiles_x + k

IO.puts(
  "zone #{index}: #{map_size(core.entities)} entities, #{Board.count(core.bacteria)} bacteria, " <>
    "#{map_size(core.game.layer)} cells in the game's layer"
)

{_effects, views} = Views.snapshot_tiles(views, core, self(), format, tiles)
moved = for {id, %Entity{x: x, y: y, kind: kind}} <- core.entities, do: {id, x, y, kind}
bacteria = core |> State.bacteria_within(bounds) |> Enum.take(30)
{born, dead} = Enum.split(bacteria, 15)
dead = for {id, _x, _y, _kind} <- dead, do: id

for _ <- 1..3 do
  {us, reds} = Bench.ZoneViewCost.each(2_000, fn i -> Game.tick(core, i) end)
  IO.puts("a game tick: #{Float.round(us, 1)} us of CPU, #{reds} reductions")

  {us, reds} =
    Bench.ZoneViewCost.each(2_000, fn _ ->
      Views.snapshot_tiles(views, core, self(), format, tiles)
    end)

  IO.puts("a snapshot of 5 tiles: #{Float.round(us, 1)} us of CPU, #{reds} reductions")

  for n <- [4, 16] do
    changes = Enum.take(moved, n)

    {us, reds} =
      Bench.ZoneViewCost.each(2_000, fn _ -> Views.publish(views, core, changes, [], nil) end)

    IO.puts("a delta of #{n} moves: #{Float.round(us, 1)} us of CPU, #{reds} reductions")
  end

  {us, reds} =
    Bench.ZoneViewCost.each(2_000, fn _ -> Views.publish(views, core, born, dead, nil) end)

  IO.puts(
    "a delta of 15 bacteria born, 15 dead: #{Float.round(us, 1)} us of CPU, #{reds} reductions"
  )
end
