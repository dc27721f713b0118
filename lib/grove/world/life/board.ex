defmodule Grove.World.Life.Board do
  @moduledoc """
  One zone's cells of the automaton, and the step from one generation to
  the next: pure functions on a small struct, no process, no ETS.

  The zone's `w` x `h` cells are the bits of one integer, row by row, with a
  one-cell frame around them (rows and columns `w + 2` and `h + 2` wide):
  the frame is where the neighbours' border cells go for a step. A step is a
  few dozen whole-integer operations (shifts, `band`, `bxor`) whatever the
  number of live cells: the eight neighbour boards are added bit-sliced into
  a four-bit counter per cell, and the rule picks the counts that live.

  A step needs the cells just outside the zone: `edges/1` gives the four
  borders a zone publishes for its neighbours (its top and bottom rows, its
  left and right columns, each an integer, bit 0 the west or north end), and
  `step/4` takes the borders of the eight neighbours (`nil` beyond the
  world's edge, where cells are always dead). The neighbours' borders of
  generation `g` and the zone's own cells of generation `g` give its cells
  of generation `g + 1` exactly as one grid of the whole world would.

  ## Examples

      iex> alias Grove.World.Life.{Board, Rule}
      iex> blinker = Board.new({0, 0, 5, 5}) |> Board.put([{1, 2}, {2, 2}, {3, 2}])
      iex> next = Board.step(blinker, Rule.conway(), %{}, Board.open_all(blinker))
      iex> Board.cells(next)
      [{2, 1}, {2, 2}, {2, 3}]
  """

  import Bitwise

  @enforce_keys [:x0, :y0, :w, :h]
  defstruct [:x0, :y0, :w, :h, bits: 0]

  @popcounts List.to_tuple(
               for b <- 0..255, do: for(<<(bit::1 <- <<b>>)>>, reduce: 0, do: (n -> n + bit))
             )

  # For each byte, its set bits from the highest down.
  @bits_down List.to_tuple(
               for b <- 0..255, do: for(bit <- 7..0//-1, (b >>> bit &&& 1) == 1, do: bit)
             )

  @type t :: %__MODULE__{
          x0: non_neg_integer(),
          y0: non_neg_integer(),
          w: pos_integer(),
          h: pos_integer(),
          bits: non_neg_integer()
        }

  @typedoc """
  What a zone publishes of its cells for its neighbours: its width and
  height, then its top row, bottom row, left column and right column.
  """
  @type edges ::
          {pos_integer(), pos_integer(), non_neg_integer(), non_neg_integer(), non_neg_integer(),
           non_neg_integer()}

  @typedoc "The neighbours' edges, by compass direction; a missing one is all dead."
  @type halo :: %{optional(:n | :ne | :e | :se | :s | :sw | :w | :nw) => edges() | nil}

  @doc "An empty board over the zone bounds `{x0, y0, x1, y1}` (upper bounds exclusive)."
  @spec new({non_neg_integer(), non_neg_integer(), pos_integer(), pos_integer()}) :: t()
  def new({x0, y0, x1, y1}), do: %__MODULE__{x0: x0, y0: y0, w: x1 - x0, h: y1 - y0}

  @doc "True when the cell, which must lie in the zone, is alive."
  @spec alive?(t(), non_neg_integer(), non_neg_integer()) :: boolean()
  def alive?(%__MODULE__{bits: 0}, _x, _y), do: false

  def alive?(%__MODULE__{} = board, x, y),
    do: (board.bits >>> index(board, x, y) &&& 1) == 1

  @doc "Makes cells of the zone alive."
  @spec put(t(), [{non_neg_integer(), non_neg_integer()}]) :: t()
  def put(%__MODULE__{} = board, cells),
    do: %{board | bits: board.bits ||| mask(board, cells)}

  @doc "Makes cells of the zone dead."
  @spec clear(t(), [{non_neg_integer(), non_neg_integer()}]) :: t()
  def clear(%__MODULE__{} = board, cells),
    do: %{board | bits: board.bits &&& bnot(mask(board, cells))}

  @doc "The given cells of the zone as a mask in the board's layout."
  @spec mask(t(), [{non_neg_integer(), non_neg_integer()}]) :: non_neg_integer()
  def mask(%__MODULE__{} = board, cells),
    do: Enum.reduce(cells, 0, fn {x, y}, acc -> acc ||| 1 <<< index(board, x, y) end)

  @doc "A mask of every cell of the zone (births allowed everywhere)."
  @spec open_all(t()) :: non_neg_integer()
  def open_all(%__MODULE__{w: w, h: h}) do
    row = ((1 <<< w) - 1) <<< 1
    stride = w + 2
    Enum.reduce(1..h, 0, fn r, acc -> acc ||| row <<< (r * stride) end)
  end

  @doc """
  A mask of the zone's cells for which `open?.(x, y)` is true: where cells
  may be born (the zone passes the cells whose ground does not block).
  """
  @spec open_where(t(), (non_neg_integer(), non_neg_integer() -> boolean())) ::
          non_neg_integer()
  def open_where(%__MODULE__{x0: x0, y0: y0, w: w, h: h} = board, open?) do
    mask(board, for(y <- y0..(y0 + h - 1), x <- x0..(x0 + w - 1), open?.(x, y), do: {x, y}))
  end

  @doc "Every live cell, row by row."
  @spec cells(t()) :: [{non_neg_integer(), non_neg_integer()}]
  def cells(%__MODULE__{bits: bits} = board), do: to_cells(board, bits)

  @doc """
  The live cells within `{x0, y0, x1, y1}` (upper bounds exclusive, clipped
  to the zone), row by row, as `cells/1` orders them: only the
  rectangle's rows are read, and in each only its columns, so that a view
  tile's few cells cost no walk of the whole zone.
  """
  @spec cells_within(t(), {integer(), integer(), integer(), integer()}) ::
          [{non_neg_integer(), non_neg_integer()}]
  def cells_within(%__MODULE__{bits: 0}, _bounds), do: []

  def cells_within(%__MODULE__{x0: bx, y0: by, w: w, h: h, bits: bits} = board, bounds) do
    {x0, y0, x1, y1} = bounds
    {x0, x1} = {max(x0, bx), min(x1, bx + w)}
    {y0, y1} = {max(y0, by), min(y1, by + h)}

    if x0 >= x1 or y0 >= y1 do
      []
    else
      stride = w + 2
      rows = y1 - y0
      # The rectangle's rows of the layout (its row r is y = by + r - 1),
      # the last first, and in each row its columns.
      band = bits >>> ((y0 - by + 1) * stride) &&& (1 <<< (rows * stride)) - 1
      columns = ((1 <<< (x1 - x0)) - 1) <<< (x0 - bx + 1)
      band_cells(<<band::size(rows * stride)>>, {stride, columns, board.x0 - 1}, y1 - 1, [])
    end
  end

  defp band_cells(<<>>, _layout, _y, cells), do: cells

  defp band_cells(rows, {stride, columns, x} = layout, y, cells) do
    <<row::size(stride), rest::bitstring>> = rows

    case row &&& columns do
      0 -> band_cells(rest, layout, y - 1, cells)
      row -> band_cells(rest, layout, y - 1, row_cells(row, div(stride - 1, 8), x, y, cells))
    end
  end

  @doc "The cells set in a mask of this board's layout, row by row."
  @spec to_cells(t(), non_neg_integer()) :: [{non_neg_integer(), non_neg_integer()}]
  def to_cells(%__MODULE__{}, 0), do: []

  def to_cells(%__MODULE__{w: w, h: h} = board, mask) do
    stride = w + 2
    # Row by row, from the last: each row is a small integer, and rows with
    # nothing set cost one comparison.
    rows_to_cells(stride, <<mask::size(stride * (h + 2))>>, h + 1, board, [])
  end

  defp rows_to_cells(stride, rows, r, board, cells) do
    case rows do
      <<>> ->
        cells

      <<0::size(stride), rest::bitstring>> ->
        rows_to_cells(stride, rest, r - 1, board, cells)

      <<row::size(stride), rest::bitstring>> ->
        cells = row_cells(row, div(stride - 1, 8), board.x0 - 1, board.y0 + r - 1, cells)
        rows_to_cells(stride, rest, r - 1, board, cells)
    end
  end

  # The row's cells, east to west, a byte of the row at a time, each put in
  # front: the list reads west to east.
  defp row_cells(_row, byte, _x, _y, cells) when byte < 0, do: cells

  defp row_cells(row, byte, x, y, cells) do
    cells =
      case row >>> (byte * 8) &&& 255 do
        0 ->
          cells

        bits ->
          base = x + byte * 8

          Enum.reduce(elem(@bits_down, bits), cells, fn bit, cells ->
            [{base + bit, y} | cells]
          end)
      end

    row_cells(row, byte - 1, x, y, cells)
  end

  @doc "How many cells are alive."
  @spec count(t()) :: non_neg_integer()
  def count(%__MODULE__{bits: bits}), do: popcount(bits)

  @doc "How many bits a mask has set."
  @spec popcount(non_neg_integer()) :: non_neg_integer()
  def popcount(0), do: 0

  def popcount(mask) do
    for <<byte <- :binary.encode_unsigned(mask)>>, reduce: 0 do
      acc -> acc + elem(@popcounts, byte)
    end
  end

  @doc "The borders this zone publishes for its neighbours."
  @spec edges(t()) :: edges()
  def edges(%__MODULE__{w: w, h: h, bits: 0}), do: {w, h, 0, 0, 0, 0}

  def edges(%__MODULE__{w: w, h: h, bits: bits}) do
    stride = w + 2
    row_mask = (1 <<< w) - 1
    top = bits >>> (stride + 1) &&& row_mask
    bottom = bits >>> (h * stride + 1) &&& row_mask
    # The frame rows hold nothing: the columns are read from the zone's rows.
    <<_frame::size(stride), rows::bitstring-size(stride * h), _::bitstring>> =
      <<bits::size(stride * (h + 2))>>

    {left, right} = columns(stride, rows, w, 0, 0)
    {w, h, top, bottom, left, right}
  end

  # Rows come last first: each one shifts the columns read so far up a place.
  defp columns(stride, rows, w, left, right) do
    case rows do
      <<>> ->
        {left, right}

      <<row::size(stride), rest::bitstring>> ->
        left = left <<< 1 ||| (row >>> 1 &&& 1)
        columns(stride, rest, w, left, right <<< 1 ||| (row >>> w &&& 1))
    end
  end

  @doc """
  The next generation under `rule`, given the neighbours' edges of this
  generation (`halo`) and `open`, the mask of cells where a birth may land
  (see `open_where/2`). Live cells outside `open` die too.
  """
  @spec step(t(), Grove.World.Life.Rule.t(), halo(), non_neg_integer()) :: t()
  def step(%__MODULE__{w: w, bits: bits} = board, rule, halo, open) do
    padded = bits ||| frame(board, halo)

    if padded == 0 do
      board
    else
      stride = w + 2
      # Each cell's row of three (west, itself, east) as a two-bit count...
      west = padded <<< 1
      east = padded >>> 1
      pair = bxor(west, padded)
      h0 = bxor(pair, east)
      h1 = (west &&& padded) ||| (east &&& pair)
      # ...then the rows above and below added in: the count of the nine
      # cells around and on each cell, in four bits (0 to 9).
      totals = add_rows({h0, h1}, {h0 <<< stride, h1 <<< stride}, {h0 >>> stride, h1 >>> stride})
      # An empty cell's neighbours are its nine-count; a live one's, one less.
      born = Enum.reduce(rule.birth, 0, fn n, acc -> acc ||| equals(totals, n) end)
      kept = Enum.reduce(rule.survival, 0, fn n, acc -> acc ||| equals(totals, n + 1) end)
      next = (born &&& bnot(bits)) ||| (kept &&& bits)
      %{board | bits: next &&& open}
    end
  end

  # Three two-bit counts per cell summed into a four-bit count per cell,
  # with whole-integer full adders: about twenty operations for every
  # cell of the zone at once.
  defp add_rows({a0, a1}, {b0, b1}, {c0, c1}) do
    ab0 = bxor(a0, b0)
    t0 = bxor(ab0, c0)
    carry = (a0 &&& b0) ||| (c0 &&& ab0)
    ab1 = bxor(a1, b1)
    sum1 = bxor(ab1, c1)
    fours = (a1 &&& b1) ||| (c1 &&& ab1)
    t1 = bxor(sum1, carry)
    more_fours = sum1 &&& carry
    {t0, t1, bxor(fours, more_fours), fours &&& more_fours}
  end

  # The cells whose count equals n (negative where every bit is a bnot:
  # the caller's `band` with a positive mask makes it finite).
  defp equals({c0, c1, c2, c3}, n) do
    bit(c0, n &&& 1) &&& bit(c1, n &&& 2) &&& bit(c2, n &&& 4) &&& bit(c3, n &&& 8)
  end

  defp bit(c, 0), do: bnot(c)
  defp bit(c, _), do: c

  # The neighbours' border cells in the board's frame.
  defp frame(%__MODULE__{w: w, h: h}, halo) when map_size(halo) > 0 do
    stride = w + 2
    bottom_row = (h + 1) * stride

    0
    |> put_row(halo[:n], 4, 1)
    |> put_bit(halo[:nw], 4, :last, 0)
    |> put_bit(halo[:ne], 4, 0, stride - 1)
    |> put_row(halo[:s], 3, bottom_row + 1)
    |> put_bit(halo[:sw], 3, :last, bottom_row)
    |> put_bit(halo[:se], 3, 0, bottom_row + stride - 1)
    |> put_column(halo[:w], 6, stride, 0)
    |> put_column(halo[:e], 5, stride, stride - 1)
  end

  defp frame(_board, _halo), do: 0

  # `field` is the place in the edges tuple: 3 top, 4 bottom, 5 left, 6 right.
  defp put_row(acc, nil, _field, _at), do: acc
  defp put_row(acc, edges, field, at), do: acc ||| elem(edges, field - 1) <<< at

  defp put_bit(acc, nil, _field, _which, _at), do: acc

  defp put_bit(acc, edges, field, which, at) do
    source = if which == :last, do: elem(edges, 0) - 1, else: which
    acc ||| (elem(edges, field - 1) >>> source &&& 1) <<< at
  end

  defp put_column(acc, nil, _field, _stride, _col), do: acc

  defp put_column(acc, edges, field, stride, col),
    do: spread_column(elem(edges, field - 1), stride + col, stride, acc)

  # A column's cells, the lowest first, each on its row of the frame.
  defp spread_column(0, _at, _stride, acc), do: acc

  defp spread_column(column, at, stride, acc) do
    acc = if (column &&& 1) == 1, do: acc ||| 1 <<< at, else: acc
    spread_column(column >>> 1, at + stride, stride, acc)
  end

  defp index(%__MODULE__{x0: x0, y0: y0, w: w}, x, y), do: (y - y0 + 1) * (w + 2) + (x - x0 + 1)
end
