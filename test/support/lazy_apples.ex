defmodule Grove.LazyApples do
  @moduledoc false
  # The apple game of the tests, whose zones nobody watches may owe their
  # ticks: `catch_up/3` is `ticks` of its ticks, each an apple to every
  # tree short of `:most`.
  @behaviour Grove.Game

  alias Grove.AppleGame
  alias Grove.Game.Area

  @impl true
  defdelegate actions, to: AppleGame
  @impl true
  defdelegate init(options), to: AppleGame
  @impl true
  defdelegate cell(cell, ground, config), to: AppleGame
  @impl true
  defdelegate join(entity, info, area), to: AppleGame
  @impl true
  defdelegate act(act, area), to: AppleGame
  @impl true
  defdelegate show(value), to: AppleGame
  @impl true
  defdelegate look(attrs), to: AppleGame
  @impl true
  defdelegate tick(area, roll), to: AppleGame

  @impl true
  def catch_up(area, ticks, _roll) do
    most = Area.config(area).most

    for {cell, {:tree, n}} <- Area.cells(area),
        n < most,
        do: {:cell, cell, {:tree, min(n + ticks, most)}}
  end
end
