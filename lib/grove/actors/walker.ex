defmodule Grove.Actors.Walker do
  @moduledoc """
  The random walker: a step in a random direction each turn, whatever is
  there. It senses nothing, so it costs the least of all kinds, and what
  its moves run into (trees, the edge, each other) is counted in the
  outcomes like any player's. Each walker is drawn with a face of its own.

  ## Examples

      iex> Grove.Actors.Walker.step(nil, nil, 2)
      {:e, nil}
  """

  @behaviour Grove.Actor

  alias Grove.World.Grid

  @directions List.to_tuple(Grid.directions())

  @impl true
  def init(_opts, _roll), do: nil

  @impl true
  def step(state, _senses, roll), do: {elem(@directions, rem(roll, 8)), state}

  @impl true
  def name, do: "walker"
end
