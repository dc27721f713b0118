defmodule Grove.LifeReference do
  @moduledoc """
  A plain life-like automaton on one grid, written for clarity, not speed:
  the reference the zones' sharded automaton is checked against. Cells
  outside the grid are dead; `barren` cells (blocked ground, entities) never
  hold a live cell.
  """

  alias Grove.World.Life.Rule

  @doc "The next generation of `live` (a MapSet of `{x, y}`) on a `width` x `height` grid."
  def step(live, %Rule{} = rule, width, height, barren \\ MapSet.new()) do
    for y <- 0..(height - 1),
        x <- 0..(width - 1),
        not MapSet.member?(barren, {x, y}),
        Rule.alive_next?(rule, MapSet.member?(live, {x, y}), neighbours(live, x, y)),
        into: MapSet.new(),
        do: {x, y}
  end

  @doc "Runs `generations` steps and returns every generation, the first included."
  def run(live, rule, width, height, generations, barren \\ MapSet.new()) do
    Enum.scan(1..generations//1, live, fn _, live -> step(live, rule, width, height, barren) end)
    |> then(&[live | &1])
  end

  defp neighbours(live, x, y) do
    cells = for dx <- -1..1, dy <- -1..1, {dx, dy} != {0, 0}, do: {x + dx, y + dy}
    Enum.count(cells, &MapSet.member?(live, &1))
  end
end
