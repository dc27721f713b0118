defmodule Grove.World.Terrain do
  @moduledoc """
  The ground of the world: meadows, forests with clearings, lakes, rocks and
  flowers, generated deterministically from a seed (same seed and options, same
  world) and immutable afterwards.

  The cells are one binary, one byte per cell, row by row. The world keeps it in
  `:persistent_term`, so any process reads a cell with `at/3` without sending a
  message and without copying the binary.

  Generation layers two fields of smooth value noise: one places lakes in its
  lowest valleys, the other grows forests on its highest ridges, and a cell in
  a forest holds a tree with a fixed chance, which leaves clearings and paths
  between them. Thresholds come from the fields' own histograms, so the
  densities you ask for are the densities you get, whatever the seed.

  ## Options

    * `:seed` - any term; the same seed gives the same world (default `1`)
    * `:tree_density` - fraction of all cells that hold a tree (default `0.12`)
    * `:water_density` - fraction of all cells under water (default `0.03`)
    * `:rock_density` - fraction of all cells that hold a rock (default `0.004`)
    * `:flower_density` - fraction of meadow cells with flowers, which do not
      block (default `0.03`)

  Trees, rocks and water block movement; meadows and flowers do not.

  ## Examples

      iex> terrain = Grove.World.Terrain.generate(40, 30, seed: 7)
      iex> {terrain.width, terrain.height, byte_size(terrain.cells)}
      {40, 30, 1200}
      iex> terrain == Grove.World.Terrain.generate(40, 30, seed: 7)
      true
      iex> Grove.World.Terrain.blocking?(:tree)
      true
  """

  import Bitwise

  @enforce_keys [:width, :height, :cells]
  defstruct [:width, :height, :cells, :mainland, options: []]

  @type t :: %__MODULE__{
          width: pos_integer(),
          height: pos_integer(),
          cells: binary(),
          mainland: bitstring() | nil,
          options: keyword()
        }

  @type kind :: :meadow | :tree | :rock | :water | :flowers

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

  @defaults [
    seed: 1,
    tree_density: 0.12,
    water_density: 0.03,
    rock_density: 0.004,
    flower_density: 0.03
  ]

  @doc "Generates a `width` x `height` terrain; see the module doc for options."
  @spec generate(pos_integer(), pos_integer(), keyword()) :: t()
  def generate(width, height, opts \\ [])
      when is_integer(width) and width > 0 and is_integer(height) and height > 0 do
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
    forest = noise_field(width, height, {seed, :forest}, [{48, 0.6}, {16, 0.3}, {6, 0.1}])
    lakes = noise_field(width, height, {seed, :lakes}, [{96, 0.7}, {32, 0.3}])

    total = width * height
    water_cut = threshold(lakes, opts[:water_density], :low)

    forest_trees = opts[:tree_density] * (1 - @lone_tree_share)
    forest_cover = min(forest_trees / @forest_fill / max(1 - opts[:water_density], 0.01), 1.0)
    forest_cut = threshold(forest, forest_cover, :high)

    land = max(total - round(opts[:water_density] * total), 1)
    forest_cells = forest_cover * land

    lone_tree_chance =
      opts[:tree_density] * @lone_tree_share * total / max(land - forest_cells, 1)

    chances = %{
      forest_tree: chance(@forest_fill),
      lone_tree: chance(lone_tree_chance),
      rock: chance(opts[:rock_density]),
      flowers: chance(opts[:flower_density])
    }

    cells =
      classify(forest, lakes, forest_cut, water_cut, chances, width, seed)
      |> IO.iodata_to_binary()

    new(width, height, cells, opts)
  end

  @doc """
  A terrain from its cells, one byte per cell, row by row (the codes of
  `kinds/0`), as `generate/3` and `from_file/1` build it.
  """
  @spec new(pos_integer(), pos_integer(), binary(), keyword()) :: t()
  def new(width, height, cells, options \\ [])
      when is_integer(width) and width > 0 and is_integer(height) and height > 0 and
             byte_size(cells) == width * height do
    %__MODULE__{
      width: width,
      height: height,
      cells: cells,
      mainland: mainland(width, height, cells),
      options: options
    }
  end

  @doc """
  The terrain as a file other programs can read (`mix grove.export.terrain`):
  a header line `grove-terrain 1 WIDTH HEIGHT SEED`, then the cells as
  `GET /terrain` serves them, one byte per cell, row by row.
  """
  @spec to_file(t()) :: iodata()
  def to_file(%__MODULE__{width: w, height: h, cells: cells, options: opts}),
    do: ["grove-terrain 1 #{w} #{h} #{inspect(opts[:seed] || 1)}\n", cells]

  @doc "Reads what `to_file/1` wrote; the options keep only the seed, as written."
  @spec from_file(binary()) :: {:ok, t()} | {:error, String.t()}
  def from_file(data) when is_binary(data) do
    with [header, cells] <- :binary.split(data, "\n"),
         ["grove-terrain", "1", w, h, seed] <- String.split(header, " ", parts: 5),
         {w, ""} when w > 0 <- Integer.parse(w),
         {h, ""} when h > 0 <- Integer.parse(h),
         true <- byte_size(cells) == w * h do
      {:ok, new(w, h, cells, seed: seed)}
    else
      _ -> {:error, "not a Grove terrain file (version 1)"}
    end
  end

  @doc "The kind of ground at a cell; the cell must lie inside the terrain."
  @spec at(t(), non_neg_integer(), non_neg_integer()) :: kind()
  def at(%__MODULE__{width: w, cells: cells}, x, y), do: decode(:binary.at(cells, y * w + x))

  @doc "True when the ground at a cell stops movement; the cell must lie inside the terrain."
  @spec blocked?(t(), non_neg_integer(), non_neg_integer()) :: boolean()
  def blocked?(%__MODULE__{width: w, cells: cells}, x, y),
    do: blocking_code?(:binary.at(cells, y * w + x))

  @doc """
  True when the cell is on the mainland: the largest region of free ground
  in which every cell can be reached from every other by steps north, east,
  south and west (the arrow keys). A player placed off it stands on an
  island between trees, rocks and water and can never meet most of the
  world, so players are placed at random only on the mainland: on the
  default world the other regions hold about 4.3 % of the free cells, the
  largest of them 281 cells.
  """
  @spec mainland?(t(), non_neg_integer(), non_neg_integer()) :: boolean()
  def mainland?(%__MODULE__{width: w, mainland: mainland}, x, y) when is_bitstring(mainland) do
    skip = y * w + x
    <<_::size(skip), bit::1, _::bitstring>> = mainland
    bit == 1
  end

  # The mainland as one bit per cell, row by row. Free cells are taken in
  # runs along each row, each run joined (union-find over the runs) to the
  # runs it touches in the row above; the largest set of joined runs is the
  # mainland. About 0.15 s for the default 1000 x 1000 terrain.
  defp mainland(width, height, cells) do
    rows =
      for y <- 0..(height - 1) do
        row_runs(binary_part(cells, y * width, width), 0, y * width, nil, [])
      end

    parents = :atomics.new(max(width * height, 1), signed: false)
    for row <- rows, {_, _, id} <- row, do: :atomics.put(parents, id, id)

    Enum.reduce(rows, [], fn row, above ->
      join_rows(above, row, parents)
      row
    end)

    sizes =
      for row <- rows, {x0, x1, id} <- row, reduce: %{} do
        acc -> Map.update(acc, root(parents, id), x1 - x0, &(&1 + x1 - x0))
      end

    best = if sizes == %{}, do: nil, else: elem(Enum.max_by(sizes, &elem(&1, 1)), 0)

    rows
    |> Enum.map(fn row ->
      {bits, last} =
        Enum.reduce(row, {[], 0}, fn {x0, x1, id}, {bits, at} ->
          if root(parents, id) == best,
            do: {[<<-1::size(x1 - x0)>>, <<0::size(x0 - at)>> | bits], x1},
            else: {bits, at}
        end)

      Enum.reverse([<<0::size(width - last)>> | bits])
    end)
    |> :erlang.list_to_bitstring()
  end

  # The runs of free cells of one row as `{x0, x1, id}` (x1 exclusive), in
  # order; a run's id is its first cell's index in the terrain, plus one.
  defp row_runs(<<>>, x, base, start, acc), do: Enum.reverse(close_run(acc, start, x, base))

  defp row_runs(<<code, rest::binary>>, x, base, start, acc) do
    case {blocking_code?(code), start} do
      {false, nil} -> row_runs(rest, x + 1, base, x, acc)
      {false, _} -> row_runs(rest, x + 1, base, start, acc)
      {true, nil} -> row_runs(rest, x + 1, base, nil, acc)
      {true, _} -> row_runs(rest, x + 1, base, nil, close_run(acc, start, x, base))
    end
  end

  defp close_run(acc, nil, _x, _base), do: acc
  defp close_run(acc, start, x, base), do: [{start, x, base + start + 1} | acc]

  # Joins the runs of two neighbouring rows that share a column.
  defp join_rows([{a0, a1, a} | above] = above_all, [{b0, b1, b} | below] = below_all, parents) do
    if a0 < b1 and b0 < a1, do: union(parents, a, b)

    if a1 < b1,
      do: join_rows(above, below_all, parents),
      else: join_rows(above_all, below, parents)
  end

  defp join_rows(_above, _below, _parents), do: :ok

  defp union(parents, a, b) do
    {ra, rb} = {root(parents, a), root(parents, b)}
    if ra != rb, do: :atomics.put(parents, max(ra, rb), min(ra, rb))
  end

  defp root(parents, id) do
    case :atomics.get(parents, id) do
      ^id ->
        id

      parent ->
        grandparent = :atomics.get(parents, parent)
        :atomics.put(parents, id, grandparent)
        root(parents, grandparent)
    end
  end

  @doc "True for the kinds of ground that stop movement."
  @spec blocking?(kind()) :: boolean()
  def blocking?(kind) when kind in [:tree, :rock, :water], do: true
  def blocking?(kind) when kind in [:meadow, :flowers], do: false

  @doc "Every kind of ground with its one-byte code, as stored in `cells` and sent to clients."
  @spec kinds() :: [{kind(), byte()}]
  def kinds,
    do: [meadow: @meadow, tree: @tree, rock: @rock, water: @water, flowers: @flowers]

  @doc "How many cells of each kind the terrain holds."
  @spec census(t()) :: %{kind() => non_neg_integer()}
  def census(%__MODULE__{cells: cells}) do
    counts =
      for <<code <- cells>>, reduce: %{} do
        acc -> Map.update(acc, code, 1, &(&1 + 1))
      end

    Map.new(kinds(), fn {kind, code} -> {kind, Map.get(counts, code, 0)} end)
  end

  @doc "A rectangle of the terrain, `{x0, y0}` inclusive to `{x1, y1}` exclusive, as rows of codes."
  @spec rows(t(), non_neg_integer(), non_neg_integer(), pos_integer(), pos_integer()) :: [
          binary()
        ]
  def rows(%__MODULE__{width: w, cells: cells}, x0, y0, x1, y1) do
    for y <- y0..(y1 - 1)//1, do: binary_part(cells, y * w + x0, x1 - x0)
  end

  @doc "How many cells of a rectangle, `{x0, y0}` inclusive to `{x1, y1}` exclusive, do not block."
  @spec walkable_count(t(), non_neg_integer(), non_neg_integer(), pos_integer(), pos_integer()) ::
          non_neg_integer()
  def walkable_count(%__MODULE__{} = terrain, x0, y0, x1, y1) do
    for row <- rows(terrain, x0, y0, x1, y1),
        <<code <- row>>,
        not blocking_code?(code),
        reduce: 0 do
      count -> count + 1
    end
  end

  defp blocking_code?(code), do: code == @tree or code == @rock or code == @water

  defp decode(@meadow), do: :meadow
  defp decode(@tree), do: :tree
  defp decode(@rock), do: :rock
  defp decode(@water), do: :water
  defp decode(@flowers), do: :flowers

  # A chance as a threshold on a 32-bit hash, so a cell's roll is one integer compare.
  defp chance(p), do: round(min(max(p, 0.0), 1.0) * 0xFFFFFFFF)

  defp roll(seed, salt, x, y), do: :erlang.phash2({seed, salt, x, y}, 0x100000000)

  defp classify(forest, lakes, forest_cut, water_cut, chances, width, seed) do
    classify_cells(forest, lakes, forest_cut, water_cut, chances, width, seed, 0, 0, [])
  end

  defp classify_cells(
         <<f::16, forest::binary>>,
         <<l::16, lakes::binary>>,
         fc,
         wc,
         ch,
         w,
         seed,
         x,
         y,
         acc
       ) do
    code =
      cond do
        l <= wc -> @water
        f >= fc and roll(seed, :tree, x, y) < ch.forest_tree -> @tree
        f < fc and roll(seed, :tree, x, y) < ch.lone_tree -> @tree
        roll(seed, :rock, x, y) < ch.rock -> @rock
        f < fc and roll(seed, :flowers, x, y) < ch.flowers -> @flowers
        true -> @meadow
      end

    {x, y} = if x + 1 == w, do: {0, y + 1}, else: {x + 1, y}
    classify_cells(forest, lakes, fc, wc, ch, w, seed, x, y, [acc | <<code>>])
  end

  defp classify_cells(<<>>, <<>>, _fc, _wc, _ch, _w, _seed, _x, _y, acc), do: acc

  # The noise value that cuts off `fraction` of the cells from the low or the high end.
  defp threshold(_field, fraction, :low) when fraction <= 0, do: -1
  defp threshold(_field, fraction, :high) when fraction <= 0, do: @noise_max + 1

  defp threshold(field, fraction, side) do
    histogram = for <<v::16 <- field>>, reduce: %{}, do: (acc -> Map.update(acc, v, 1, &(&1 + 1)))
    wanted = fraction * div(byte_size(field), 2)

    values =
      case side do
        :low -> Enum.to_list(0..@noise_max)
        :high -> Enum.to_list(@noise_max..0)
      end

    Enum.reduce_while(values, 0, fn v, seen ->
      seen = seen + Map.get(histogram, v, 0)
      if seen >= wanted, do: {:halt, {:found, v}}, else: {:cont, seen}
    end)
    |> case do
      {:found, v} -> v
      _all -> if side == :low, do: @noise_max, else: 0
    end
  end

  # Fractal value noise: for each octave, random values on a lattice `scale`
  # cells apart, smoothly interpolated; octaves are summed with their weights.
  # Returns a binary of 16-bit values in 0..@noise_max, one per cell.
  defp noise_field(width, height, salt, octaves) do
    octaves =
      for {scale, weight} <- octaves do
        scale = max(1, min(scale, max(width, height)))
        {scale, weight, lattice(width, height, scale, {salt, scale}), fade_table(scale)}
      end

    total_weight = Enum.reduce(octaves, 0.0, fn {_, w, _, _}, acc -> acc + w end)

    rows_per_task = max(div(height, System.schedulers_online() * 4), 1)

    0..(height - 1)
    |> Enum.chunk_every(rows_per_task)
    |> Task.async_stream(
      fn rows -> for y <- rows, do: noise_row(y, width, octaves, total_weight) end,
      ordered: true,
      timeout: :infinity
    )
    |> Enum.map(fn {:ok, rows} -> rows end)
    |> IO.iodata_to_binary()
  end

  defp noise_row(y, width, octaves, total_weight) do
    rows =
      for {scale, weight, lattice, fades} <- octaves do
        j = div(y, scale)
        fy = elem(fades, rem(y, scale))
        {scale, weight, elem(lattice, j), elem(lattice, j + 1), fy, fades}
      end

    for x <- 0..(width - 1), into: <<>> do
      v =
        Enum.reduce(rows, 0.0, fn {scale, weight, top, bottom, fy, fades}, acc ->
          i = div(x, scale)
          fx = elem(fades, rem(x, scale))
          a = elem(top, i)
          b = elem(top, i + 1)
          c = elem(bottom, i)
          d = elem(bottom, i + 1)
          upper = a + (b - a) * fx
          lower = c + (d - c) * fx
          acc + weight * (upper + (lower - upper) * fy)
        end)

      <<round(v / total_weight * @noise_max)::16>>
    end
  end

  defp lattice(width, height, scale, salt) do
    columns = div(width, scale) + 2
    rows = div(height, scale) + 2

    for j <- 0..(rows - 1) do
      for(i <- 0..(columns - 1), do: lattice_value(salt, i, j)) |> List.to_tuple()
    end
    |> List.to_tuple()
  end

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
