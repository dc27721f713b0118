# What the orchard's tick costs a zone someone watches, alone: the layer
# of a zone of 50 x 50 cells of the default world's terrain, ticked
# through the zone's game rules (`Zone.Game.tick/2`, the game's `tick/2`
# and its effects) in a compiled loop, twice: as the orchard lays it (a
# quarter of its trees bear three apples, the others fewer), and grown
# (every tree bears three, as they do after a few minutes, but one in
# four picked down by one). Prints the CPU time a tick, for three rounds
# of each. The tick
# runs once a second in every zone someone watches, and a catch-up of ten
# in every other zone every ten seconds. Run it in each checkout to
# compare builds:
#
#   taskset -c 1 mix run --no-start lab/bench/orchard_tick.exs
alias Grove.World.{Grid, Rules, Terrain}
alias Grove.World.Game.Spec
alias Grove.World.Zone.{Game, State}

defmodule Bench.OrchardTick do
  # CPU time a tick, in us, over `ticks` ticks of the same state (so that
  # each tick finds the layer as play left it).
  def round(state, ticks) do
    {started, _} = :erlang.statistics(:runtime)

    for roll <- 1..ticks do
      state |> Game.tick(roll) |> Game.take_output()
    end

    {stopped, _} = :erlang.statistics(:runtime)
    (stopped - started) * 1000 / ticks
  end
end

grid = Grid.new(1000, 1000, 50)
terrain = Terrain.generate(1000, 1000, seed: 1)
spec = Spec.new!(Grove.Games.Orchard)

state =
  State.new(0, grid, terrain, Rules.new(move_rate: nil))
  |> Game.setup(spec, :generate)
  |> Map.put(:watched, true)

{_output, state} = Game.take_output(state)

grown =
  state.game.layer
  |> Enum.with_index()
  |> Map.new(fn
    {{key, {:tree, _n}}, i} -> {key, {:tree, if(rem(i, 4) == 0, do: 2, else: 3)}}
    {pair, _i} -> pair
  end)

for {name, layer} <- [laid: state.game.layer, grown: grown] do
  state = %{state | game: %{state.game | layer: layer}}
  short = Enum.count(layer, &match?({_, {:tree, n}} when n < 3, &1))
  IO.puts("#{name}: #{map_size(layer)} cells in the layer, #{short} trees short of apples")
  _warm = Bench.OrchardTick.round(state, 2000)

  for round <- 1..3,
      do:
        IO.puts(
          "#{name}, round #{round}: #{Float.round(Bench.OrchardTick.round(state, 20_000), 2)} us a tick"
        )
end
