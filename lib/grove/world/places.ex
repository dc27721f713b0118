defmodule Grove.World.Places do
  @moduledoc false
  # Which entities stand in each block of cells (the minimap's blocks,
  # `density_block` cells on a side): a bag of `{key, id, zone}`, one
  # object per entity and zone that holds it, in a table of the world's.
  # A block's entities are spread over `@ways` keys by their ids
  # (`key/2`): an insert into a bag, and a delete of one object, walk
  # every object of the key, so a key per block cost a step from one
  # block into another as many reads as the block held entities (25 at
  # 250,000 actors in a 1000 x 1000 world, each a cache miss, and the
  # table's writes about a seventh of both cores); a read of a block looks
  # its keys up in turn.
  # Each zone writes its own entities' objects as they come, go, and cross
  # from one block into another (a step inside a block writes nothing, so
  # most moves cost it nothing); anyone reads it without a message.
  #
  # It is what `Grove.World.nearby/3` reads: the blocks a square touches,
  # then each entity's row in its zone's table for its cell, where a scan
  # of every row of up to four zones' tables was needed before. It says
  # where to look, the zones' tables say what is there: an entity whose
  # row is gone (its zone sleeps with it in the store, or it just left) is
  # not seen, as before.

  import Bitwise

  alias Grove.World
  alias Grove.World.{Grid, Slots}

  # Keys a block's entities are spread over (a power of two).
  @ways 4

  @doc "The table, owned by whoever calls (the world's keeper)."
  @spec new() :: :ets.tid()
  def new,
    do: :ets.new(:grove_places, [:bag, :public, read_concurrency: true, write_concurrency: true])

  @doc "Entity `id`, held by zone `zone`, stands on `cell` now."
  @spec add(World.t(), non_neg_integer(), non_neg_integer(), {integer(), integer()}) :: true
  def add(%World{places: table} = world, zone, id, {x, y}),
    do: :ets.insert(table, {key(block(world, x, y), id), id, zone})

  @doc "Entity `id`, which stood on `cell`, is no longer held by zone `zone`."
  @spec remove(World.t(), non_neg_integer(), non_neg_integer(), {integer(), integer()}) :: true
  def remove(%World{places: table} = world, zone, id, {x, y}),
    do: :ets.delete_object(table, {key(block(world, x, y), id), id, zone})

  @doc "Entity `id` of zone `zone` stepped from one cell to another."
  @spec step(World.t(), non_neg_integer(), non_neg_integer(), {integer(), integer()}, {
          integer(),
          integer()
        }) :: :ok
  def step(%World{} = world, zone, id, {fx, fy} = from, {tx, ty} = to) do
    if block(world, fx, fy) != block(world, tx, ty) do
      remove(world, zone, id, from)
      add(world, zone, id, to)
    end

    :ok
  end

  @doc "Zone `zone` holds nothing on this node any more."
  @spec clear(World.t(), non_neg_integer()) :: true
  def clear(%World{places: table}, zone), do: :ets.match_delete(table, {:_, :_, zone})

  @doc """
  The objects of zone `zone` in the blocks its cells touch, as `{block,
  id}`: where its entities' places are (an audit's check, which reads the
  zone's blocks, not the whole table).
  """
  @spec of_zone(World.t(), non_neg_integer()) :: [{non_neg_integer(), non_neg_integer()}]
  def of_zone(%World{places: table, density_block: side, density_cols: cols} = world, zone) do
    {x0, y0, x1, y1} = Grid.zone_bounds(world.grid, zone)

    for by <- div(y0, side)..div(y1 - 1, side)//1,
        bx <- div(x0, side)..div(x1 - 1, side)//1,
        block = by * cols + bx,
        {_key, id, ^zone} <- lookup(table, block),
        do: {block, id}
  end

  @doc "The block a cell lies in, as `of_zone/2` gives it."
  @spec block(World.t(), integer(), integer()) :: non_neg_integer()
  def block(%World{density_block: side, density_cols: cols}, x, y),
    do: div(y, side) * cols + div(x, side)

  # The key of entity `id` in `block`.
  defp key(block, id), do: block * @ways + (id &&& @ways - 1)

  # A block's objects, key by key.
  defp lookup(table, block), do: lookup(table, block * @ways, @ways, [])

  defp lookup(_table, _key, 0, acc), do: acc

  defp lookup(table, key, left, acc),
    do: lookup(table, key + 1, left - 1, :ets.lookup(table, key) ++ acc)

  @doc """
  The entities within the square `{x0, y0, x1, y1}` (inclusive, inside the
  grid), as `{id, x, y, kind}` read from their zones' tables.
  """
  @spec within(World.t(), {integer(), integer(), integer(), integer()}) :: [
          {non_neg_integer(), integer(), integer(), byte()}
        ]
  def within(%World{places: table, density_block: side, density_cols: cols} = world, square) do
    {x0, y0, x1, y1} = square

    # An entity is taken from the block its row says it stands in: an
    # object left in another block (a zone stopped between writing the row
    # and the index) never shows it twice.
    for by <- div(y0, side)..div(y1, side)//1,
        bx <- div(x0, side)..div(x1, side)//1,
        {_key, id, zone} <- lookup(table, by * cols + bx),
        {^id, x, y, _owner, kind, _, _, _, _, _, _, _} <- Slots.lookup(world, zone, id),
        x >= x0 and x <= x1 and y >= y0 and y <= y1,
        div(x, side) == bx and div(y, side) == by,
        do: {id, x, y, kind}
  end

  @doc """
  Zone `zone` holds `entities` (`{id, cell}`) now and nothing else: what
  it wrote before stopping is replaced (a zone restarted from its table).
  """
  @spec reset(World.t(), non_neg_integer(), [{non_neg_integer(), {integer(), integer()}}]) ::
          :ok
  def reset(%World{places: table} = world, zone, entities) do
    for {block, id} <- of_zone(world, zone),
        do: :ets.delete_object(table, {key(block, id), id, zone})

    for {id, cell} <- entities, do: add(world, zone, id, cell)
    :ok
  end
end
