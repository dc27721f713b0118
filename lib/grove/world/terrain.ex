defmodule Grove.World.Terrain do
  @moduledoc """
  The ground of the world, one kind of ground per cell, generated
  deterministically (same seed and options, same ground, on any node, in
  any order) and immutable afterwards.

  A generator is a module of this behaviour: `c:init/3` turns the world's
  size and the terrain options into its parameters once, and `c:cells/2`
  makes the ground of any rectangle from them, one byte per cell (the codes
  of `kinds/0`), row by row. A rectangle's ground must not depend on which
  others were made before: zones generate their own areas, on whatever
  node runs them, whenever they start. `Grove.World.Terrains.Woodland`,
  meadows, forests, lakes, rocks and flowers, is the default.

  A world of up to `whole_limit/0` cells makes its whole ground at once and
  keeps it in one binary (`cells`), from which zones take their areas,
  `GET /terrain` serves it, and players are placed on its mainland
  (`mainland?/3`). A larger world makes an area's ground when something
  first needs it: each zone makes its own (its cells and a border of one
  cell around them, where its moves step out), and what other readers ask
  for is kept in a bounded cache, an ETS table read without a message.

  ## Options

    * `:generator` - the module that makes the ground (default
      `Grove.World.Terrains.Woodland`)
    * `:whole_limit` - the most cells a world may have for its ground to
      be made whole at start (default `whole_limit/0`)
    * `:seed` - any term, handed to the generator (default `1`)
    * the generator's own options (see its module)

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

  alias Grove.World.Terrains.Woodland

  @typedoc "A rectangle of cells, `{x0, y0}` inclusive to `{x1, y1}` exclusive."
  @type rect :: {non_neg_integer(), non_neg_integer(), pos_integer(), pos_integer()}

  @doc """
  The generator's parameters for a world of this size, from the terrain
  options (`:seed` included, `:generator` left out); raises
  `ArgumentError` on a bad option.
  """
  @callback init(width :: pos_integer(), height :: pos_integer(), opts :: keyword()) :: term()

  @doc "The ground of a rectangle inside the world, one code a cell, row by row."
  @callback cells(params :: term(), rect()) :: binary()

  defmodule Area do
    @moduledoc """
    The ground of a rectangle of the world, as a zone keeps its own:
    `Grove.World.Terrain`'s readers take it as they take a whole terrain,
    for the cells it covers.
    """
    @enforce_keys [:x0, :y0, :x1, :y1, :cells]
    defstruct [:x0, :y0, :x1, :y1, :cells, :mainland]

    @type t :: %__MODULE__{
            x0: non_neg_integer(),
            y0: non_neg_integer(),
            x1: pos_integer(),
            y1: pos_integer(),
            cells: binary(),
            mainland: bitstring() | nil
          }
  end

  @enforce_keys [:width, :height]
  defstruct [
    :width,
    :height,
    :cells,
    :mainland,
    :generator,
    :params,
    :areas,
    :area_size,
    options: []
  ]

  @type t :: %__MODULE__{
          width: pos_integer(),
          height: pos_integer(),
          cells: binary() | nil,
          mainland: bitstring() | nil,
          generator: module() | nil,
          params: term(),
          areas: :ets.tid() | nil,
          area_size: pos_integer() | nil,
          options: keyword()
        }

  @type kind :: :meadow | :tree | :rock | :water | :flowers

  @meadow 0
  @tree 1
  @rock 2
  @water 3
  @flowers 4

  # 2048 x 2048: the largest world whose whole ground is made at start.
  @whole_limit 4_194_304
  # Areas a large world's cache keeps for readers other than their zones.
  @cached_areas 4096

  @doc """
  The most cells a world may have for its whole ground to be made at start
  and kept in one binary (#{@whole_limit}); a larger world makes it area by
  area.
  """
  @spec whole_limit() :: pos_integer()
  def whole_limit, do: @whole_limit

  @doc """
  Generates the whole ground of a `width` x `height` world; see the module
  doc for options.
  """
  @spec generate(pos_integer(), pos_integer(), keyword()) :: t()
  def generate(width, height, opts \\ [])
      when is_integer(width) and width > 0 and is_integer(height) and height > 0 do
    terrain = prepare(width, height, opts)
    rows_per_task = max(div(height, System.schedulers_online() * 4), 1)

    cells =
      0..(height - 1)
      |> Enum.chunk_every(rows_per_task)
      |> Task.async_stream(
        fn [first | _] = rows ->
          terrain.generator.cells(terrain.params, {0, first, width, List.last(rows) + 1})
        end,
        timeout: :infinity
      )
      |> Enum.map(fn {:ok, cells} -> cells end)
      |> IO.iodata_to_binary()

    %{terrain | cells: cells, mainland: mainland(width, height, cells)}
  end

  @doc """
  The ground of a world's grid: whole when it has at most `:whole_limit`
  cells (an option of its own, default `whole_limit/0`; `generate/3`),
  else made area by area, an area being a zone of `zone_size` cells a side
  with a border of one cell (`area_of/3`).
  """
  @spec for_world(pos_integer(), pos_integer(), pos_integer(), keyword()) :: t()
  def for_world(width, height, zone_size, opts) when is_integer(zone_size) and zone_size > 0 do
    {limit, opts} = Keyword.pop(opts, :whole_limit, @whole_limit)

    unless is_integer(limit) and limit >= 0 do
      raise ArgumentError,
            ":whole_limit must be a non-negative integer, got: #{inspect(limit)}"
    end

    terrain =
      if width * height <= limit,
        do: generate(width, height, opts),
        else: %{
          prepare(width, height, opts)
          | areas: :ets.new(:grove_terrain, [:set, :public, read_concurrency: true])
        }

    %{terrain | area_size: zone_size}
  end

  defp prepare(width, height, opts) do
    {generator, opts} = Keyword.pop(opts, :generator, Woodland)
    opts = opts |> Keyword.delete(:whole_limit) |> Keyword.put_new(:seed, 1)

    unless is_atom(generator) and Code.ensure_loaded?(generator) and
             function_exported?(generator, :cells, 2) do
      raise ArgumentError,
            ":generator must be a module of Grove.World.Terrain, got: #{inspect(generator)}"
    end

    %__MODULE__{
      width: width,
      height: height,
      generator: generator,
      params: generator.init(width, height, opts),
      options: opts
    }
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

  @doc "True when the terrain holds its whole ground in one binary (`cells`)."
  @spec whole?(t()) :: boolean()
  def whole?(%__MODULE__{cells: cells}), do: is_binary(cells)

  @doc """
  The terrain as a file other programs can read (`mix grove.export.terrain`):
  a header line `grove-terrain 1 WIDTH HEIGHT SEED`, then the cells as
  `GET /terrain` serves them, one byte per cell, row by row.
  """
  @spec to_file(t()) :: iodata()
  def to_file(%__MODULE__{width: w, height: h, cells: cells, options: opts})
      when is_binary(cells),
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

  ## Areas

  @doc """
  The ground of a rectangle inside the world, made by the generator (or
  cut from the whole ground).
  """
  @spec area(t(), rect()) :: Area.t()
  def area(%__MODULE__{cells: cells, width: w}, {x0, y0, x1, y1}) when is_binary(cells) do
    rows = for y <- y0..(y1 - 1)//1, do: binary_part(cells, y * w + x0, x1 - x0)
    %Area{x0: x0, y0: y0, x1: x1, y1: y1, cells: IO.iodata_to_binary(rows)}
  end

  def area(%__MODULE__{generator: generator, params: params}, {x0, y0, x1, y1} = rect) do
    %Area{x0: x0, y0: y0, x1: x1, y1: y1, cells: generator.cells(params, rect)}
  end

  @doc """
  The ground of a rectangle inside an area (or a whole terrain), as an
  area of its own: what a zone shows of its ground, without its border.
  """
  @spec crop(t() | Area.t(), rect()) :: Area.t()
  def crop(%__MODULE__{} = terrain, rect), do: area(terrain, rect)

  def crop(%Area{} = area, {x0, y0, x1, y1}) do
    width = area.x1 - area.x0

    rows =
      for y <- y0..(y1 - 1)//1,
          do: binary_part(area.cells, (y - area.y0) * width + x0 - area.x0, x1 - x0)

    %Area{x0: x0, y0: y0, x1: x1, y1: y1, cells: IO.iodata_to_binary(rows)}
  end

  @doc """
  The area of a world's grid that holds a cell: its zone's cells (zones of
  `area_size`, see `for_world/4`) and a border of one cell around them,
  inside the world. In a large world it is taken from the cache, or made
  and kept there.
  """
  @spec area_of(t(), non_neg_integer(), non_neg_integer()) :: Area.t()
  def area_of(%__MODULE__{areas: nil} = terrain, x, y),
    do: area(terrain, area_rect(terrain, x, y))

  def area_of(%__MODULE__{areas: areas, area_size: size} = terrain, x, y) do
    key = {div(x, size), div(y, size)}

    case :ets.lookup(areas, key) do
      [{_key, area}] ->
        area

      [] ->
        area = made(terrain, area_rect(terrain, x, y))
        if :ets.info(areas, :size) >= @cached_areas, do: shrink(areas)
        :ets.insert(areas, {key, area})
        area
    end
  end

  @doc """
  Forgets the cached area that holds a cell (its zone stopped); made again
  when next asked for. Nothing to do for a whole terrain.
  """
  @spec forget_area(t(), non_neg_integer(), non_neg_integer()) :: :ok
  def forget_area(%__MODULE__{areas: nil}, _x, _y), do: :ok

  def forget_area(%__MODULE__{areas: areas, area_size: size}, x, y) do
    :ets.delete(areas, {div(x, size), div(y, size)})
    :ok
  end

  # An area made from the seed leaves some 24 words of garbage per cell
  # (the noise's floats and rows; about 400 KB for a zone of 50 with its
  # border) for a binary of a byte per cell. Made on the caller's heap, a
  # zone's small one, that is a dozen collections while it is made, and
  # the garbage kept until the next. So it is made in a process of its
  # own, at the caller's priority, whose heap is sized for it from the
  # start: no collection while it runs, its garbage gone with it, and the
  # binary, off-heap, handed over without a copy. A generator that raises
  # raises in the caller.
  @garbage_words_per_cell 24
  @most_making_heap 1_048_576

  defp made(terrain, {x0, y0, x1, y1} = rect) do
    caller = self()
    {:priority, priority} = Process.info(caller, :priority)
    heap = min(max((x1 - x0) * (y1 - y0), 0) * @garbage_words_per_cell, @most_making_heap)

    {pid, ref} =
      :erlang.spawn_opt(
        fn ->
          result =
            try do
              {:ok, area(terrain, rect)}
            catch
              kind, reason -> {:raised, kind, reason, __STACKTRACE__}
            end

          send(caller, {self(), result})
        end,
        [:monitor, priority: priority, min_heap_size: heap]
      )

    receive do
      {^pid, {:ok, area}} ->
        Process.demonitor(ref, [:flush])
        area

      {^pid, {:raised, kind, reason, stacktrace}} ->
        Process.demonitor(ref, [:flush])
        :erlang.raise(kind, reason, stacktrace)

      {:DOWN, ^ref, :process, ^pid, reason} ->
        exit(reason)
    end
  end

  defp area_rect(%__MODULE__{width: w, height: h, area_size: size}, x, y) do
    x0 = div(x, size) * size
    y0 = div(y, size) * size
    {max(x0 - 1, 0), max(y0 - 1, 0), min(x0 + size + 1, w), min(y0 + size + 1, h)}
  end

  # A quarter of the cache goes, in the table's own order: a zone holds its
  # area in its state, so what goes is only made again when read again.
  defp shrink(areas) do
    keys = :ets.select(areas, [{{:"$1", :_}, [], [:"$1"]}], div(@cached_areas, 4))

    case keys do
      {keys, _continuation} -> Enum.each(keys, &:ets.delete(areas, &1))
      :"$end_of_table" -> :ok
    end
  end

  ## Reading

  @doc "The kind of ground at a cell; the cell must lie inside the terrain."
  @spec at(t() | Area.t(), non_neg_integer(), non_neg_integer()) :: kind()
  def at(terrain, x, y), do: decode(code(terrain, x, y))

  @doc "True when the ground at a cell stops movement; the cell must lie inside the terrain."
  @spec blocked?(t() | Area.t(), non_neg_integer(), non_neg_integer()) :: boolean()
  def blocked?(terrain, x, y), do: blocking_code?(code(terrain, x, y))

  @doc "True when the terrain (a whole world, or an area) holds the cell's ground."
  @spec covers?(t() | Area.t(), integer(), integer()) :: boolean()
  def covers?(%Area{x0: x0, y0: y0, x1: x1, y1: y1}, x, y),
    do: x >= x0 and x < x1 and y >= y0 and y < y1

  def covers?(%__MODULE__{width: w, height: h}, x, y), do: x >= 0 and y >= 0 and x < w and y < h

  @doc "The cell's code (see `kinds/0`); the cell must lie inside the terrain."
  @spec code(t() | Area.t(), non_neg_integer(), non_neg_integer()) :: byte()
  def code(%__MODULE__{width: w, cells: cells}, x, y) when is_binary(cells),
    do: :binary.at(cells, y * w + x)

  def code(%Area{x0: x0, y0: y0, x1: x1, cells: cells}, x, y),
    do: :binary.at(cells, (y - y0) * (x1 - x0) + x - x0)

  def code(%__MODULE__{} = terrain, x, y), do: code(area_of(terrain, x, y), x, y)

  @doc """
  True when the cell is on the mainland: the largest region of free ground
  in which every cell can be reached from every other by steps north, east,
  south and west (the arrow keys). A player placed off it stands on an
  island between trees, rocks and water and can never meet most of the
  world, so players are placed at random only on the mainland: on the
  default world the other regions hold about 4.3 % of the free cells, the
  largest of them 281 cells.

  A world too large to be made whole has no mainland of its own: there, a
  cell is on the mainland when it is in the largest region of free ground
  of its area (`area_of/3`), which leaves out the islands and pockets an
  area holds.
  """
  @spec mainland?(t() | Area.t(), non_neg_integer(), non_neg_integer()) :: boolean()
  def mainland?(%__MODULE__{width: w, mainland: mainland}, x, y) when is_bitstring(mainland),
    do: bit(mainland, y * w + x)

  def mainland?(%Area{mainland: mainland} = area, x, y) when is_bitstring(mainland),
    do: bit(mainland, (y - area.y0) * (area.x1 - area.x0) + x - area.x0)

  def mainland?(%Area{} = area, x, y),
    do: mainland?(with_mainland(area), x, y)

  def mainland?(%__MODULE__{areas: areas, area_size: size} = terrain, x, y) do
    case area_of(terrain, x, y) do
      %Area{mainland: nil} = area ->
        area = with_mainland(area)
        :ets.insert(areas, {{div(x, size), div(y, size)}, area})
        mainland?(area, x, y)

      area ->
        mainland?(area, x, y)
    end
  end

  defp with_mainland(%Area{x0: x0, y0: y0, x1: x1, y1: y1, cells: cells} = area),
    do: %{area | mainland: mainland(x1 - x0, y1 - y0, cells)}

  defp bit(bits, skip) do
    <<_::size(skip), bit::1, _::bitstring>> = bits
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

  @doc "How many cells of each kind a whole terrain holds."
  @spec census(t()) :: %{kind() => non_neg_integer()}
  def census(%__MODULE__{cells: cells}) when is_binary(cells) do
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
  def rows(%__MODULE__{width: w, cells: cells}, x0, y0, x1, y1) when is_binary(cells) do
    for y <- y0..(y1 - 1)//1, do: binary_part(cells, y * w + x0, x1 - x0)
  end

  def rows(%__MODULE__{} = terrain, x0, y0, x1, y1) when x1 > x0 and y1 > y0 do
    %Area{cells: cells} = area(terrain, {x0, y0, x1, y1})
    for y <- 0..(y1 - y0 - 1), do: binary_part(cells, y * (x1 - x0), x1 - x0)
  end

  def rows(%__MODULE__{}, _x0, _y0, _x1, _y1), do: []

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
end
