defmodule Grove.World.Terrains.Woodland do
  @moduledoc """
  Grove's own ground, the default `Grove.World.Terrain` generator:
  meadows, forests with clearings, lakes, rocks and flowers.

  Two fields of smooth value noise cover the world: one places lakes in its
  lowest valleys, the other grows forests on its highest ridges, and a cell
  in a forest holds a tree with a fixed chance, which leaves clearings and
  paths between them. Thresholds come from the fields' own histograms, so
  the densities you ask for are the densities you get, whatever the seed:
  over every cell in a world of up to 4,194,304 cells (2048 x 2048), over
  an even sample of 256 x 256 cells in a larger one.

  Every cell depends only on the seed, the thresholds and its own
  coordinates (the noise's lattice is a hash of the seed and the lattice
  point), so any area comes out the same whichever is generated first: a
  lake across a zone's border is one lake.

  `cells/2` takes a rectangle of the world (`t:Grove.World.Terrain.rect/0`),
  from `{0, 0}` on: the noise's lattice has no points left of or above the
  origin, and a rectangle that starts there raises `ArgumentError`.

  ## Options

    * `:seed` - any term; the same seed gives the same world (default `1`)
    * `:tree_density` - fraction of all cells that hold a tree (default `0.12`)
    * `:water_density` - fraction of all cells under water (default `0.03`)
    * `:rock_density` - fraction of all cells that hold a rock (default `0.004`)
    * `:flower_density` - fraction of meadow cells with flowers, which do not
      block (default `0.03`)

  ## Examples

      iex> alias Grove.World.Terrains.Woodland
      iex> params = Woodland.init(40, 30, seed: 7)
      iex> whole = Woodland.cells(params, {0, 0, 40, 30})
      iex> byte_size(whole)
      1200
      iex> Woodland.cells(params, {10, 5, 12, 6}) == binary_part(whole, 5 * 40 + 10, 2)
      true
  """

  @behaviour Grove.World.Terrain

  import Bitwise

  alias Grove.World.Terrains.Phash2

  @enforce_keys [:seed, :forest, :lakes, :forest_cut, :water_cut, :chances]
  defstruct @enforce_keys

  @type t :: %__MODULE__{}

  @meadow 0
  @tree 1
  @rock 2
  @water 3
  @flowers 4

  # Inside a forest a cell holds a tree with this chance; the rest are clearings.
  @forest_fill 0.7
  # Outside forests, this share of the trees stands alone in the meadows.
  @lone_tree_share 0.1
  # Noise values are integers in 0..@noise_max so thresholds can come from a histogram.
  @noise_max 1023
  # Octaves of each field: {lattice spacing in cells, weight}.
  @forest_octaves [{48, 0.6}, {16, 0.3}, {6, 0.1}]
  @lake_octaves [{96, 0.7}, {32, 0.3}]
  # A world of more cells than this takes its thresholds from a sample of
  # this many cells a side, spread evenly over it (the whole limit of
  # `Grove.World.Terrain`: a world made whole is made as it always was).
  @exact_limit 4_194_304
  @sample_side 256

  @defaults [
    seed: 1,
    tree_density: 0.12,
    water_density: 0.03,
    rock_density: 0.004,
    flower_density: 0.03
  ]

  @impl true
  def init(width, height, opts) when is_integer(width) and is_integer(height) do
    opts = Keyword.validate!(opts, @defaults)

    for key <- [:tree_density, :water_density, :rock_density, :flower_density] do
      density = Keyword.fetch!(opts, key)

      unless is_number(density) and density >= 0 and density <= 1 do
        raise ArgumentError, "#{inspect(key)} must be a number in 0..1, got: #{inspect(density)}"
      end
    end

    if opts[:tree_density] + opts[:water_density] + opts[:rock_density] > 0.9 do
      raise ArgumentError,
            "tree, water and rock densities add up to more than 0.9; the world would have no room to walk"
    end

    seed = :erlang.phash2(opts[:seed])
    forest = octaves({seed, :forest}, @forest_octaves, width, height)
    lakes = octaves({seed, :lakes}, @lake_octaves, width, height)

    {forest_values, lake_values, sampled} = histograms(forest, lakes, width, height)

    total = width * height
    water_cut = threshold(lake_values, sampled, opts[:water_density], :low)

    forest_trees = opts[:tree_density] * (1 - @lone_tree_share)
    forest_cover = min(forest_trees / @forest_fill / max(1 - opts[:water_density], 0.01), 1.0)
    forest_cut = threshold(forest_values, sampled, forest_cover, :high)

    land = max(total - round(opts[:water_density] * total), 1)
    forest_cells = forest_cover * land

    lone_tree_chance =
      opts[:tree_density] * @lone_tree_share * total / max(land - forest_cells, 1)

    %__MODULE__{
      seed: seed,
      forest: forest,
      lakes: lakes,
      forest_cut: forest_cut,
      water_cut: water_cut,
      chances: {
        chance(@forest_fill),
        chance(lone_tree_chance),
        chance(opts[:rock_density]),
        chance(opts[:flower_density])
      }
    }
  end

  @impl true
  def cells(%__MODULE__{} = params, rect), do: cells(params, rect, true)

  @doc false
  # With `false`, every row of both fields computed, none skipped for
  # lying on one side of its cut: what `cells/2` must give (its tests).
  @spec cells(t(), {integer(), integer(), integer(), integer()}, boolean()) :: binary()
  def cells(%__MODULE__{}, {x0, y0, _x1, _y1} = rect, _skip?) when x0 < 0 or y0 < 0 do
    raise ArgumentError,
          "a rectangle of the ground starts at an x0 and a y0 of 0 or more " <>
            "(the world's origin is {0, 0}), got: #{inspect(rect)}"
  end

  def cells(%__MODULE__{} = params, {x0, y0, x1, y1}, skip?) when x1 > x0 and y1 > y0 do
    %__MODULE__{seed: seed, forest_cut: fc, water_cut: wc, chances: chances} = params
    forest = field_rows(params.forest, x0, y0, x1, y1, skip? && {:forest, fc})
    lakes = field_rows(params.lakes, x0, y0, x1, y1, skip? && {:water, wc})
    {forest_tree, lone_tree, rock, flowers} = chances
    cuts = {seed, fc, wc, forest_tree, lone_tree, rock, flowers}

    # x0 and y0 are 0 or more (a `Grove.World.Terrain.rect/0`, inside the
    # world; the fields above take no other) and below x1 and y1, so x1
    # and y1 small make every column and row of the area small.
    if Phash2.small?(seed) and Phash2.small?(x1) and Phash2.small?(y1),
      do: classify_by_columns(forest, lakes, cuts, columns(seed, x0, x1), y0, []),
      else: classify_rows(forest, lakes, cuts, x0, y0, [])
  end

  ## Classifying

  # Each cell a byte of a list (two words, where a binary of one byte
  # took five), made into the area's binary once. A row's cells take
  # the cuts and chances as arguments of their own, not out of a tuple
  # at every cell, and their rolls inline.
  defp classify_rows([forest_row | forest], [lake_row | lakes], cuts, x0, y, acc) do
    {seed, fc, wc, forest_tree, lone_tree, rock, flowers} = cuts

    row =
      classify_row(
        forest_row,
        lake_row,
        x0,
        y,
        seed,
        fc,
        wc,
        forest_tree,
        lone_tree,
        rock,
        flowers
      )

    classify_rows(forest, lakes, cuts, x0, y + 1, [acc | row])
  end

  defp classify_rows([], [], _cuts, _x0, _y, acc), do: :erlang.list_to_binary(acc)

  # The rolls' draws are `:erlang.phash2({seed, salt, x, y}, 2^32)`, the
  # same values worked out in steps (`Phash2`): the state after `{seed,
  # salt, x` once for each column of the area and each salt, and a
  # cell's draw the last step, with its row. Where the coordinates are
  # too large for those steps (a world wider than 2^27), each draw is
  # the built-in's, as above.
  defp columns(seed, x0, x1) do
    start = Phash2.int(Phash2.tuple(4), seed)

    {tree, rock, flowers} =
      {Phash2.atom(start, :tree), Phash2.atom(start, :rock), Phash2.atom(start, :flowers)}

    for x <- x0..(x1 - 1), do: {Phash2.int(tree, x), Phash2.int(rock, x), Phash2.int(flowers, x)}
  end

  defp classify_by_columns([forest_row | forest], [lake_row | lakes], cuts, columns, y, acc) do
    {_seed, fc, wc, forest_tree, lone_tree, rock, flowers} = cuts

    row =
      classify_cells(
        forest_row,
        lake_row,
        columns,
        y,
        fc,
        wc,
        forest_tree,
        lone_tree,
        rock,
        flowers
      )

    classify_by_columns(forest, lakes, cuts, columns, y + 1, [acc | row])
  end

  defp classify_by_columns([], [], _cuts, _columns, _y, acc), do: :erlang.list_to_binary(acc)

  defp classify_cells(
         [f | forest],
         [l | lakes],
         [{tree, rock_at, flowers_at} | columns],
         y,
         fc,
         wc,
         ft,
         lt,
         rock,
         fl
       ) do
    code =
      cond do
        l <= wc -> @water
        f >= fc and Phash2.int(tree, y) < ft -> @tree
        f < fc and Phash2.int(tree, y) < lt -> @tree
        Phash2.int(rock_at, y) < rock -> @rock
        f < fc and Phash2.int(flowers_at, y) < fl -> @flowers
        true -> @meadow
      end

    [code | classify_cells(forest, lakes, columns, y, fc, wc, ft, lt, rock, fl)]
  end

  defp classify_cells([], [], [], _y, _fc, _wc, _ft, _lt, _rock, _fl), do: []

  defp classify_row([f | forest], [l | lakes], x, y, seed, fc, wc, ft, lt, rock, fl) do
    code =
      cond do
        l <= wc -> @water
        f >= fc and roll(seed, :tree, x, y) < ft -> @tree
        f < fc and roll(seed, :tree, x, y) < lt -> @tree
        roll(seed, :rock, x, y) < rock -> @rock
        f < fc and roll(seed, :flowers, x, y) < fl -> @flowers
        true -> @meadow
      end

    [code | classify_row(forest, lakes, x + 1, y, seed, fc, wc, ft, lt, rock, fl)]
  end

  defp classify_row([], [], _x, _y, _seed, _fc, _wc, _ft, _lt, _rock, _fl), do: []

  # A chance as a threshold on a 32-bit hash, so a cell's roll is one integer compare.
  defp chance(p), do: round(min(max(p, 0.0), 1.0) * 0xFFFFFFFF)

  @compile {:inline, roll: 4}
  defp roll(seed, salt, x, y), do: :erlang.phash2({seed, salt, x, y}, 0x100000000)

  ## Thresholds

  # The histogram of each field's values, over every cell of a world up to
  # the whole limit, else over an even sample; and how many cells it counts.
  defp histograms(forest, lakes, width, height) do
    if width * height <= @exact_limit do
      histograms_by_rows(forest, lakes, width, height)
    else
      histograms_by_sample(forest, lakes, width, height)
    end
  end

  defp histograms_by_rows(forest, lakes, width, height) do
    forest_counts = :counters.new(@noise_max + 1, [:write_concurrency])
    lake_counts = :counters.new(@noise_max + 1, [:write_concurrency])
    rows_per_task = max(div(height, System.schedulers_online() * 4), 1)

    0..(height - 1)
    |> Enum.chunk_every(rows_per_task)
    |> Task.async_stream(
      fn [first | _] = rows ->
        last = List.last(rows) + 1
        count(field_rows(forest, 0, first, width, last), forest_counts)
        count(field_rows(lakes, 0, first, width, last), lake_counts)
      end,
      timeout: :infinity
    )
    |> Stream.run()

    {forest_counts, lake_counts, width * height}
  end

  defp histograms_by_sample(forest, lakes, width, height) do
    forest_counts = :counters.new(@noise_max + 1, [])
    lake_counts = :counters.new(@noise_max + 1, [])
    xs = sample_points(width)
    ys = sample_points(height)

    for y <- ys, x <- xs do
      [[f]] = field_rows(forest, x, y, x + 1, y + 1)
      [[l]] = field_rows(lakes, x, y, x + 1, y + 1)
      :counters.add(forest_counts, f + 1, 1)
      :counters.add(lake_counts, l + 1, 1)
    end

    {forest_counts, lake_counts, length(xs) * length(ys)}
  end

  defp sample_points(side) do
    n = min(side, @sample_side)
    for k <- 0..(n - 1), do: div((2 * k + 1) * side, 2 * n)
  end

  defp count(rows, counts) do
    for row <- rows, v <- row, do: :counters.add(counts, v + 1, 1)
    :ok
  end

  # The noise value that cuts off `fraction` of the cells from the low or the high end.
  defp threshold(_counts, _total, fraction, :low) when fraction <= 0, do: -1
  defp threshold(_counts, _total, fraction, :high) when fraction <= 0, do: @noise_max + 1

  defp threshold(counts, total, fraction, side) do
    wanted = fraction * total

    values =
      case side do
        :low -> Enum.to_list(0..@noise_max)
        :high -> Enum.to_list(@noise_max..0)
      end

    Enum.reduce_while(values, 0, fn v, seen ->
      seen = seen + :counters.get(counts, v + 1)
      if seen >= wanted, do: {:halt, {:found, v}}, else: {:cont, seen}
    end)
    |> case do
      {:found, v} -> v
      _all -> if side == :low, do: @noise_max, else: 0
    end
  end

  ## Noise

  # Fractal value noise: for each octave, random values on a lattice `scale`
  # cells apart, smoothly interpolated; octaves are summed with their
  # weights. A lattice value is a hash of the field's salt, the octave's
  # scale and the lattice point, so any rectangle is computed on its own.
  defp octaves(salt, octaves, width, height) do
    for {scale, weight} <- octaves do
      scale = max(1, min(scale, max(width, height)))
      {scale, weight, {salt, scale}, fade_table(scale)}
    end
  end

  # The field's values over a rectangle, as rows of integers in 0..@noise_max.
  #
  # A cell's value in an octave is the lattice's four corners around it,
  # interpolated along x on the lattice row above and on the one below,
  # then between those two along y. The first step depends on the cell's
  # column and its lattice row only, so it is done once for each column
  # and lattice row the rectangle touches (`scale` rows of cells share it),
  # and each row of cells does only the last step: the same operations on
  # the same values as cell by cell, so the same bytes.
  #
  # A cell is classified by its fields' values only against a cut (water
  # at or under the water cut, forest at or over the forest cut). Given
  # one (`{:water, cut}` or `{:forest, cut}`), a row whose values all lie on
  # one side of it is not computed: it is one value on that side, which
  # classifies each cell the same. Its bounds come from the values
  # interpolated along x: a cell's value in an octave lies between the two
  # its column has on the lattice rows above and below it, so the row's
  # sum lies between the sums of the least and the greatest of those
  # over the row's columns. A unit of margin on each side covers the
  # floats' rounding. Most rows of a zone of a large world have no water
  # near, and many no forest.
  defp field_rows(octaves, x0, y0, x1, y1, cut \\ nil) do
    total_weight = Enum.reduce(octaves, 0.0, fn {_, w, _, _}, acc -> acc + w end)

    prepared =
      for {scale, weight, salt, fades} <- octaves do
        i0 = div(x0, scale)
        j0 = div(y0, scale)
        i1 = div(x1 - 1, scale) + 1
        j1 = div(y1 - 1, scale) + 1

        lattice =
          for j <- j0..j1 do
            List.to_tuple(for i <- i0..i1, do: lattice_value(salt, i, j))
          end
          |> List.to_tuple()

        columns = for x <- x0..(x1 - 1), do: {div(x, scale) - i0, elem(fades, rem(x, scale))}

        spans =
          for j <- 0..(j1 - j0 - 1) do
            span(columns, elem(lattice, j), elem(lattice, j + 1))
          end
          |> List.to_tuple()

        bounds =
          if cut, do: spans |> Tuple.to_list() |> Enum.map(&span_bounds/1) |> List.to_tuple()

        {scale, weight, fades, j0, spans, bounds}
      end

    same = if cut, do: %{}

    {rows, _same} =
      Enum.map_reduce(y0..(y1 - 1), same, fn y, same ->
        case cut && on_one_side(prepared, y, total_weight, cut) do
          value when is_integer(value) ->
            row = Map.get_lazy(same, value, fn -> List.duplicate(value, x1 - x0) end)
            {row, Map.put(same, value, row)}

          _computed ->
            octaves =
              for {scale, weight, fades, j0, spans, _bounds} <- prepared,
                  do: {weight, elem(spans, div(y, scale) - j0), elem(fades, rem(y, scale))}

            {field_row(octaves, total_weight), same}
        end
      end)

    rows
  end

  # The value that stands for a whole row on one side of the cut, or nil.
  defp on_one_side(prepared, y, total_weight, cut) do
    {low, high} =
      Enum.reduce(prepared, {0.0, 0.0}, fn {scale, weight, _fades, j0, _spans, bounds},
                                           {low, high} ->
        {least, most} = elem(bounds, div(y, scale) - j0)
        {low + weight * least, high + weight * most}
      end)

    low = floor(low / total_weight * @noise_max) - 1
    high = ceil(high / total_weight * @noise_max) + 1

    case cut do
      {:water, cut} when low > cut -> cut + 1
      {:forest, cut} when high < cut -> cut - 1
      {:forest, cut} when low >= cut -> cut
      _across -> nil
    end
  end

  defp span_bounds([{upper, lower} | span]) when upper > lower,
    do: span_bounds(span, lower, upper)

  defp span_bounds([{upper, lower} | span]), do: span_bounds(span, upper, lower)

  # The least and the greatest by comparisons, where `min/2` and `max/2`
  # are four calls a column (of a zone of 50's thousand columns and
  # lattice rows): the same values.
  defp span_bounds([{upper, lower} | span], least, most) do
    low = if upper > lower, do: lower, else: upper
    high = if upper < lower, do: lower, else: upper
    least = if least > low, do: low, else: least
    most = if most < high, do: high, else: most
    span_bounds(span, least, most)
  end

  defp span_bounds([], least, most), do: {least, most}

  # A row of cells: its octaves summed in order, scaled to 0..@noise_max.
  # The fields' two and three octaves in one pass over the row, any other
  # count an octave at a time: the same sums in the same order.
  defp field_row([{w1, s1, fy1}, {w2, s2, fy2}], tw), do: row2(s1, s2, w1, w2, fy1, fy2, tw)

  defp field_row([{w1, s1, fy1}, {w2, s2, fy2}, {w3, s3, fy3}], tw),
    do: row3(s1, s2, s3, w1, w2, w3, fy1, fy2, fy3, tw)

  defp field_row(octaves, tw) do
    octaves
    |> Enum.reduce(nil, fn {weight, span, fy}, acc -> add_octave(acc, span, weight, fy) end)
    |> scaled(tw)
  end

  # Every value is a float, and the guards say so: the compiler then keeps
  # the sums in the floating-point registers instead of allocating each
  # intermediate result on the heap, with the same operations in the same
  # order, so the same values.
  defp row2([{u1, l1} | s1], [{u2, l2} | s2], w1, w2, fy1, fy2, tw)
       when is_float(u1) and is_float(l1) and is_float(u2) and is_float(l2) and is_float(w1) and
              is_float(w2) and is_float(fy1) and is_float(fy2) and is_float(tw) do
    sum = 0.0 + w1 * (u1 + (l1 - u1) * fy1) + w2 * (u2 + (l2 - u2) * fy2)
    [round(sum / tw * @noise_max) | row2(s1, s2, w1, w2, fy1, fy2, tw)]
  end

  defp row2([], [], _w1, _w2, _fy1, _fy2, _tw), do: []

  defp row3([{u1, l1} | s1], [{u2, l2} | s2], [{u3, l3} | s3], w1, w2, w3, fy1, fy2, fy3, tw)
       when is_float(u1) and is_float(l1) and is_float(u2) and is_float(l2) and is_float(u3) and
              is_float(l3) and is_float(w1) and is_float(w2) and is_float(w3) and is_float(fy1) and
              is_float(fy2) and is_float(fy3) and is_float(tw) do
    sum =
      0.0 + w1 * (u1 + (l1 - u1) * fy1) + w2 * (u2 + (l2 - u2) * fy2) +
        w3 * (u3 + (l3 - u3) * fy3)

    [round(sum / tw * @noise_max) | row3(s1, s2, s3, w1, w2, w3, fy1, fy2, fy3, tw)]
  end

  defp row3([], [], [], _w1, _w2, _w3, _fy1, _fy2, _fy3, _tw), do: []

  # Each column's values interpolated along x on the lattice rows above
  # and below it.
  defp span([{i, fx} | columns], top, bottom) do
    pair = interpolated(elem(top, i), elem(top, i + 1), elem(bottom, i), elem(bottom, i + 1), fx)
    [pair | span(columns, top, bottom)]
  end

  defp span([], _top, _bottom), do: []

  # Floats, as the rows' sums are (`row2/7`); inline in `span/3`.
  @compile {:inline, interpolated: 5}
  defp interpolated(a, b, c, d, fx)
       when is_float(a) and is_float(b) and is_float(c) and is_float(d) and is_float(fx),
       do: {a + (b - a) * fx, c + (d - c) * fx}

  # A row's sums over the octaves so far, with one more octave added.
  defp add_octave(nil, [{upper, lower} | span], weight, fy),
    do: [0.0 + weight * (upper + (lower - upper) * fy) | add_octave(nil, span, weight, fy)]

  defp add_octave(nil, [], _weight, _fy), do: []

  defp add_octave([acc | sums], [{upper, lower} | span], weight, fy),
    do: [acc + weight * (upper + (lower - upper) * fy) | add_octave(sums, span, weight, fy)]

  defp add_octave([], [], _weight, _fy), do: []

  defp scaled([sum | sums], total_weight),
    do: [round(sum / total_weight * @noise_max) | scaled(sums, total_weight)]

  defp scaled([], _total_weight), do: []

  defp lattice_value(salt, i, j), do: (:erlang.phash2({salt, i, j}, 65_536) &&& 0xFFFF) / 65_535

  # Smoothstep weights for each offset inside a lattice cell, so the noise has no creases.
  defp fade_table(scale) do
    for offset <- 0..(scale - 1) do
      t = offset / scale
      t * t * (3 - 2 * t)
    end
    |> List.to_tuple()
  end
end
