defmodule Grove.World.Grid do
  @moduledoc """
  Arithmetic on the world grid: cells, directions and the zones that cut it.

  Pure functions on a small struct; nothing here sends a message. Coordinates
  are screen-like: `x` grows to the east, `y` grows to the south, `{0, 0}` is
  the north-west corner.

  Zones are squares of `zone_size` cells numbered row by row from the
  north-west corner; the zones on the east and south edges are cut short when
  the world size is not a multiple of the zone size.

  Views cut zones finer, into tiles of `tile_size` cells a side (a divisor
  of `zone_size`, so that no tile straddles two zones), numbered row by row
  over the whole world like zones: a viewer is sent the tiles its viewport
  overlaps, not whole zones. With `tile_size` equal to `zone_size`, a
  tile is its zone and has its number.

  ## Examples

      iex> grid = Grove.World.Grid.new(100, 80, 50)
      iex> Grove.World.Grid.zone_count(grid)
      4
      iex> Grove.World.Grid.zone_of(grid, 60, 10)
      1
      iex> Grove.World.Grid.zone_bounds(grid, 3)
      {50, 50, 100, 80}
      iex> Grove.World.Grid.step({5, 5}, :ne)
      {6, 4}
  """

  @enforce_keys [:width, :height, :zone_size, :zones_x, :zones_y, :tile_size, :tiles_x]
  defstruct @enforce_keys

  @type t :: %__MODULE__{
          width: pos_integer(),
          height: pos_integer(),
          zone_size: pos_integer(),
          zones_x: pos_integer(),
          zones_y: pos_integer(),
          tile_size: pos_integer(),
          tiles_x: pos_integer()
        }

  @typedoc "A cell: `{x, y}`."
  @type cell :: {non_neg_integer(), non_neg_integer()}

  @typedoc "The eight compass directions a move can take."
  @type direction :: :n | :ne | :e | :se | :s | :sw | :w | :nw

  @typedoc "A zone's number, from 0 to `zone_count(grid) - 1`."
  @type zone_index :: non_neg_integer()

  @typedoc "A view tile's number, row by row over the world."
  @type tile_index :: non_neg_integer()

  @directions [:n, :ne, :e, :se, :s, :sw, :w, :nw]

  @doc """
  Builds a grid of `width` x `height` cells cut into zones of `zone_size`,
  and those into view tiles of `tile_size` (a divisor of `zone_size`; by
  default the zone itself).
  """
  @spec new(pos_integer(), pos_integer(), pos_integer(), pos_integer() | nil) :: t()
  def new(width, height, zone_size, tile_size \\ nil)
      when is_integer(width) and width > 0 and is_integer(height) and height > 0 and
             is_integer(zone_size) and zone_size > 0 do
    tile_size = tile_size || zone_size

    unless is_integer(tile_size) and tile_size > 0 and rem(zone_size, tile_size) == 0 do
      raise ArgumentError,
            "a view tile's side must divide the zone's (#{zone_size}), got: #{inspect(tile_size)}"
    end

    %__MODULE__{
      width: width,
      height: height,
      zone_size: zone_size,
      zones_x: div(width + zone_size - 1, zone_size),
      zones_y: div(height + zone_size - 1, zone_size),
      tile_size: tile_size,
      tiles_x: div(width + tile_size - 1, tile_size)
    }
  end

  @doc """
  The side of the view tiles a zone of `zone_size` is cut into by default:
  the largest divisor of `zone_size` no larger than 10.

      iex> Grove.World.Grid.default_tile(50)
      10
      iex> Grove.World.Grid.default_tile(8)
      8
      iex> Grove.World.Grid.default_tile(64)
      8
  """
  @spec default_tile(pos_integer()) :: pos_integer()
  def default_tile(zone_size),
    do: Enum.find(min(zone_size, 10)..1//-1, &(rem(zone_size, &1) == 0))

  @doc "The eight directions, clockwise from north."
  @spec directions() :: [direction()]
  def directions, do: @directions

  @doc "True when `term` is one of the eight directions."
  defguard is_direction(term) when term in @directions

  @doc "The cell one step from `cell` in `direction` (it may lie outside the grid)."
  @spec step({integer(), integer()}, direction()) :: {integer(), integer()}
  def step({x, y}, :n), do: {x, y - 1}
  def step({x, y}, :ne), do: {x + 1, y - 1}
  def step({x, y}, :e), do: {x + 1, y}
  def step({x, y}, :se), do: {x + 1, y + 1}
  def step({x, y}, :s), do: {x, y + 1}
  def step({x, y}, :sw), do: {x - 1, y + 1}
  def step({x, y}, :w), do: {x - 1, y}
  def step({x, y}, :nw), do: {x - 1, y - 1}

  @doc """
  The column of `step/2`'s cell from column `x`, with no tuple made:
  where a move is decided at every step, the two coordinates apart.
  """
  @spec step_x(integer(), direction()) :: integer()
  def step_x(x, direction) when direction in [:ne, :e, :se], do: x + 1
  def step_x(x, direction) when direction in [:sw, :w, :nw], do: x - 1
  def step_x(x, direction) when direction in [:n, :s], do: x

  @doc "The row of `step/2`'s cell from row `y`, as `step_x/2`."
  @spec step_y(integer(), direction()) :: integer()
  def step_y(y, direction) when direction in [:nw, :n, :ne], do: y - 1
  def step_y(y, direction) when direction in [:sw, :s, :se], do: y + 1
  def step_y(y, direction) when direction in [:w, :e], do: y

  @doc "True when the cell lies inside the grid."
  @spec in_bounds?(t(), integer(), integer()) :: boolean()
  def in_bounds?(%__MODULE__{width: w, height: h}, x, y),
    do: x >= 0 and y >= 0 and x < w and y < h

  @doc "Wraps a cell around the edges, for worlds where the bounds rule is off."
  @spec wrap(t(), integer(), integer()) :: cell()
  def wrap(%__MODULE__{width: w, height: h}, x, y),
    do: {Integer.mod(x, w), Integer.mod(y, h)}

  @doc "A unique integer for a cell inside the grid, usable as a map key."
  @spec cell_key(t(), non_neg_integer(), non_neg_integer()) :: non_neg_integer()
  def cell_key(%__MODULE__{width: w}, x, y), do: y * w + x

  @doc "The cell of a key from `cell_key/3`."
  @spec cell_of_key(t(), non_neg_integer()) :: cell()
  def cell_of_key(%__MODULE__{width: w}, key), do: {rem(key, w), div(key, w)}

  @doc "How many zones cut the grid."
  @spec zone_count(t()) :: pos_integer()
  def zone_count(%__MODULE__{zones_x: zx, zones_y: zy}), do: zx * zy

  @doc "The zone that holds a cell inside the grid."
  @spec zone_of(t(), non_neg_integer(), non_neg_integer()) :: zone_index()
  def zone_of(%__MODULE__{zone_size: s, zones_x: zx}, x, y), do: div(y, s) * zx + div(x, s)

  @doc "A zone's cells as `{x0, y0, x1, y1}`, lower bounds inclusive, upper exclusive."
  @spec zone_bounds(t(), zone_index()) ::
          {non_neg_integer(), non_neg_integer(), pos_integer(), pos_integer()}
  def zone_bounds(%__MODULE__{} = grid, index) do
    %__MODULE__{width: w, height: h, zone_size: s, zones_x: zx} = grid
    x0 = rem(index, zx) * s
    y0 = div(index, zx) * s
    {x0, y0, min(x0 + s, w), min(y0 + s, h)}
  end

  @doc """
  The zones a square viewport of `radius` around `center` overlaps, in
  ascending order. The viewport is clipped to the grid.

      iex> grid = Grove.World.Grid.new(100, 100, 50)
      iex> Grove.World.Grid.view_zones(grid, {10, 10}, 8)
      [0]
      iex> Grove.World.Grid.view_zones(grid, {48, 52}, 8)
      [0, 1, 2, 3]
  """
  @spec view_zones(t(), cell(), non_neg_integer()) :: [zone_index()]
  def view_zones(%__MODULE__{zone_size: size, zones_x: per_row} = grid, center, radius),
    do: squares_in_view(grid, center, radius, size, per_row)

  @doc """
  The zones an entity stepping from `from` (or placed, `nil`) to `to`
  inside zone `index` has come within `distance` cells of with this step:
  those within `distance` of `to` but not of `from`, its own zone left
  out. A cell deep inside its zone is near no other, whatever the step.

      iex> grid = Grove.World.Grid.new(100, 100, 50)
      iex> Grove.World.Grid.approached(grid, 0, {44, 10}, {45, 10}, 4)
      []
      iex> Grove.World.Grid.approached(grid, 0, {45, 10}, {46, 10}, 4)
      [1]
      iex> Grove.World.Grid.approached(grid, 0, {46, 10}, {47, 10}, 4)
      []
      iex> Grove.World.Grid.approached(grid, 0, nil, {47, 47}, 4)
      [1, 2, 3]
  """
  @spec approached(t(), zone_index(), cell() | nil, cell(), non_neg_integer()) :: [zone_index()]
  def approached(%__MODULE__{zone_size: s} = grid, index, from, {x, y} = to, distance) do
    near_border? =
      rem(x, s) < distance or rem(x, s) >= s - distance or rem(y, s) < distance or
        rem(y, s) >= s - distance

    if near_border? and distance > 0 do
      before = if from == nil, do: [index], else: [index | view_zones(grid, from, distance)]
      view_zones(grid, to, distance) -- before
    else
      []
    end
  end

  @doc """
  The range of zone columns and rows a viewport overlaps, `{col0, col1,
  row0, row1}`: two viewports overlap the same zones exactly when these are
  equal, which is cheaper to tell than comparing `view_zones/3`.

      iex> grid = Grove.World.Grid.new(100, 100, 50)
      iex> Grove.World.Grid.view_span(grid, {10, 10}, 8) == Grove.World.Grid.view_span(grid, {11, 10}, 8)
      true
      iex> Grove.World.Grid.view_span(grid, {41, 10}, 8) == Grove.World.Grid.view_span(grid, {42, 10}, 8)
      false
  """
  @spec view_span(t(), cell(), non_neg_integer()) ::
          {non_neg_integer(), non_neg_integer(), non_neg_integer(), non_neg_integer()}
  def view_span(%__MODULE__{zone_size: s} = grid, center, radius),
    do: span(grid, center, radius, s)

  @doc """
  The range of view tile columns and rows a viewport overlaps, as
  `view_span/3` for zones: two viewports overlap the same tiles exactly
  when these are equal.

      iex> grid = Grove.World.Grid.new(100, 100, 50, 10)
      iex> Grove.World.Grid.tile_span(grid, {10, 10}, 8) == Grove.World.Grid.tile_span(grid, {11, 10}, 8)
      true
      iex> Grove.World.Grid.tile_span(grid, {11, 10}, 8) == Grove.World.Grid.tile_span(grid, {12, 10}, 8)
      false
  """
  @spec tile_span(t(), cell(), non_neg_integer()) ::
          {non_neg_integer(), non_neg_integer(), non_neg_integer(), non_neg_integer()}
  def tile_span(%__MODULE__{tile_size: s} = grid, center, radius),
    do: span(grid, center, radius, s)

  defp span(%__MODULE__{width: w, height: h}, {x, y}, radius, s) do
    {div(max(x - radius, 0), s), div(min(x + radius, w - 1), s), div(max(y - radius, 0), s),
     div(min(y + radius, h - 1), s)}
  end

  @doc "The view tile that holds a cell inside the grid."
  @spec tile_of(t(), non_neg_integer(), non_neg_integer()) :: tile_index()
  def tile_of(%__MODULE__{tile_size: s, tiles_x: tx}, x, y), do: div(y, s) * tx + div(x, s)

  @doc "The zone a view tile lies in."
  @spec tile_zone(t(), tile_index()) :: zone_index()
  def tile_zone(%__MODULE__{tile_size: s, tiles_x: tx} = grid, tile),
    do: zone_of(grid, rem(tile, tx) * s, div(tile, tx) * s)

  @doc "A view tile's cells as `{x0, y0, x1, y1}`, as `zone_bounds/2`."
  @spec tile_bounds(t(), tile_index()) ::
          {non_neg_integer(), non_neg_integer(), pos_integer(), pos_integer()}
  def tile_bounds(%__MODULE__{width: w, height: h, tile_size: s, tiles_x: tx}, tile) do
    x0 = rem(tile, tx) * s
    y0 = div(tile, tx) * s
    {x0, y0, min(x0 + s, w), min(y0 + s, h)}
  end

  @doc """
  The view tiles a square viewport of `radius` around `center` overlaps,
  in ascending order, clipped to the grid, as `view_zones/3` for zones.

      iex> grid = Grove.World.Grid.new(100, 100, 50, 10)
      iex> Grove.World.Grid.view_tiles(grid, {15, 15}, 4)
      [11]
      iex> Grove.World.Grid.view_tiles(grid, {10, 10}, 1)
      [0, 1, 10, 11]
  """
  @spec view_tiles(t(), cell(), non_neg_integer()) :: [tile_index()]
  def view_tiles(%__MODULE__{tile_size: size, tiles_x: per_row} = grid, center, radius),
    do: squares_in_view(grid, center, radius, size, per_row)

  # The squares of side `size`, `per_row` to a row, that a viewport of
  # `radius` around `{x, y}` overlaps, clipped to the grid: zones or tiles.
  defp squares_in_view(%__MODULE__{width: w, height: h}, {x, y}, radius, size, per_row) do
    col0 = div(max(x - radius, 0), size)
    col1 = div(min(x + radius, w - 1), size)
    row0 = div(max(y - radius, 0), size)
    row1 = div(min(y + radius, h - 1), size)
    for row <- row0..row1, col <- col0..col1, do: row * per_row + col
  end

  @doc "True when `cell` lies inside the square viewport of `radius` around `center`."
  @spec in_view?(cell(), non_neg_integer(), cell()) :: boolean()
  def in_view?({cx, cy}, radius, {x, y}),
    do: abs(x - cx) <= radius and abs(y - cy) <= radius
end
