defmodule Grove.World.Directory do
  @moduledoc false
  # Which zone owns each entity: the routing table every move reads first.
  #
  # Entity ids are dense integers from one counter, so the directory is an
  # array, not a hash table: `:atomics` chunks of 65,536 slots, each holding
  # the owning zone plus one (0 for none). A lookup is one persistent_term
  # read and one atomics read, with no copy and no lock; at 250,000 moves a
  # second an ETS lookup here cost about 8 % of the machine.
  #
  # Chunks are created by the world's keeper, one at a time, when the first
  # id in them is handed out, and published as new persistent_term keys
  # (adding a key is cheap; only changing or erasing one makes the VM scan
  # every process). The owning zone is the only writer of an entity's slot.

  @chunk 65_536

  @doc "The zone that owns an entity, or nil."
  @spec lookup(atom(), non_neg_integer()) :: non_neg_integer() | nil
  def lookup(world, id) do
    case :persistent_term.get({__MODULE__, world, div(id, @chunk)}, nil) do
      nil ->
        nil

      chunk ->
        zone_in(chunk, id)
    end
  end

  # A chunk keeps each of its ids' zone plus one, 0 for none.
  @compile {:inline, zone_in: 2}
  defp zone_in(chunk, id) do
    case :atomics.get(chunk, rem(id, @chunk) + 1) do
      0 -> nil
      zone -> zone - 1
    end
  end

  @typedoc """
  The directory as it stands, for many lookups in a row (`reader/1`): the
  chunks from the first on, read once, where `lookup/2` reads one at each
  lookup.
  """
  @type reader :: {atom(), tuple()}

  @doc """
  A reader of the world's directory for a batch of lookups (`read/2`):
  the chunks that exist now, from the first up to the first missing. An
  id past them (a chunk made since, or of another node's range) is looked
  up as `lookup/2` does, so a reader is never wrong, only slower; it is
  not meant to be kept past the batch.
  """
  @spec reader(atom()) :: reader()
  def reader(world), do: {world, chunks_from(world, 0, [])}

  defp chunks_from(world, n, chunks) do
    case :persistent_term.get({__MODULE__, world, n}, nil) do
      nil -> chunks |> :lists.reverse() |> List.to_tuple()
      chunk -> chunks_from(world, n + 1, [chunk | chunks])
    end
  end

  @doc "The zone that owns an entity, or nil, as `lookup/2` says, through a `reader/1`."
  @spec read(reader(), non_neg_integer()) :: non_neg_integer() | nil
  def read({world, chunks}, id) do
    n = div(id, @chunk)

    if n < tuple_size(chunks) do
      zone_in(elem(chunks, n), id)
    else
      lookup(world, id)
    end
  end

  @doc "Records the zone that now owns an entity (its slot must exist)."
  @spec assign(atom(), non_neg_integer(), non_neg_integer()) :: :ok
  def assign(world, id, zone),
    do: :atomics.put(chunk!(world, id), rem(id, @chunk) + 1, zone + 1)

  @doc """
  Records that an entity has moved on from `from` to `to`, unless the
  directory already names another zone (a later one) for it.
  """
  @spec moved_on(atom(), non_neg_integer(), non_neg_integer(), non_neg_integer()) :: :ok
  def moved_on(world, id, from, to) do
    _ = :atomics.compare_exchange(chunk!(world, id), rem(id, @chunk) + 1, from + 1, to + 1)
    :ok
  end

  @doc "Forgets an entity, unless another zone has taken it since."
  @spec release(atom(), non_neg_integer(), non_neg_integer()) :: :ok
  def release(world, id, zone) do
    _ = :atomics.compare_exchange(chunk!(world, id), rem(id, @chunk) + 1, zone + 1, 0)
    :ok
  end

  @doc "Creates the chunk for an id if it does not exist yet; only the keeper calls this."
  @spec ensure_chunk(atom(), non_neg_integer()) :: :ok
  def ensure_chunk(world, id) do
    key = {__MODULE__, world, div(id, @chunk)}

    if :persistent_term.get(key, nil) == nil,
      do: :persistent_term.put(key, :atomics.new(@chunk, signed: false))

    :ok
  end

  @doc "True when the slot for this id exists, so `assign/3` may be used."
  @spec ready?(atom(), non_neg_integer()) :: boolean()
  def ready?(world, id),
    do: :persistent_term.get({__MODULE__, world, div(id, @chunk)}, nil) != nil

  @doc "Every entity with a zone, as `{id, zone}` (for audits: it reads every chunk)."
  @spec entries(atom()) :: [{non_neg_integer(), non_neg_integer()}]
  def entries(world) do
    for n <- chunks(world),
        chunk = :persistent_term.get({__MODULE__, world, n}),
        slot <- 1..@chunk,
        zone = :atomics.get(chunk, slot),
        zone != 0,
        do: {n * @chunk + slot - 1, zone - 1}
  end

  @doc "Removes every chunk of a world that is stopping."
  @spec erase(atom()) :: :ok
  def erase(world) do
    for n <- chunks(world), do: :persistent_term.erase({__MODULE__, world, n})
    :ok
  end

  # The chunks a world has: ids from one counter on one node fill a few,
  # but a node of a cluster also records entities of other nodes' ranges.
  defp chunks(world) do
    for {{__MODULE__, ^world, n}, _chunk} <- :persistent_term.get(), do: n
  end

  defp chunk!(world, id), do: :persistent_term.get({__MODULE__, world, div(id, @chunk)})
end
