defmodule Grove.World.Entity do
  @moduledoc false
  # One thing on the grid, as its zone holds it. The owner is the client process
  # the zone answers; `kind` is a small integer clients draw (0 actor, 1 player, ...).
  # `paced_until` is the move-rate limiter's state (see Grove.RateLimit), which
  # travels with the entity across zones. `monitor` is the owning zone's
  # monitor on the owner. A viewer (`updates: :view`) reads what zones
  # publish in its `view_format` (see Grove.World.ViewFormat). `label` is a
  # player's name and avatar, which viewers are told once, when the entity
  # comes into their view of an area (nil for actors and bacteria).
  #
  # The row a zone keeps of it in its ETS table is this module's: its
  # shape is spelled out nowhere else (`to_row/1`, `from_row/1`,
  # `row_cell/1`, `row_label/1`, `within/1`).

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
    label: nil
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
          label: label() | nil
        }

  @typedoc "A player's name and avatar (an emoji), as others see them."
  @type label :: {String.t(), String.t()}

  @typedoc "How an entity is kept in its zone's ETS table, so a restarted zone can rebuild it."
  @type row ::
          {id(), non_neg_integer(), non_neg_integer(), pid(), 0..255, updates(),
           non_neg_integer(), Grove.World.Feed.format(), label() | nil}

  @spec to_row(t()) :: row()
  def to_row(%__MODULE__{} = e),
    do: {e.id, e.x, e.y, e.owner, e.kind, e.updates, e.view_radius, e.view_format, e.label}

  @doc "The cell of an entity's row."
  @spec row_cell(row()) :: Grove.World.Grid.cell()
  def row_cell({_id, x, y, _owner, _kind, _updates, _view_radius, _view_format, _label}),
    do: {x, y}

  @doc "The name and avatar of an entity's row (nil when it has none)."
  @spec row_label(row()) :: label() | nil
  def row_label({_id, _x, _y, _owner, _kind, _updates, _view_radius, _view_format, label}),
    do: label

  @doc """
  A match specification for a zone's table: `{id, x, y, kind}` of the rows
  whose cell is within `{x0, y0, x1, y1}` (inclusive).
  """
  @spec within({integer(), integer(), integer(), integer()}) :: :ets.match_spec()
  def within({x0, y0, x1, y1}) do
    [
      {{:"$1", :"$2", :"$3", :_, :"$4", :_, :_, :_, :_},
       [{:>=, :"$2", x0}, {:"=<", :"$2", x1}, {:>=, :"$3", y0}, {:"=<", :"$3", y1}],
       [{{:"$1", :"$2", :"$3", :"$4"}}]}
    ]
  end

  @spec from_row(row()) :: t()
  def from_row({id, x, y, owner, kind, updates, view_radius, view_format, label}),
    do: %__MODULE__{
      id: id,
      x: x,
      y: y,
      owner: owner,
      kind: kind,
      updates: updates,
      view_radius: view_radius,
      view_format: view_format,
      label: label
    }
end
