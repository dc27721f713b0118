defmodule Grove.World.Entity do
  @moduledoc """
  One thing on the grid, as its zone holds it, and as a game's callbacks
  are given it (`Grove.Game`): a game reads `id`, `x`, `y`, `kind` (0 an
  actor, 1 a player, 2 a bacterium, 3 and up an actor kind's code),
  `label` (a player's name and avatar) and `attrs`, its game attributes
  (`nil` until the game sets them); `look` is what players see of them
  (`Grove.Game.look/1`). The other fields are the world's: the owner is
  the client process the zone answers; `paced_until` is the move-rate
  limiter's state (see Grove.RateLimit), which travels with the entity
  across zones, like its attributes; `monitor` is the owning zone's
  monitor on the owner. A viewer (`updates: :view`) reads what zones
  publish in its `view_format` (see Grove.World.ViewFormat). `label` is a
  player's name and avatar, which viewers are told once, when the entity
  comes into their view of an area (nil for actors and bacteria).

  The row a zone keeps of it in its ETS table is this module's: its
  shape is spelled out nowhere else (`to_row/1`, `from_row/1`,
  `row_cell/1`, `row_label/1`, `within/1`, the positions of the look and
  the attributes).
  """

  @enforce_keys [:id, :owner]
  defstruct [
    :id,
    :owner,
    :monitor,
    x: 0,
    y: 0,
    kind: 0,
    updates: :self,
    view_radius: 8,
    view_format: {Grove.World.View, :raw},
    paced_until: nil,
    label: nil,
    look: 0,
    attrs: nil,
    walk: nil
  ]

  @type id :: non_neg_integer()
  @type updates :: :none | :self | :view

  @type t :: %__MODULE__{
          id: id(),
          owner: pid(),
          monitor: reference() | nil,
          x: non_neg_integer(),
          y: non_neg_integer(),
          kind: 0..255,
          updates: updates(),
          view_radius: non_neg_integer(),
          view_format: Grove.World.Feed.format(),
          paced_until: integer() | nil,
          label: label() | nil,
          look: 0..255,
          attrs: term(),
          walk: walk() | nil
        }

  @typedoc """
  How a resident actor walks (`Grove.Actors`' `:resident`): its kind, the
  kind's state, and the ms between its steps. Its zone steps it on its
  own schedule; `nil` for everyone else, whose moves come from their
  owner.
  """
  @type walk :: {module(), term(), pos_integer()}

  @typedoc "A player's name and avatar (an emoji), as others see them."
  @type label :: {String.t(), String.t()}

  @typedoc """
  How an entity is kept in its zone's ETS table, so a restarted zone can
  rebuild it and anyone can read it without a message: id, cell, owner,
  kind, updates, view radius and format, label, then its game look and
  attributes.
  """
  @type row ::
          {id(), non_neg_integer(), non_neg_integer(), pid(), 0..255, updates(),
           non_neg_integer(), Grove.World.Feed.format(), label() | nil, 0..255, term(),
           walk() | nil}

  @doc false
  @spec to_row(t()) :: row()
  def to_row(%__MODULE__{} = e),
    do:
      {e.id, e.x, e.y, e.owner, e.kind, e.updates, e.view_radius, e.view_format, e.label, e.look,
       e.attrs, e.walk}

  @doc false
  @spec row_cell(row()) :: Grove.World.Grid.cell()
  def row_cell(row), do: {elem(row, 1), elem(row, 2)}

  @doc false
  @spec row_label(row()) :: label() | nil
  def row_label(row), do: elem(row, 8)

  @doc false
  @spec from_row(row()) :: t()
  # A row of an older release, saved before residents walked: no walk.
  def from_row({id, x, y, owner, kind, updates, view_radius, view_format, label, look, attrs}),
    do:
      from_row(
        {id, x, y, owner, kind, updates, view_radius, view_format, label, look, attrs, nil}
      )

  def from_row(
        {id, x, y, owner, kind, updates, view_radius, view_format, label, look, attrs, walk}
      ),
      do: %__MODULE__{
        id: id,
        x: x,
        y: y,
        owner: owner,
        kind: kind,
        updates: updates,
        view_radius: view_radius,
        view_format: view_format,
        label: label,
        look: look,
        attrs: attrs,
        walk: walk
      }

  @doc false
  # The row's places of the look and the attributes, for `:ets.update_element/3`.
  def look_position, do: 10
  def attrs_position, do: 11
  def walk_position, do: 12
end
