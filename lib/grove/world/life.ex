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
      `:occupied`, so no entity ever shares a cell with a bacterium.
    * Bacteria are shown in views as entities of kind `2`, with an id made
      from their cell (`bacterium_id/2`: ids count down from 2^32 - 1, while
      entity ids count up from 1), and count on the minimap like entities.
    * A player may seed a pattern in front of itself (`Grove.World.seed/5`);
      it lands at the zone's next generation, on the cells still free then.

  The automaton is deterministic for a seed: the same world options give
  the same generations, as long as no entity stands where a birth would be.

  ## Options

  `Grove.World`'s `:life` option: `false` (no bacteria, the default) or a
  keyword list:

    * `:rule` - the rule in B/S notation (default `"B3/S23"`), see
      `Grove.World.Life.Rule`
    * `:interval` - milliseconds between generations, or `:manual` to step
      with `Grove.World.step_life/1` (default `1000`)
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
  world smaller than 2^31 cells.

      iex> grid = Grove.World.Grid.new(100, 100, 50)
      iex> Grove.World.Life.bacterium_id(grid, {0, 0})
      4294967295
      iex> Grove.World.Life.bacterium_id(grid, {1, 2})
      4294967094
  """
  @spec bacterium_id(Grid.t(), Grid.cell()) :: non_neg_integer()
  def bacterium_id(%Grid{} = grid, {x, y}), do: @max_id - Grid.cell_key(grid, x, y)

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
end
