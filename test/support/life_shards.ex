defmodule Grove.LifeShards do
  @moduledoc """
  The zones' automaton without processes: one `Grove.World.Life.Board` per
  zone of a grid, stepped as the zones step it (each from its own cells and
  the edges its neighbours published for the same generation), so tests can
  compare it with `Grove.LifeReference` generation by generation.
  """

  alias Grove.World.Grid
  alias Grove.World.Life
  alias Grove.World.Life.Board

  defstruct [:grid, :rule, :boards, :opens]

  @doc "Cuts a world of live cells into zone boards; `barren` cells never live."
  def new(%Grid{} = grid, rule, live, barren \\ MapSet.new()) do
    zones = 0..(Grid.zone_count(grid) - 1)

    boards =
      Map.new(zones, fn index ->
        board = Board.new(Grid.zone_bounds(grid, index))
        cells = for {x, y} = cell <- live, Grid.zone_of(grid, x, y) == index, do: cell
        {index, Board.put(board, cells)}
      end)

    opens =
      Map.new(boards, fn {index, board} ->
        {index, Board.open_where(board, fn x, y -> not MapSet.member?(barren, {x, y}) end)}
      end)

    %__MODULE__{grid: grid, rule: rule, boards: boards, opens: opens}
  end

  @doc "One generation: every zone publishes its edges, then steps from its neighbours'."
  def step(%__MODULE__{} = shards) do
    edges = Map.new(shards.boards, fn {index, board} -> {index, Board.edges(board)} end)

    boards =
      Map.new(shards.boards, fn {index, board} ->
        halo =
          Map.new(Life.neighbours(shards.grid, index), fn {direction, neighbour} ->
            {direction, neighbour && Map.fetch!(edges, neighbour)}
          end)

        {index, Board.step(board, shards.rule, halo, Map.fetch!(shards.opens, index))}
      end)

    %{shards | boards: boards}
  end

  @doc "Every live cell of the world."
  def live(%__MODULE__{boards: boards}),
    do: boards |> Map.values() |> Enum.flat_map(&Board.cells/1) |> MapSet.new()
end
