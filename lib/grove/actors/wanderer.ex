defmodule Grove.Actors.Wanderer do
  @moduledoc """
  A wanderer keeps its heading and turns where it cannot go on: at trees,
  water, rocks, the edge of the world and other entities. It senses the
  cells around it (radius 1, entities included) and never asks for a
  step into a cell it sees taken; boxed in, it stays and turns round.
  Now and then it veers by an eighth on open ground, so that its paths
  bend like an animal's rather than run along a ruler.

  Its state is its heading, `0..7` (north, clockwise). It takes no
  options.
  """

  @behaviour Grove.Actor

  alias Grove.Actor
  alias Grove.Actor.Senses
  alias Grove.World.Grid

  @veer 12

  @impl true
  def init(_opts, roll), do: rem(roll, 8)

  @impl true
  def senses, do: [radius: 1, entities: true]

  @impl true
  def name, do: "wanderer"

  @impl true
  def emoji, do: "🦊"

  @impl true
  def step(heading, %Senses{} = senses, roll) do
    # Bit 0: which side to try first; the rest: whether to veer (one step in @veer).
    side = if rem(roll, 2) == 0, do: 1, else: -1
    preferred = if rem(div(roll, 2), @veer) == 0, do: heading + side, else: heading
    go(senses, preferred, side)
  end

  @doc """
  The first free step from `heading`, trying it, then turning by one,
  two and three eighths to `side` and the other side in turn, then back;
  `{:stay, heading turned round}` when none is free. Also used by the
  sheep to wander when alone.
  """
  @spec go(Senses.t(), integer(), 1 | -1) :: {Grid.direction() | :stay, 0..7}
  def go(%Senses{at: at} = senses, heading, side) do
    turns = [0, side, -side, 2 * side, -2 * side, 3 * side, -3 * side, 4]

    case Enum.find(turns, &Senses.free?(senses, Grid.step(at, Actor.direction(heading + &1)))) do
      nil -> {:stay, Integer.mod(heading + 4, 8)}
      turn -> {Actor.direction(heading + turn), Integer.mod(heading + turn, 8)}
    end
  end
end
