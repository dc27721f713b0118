defmodule Grove.Load.Crowd do
  @moduledoc """
  Players who gather: each walks to one point of the world and then
  either presses in toward it (`:press`: every move heads for the point,
  so near it most are refused `occupied`) or mills about there (`:mill`:
  within `radius` cells of the point, moves go any way; a player pushed
  out walks back). The bots' load of `mix grove.load ws --crowd ...`,
  where ExVenture met its wall: everyone in one room.

  The point is a cell, or where it lies on the zone grid:

    * `:corner` - where four zones meet, the zone corner nearest the
      world's centre (a crowd there is shared by four zone processes);
    * `:middle` - the middle of the zone that holds the world's centre
      (a crowd there is one zone's);
    * `{x, y}` - that cell.

  Walking there, a player moves every `approach_ms` (faster than its
  usual pace, so the crowd forms in a minute or two rather than ten); once
  within `radius` of the point, or stopped at the crowd's edge (its last
  step got it nowhere), it moves at the run's pace: a thousand players
  make a crowd wider than the radius, and half of them refused ten times
  a second would measure the load generator rather than the server. A step toward
  the point is the direct one three times in four and a neighbouring
  direction otherwise, so that players slide around trees and each other
  rather than stand behind them for ever.

  Pure functions; `Grove.Load.Swarm` asks them for each player's next
  direction and wait.

  ## Examples

      iex> crowd = Grove.Load.Crowd.new(:press, {500, 500}, radius: 10)
      iex> Grove.Load.Crowd.direction(crowd, {490, 510}, 0)
      :ne
      iex> Grove.Load.Crowd.within?(crowd, {490, 510})
      true
      iex> Grove.Load.Crowd.place(:corner, 1000, 1000, 50)
      {500, 500}
      iex> Grove.Load.Crowd.place(:middle, 1000, 1000, 50)
      {525, 525}
  """

  alias Grove.World.Grid

  @enforce_keys [:mode, :at]
  defstruct [:mode, :at, radius: 12, approach_ms: 100]

  @type mode :: :press | :mill
  @type t :: %__MODULE__{
          mode: mode(),
          at: Grid.cell(),
          radius: pos_integer(),
          approach_ms: pos_integer()
        }

  @directions List.to_tuple(Grid.directions())

  @doc "A crowd: `mode` at the cell `at`; options `:radius` (12) and `:approach_ms` (100)."
  @spec new(mode(), Grid.cell(), keyword()) :: t()
  def new(mode, at, opts \\ []) when mode in [:press, :mill] do
    opts = Keyword.validate!(opts, radius: 12, approach_ms: 100)
    %__MODULE__{mode: mode, at: at, radius: opts[:radius], approach_ms: opts[:approach_ms]}
  end

  @doc "The cell for `:corner`, `:middle` or `{x, y}` on a world of that size and zone size."
  @spec place(:corner | :middle | Grid.cell(), pos_integer(), pos_integer(), pos_integer()) ::
          Grid.cell()
  def place(:corner, width, height, zone_size),
    do: {nearest_corner(width, zone_size), nearest_corner(height, zone_size)}

  def place(:middle, width, height, zone_size),
    do: {middle(width, zone_size), middle(height, zone_size)}

  def place({x, y}, _width, _height, _zone_size), do: {x, y}

  defp nearest_corner(side, zone_size),
    do: min(round(side / 2 / zone_size) * zone_size, side - 1)

  defp middle(side, zone_size),
    do: min(div(div(side, 2), zone_size) * zone_size + div(zone_size, 2), side - 1)

  @doc "True when the cell is within the crowd's radius of its point."
  @spec within?(t(), Grid.cell()) :: boolean()
  def within?(%__MODULE__{at: {ax, ay}, radius: radius}, {x, y}),
    do: max(abs(x - ax), abs(y - ay)) <= radius

  @doc """
  The direction a player on `cell` steps in next; `roll` is any
  non-negative random integer (its low bits choose).
  """
  @spec direction(t(), Grid.cell() | nil, non_neg_integer()) :: Grid.direction()
  def direction(_crowd, nil, roll), do: elem(@directions, rem(roll, 8))

  def direction(%__MODULE__{mode: :mill} = crowd, cell, roll) do
    if within?(crowd, cell), do: elem(@directions, rem(roll, 8)), else: toward(crowd, cell, roll)
  end

  def direction(%__MODULE__{mode: :press} = crowd, cell, roll), do: toward(crowd, cell, roll)

  @doc """
  Milliseconds until the next move of a player on `cell`, at the run's
  pace `every`; `stuck` when its last step left it where it was.
  """
  @spec wait(t(), Grid.cell() | nil, pos_integer(), boolean()) :: pos_integer()
  def wait(crowd, cell, every, stuck \\ false) do
    if cell != nil and not stuck and not within?(crowd, cell),
      do: min(crowd.approach_ms, every),
      else: every
  end

  # Straight at the point three times in four, else an eighth to either
  # side; on the point itself, anywhere.
  defp toward(%__MODULE__{at: at}, cell, roll) do
    case Grove.Actor.toward(cell, at) do
      nil ->
        elem(@directions, rem(roll, 8))

      direct ->
        heading = Grove.Actor.heading(direct)

        case rem(roll, 8) do
          6 -> Grove.Actor.direction(heading + 1)
          7 -> Grove.Actor.direction(heading - 1)
          _ -> direct
        end
    end
  end
end
