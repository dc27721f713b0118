defmodule Grove.World.Life do
  @moduledoc """
  Bacteria: a second kind of life in the world, which does not walk but is
  born and dies, each generation, by the rules of a life-like cellular
  automaton (Conway's Game of Life, `"B3/S23"`, unless configured).

  The zones compute it themselves, each its own cells, in their own
  process, at the world's generation interval (see `docs/decisions.md` for
  why): a zone publishes the border cells of each generation in ETS, and
  computes generation `g + 1` only once its eight neighbours have published
  generation `g`. No zone sends another a message for it, and the result
  is exactly the one a single grid would give. `Grove.World.Life.Board` is
  the pure step of one zone.

  ## How bacteria meet the rest of the world

    * A birth never lands on a cell whose ground blocks, nor on a cell an
      entity (player or walker) stands on; live cells on such cells simply
      do not come to be. Cells outside the world are always dead (even in a
      world whose moves wrap around).
    * A live cell is occupied: a move or a join onto it is refused with
      `:occupied`, so no entity ever shares a cell with a bacterium. (In a
      world whose rules let entities share cells, `exclusive: false`, the
      zone keeps no index of occupied cells and births do not look for
      entities.)
    * Bacteria are shown in views as entities of kind `2`, with an id made
      from their cell (`bacterium_id/2`: ids count down from 2^32 - 1, while
      entity ids count up from 1), and count on the minimap like entities.
    * A player may seed a pattern in front of itself (`Grove.World.Bacteria.seed/5`);
      it lands at the zone's next generation, on the cells still free then.

  The automaton is deterministic for a seed: the same world options give
  the same generations, as long as no entity stands where a birth would be.

  ## Options

  `Grove.World`'s `:life` option: `false` (no bacteria, the default) or a
  keyword list:

    * `:rule` - the rule in B/S notation (default `"B3/S23"`), see
      `Grove.World.Life.Rule`
    * `:interval` - milliseconds between generations, or `:manual` to step
      with `Grove.World.Bacteria.step_life/1` (default `1000`)
    * `:soup` - share of the world, in 8 x 8 blocks chosen by the world's
      seed, that starts as a random soup of bacteria (default `0.1`)
    * `:soup_density` - chance that a cell of a soup block starts alive
      (default `0.4`)
  """

  alias Grove.World.Grid
  alias Grove.World.Life.Rule

  @enforce_keys [:rule, :interval]
  defstruct [:rule, :interval, soup: 0.1, soup_density: 0.4]

  @type t :: %__MODULE__{
          rule: Rule.t(),
          interval: pos_integer() | :manual,
          soup: float(),
          soup_density: float()
        }

  @defaults [rule: "B3/S23", interval: 1000, soup: 0.1, soup_density: 0.4]

  # The entity kind views carry for a bacterium.
  @kind 2
  # The side of the blocks a soup is laid in.
  @soup_block 8
  @max_id 0xFFFFFFFF
  @max_wide_id 0x1FFFFFFFFFFFFF

  @doc """
  Validates the `:life` option of a world; `false` gives `nil` (no
  bacteria). Raises `ArgumentError` naming the bad option.
  """
  @spec new!(false | keyword()) :: t() | nil
  def new!(false), do: nil

  def new!(opts) when is_list(opts) do
    opts = Keyword.validate!(opts, @defaults)

    rule =
      case Rule.parse(opts[:rule]) do
        {:ok, rule} -> rule
        {:error, why} -> raise ArgumentError, "life :rule: " <> why
      end

    interval = opts[:interval]

    unless interval == :manual or (is_integer(interval) and interval > 0) do
      raise ArgumentError,
            "life :interval must be a positive integer (milliseconds) or :manual, got: #{inspect(interval)}"
    end

    for key <- [:soup, :soup_density],
        not (is_number(opts[key]) and opts[key] >= 0 and opts[key] <= 1) do
      raise ArgumentError,
            "life #{inspect(key)} must be a number in 0..1, got: #{inspect(opts[key])}"
    end

    %__MODULE__{
      rule: rule,
      interval: interval,
      soup: opts[:soup] / 1,
      soup_density: opts[:soup_density] / 1
    }
  end

  def new!(other),
    do: raise(ArgumentError, ":life must be false or a keyword list, got: #{inspect(other)}")

  @doc "The entity kind views carry for a bacterium."
  @spec kind() :: byte()
  def kind, do: @kind

  @doc """
  The id a bacterium on a cell has in views: ids count down from 2^32 - 1
  by cell, so they never meet entity ids, which count up from 1, in any
  world smaller than 2^31 cells. In a world wider or higher than 65,535
  cells (which only protocol version 3 can show) they count down from
  2^53 - 1, the largest id the protocol carries.

      iex> grid = Grove.World.Grid.new(100, 100, 50)
      iex> Grove.World.Life.bacterium_id(grid, {0, 0})
      4294967295
      iex> Grove.World.Life.bacterium_id(grid, {1, 2})
      4294967094
      iex> Grove.World.Life.bacterium_id(Grove.World.Grid.new(1_000_000, 1_000_000, 50), {1, 2})
      9007199252740990
  """
  @spec bacterium_id(Grid.t(), Grid.cell()) :: non_neg_integer()
  def bacterium_id(%Grid{width: w, height: h} = grid, {x, y}) when w <= 65_535 and h <= 65_535,
    do: @max_id - Grid.cell_key(grid, x, y)

  def bacterium_id(%Grid{} = grid, {x, y}), do: @max_wide_id - Grid.cell_key(grid, x, y)

  @doc "The eight zones around a zone, by direction; `nil` beyond the world's edge."
  @spec neighbours(Grid.t(), Grid.zone_index()) :: %{Grid.direction() => Grid.zone_index() | nil}
  def neighbours(%Grid{zones_x: zx, zones_y: zy}, index) do
    col = rem(index, zx)
    row = div(index, zx)

    Map.new(Grid.directions(), fn direction ->
      {c, r} = Grid.step({col, row}, direction)
      {direction, if(c >= 0 and r >= 0 and c < zx and r < zy, do: r * zx + c)}
    end)
  end

  @doc """
  The live cells of generation 0 inside the bounds: blocks of
  #{@soup_block} x #{@soup_block} cells chosen by the seed (a share `soup`
  of them) hold a random soup; `open?` says where a cell may live.
  """
  @spec soup(
          t(),
          term(),
          {non_neg_integer(), non_neg_integer(), pos_integer(), pos_integer()},
          (non_neg_integer(), non_neg_integer() -> boolean())
        ) ::
          [Grid.cell()]
  def soup(%__MODULE__{soup: soup}, _seed, _bounds, _open?) when soup == 0, do: []

  def soup(%__MODULE__{} = life, seed, {x0, y0, x1, y1}, open?) do
    seed = :erlang.phash2(seed)
    block_chance = round(life.soup * 0xFFFFFFFF)
    cell_chance = round(life.soup_density * 0xFFFFFFFF)

    for y <- y0..(y1 - 1),
        x <- x0..(x1 - 1),
        :erlang.phash2({seed, :soup, div(x, @soup_block), div(y, @soup_block)}, 0x100000000) <
          block_chance,
        :erlang.phash2({seed, :bacterium, x, y}, 0x100000000) < cell_chance,
        open?.(x, y),
        do: {x, y}
  end

  # Patterns a player may seed, as live cells in their own box, from its
  # north-west corner; the glider travels south-east as drawn.
  @patterns %{
    glider: [{1, 0}, {2, 1}, {0, 2}, {1, 2}, {2, 2}],
    blinker: [{0, 1}, {1, 1}, {2, 1}],
    block: [{0, 0}, {1, 0}, {0, 1}, {1, 1}],
    r_pentomino: [{1, 0}, {2, 0}, {0, 1}, {1, 1}, {1, 2}],
    lwss: [{1, 0}, {4, 0}, {0, 1}, {0, 2}, {4, 2}, {0, 3}, {1, 3}, {2, 3}, {3, 3}],
    beacon: [{0, 0}, {1, 0}, {0, 1}, {3, 2}, {2, 3}, {3, 3}],
    toad: [{1, 0}, {2, 0}, {3, 0}, {0, 1}, {1, 1}, {2, 1}]
  }

  @doc "The names of the patterns a player may seed, in the protocol's order."
  @spec patterns() :: [atom()]
  def patterns, do: [:glider, :blinker, :block, :r_pentomino, :lwss, :beacon, :toad]

  @doc """
  The cells of a pattern seeded by someone standing on `cell` and facing
  `direction`: the pattern's box lies just in front of the cell, never on
  it, mirrored so that what travels (a glider, a spaceship) heads away
  from the one who seeded it. Cells may lie outside the world.

      iex> Grove.World.Life.pattern_cells(:blinker, {10, 10}, :e)
      [{11, 10}, {12, 10}, {13, 10}]
      iex> Grove.World.Life.pattern_cells(:block, {10, 10}, :n)
      [{9, 7}, {10, 7}, {9, 8}, {10, 8}]
  """
  @spec pattern_cells(atom(), Grid.cell(), Grid.direction()) :: [{integer(), integer()}]
  def pattern_cells(pattern, {x, y}, direction) do
    cells = Map.fetch!(@patterns, pattern)
    width = Enum.max(for {cx, _} <- cells, do: cx) + 1
    height = Enum.max(for {_, cy} <- cells, do: cy) + 1
    {dx, dy} = Grid.step({0, 0}, direction)
    reach = div(max(width, height), 2) + 1
    # The box's centre is `reach` steps ahead, which keeps the box off the cell.
    left = x + dx * reach - div(width, 2)
    top = y + dy * reach - div(height, 2)
    flip_x = direction in [:sw, :w, :nw]
    flip_y = direction in [:ne, :n, :nw]

    for {cx, cy} <- cells do
      cx = if flip_x, do: width - 1 - cx, else: cx
      cy = if flip_y, do: height - 1 - cy, else: cy
      {left + cx, top + cy}
    end
    |> Enum.sort_by(fn {cx, cy} -> {cy, cx} end)
  end
end
