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

  alias Grove.World
  alias Grove.World.{Entity, Grid, Slots}
  alias Grove.World.Game.Storage

  @version 1

  @doc "Where a world keeps its sleeping zones' entities in its store."
  @spec scope(World.t()) :: String.t()
  def scope(%World{grid: grid} = world) do
    seed = Keyword.get(world.terrain_options, :seed, 1)
    "zones/#{grid.width}x#{grid.height}/#{grid.zone_size}/#{inspect(seed)}"
  end

  @doc "Writes the rows of a zone's entities as it falls asleep."
  @spec save(World.t(), Grid.zone_index(), [Entity.row()]) :: :ok | {:error, term()}
  def save(%World{game_store: store} = world, index, rows),
    do: Storage.save_state(store, scope(world), [{Integer.to_string(index), encode(rows)}])

  @doc """
  The rows a sleeping zone saved, as it wakes: `{:ok, rows}`, or
  `{:error, why}` (no save, a store that cannot answer, a save that
  cannot be read).
  """
  @spec load(World.t(), Grid.zone_index()) :: {:ok, [Entity.row()]} | {:error, term()}
  def load(%World{game_store: store} = world, index) do
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
         {:ok, rows} <- load(world, index) do
      rows
    else
      rows when is_list(rows) -> rows
      _none -> []
    end
  end

  @doc "True when a zone's entities are in the store, not in its table."
  @spec asleep_in_store?(World.t(), Grid.zone_index()) :: boolean()
  def asleep_in_store?(%World{zones_on_demand: true, game_store: store} = world, index)
      when store != nil,
      do: Slots.entities(world, index) > 0 and Slots.size(world, index) == 0

  def asleep_in_store?(_world, _index), do: false

  @doc false
  @spec encode([Entity.row()]) :: binary()
  def encode(rows), do: :erlang.term_to_binary({@version, rows}, [:compressed])

  @doc false
  @spec decode(binary()) :: {:ok, [Entity.row()]} | {:error, String.t()}
  def decode(binary) do
    case :erlang.binary_to_term(binary, [:safe]) do
      {@version, rows} when is_list(rows) -> {:ok, rows}
      _other -> {:error, "it is not a sleeping zone's save"}
    end
  rescue
    ArgumentError -> {:error, "it is not a sleeping zone's save"}
  end
end
