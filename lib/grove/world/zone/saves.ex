defmodule Grove.World.Zone.Saves do
  @moduledoc false
  # What a zone on demand keeps in the world's store while it sleeps: the
  # rows of the entities that stay in it (actors standing still; a zone with
  # a player's entity never sleeps), under its number in a scope of the
  # world's shape and seed. The game's layer goes where the game's saver
  # puts it (`Grove.World.Game.save_scope/1`), so that the one save a zone
  # has of it is the newest. A zone that sleeps with its state in the store
  # empties its tables; the one that wakes, finding them empty while its
  # count of entities (`zone_entities`) says it holds some, reads them
  # back. A zone that never ran counts none, and reads nothing.
  #
  # Rows name their owners' processes: a save outlives them only in a
  # world that stops, and a world that starts again reads no save (its
  # zones count no entities), so an entity is never restored without its
  # owner. A zone that is woken reads its save whatever the directory
  # says, then keeps only the rows the directory still gives it, as a
  # restarted zone does with its table.
  #
  # Bacteria: a zone that sleeps keeps its board frozen (`Zone.Bacteria`).
  # With a store, its cells go there beside its entities; its row in the
  # life table keeps its generation and borders (what its neighbours read)
  # with `nil` for its cells, which says they are in the store.

  alias Grove.World
  alias Grove.World.{Entity, Grid, Slots}
  alias Grove.World.Zone.Bacteria
  alias Grove.World.Game.Storage

  # Version 1 held the entities' rows alone.
  @version 2

  @typedoc "What a sleeping zone saves: its entities' rows, and its row of bacteria or nil."
  @type save :: {[Entity.row()], Bacteria.row() | nil}

  @doc "Where a world keeps its sleeping zones' entities in its store."
  @spec scope(World.t()) :: String.t()
  def scope(%World{grid: grid} = world) do
    seed = Keyword.get(world.terrain_options, :seed, 1)
    "zones/#{grid.width}x#{grid.height}/#{grid.zone_size}/#{inspect(seed)}"
  end

  @doc "Writes the rows of a zone's entities, and its bacteria's, as it falls asleep."
  @spec save(World.t(), Grid.zone_index(), [Entity.row()], Bacteria.row() | nil) ::
          :ok | {:error, term()}
  def save(%World{store: store} = world, index, rows, life \\ nil),
    do:
      Storage.save_state(store, scope(world), [{Integer.to_string(index), encode({rows, life})}])

  @doc """
  Drops a zone's save once it is awake again: in a cluster, a zone's save
  is in the store only while it sleeps, so that the node that takes it
  after its own is lost reads what it holds now (`Grove.World.Placer`).
  """
  @spec drop(World.t(), Grid.zone_index()) :: :ok | {:error, term()}
  def drop(%World{store: store} = world, index),
    do: Storage.save_state(store, scope(world), [{Integer.to_string(index), nil}])

  @doc "True when the store holds a save of the zone (a read of the store)."
  @spec saved?(World.t(), Grid.zone_index()) :: boolean()
  def saved?(%World{store: nil}, _index), do: false
  def saved?(world, index), do: match?({:ok, _}, load(world, index))

  @doc """
  The rows a sleeping zone saved, as it wakes: `{:ok, rows}`, or
  `{:error, why}` (no save, a store that cannot answer, a save that
  cannot be read).
  """
  @spec load(World.t(), Grid.zone_index()) :: {:ok, save()} | {:error, term()}
  def load(%World{store: nil}, _index), do: {:error, :not_found}

  def load(%World{store: store} = world, index) do
    with {:ok, binary} <- Storage.fetch_state(store, scope(world), Integer.to_string(index)),
         do: decode(binary)
  end

  @doc """
  The rows of a zone as readers see them: its table's, or, when the table
  is empty because the zone sleeps with its entities in the store, the
  save's (a read of the store: for the rare reader of a sleeping zone).
  """
  @spec rows(World.t(), Grid.zone_index()) :: [Entity.row()]
  def rows(%World{} = world, index) do
    with [] <- Slots.rows(world, index),
         true <- asleep_in_store?(world, index),
         {:ok, {rows, _life}} <- load(world, index) do
      rows
    else
      rows when is_list(rows) -> rows
      _none -> []
    end
  end

  @doc "True when a zone's entities, or its bacteria, are in the store, not in its tables."
  @spec asleep_in_store?(World.t(), Grid.zone_index()) :: boolean()
  def asleep_in_store?(%World{zones_on_demand: true, store: store} = world, index)
      when store != nil do
    (Slots.entities(world, index) > 0 and Slots.size(world, index) == 0) or
      life_in_store?(world, index)
  end

  def asleep_in_store?(_world, _index), do: false

  @doc """
  True when a zone that does not run holds something: its entities' rows
  or its game's layer in its tables, or a save in the store.
  """
  @spec holds?(World.t(), Grid.zone_index()) :: boolean()
  def holds?(%World{} = world, index) do
    game_table = Slots.game_table(world, index)

    Slots.size(world, index) > 0 or
      (game_table != nil and :ets.info(game_table, :size) not in [0, :undefined]) or
      asleep_in_store?(world, index)
  end

  defp life_in_store?(%World{life_table: nil}, _index), do: false

  defp life_in_store?(world, index),
    do: match?([{_, _, nil, _, _}], :ets.lookup(world.life_table, index))

  @doc """
  A zone's row of bacteria as readers see it: its cells from the store
  when the zone sleeps with them there, else the life table's row; nil
  when it has none.
  """
  @spec life_row(World.t(), Grid.zone_index()) :: Bacteria.row() | nil
  def life_row(%World{} = world, index) do
    case :ets.lookup(world.life_table, index) do
      [{_, _, nil, _, _} = frozen] ->
        case load(world, index) do
          {:ok, {_rows, {^index, _, bits, _, _}}} -> put_elem(frozen, 2, bits)
          _none -> nil
        end

      [row] ->
        row

      [] ->
        nil
    end
  end

  @doc false
  @spec encode(save()) :: binary()
  def encode({rows, life}), do: :erlang.term_to_binary({@version, rows, life}, [:compressed])

  @doc false
  @spec decode(binary()) :: {:ok, save()} | {:error, String.t()}
  def decode(binary) do
    case :erlang.binary_to_term(binary, [:safe]) do
      {@version, rows, life} when is_list(rows) -> {:ok, {rows, life}}
      {1, rows} when is_list(rows) -> {:ok, {rows, nil}}
      _other -> {:error, "it is not a sleeping zone's save"}
    end
  rescue
    ArgumentError -> {:error, "it is not a sleeping zone's save"}
  end
end
