defmodule Grove.Actor.Senses do
  @moduledoc """
  What an actor perceives when its turn comes: its own cell, the ground
  around it and, if its kind asks, the entities near it; everything
  within the `radius` its kind declares (see `Grove.Actor`).

  The herd fills it in from what any process reads without a message:
  the terrain (`Grove.World.terrain/1`, in `:persistent_term`), the
  actor's cell and its neighbours (`Grove.World.position/2` and
  `Grove.World.nearby/3`, the zones' ETS tables). It is plain data, so a
  kind's `step/3` stays a pure function of it, and tests build one with
  `new/1`.

  The radius is a bound, not a hint: `ground/2` answers `:unseen` past
  it, and `free?/2` is false there, so a kind cannot come to depend on
  more than it declared (which is what its sensing costs).

  A kind that plays the world's game (`Grove.Game`) may also sense its
  cell layer (`game: true`): `cell/2` gives a cell's value within the
  radius, `free?/2` counts the cells the layer blocks or frees, and
  `attrs` holds the actor's own attributes. Those come from the zones'
  game tables, read like positions.

  ## Examples

      iex> terrain = Grove.World.Terrain.generate(10, 10, tree_density: 0.0, water_density: 0.0, rock_density: 0.0, flower_density: 0.0)
      iex> senses = Grove.Actor.Senses.new(terrain: terrain, at: {0, 5}, radius: 1, entities: [{7, 1, 5, 0}])
      iex> Grove.Actor.Senses.ground(senses, {0, 4})
      :meadow
      iex> Grove.Actor.Senses.ground(senses, {-1, 5})
      :outside
      iex> Grove.Actor.Senses.ground(senses, {3, 5})
      :unseen
      iex> Grove.Actor.Senses.free?(senses, {1, 5})
      false
      iex> Grove.Actor.Senses.free?(senses, {1, 4})
      true
  """

  alias Grove.World.{Entity, Grid, Terrain}

  @enforce_keys [:at, :radius, :terrain]
  defstruct [
    :at,
    :radius,
    :terrain,
    id: nil,
    kind: 0,
    entities: nil,
    cells: nil,
    walk: %{},
    attrs: nil
  ]

  @typedoc "An entity sensed nearby: id, cell and kind code."
  @type entity :: {Entity.id(), non_neg_integer(), non_neg_integer(), byte()}

  @typedoc """
  `entities` is `nil` when the kind does not sense entities, else the
  others within the radius (the actor itself left out).
  """
  @type t :: %__MODULE__{
          id: Entity.id() | nil,
          kind: byte(),
          at: Grid.cell(),
          radius: pos_integer(),
          terrain: Terrain.t(),
          entities: [entity()] | nil,
          cells: %{Grid.cell() => term()} | nil,
          walk: %{Grid.cell() => boolean()},
          attrs: term()
        }

  @doc """
  Builds senses from `:at`, `:radius` and `:terrain` (required), `:id`,
  `:kind` (the actor's own kind code, default `0`), `:entities` (default
  `nil`: not sensed), and for a kind that plays the game `:cells` (the
  layer's values by cell, default `nil`: not sensed), `:walk` (cells the
  layer blocks, `true`, or frees, `false`) and `:attrs` (the actor's own
  attributes). Entities and cells outside the radius and the actor itself
  are dropped, as the herd would.
  """
  @spec new(keyword()) :: t()
  def new(opts) do
    opts =
      Keyword.validate!(opts, [
        :at,
        :radius,
        :terrain,
        id: nil,
        kind: 0,
        entities: nil,
        cells: nil,
        walk: %{},
        attrs: nil
      ])

    {x, y} = at = Keyword.fetch!(opts, :at)
    radius = Keyword.fetch!(opts, :radius)
    id = opts[:id]

    entities =
      case opts[:entities] do
        nil ->
          nil

        list ->
          for {other, ex, ey, _kind} = entity <- list,
              other != id,
              abs(ex - x) <= radius and abs(ey - y) <= radius,
              do: entity
      end

    within = fn {cx, cy} -> abs(cx - x) <= radius and abs(cy - y) <= radius end

    %__MODULE__{
      id: id,
      kind: opts[:kind],
      at: at,
      radius: radius,
      terrain: Keyword.fetch!(opts, :terrain),
      entities: entities,
      cells: opts[:cells] && Map.filter(opts[:cells], fn {cell, _} -> within.(cell) end),
      walk: Map.filter(opts[:walk], fn {cell, _} -> within.(cell) end),
      attrs: opts[:attrs]
    }
  end

  @doc """
  The senses a resident actor's zone read for it (`Grove.World`'s
  `:senses`): a map of every field but the struct's, each already within
  the radius, as the herd reads them.
  """
  @spec from_sight(map()) :: t()
  def from_sight(%{at: _, radius: _, terrain: _} = sight),
    do: Map.put(sight, :__struct__, __MODULE__)

  @doc """
  The game's layer at a cell within the radius: its value, or `nil` for
  none, a cell beyond the radius, or a kind that does not sense the game.
  """
  @spec cell(t(), {integer(), integer()}) :: term()
  def cell(%__MODULE__{cells: nil}, _cell), do: nil
  def cell(%__MODULE__{cells: cells}, cell), do: Map.get(cells, cell)

  @doc """
  The ground at a cell: a terrain kind, `:outside` off the edge of the
  world, or `:unseen` beyond the radius.
  """
  @spec ground(t(), {integer(), integer()}) :: Terrain.kind() | :outside | :unseen
  def ground(%__MODULE__{at: {ax, ay}, radius: radius, terrain: terrain}, {x, y}) do
    cond do
      abs(x - ax) > radius or abs(y - ay) > radius -> :unseen
      x < 0 or y < 0 or x >= terrain.width or y >= terrain.height -> :outside
      true -> Terrain.at(terrain, x, y)
    end
  end

  @doc """
  True when a move there could succeed as far as the actor can tell:
  within the radius, inside the world, on ground that does not block, and
  with no entity sensed on it (entities count only for kinds that sense
  them; the zone still has the last word).
  """
  @spec free?(t(), {integer(), integer()}) :: boolean()
  def free?(%__MODULE__{} = senses, {x, y} = cell) do
    case ground(senses, cell) do
      ground when ground in [:outside, :unseen] ->
        false

      ground ->
        not Map.get(senses.walk, cell, Terrain.blocking?(ground)) and
          not occupied?(senses.entities, x, y)
    end
  end

  defp occupied?(nil, _x, _y), do: false
  defp occupied?([], _x, _y), do: false
  defp occupied?([{_, x, y, _} | _], x, y), do: true
  defp occupied?([_ | rest], x, y), do: occupied?(rest, x, y)
end
