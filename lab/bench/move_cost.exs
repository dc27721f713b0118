# What one move costs a zone, measured two ways, for comparing two builds
# of Grove (run it in each checkout, alternately, in one sitting):
#
#   cd lab && flock -x /work/.machine.lock taskset -c 0 mix run --no-start bench/move_cost.exs [--game none|idle|apples] [--updates self|view]
#
# 1. the pure core: one zone's state with 50 entities, moves applied with
#    `Zone.Handoff.move/8` in a loop (each entity in turn, in a cycle of
#    directions that keeps it inside the zone); the best of seven rounds
#    of 200,000 moves, in nanoseconds a move;
# 2. a zone process: a client owning 200 entities in a world of four zones
#    sends them in batches of 50 with `Grove.World.move_many/2` and waits
#    for every outcome; moves per second over five seconds, after one of
#    warm-up.
#
# `--updates view` makes the client's entities viewers (as players' are):
# each move then also asks whether the viewport still overlaps the same
# zones, and the zones collect what changed for their (manual) ticks.
#
# `--game` (in a build that has games): none, the default world's; idle, a
# game with no hook, cell or action used; apples, a game whose `enter/2`
# hook runs on every move (test/support's Grove.AppleGame is not compiled
# here, so a small one is defined below).

{opts, _, _} = OptionParser.parse(System.argv(), strict: [game: :string, updates: :string])
game_name = Keyword.get(opts, :game, "none")

updates =
  case Keyword.get(opts, :updates, "self") do
    "self" -> :self
    "view" -> :view
    other -> raise "--updates self|view, not #{other}"
  end

games? = Code.ensure_loaded?(Grove.Game)

if game_name != "none" and not games?, do: raise("this build has no games: use --game none")

if games? do
  defmodule Bench.IdleGame do
    @behaviour Grove.Game
    def actions, do: %{}
    def act(_act, _area), do: {:error, :nothing}
  end

  defmodule Bench.EnterGame do
    @behaviour Grove.Game
    def actions, do: %{}
    def act(_act, _area), do: {:error, :nothing}
    def join(entity, _info, _area), do: [{:attrs, entity.id, 0}]
    # Looks at the cell stepped on, and changes nothing: the cost of a hook.
    def enter(entity, area) do
      _ = Grove.Game.Area.cell(area, {entity.x, entity.y})
      []
    end
  end
end

game =
  case game_name do
    "none" -> nil
    "idle" -> Bench.IdleGame
    "apples" -> Bench.EnterGame
  end

alias Grove.World.{Entity, Grid, Rules, Terrain}
alias Grove.World.Zone.State

## 1. The pure core

grid = Grid.new(50, 50, 50)
terrain = %Terrain{width: 50, height: 50, cells: :binary.copy(<<0>>, 2500)}
state = State.new(0, grid, terrain, Rules.new(move_rate: nil))

state =
  if game,
    do: Grove.World.Zone.Game.setup(state, Grove.World.Game.Spec.new!(game), :generate),
    else: state

state =
  Enum.reduce(1..50, state, fn id, state ->
    cell = {rem(id * 7, 40) + 5, div(id * 7, 40) * 4 + 5}
    {:ok, _entity, state} = State.place(state, %Entity{id: id, owner: self()}, [cell])
    state
  end)

# Out and back: every entity ends each cycle where it began.
cycle = List.to_tuple([:e, :w, :s, :n, :ne, :sw, :se, :nw])
locate = fn _ -> 0 end
owner = self()

# The loop is compiled: evaluated in the script, it costs more than the
# rules it times.
defmodule Bench.MoveCostLoop do
  def round(state, moves, cycle, owner, locate) do
    started = System.monotonic_time(:nanosecond)

    state =
      Enum.reduce(0..(moves - 1), state, fn i, state ->
        id = rem(i, 50) + 1
        direction = elem(cycle, rem(div(i, 50), 8))

        case Grove.World.Zone.Handoff.move(state, id, direction, owner, i, 0, 0, locate) do
          {:moved, _entity, _from, state} -> state
          {:rejected, _reason, state} -> state
        end
      end)

    {state, (System.monotonic_time(:nanosecond) - started) / moves}
  end
end

round = fn state, moves -> Bench.MoveCostLoop.round(state, moves, cycle, owner, locate) end

{state, _warm} = round.(state, 200_000)

{_state, times} =
  Enum.reduce(1..7, {state, []}, fn _, {state, times} ->
    {state, ns} = round.(state, 200_000)
    {state, [ns | times]}
  end)

pure = Enum.min(times)

## 2. Through a zone process

name = :move_cost_world

{:ok, _} =
  Grove.World.start_link(
    [
      name: name,
      width: 100,
      height: 100,
      zone_size: 50,
      tick: :manual,
      terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
      rules: [move_rate: nil]
    ] ++ if(game, do: [game: game], else: [])
  )

ids =
  for i <- 0..199 do
    # 50 in each zone, well inside it.
    {zx, zy} = {rem(i, 2) * 50, div(rem(i, 4), 2) * 50}
    cell = {zx + 10 + rem(div(i, 4), 30), zy + 10 + div(div(i, 4), 30) * 4}
    {:ok, id, _} = Grove.World.join(name, at: cell, updates: updates)
    id
  end

# The viewers' snapshots, not waited for.
flush = fn flush ->
  receive do
    {:grove_view, _, _, _, _} -> flush.(flush)
  after
    0 -> :ok
  end
end

flush.(flush)

batches = Enum.chunk_every(ids, 50)

drain = fn drain, left ->
  if left > 0 do
    receive do
      {:grove_moves, outcomes} -> drain.(drain, left - length(outcomes))
      {:grove_move, _, _, _} -> drain.(drain, left - 1)
    end
  end
end

run = fn seconds ->
  deadline = System.monotonic_time(:millisecond) + seconds * 1000

  Stream.iterate(0, &(&1 + 1))
  |> Enum.reduce_while(0, fn i, moved ->
    if System.monotonic_time(:millisecond) >= deadline do
      {:halt, moved}
    else
      direction = elem(cycle, rem(i, 8))

      for batch <- batches,
          do: Grove.World.move_many(name, for(id <- batch, do: {id, direction, i}))

      drain.(drain, length(ids))
      {:cont, moved + length(ids)}
    end
  end)
end

_warm = run.(1)
moved = run.(5)

IO.puts(
  "game #{game_name}, updates #{updates}: pure core #{Float.round(pure, 1)} ns a move; " <>
    "zone process #{round(moved / 5)} moves/s (#{Float.round(5_000_000 / moved, 2)} us a move)"
)
