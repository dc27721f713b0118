defmodule Grove.Games.Orchard.Grazer do
  @moduledoc """
  Sheep of the orchard (`Grove.Games.Orchard`): they flock like
  `Grove.Actors.Sheep`, and one turn in three, next to flowers that have
  not been grazed, they graze them (`graze`, toward the flowers), which
  the game shows as 🌱 until the flowers grow back.

  It senses the entities within four cells (to flock) and the game's
  layer (`game: true`). Its state is its heading, as a sheep's.
  """

  @behaviour Grove.Actor

  alias Grove.Actor.Senses
  alias Grove.Actors.Sheep
  alias Grove.World.Grid

  @impl true
  def init(opts, roll), do: Sheep.init(opts, roll)

  @impl true
  def senses, do: [radius: 4, entities: true, game: true]

  @impl true
  def name, do: "grazer"

  @impl true
  def emoji, do: "🐑"

  @impl true
  def step(heading, %Senses{at: at} = senses, roll) do
    flowers =
      for direction <- Grid.directions(),
          cell = Grid.step(at, direction),
          Senses.ground(senses, cell) == :flowers and Senses.cell(senses, cell) == nil,
          do: direction

    if flowers != [] and rem(div(roll, 16), 3) == 0,
      do: {{:act, :graze, Enum.at(flowers, rem(roll, length(flowers)))}, heading},
      else: Sheep.step(heading, senses, roll)
  end
end
