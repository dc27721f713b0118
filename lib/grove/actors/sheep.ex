defmodule Grove.Actors.Sheep do
  @moduledoc """
  Sheep flock: each drifts toward the other sheep it sees within four
  cells, grazes (mostly stays, now and then takes a small step) once it
  stands next to one, and wanders like a `Grove.Actors.Wanderer` when it
  sees none. Scattered sheep gather into small flocks over a minute or
  two and then move slowly together.

  It senses the entities within its radius and tells sheep apart by their
  kind code (its own), so two groups of sheep of different kinds would
  not mix. It never asks for a step into a cell it sees taken.

  Its state is its heading, `0..7` (north, clockwise), kept for when it
  wanders alone. It takes no options.
  """

  @behaviour Grove.Actor

  alias Grove.Actor
  alias Grove.Actor.Senses
  alias Grove.Actors.Wanderer
  alias Grove.World.Grid

  @radius 4
  # A grazing sheep moves on one turn in this many.
  @graze 4

  @impl true
  def init(_opts, roll), do: rem(roll, 8)

  @impl true
  def senses, do: [radius: @radius, entities: true]

  @impl true
  def name, do: "sheep"

  @impl true
  def emoji, do: "🐑"

  @impl true
  def step(heading, %Senses{at: {x, y} = at, kind: kind} = senses, roll) do
    side = if rem(roll, 2) == 0, do: 1, else: -1
    flock = for {_id, fx, fy, ^kind} <- senses.entities, do: {fx, fy}

    cond do
      flock == [] ->
        Wanderer.go(senses, heading, side)

      Enum.any?(flock, fn {fx, fy} -> max(abs(fx - x), abs(fy - y)) <= 1 end) ->
        # Grazing: a step now and then, in a direction of its own.
        if rem(div(roll, 2), @graze) == 0,
          do: nudge(senses, rem(div(roll, 8), 8), side),
          else: {:stay, heading}

      true ->
        {sx, sy} = Enum.reduce(flock, {0, 0}, fn {fx, fy}, {sx, sy} -> {sx + fx, sy + fy} end)
        n = length(flock)
        centre = {round(sx / n), round(sy / n)}

        case Actor.toward(at, centre) do
          nil -> {:stay, heading}
          direction -> nudge(senses, Actor.heading(direction), side)
        end
    end
  end

  # A step toward `heading` or at most an eighth off it, or none.
  defp nudge(%Senses{at: at} = senses, heading, side) do
    case Enum.find(
           [0, side, -side],
           &Senses.free?(senses, Grid.step(at, Actor.direction(heading + &1)))
         ) do
      nil -> {:stay, Integer.mod(heading, 8)}
      turn -> {Actor.direction(heading + turn), Integer.mod(heading + turn, 8)}
    end
  end
end
