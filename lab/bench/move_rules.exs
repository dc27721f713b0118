# What a zone's pure move rules cost a move, alone: one zone's state
# (`Zone.State`, 50 x 50 cells, open ground, no rate) with N entities, each
# moved in turn through `Zone.Handoff.move/8` in a cycle of directions,
# in a compiled loop (a loop evaluated in a script costs more than the
# rules it times). Prints the CPU time a move, for three rounds of
# 1,000,000 moves. Run it in each checkout to compare builds:
#
#   cd lab && taskset -c 1 mix run --no-start bench/move_rules.exs          # 50 entities
#   cd lab && N=625 taskset -c 1 mix run --no-start bench/move_rules.exs    # 250,000 actors' zones
alias Grove.World.{Entity, Grid, Rules, Terrain}
alias Grove.World.Zone.State

defmodule Bench.MoveRules do
  @cycle List.to_tuple([:e, :w, :s, :n, :ne, :sw, :se, :nw])

  # CPU time a move, in ns, and the state after.
  def round(state, n, moves) do
    {started, _} = :erlang.statistics(:runtime)
    owner = self()
    locate = fn _ -> 0 end

    state =
      Enum.reduce(0..(moves - 1), state, fn i, state ->
        direction = elem(@cycle, rem(div(i, n), 8))

        case Grove.World.Zone.Handoff.move(
               state,
               rem(i, n) + 1,
               direction,
               owner,
               i,
               0,
               0,
               locate
             ) do
          {:moved, _entity, _from, state} -> state
          {:rejected, _reason, state} -> state
        end
      end)

    {stopped, _} = :erlang.statistics(:runtime)
    {state, (stopped - started) * 1_000_000 / moves}
  end
end

n = String.to_integer(System.get_env("N", "50"))
if n > 625, do: raise("N at most 625: one entity on every other cell of every other row")
grid = Grid.new(50, 50, 50)
terrain = %Terrain{width: 50, height: 50, cells: :binary.copy(<<0>>, 2500)}

# On every other cell of every other row: each step of the cycle (out
# and back) lands on a free cell.
state =
  Enum.reduce(1..n, State.new(0, grid, terrain, Rules.new(move_rate: nil)), fn id, state ->
    cell = {rem(id - 1, 25) * 2, div(id - 1, 25) * 2}
    {:ok, _entity, state} = State.place(state, %Entity{id: id, owner: self()}, [cell])
    state
  end)

{state, _warm} = Bench.MoveRules.round(state, n, 1_000_000)

Enum.reduce(1..3, state, fn _, state ->
  {state, ns} = Bench.MoveRules.round(state, n, 1_000_000)
  IO.puts("#{n} entities: #{round(ns)} ns of CPU a move")
  state
end)
