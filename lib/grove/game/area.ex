defmodule Grove.Game.Area do
  @moduledoc """
  What a game's callbacks read: the zone they run in, as it is between two
  messages. An area is the zone's own state, read through these functions
  without copying anything; callbacks never change it, they answer effects
  (see `Grove.Game`).

  The area covers the zone's cells (`bounds/1`, `inside?/2`). The ground
  (`ground/2`) may be read anywhere in the world; the layer and the
  entities only inside. Entities on their way to another zone, or acting
  there, are not in it (`entity/2` and `entity_at/2` answer `nil`, and
  their cells are not `free?/2`).

  ## Examples

      iex> state = Grove.World.Zone.State.new(0, Grove.World.Grid.new(4, 4, 4),
      ...>   %Grove.World.Terrain{width: 4, height: 4, cells: :binary.copy(<<0>>, 16)},
      ...>   Grove.World.Rules.new())
      iex> Grove.Game.Area.bounds(state)
      {0, 0, 4, 4}
      iex> Grove.Game.Area.ground(state, {1, 1})
      :meadow
      iex> Grove.Game.Area.free?(state, {1, 1})
      true
  """

  alias Grove.Game
  alias Grove.World.{Entity, Grid, Terrain}
  alias Grove.World.Zone.State

  @opaque t :: State.t()

  @doc "The game's configuration, as its `init/1` made it."
  @spec config(t()) :: Game.config()
  def config(%State{game: %{spec: spec}}), do: spec.config
  def config(%State{game: nil}), do: nil

  @doc "The area's cells, as `{x0, y0, x1, y1}` (upper bounds exclusive)."
  @spec bounds(t()) :: {non_neg_integer(), non_neg_integer(), pos_integer(), pos_integer()}
  def bounds(%State{bounds: bounds}), do: bounds

  @doc "True when the cell lies in the area."
  @spec inside?(t(), Grid.cell()) :: boolean()
  def inside?(%State{} = state, {x, y}), do: State.inside?(state, x, y)

  @doc "The ground of any cell of the world (`:meadow`, `:tree`, ...); `:outside` past its edge."
  @spec ground(t(), Grid.cell()) :: Terrain.kind() | :outside
  def ground(%State{grid: grid, terrain: terrain}, {x, y}) do
    if Grid.in_bounds?(grid, x, y), do: Terrain.at(terrain, x, y), else: :outside
  end

  @doc "A cell's layer value (`nil` for none, and outside the area)."
  @spec cell(t(), Grid.cell()) :: Game.value()
  def cell(%State{game: %{layer: layer}, grid: grid} = state, {x, y}) do
    if State.inside?(state, x, y), do: Map.get(layer, Grid.cell_key(grid, x, y)), else: nil
  end

  def cell(%State{game: nil}, _cell), do: nil

  @doc "Every cell of the area whose layer holds a value, as `{{x, y}, value}`."
  @spec cells(t()) :: [{Grid.cell(), Game.value()}]
  def cells(%State{game: %{layer: layer}, grid: grid}),
    do: for({key, value} <- layer, do: {Grid.cell_of_key(grid, key), value})

  def cells(%State{game: nil}), do: []

  @doc """
  The cells of the area whose value a tick may change, as `cells/1`
  gives them: those whose value the game's `ticks?/1` keeps, or, for a
  game without it, every cell whose layer holds a value.
  """
  @spec ticking(t()) :: [{Grid.cell(), Game.value()}]
  def ticking(%State{game: %{spec: %{hooks: %{ticks?: true}}} = game, grid: grid}),
    do:
      for(
        {key, _} <- game.ticking,
        do: {Grid.cell_of_key(grid, key), Map.fetch!(game.layer, key)}
      )

  def ticking(%State{} = state), do: cells(state)

  @doc "An entity of the area by id, or nil."
  @spec entity(t(), Entity.id()) :: Entity.t() | nil
  def entity(%State{} = state, id) do
    case state.entities do
      %{^id => entity} -> if State.away?(state, id), do: nil, else: entity
      _ -> nil
    end
  end

  @doc "The entity standing on a cell of the area, or nil."
  @spec entity_at(t(), Grid.cell()) :: Entity.t() | nil
  def entity_at(%State{} = state, {x, y}) do
    case State.occupant(state, x, y) do
      nil -> nil
      id -> entity(state, id)
    end
  end

  @doc "Every entity of the area."
  @spec entities(t()) :: [Entity.t()]
  def entities(%State{} = state),
    do: for({id, entity} <- state.entities, not State.away?(state, id), do: entity)

  @doc """
  True when an entity could step onto the cell now: in the area, neither
  ground nor layer blocking it, nobody on it.
  """
  @spec free?(t(), Grid.cell()) :: boolean()
  def free?(%State{} = state, {x, y}) do
    State.inside?(state, x, y) and not State.blocked?(state, x, y) and
      State.occupant(state, x, y) == nil and not State.live?(state, x, y)
  end
end
