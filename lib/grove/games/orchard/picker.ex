defmodule Grove.Games.Orchard.Picker do
  @moduledoc """
  An actor that plays the orchard (`Grove.Games.Orchard`) as a player
  would: it looks for trees with apples within five cells, walks to one
  and picks, and with its hands full (or no apples left in sight) walks to
  a basket and delivers. With nothing in sight it wanders like a
  `Grove.Actors.Wanderer`.

  It senses the game's layer and its own attributes (`game: true`), not
  the other entities: a step into someone is refused `occupied`, and it
  turns next time. Its state is its heading, `0..7`. It takes no options.
  """

  @behaviour Grove.Actor

  alias Grove.Actor
  alias Grove.Actor.Senses
  alias Grove.Actors.Wanderer
  alias Grove.World.Grid

  @radius 5
  @carry 3

  @impl true
  def init(_opts, roll), do: rem(roll, 8)

  @impl true
  def senses, do: [radius: @radius, game: true]

  @impl true
  def name, do: "picker"

  @impl true
  def emoji, do: "🧑‍🌾"

  @impl true
  def step(heading, %Senses{} = senses, roll) do
    side = if rem(roll, 2) == 0, do: 1, else: -1
    carrying = carrying(senses.attrs)
    trees = for {cell, {:tree, n}} <- senses.cells || %{}, n > 0, do: cell
    baskets = for {cell, :basket} <- senses.cells || %{}, do: cell

    tree = if carrying < @carry, do: next_to(senses.at, trees)
    basket = if carrying > 0, do: next_to(senses.at, baskets)

    cond do
      tree != nil ->
        {{:act, :pick, Actor.toward(senses.at, tree)}, heading}

      basket != nil ->
        {{:act, :deliver, Actor.toward(senses.at, basket)}, heading}

      carrying == @carry or (carrying > 0 and trees == []) ->
        head_for(senses, nearest(senses.at, baskets), heading, side)

      true ->
        head_for(senses, nearest(senses.at, trees), heading, side)
    end
  end

  defp carrying(%{carrying: n}), do: n
  defp carrying(_attrs), do: 0

  defp next_to({x, y}, cells),
    do: Enum.find(cells, fn {cx, cy} -> max(abs(cx - x), abs(cy - y)) == 1 end)

  # The nearest other than its own cell (what it senses may be a moment old).
  defp nearest({x, y} = at, cells) do
    case Enum.reject(cells, &(&1 == at)) do
      [] -> nil
      others -> Enum.min_by(others, fn {cx, cy} -> max(abs(cx - x), abs(cy - y)) end)
    end
  end

  defp head_for(senses, nil, heading, side), do: Wanderer.go(senses, heading, side)

  # Straight at it, or an eighth or two off when that is taken.
  defp head_for(%Senses{at: at} = senses, target, heading, side) do
    toward = Actor.heading(Actor.toward(at, target))

    case Enum.find([0, side, -side, 2 * side, -2 * side], fn turn ->
           Senses.free?(senses, Grid.step(at, Actor.direction(toward + turn)))
         end) do
      nil -> Wanderer.go(senses, heading, side)
      turn -> {Actor.direction(toward + turn), Integer.mod(toward + turn, 8)}
    end
  end
end
