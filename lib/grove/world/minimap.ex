defmodule Grove.World.Minimap do
  @moduledoc false
  # The picture of the whole world a minimap draws: how crowded each block
  # is, read from the `:atomics` the zones keep up to date as entities come,
  # go and move (`Grove.World.Counts.density/3`). No message is sent.
  # A world too large to picture whole is told as its populated places
  # instead: its busiest zones, by the entities each counts (`places/3`).

  alias Grove.World

  @doc "Counts `by` more entities (or fewer) on the block of a cell."
  @spec add(World.t(), {non_neg_integer(), non_neg_integer()}, integer()) :: :ok
  def add(%World{} = world, {x, y}, by) do
    block = world.density_block
    :atomics.add(world.density, div(y, block) * world.density_cols + div(x, block) + 1, by)
  end

  @doc """
  `cols` x `rows` bytes, row by row, each the share of its block's cells
  that hold an entity, from 0 to 255; with `max_side`, neighbouring blocks
  are merged so that neither side exceeds it.
  """
  @spec density(World.t(), pos_integer() | nil, :entities | :bacteria) ::
          %{cols: pos_integer(), rows: pos_integer(), cells: binary()}
  def density(%World{} = world, max_side, layer \\ :entities),
    do: world |> sums(max_side, layer) |> cells()

  @doc """
  What `density/3` draws before it scales: the count of each merged block,
  row by row, with the cells a block holds. The sums of several nodes'
  zones add up (`merge/2`) to the world's.
  """
  @spec sums(World.t() | World.name(), pos_integer() | nil, :entities | :bacteria) :: sums()
  def sums(world, max_side, layer) do
    world = World.fetch!(world)
    %World{density_cols: cols, density_rows: rows, density_block: block} = world

    counts =
      case layer do
        :entities -> world.density
        :bacteria -> world.life_density || :atomics.new(cols * rows, signed: true)
      end

    # Neighbouring blocks are summed in groups of `group` x `group` when the
    # grid is wider or taller than `max_side`.
    group = if max_side, do: max(div(max(cols, rows) + max_side - 1, max_side), 1), else: 1
    out_cols = div(cols + group - 1, group)
    out_rows = div(rows + group - 1, group)

    counts =
      for out_row <- 0..(out_rows - 1), out_col <- 0..(out_cols - 1) do
        for row <- (out_row * group)..min(out_row * group + group - 1, rows - 1),
            col <- (out_col * group)..min(out_col * group + group - 1, cols - 1),
            reduce: 0 do
          acc -> acc + :atomics.get(counts, row * cols + col + 1)
        end
      end

    %{cols: out_cols, rows: out_rows, capacity: block * block * group * group, counts: counts}
  end

  @typedoc "Counts of merged blocks, row by row; see `sums/3`."
  @type sums :: %{
          cols: pos_integer(),
          rows: pos_integer(),
          capacity: pos_integer(),
          counts: [integer()]
        }

  @doc "The sums of two parts of one world, read alike."
  @spec merge(sums(), sums()) :: sums()
  def merge(%{counts: a} = sums, %{counts: b}),
    do: %{sums | counts: Enum.zip_with(a, b, &(&1 + &2))}

  @doc "The bytes a minimap draws, from the sums."
  @spec cells(sums()) :: %{cols: pos_integer(), rows: pos_integer(), cells: binary()}
  def cells(%{cols: cols, rows: rows, capacity: capacity, counts: counts}) do
    cells =
      for count <- counts, into: <<>> do
        <<min(max(div(count * 255 + capacity - 1, capacity), 0), 255)>>
      end

    %{cols: cols, rows: rows, cells: cells}
  end

  @typedoc "A populated place: a zone's column and row, and the entities it holds."
  @type place :: {non_neg_integer(), non_neg_integer(), pos_integer()}

  @doc """
  The `limit` busiest zones of `counts` (`{zone index, entities}`, in any
  order, from any number of nodes), busiest first, as `{column, row,
  entities}` in a grid `zones_x` zones wide; zones without entities are
  left out, and a zone counted twice (while a node hands it to another)
  keeps its larger count.
  """
  @spec places(Enumerable.t(), pos_integer(), non_neg_integer()) :: [place()]
  def places(counts, zones_x, limit) do
    counts
    |> Enum.filter(fn {_index, count} -> count > 0 end)
    |> Enum.sort_by(fn {index, count} -> {-count, index} end)
    |> Enum.uniq_by(fn {index, _count} -> index end)
    |> Enum.take(limit)
    |> Enum.map(fn {index, count} -> {rem(index, zones_x), div(index, zones_x), count} end)
  end
end
