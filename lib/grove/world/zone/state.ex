defmodule Grove.World.Zone.State do
  @moduledoc false
  # The pure core of a zone: the entities inside one square of the grid, the
  # cells they occupy, and the rules they move by. No processes, no ETS, no
  # clock: the zone process feeds it messages and the time, and carries out
  # what it answers (replies, ETS writes, handoff messages).
  #
  # A move that leaves the zone becomes a handoff. The entity stays here,
  # marked as leaving and still holding its old cell (the reservation), until
  # the target zone answers: `finish_handoff/2` when the target took it,
  # `cancel_handoff/2` when the target refused. Meanwhile the entity's further
  # moves are deferred here and replayed or forwarded once the answer is in,
  # so each move still gets exactly one outcome and the entity is never owned
  # by two zones nor by none.
  # What a zone sends and answers at each step of a handoff is decided on
  # top of these functions, just as purely, in `Zone.Handoff`.
  #
  # While anyone watches the zone, `changed` and `departed` collect what
  # happened since the last tick; `flush/1` hands them over for the delta,
  # with the labels (a player's name and avatar) of the entities that came
  # into the zone meanwhile (`arrived`): viewers are told a label when the
  # entity comes into their view of the zone, never with its moves.
  #
  # With bacteria (Grove.World.Life), `bacteria` holds the zone's live
  # cells of the current generation: they occupy their cells like entities
  # (a move or a join onto one is refused `:occupied`), and views show them
  # as entities of their own kind, whose births and deaths go into the
  # delta like arrivals and departures.
  #
  # With a game (Grove.Game), `game` holds the zone's share of it
  # (`Zone.Game`: the cell layer, and what the zone process must still
  # write and send), and `acting` the entities whose action runs in
  # another zone: like a leaving entity, such an entity keeps its cell and
  # its further operations wait (`defer/3`) until that zone answers. A
  # world without a game has `game: nil`, and its moves never look further.
  #
  # `events` are short messages to the zone's viewers (a game's, a
  # chat's), published with the next delta; only collected while watched.
  #
  # `cells`, who stands where (in a world whose entities do not share
  # cells), holds one map per row of the zone, from x to the entity's id:
  # every move updates it, and a map of more than 32 keys (a zone's whole
  # occupancy in one map) is a hash trie whose updates cost several times
  # a small flat map's and a tuple's copy. The rows are kept in tuples of
  # `@group` rows, in a tuple of those (`row/2`, `put_row/3`): a row
  # written copies its group and the groups' tuple, 9 and 8 words in a
  # zone 50 rows high, where one tuple of the rows cost 51 at every step
  # (a zone's moves made more garbage than anything else it does).

  alias Grove.RateLimit
  alias Grove.World.{Entity, Grid, Life, Rules, Terrain, ViewFormat}
  alias Grove.World.Life.Board
  alias Grove.World.Zone.Game

  @max_deferred 8

  # Rows of `cells` a group.
  @group 8

  # A row read or written is a step's every time: inlined, its tuples'
  # reads and writes cost no call of their own.
  @compile {:inline, row_of: 2, put_row_of: 3, row: 2, put_row: 3}

  @enforce_keys [:index, :bounds, :grid, :terrain, :rules]
  defstruct [
    :index,
    :bounds,
    :grid,
    :terrain,
    :rules,
    bacteria: nil,
    game: nil,
    entities: %{},
    cells: {},
    leaving: %{},
    acting: %{},
    changed: %{},
    departed: %{},
    arrived: %{},
    events: [],
    watched: false
  ]

  @type reason :: :out_of_bounds | :blocked | :occupied | :rate_limited | :not_owner

  @typedoc """
  A handoff in flight: where the entity goes, the move's tag, operations
  deferred meanwhile, and the epoch of the target zone's placement it was
  sent to (in a cluster; see `sent_to/3`).
  """
  @type leaving :: %{
          to: Grid.zone_index(),
          target: Grid.cell(),
          tag: term(),
          since: integer(),
          deferred: [term()],
          epoch: non_neg_integer()
        }

  @typedoc "An action running in another zone: where, its tag, its owner, operations deferred meanwhile."
  @type acting :: %{
          to: Grid.zone_index(),
          tag: term(),
          owner: pid(),
          since: integer(),
          deferred: [term()],
          epoch: non_neg_integer()
        }

  @typedoc "A message to the viewers of a cell: who caused it, where, what, and small data."
  @type event :: {Entity.id(), non_neg_integer(), non_neg_integer(), atom(), map()}

  @type t :: %__MODULE__{
          index: Grid.zone_index(),
          bounds: {non_neg_integer(), non_neg_integer(), pos_integer(), pos_integer()},
          grid: Grid.t(),
          terrain: Terrain.t() | Terrain.Area.t(),
          rules: Rules.t(),
          bacteria: Board.t() | nil,
          game: Game.t() | nil,
          entities: %{Entity.id() => Entity.t()},
          cells: tuple(),
          leaving: %{Entity.id() => leaving()},
          acting: %{Entity.id() => acting()},
          changed: %{Entity.id() => {non_neg_integer(), non_neg_integer(), byte()}},
          departed: %{Entity.id() => true},
          arrived: %{Entity.id() => Entity.label()},
          events: [event()],
          watched: boolean()
        }

  @typedoc "An entity's label as views carry it: id, name and avatar."
  @type label_entry :: {Entity.id(), String.t(), String.t()}

  @doc """
  A zone of the grid, empty, on its ground: its own area
  (`Grove.World.Terrain.area_of/3`), or the whole world's.
  """
  @spec new(Grid.zone_index(), Grid.t(), Terrain.t() | Terrain.Area.t(), Rules.t()) :: t()
  def new(index, %Grid{} = grid, terrain, %Rules{} = rules) do
    %__MODULE__{
      index: index,
      bounds: Grid.zone_bounds(grid, index),
      grid: grid,
      terrain: terrain,
      rules: rules,
      cells: empty_cells(zone_height(grid, index))
    }
  end

  defp empty_cells(height) do
    full = Tuple.duplicate(Tuple.duplicate(%{}, @group), div(height, @group))

    case rem(height, @group) do
      0 -> full
      last -> Tuple.append(full, Tuple.duplicate(%{}, last))
    end
  end

  defp zone_height(grid, index) do
    {_x0, y0, _x1, y1} = Grid.zone_bounds(grid, index)
    y1 - y0
  end

  @doc """
  Puts an entity on a free cell of this zone, trying each candidate cell in
  turn, those with a neighbour it could step to first (a cell boxed in by
  what blocks and what stands around it would leave a player unable to
  move). With a game, its `join/3` hook is told of it, with `info`.
  """
  @spec place(t(), Entity.t(), [Grid.cell()], map()) ::
          {:ok, Entity.t(), t()} | {:rejected, :out_of_bounds | :blocked | :occupied, t()}
  def place(%__MODULE__{} = state, %Entity{} = entity, candidates, info \\ %{}) do
    {open, boxed} = Enum.split_with(candidates, fn {x, y} -> open_beside?(state, x, y) end)
    place_first(state, entity, open ++ boxed, :occupied, info)
  end

  # A cell north, east, south or west of it (where the arrow keys step)
  # that an entity could step to, as far as this zone knows: one in
  # another zone counts, since only that zone can tell.
  defp open_beside?(state, x, y) do
    Enum.any?([:n, :e, :s, :w], fn direction ->
      {nx, ny} = Grid.step({x, y}, direction)

      cond do
        not Grid.in_bounds?(state.grid, nx, ny) -> false
        not inside?(state, nx, ny) -> true
        true -> check_arrival(state, nil, nx, ny) == :ok
      end
    end)
  end

  defp place_first(state, _entity, [], last_reason, _info), do: {:rejected, last_reason, state}

  defp place_first(state, entity, [{x, y} | rest], _last_reason, info) do
    case check_arrival(state, entity.id, x, y) do
      :ok ->
        placed = %{entity | x: x, y: y, paced_until: nil}
        state = insert(state, placed)

        case state.game do
          nil -> {:ok, placed, state}
          _game -> Game.joined(state, placed.id, info)
        end

      {:rejected, reason} ->
        place_first(state, entity, rest, reason, info)
    end
  end

  @doc """
  Applies one move of an entity owned by `owner`. `now` is in milliseconds and
  only matters when a move rate is set. A move within the zone answers the
  entity at its new cell and the cell it came from.
  """
  @spec apply_move(t(), Entity.id(), Grid.direction(), pid(), term(), integer()) ::
          {:moved, Entity.t(), Grid.cell(), t()}
          | {:rejected, reason(), t()}
          | {:handoff, Entity.t(), Grid.zone_index(), Grid.cell(), t()}
          | {:leaving, t()}
          | {:unknown, t()}
  def apply_move(%__MODULE__{} = state, id, direction, owner, tag, now) do
    case state.entities do
      %{^id => %Entity{owner: ^owner} = entity} ->
        if is_map_key(state.leaving, id) or is_map_key(state.acting, id) do
          {:leaving, state}
        else
          move_entity(state, entity, direction, tag, now)
        end

      %{^id => _other_owner} ->
        {:rejected, :not_owner, state}

      _ ->
        {:unknown, state}
    end
  end

  @doc """
  True when a batch's moves may go through `plain_step/7`: a zone with
  no game and no bacteria, whose entities do not share cells, that
  nobody watches (nothing to record for a delta).
  """
  @spec plain?(t()) :: boolean()
  def plain?(%__MODULE__{game: nil, bacteria: nil, watched: false, rules: %Rules{exclusive: true}}),
      do: true

  def plain?(%__MODULE__{}), do: false

  @doc """
  One move of a batch in a `plain?/1` zone, on its entities and cells
  held apart from the state (`put_plain/3` puts them back), so that a
  step makes no copy of the state: what `apply_move/6` gives for a step
  inside the zone that is taken or refused on a taken or a blocking
  cell, as `{:moved, entity, fx, fy, entities, cells}` (the cell it came
  from) or `{:occupied | :blocked, entities}`, with the step booked on
  the entity's rate. Anything else (another owner, an entity that is
  away, watches or is limited, a step out of the zone, an unknown
  entity) is `:other`, with nothing changed: `apply_move/6` takes it on
  the state with these put back.

  The step is `move_to/7`'s first clause's (the common step), taken
  apart from the state: a change to one is a change to the other. The
  property of `plain_step/7` in the state's tests holds them together.
  """
  @spec plain_step(t(), map(), tuple(), Entity.id(), Grid.direction(), pid(), integer()) ::
          {:moved, Entity.t(), non_neg_integer(), non_neg_integer(), map(), tuple()}
          | {:occupied | :blocked, map()}
          | :other
  def plain_step(
        %__MODULE__{
          bounds: {x0, y0, x1, y1},
          rules: %Rules{blocking: blocking} = rules,
          terrain: terrain,
          leaving: leaving,
          acting: acting
        },
        entities,
        cells,
        id,
        direction,
        owner,
        now
      ) do
    case entities do
      %{^id => %Entity{owner: ^owner, updates: updates, x: fx, y: fy} = entity}
      when updates != :view ->
        x = Grid.step_x(fx, direction)
        y = Grid.step_y(fy, direction)

        with true <- x >= x0 and x < x1 and y >= y0 and y < y1,
             false <- is_map_key(leaving, id) or is_map_key(acting, id),
             {:ok, paced} <- book(rules, entity, now) do
          row = row_of(cells, y - y0)

          cond do
            blocking and Terrain.blocked?(terrain, x, y) ->
              {:blocked, Map.put(entities, id, %{entity | paced_until: paced})}

            is_map_key(row, x) ->
              {:occupied, Map.put(entities, id, %{entity | paced_until: paced})}

            fy == y ->
              cells = put_row_of(cells, y - y0, row |> Map.delete(fx) |> Map.put(x, id))
              moved = %{entity | x: x, paced_until: paced}
              {:moved, moved, fx, fy, Map.put(entities, id, moved), cells}

            true ->
              cells =
                cells
                |> put_row_of(fy - y0, Map.delete(row_of(cells, fy - y0), fx))
                |> put_row_of(y - y0, Map.put(row, x, id))

              moved = %{entity | x: x, y: y, paced_until: paced}
              {:moved, moved, fx, fy, Map.put(entities, id, moved), cells}
          end
        else
          _other -> :other
        end

      _ ->
        :other
    end
  end

  @doc "The state with the entities and cells `plain_step/7` left."
  @spec put_plain(t(), map(), tuple()) :: t()
  def put_plain(%__MODULE__{} = state, entities, cells),
    do: %{state | entities: entities, cells: cells}

  @doc """
  Books one of the entity's steps on its rate (moves and actions share it):
  the entity with its booking, put in the state, or `:limited`.
  """
  @spec pace(t(), Entity.t(), integer()) :: {:ok, Entity.t(), t()} | :limited
  def pace(%__MODULE__{rules: %Rules{move_limit: nil}} = state, entity, _now),
    do: {:ok, entity, state}

  def pace(%__MODULE__{} = state, entity, now) do
    case take_token(state.rules, entity, now) do
      {:ok, entity} -> {:ok, entity, put_entity(state, entity)}
      :empty -> :limited
    end
  end

  # The step's booking on the rate (`paced`) is written with the step
  # itself, in one update of the entity where the step is taken (the
  # common case), and on its own where it is not.
  defp move_entity(state, %Entity{x: x, y: y} = entity, direction, tag, now) do
    case book(state.rules, entity, now) do
      {:ok, paced} ->
        x = Grid.step_x(x, direction)
        y = Grid.step_y(y, direction)
        move_to(state, entity, paced, x, y, tag, now)

      :empty ->
        {:rejected, :rate_limited, state}
    end
  end

  # The common step, first: inside the zone, with no game and no
  # bacteria, among entities that do not share cells. What the clause
  # after it checks in turn (`inside?/3`, `blocked?/3`, `taken?/3`,
  # `live?/3`) and `relocate/5` writes, read from the state at once, where
  # each check read its fields of it again. `plain_step/7` takes the same
  # step for a batch, on entities and cells held apart from the state:
  # change both together.
  defp move_to(
         %__MODULE__{
           bounds: {x0, y0, x1, y1},
           game: nil,
           bacteria: nil,
           rules: %Rules{exclusive: true, blocking: blocking},
           terrain: terrain,
           cells: cells,
           entities: entities
         } = state,
         %Entity{id: id, x: fx, y: fy} = entity,
         paced,
         x,
         y,
         _tag,
         _now
       )
       when x >= x0 and x < x1 and y >= y0 and y < y1 do
    row = row_of(cells, y - y0)

    cond do
      blocking and Terrain.blocked?(terrain, x, y) ->
        {:rejected, :blocked, put_paced(state, entity, paced)}

      is_map_key(row, x) ->
        {:rejected, :occupied, put_paced(state, entity, paced)}

      true ->
        moved = %{entity | x: x, y: y, paced_until: paced}

        cells =
          if fy == y,
            do: put_row_of(cells, y - y0, row |> Map.delete(fx) |> Map.put(x, id)),
            else: move_cell(state, fx, fy, x, y, id)

        state = record(%{state | entities: Map.put(entities, id, moved), cells: cells}, moved)
        {:moved, moved, {fx, fy}, state}
    end
  end

  defp move_to(%__MODULE__{grid: grid, rules: rules} = state, entity, paced, x, y, tag, now) do
    cond do
      inside?(state, x, y) ->
        cond do
          blocked?(state, x, y) ->
            {:rejected, :blocked, put_paced(state, entity, paced)}

          rules.exclusive and taken?(state, x, y) ->
            {:rejected, :occupied, put_paced(state, entity, paced)}

          live?(state, x, y) ->
            {:rejected, :occupied, put_paced(state, entity, paced)}

          true ->
            relocate(state, entity, paced, x, y)
        end

      not Grid.in_bounds?(grid, x, y) ->
        if rules.bounds do
          {:rejected, :out_of_bounds, put_paced(state, entity, paced)}
        else
          {x, y} = Grid.wrap(grid, x, y)
          move_to(state, entity, paced, x, y, tag, now)
        end

      blocked_elsewhere?(state, x, y) ->
        {:rejected, :blocked, put_paced(state, entity, paced)}

      true ->
        entity = %{entity | paced_until: paced}
        to = Grid.zone_of(grid, x, y)
        leaving = %{to: to, target: {x, y}, tag: tag, since: now, deferred: [], epoch: 0}
        state = %{put_entity(state, entity) | leaving: Map.put(state.leaving, entity.id, leaving)}
        {:handoff, entity, to, {x, y}, state}
    end
  end

  defp put_paced(state, entity, paced), do: put_entity(state, %{entity | paced_until: paced})

  # The common case, a step inside the zone, in one update of the state
  # and one of the entity: every move goes through here.
  defp relocate(%__MODULE__{rules: rules} = state, %Entity{id: id} = entity, paced, x, y) do
    moved = %{entity | x: x, y: y, paced_until: paced}

    cells =
      if rules.exclusive,
        do: move_cell(state, entity.x, entity.y, x, y, id),
        else: state.cells

    state = record(%{state | entities: Map.put(state.entities, id, moved), cells: cells}, moved)

    case state.game do
      nil -> {:moved, moved, {entity.x, entity.y}, state}
      _game -> Game.entered(state, id, {entity.x, entity.y})
    end
  end

  @doc """
  Takes in an entity handed over by a neighbour zone at `cell`. The neighbour
  already checked bounds, terrain and the move rate; this zone owns the cell's
  occupancy, so only it can say whether the cell is free.
  """
  @spec accept_arrival(t(), Entity.t(), Grid.cell()) ::
          {:ok, Entity.t(), t()} | {:rejected, :blocked | :occupied | :out_of_bounds, t()}
  def accept_arrival(%__MODULE__{} = state, %Entity{} = entity, {x, y}) do
    case check_arrival(state, entity.id, x, y) do
      :ok ->
        arrived = %{entity | x: x, y: y, monitor: nil}
        state = insert(state, arrived)

        case state.game do
          nil ->
            {:ok, arrived, state}

          _game ->
            {:moved, arrived, _from, state} = Game.entered(state, arrived.id, {x, y})
            {:ok, arrived, state}
        end

      {:rejected, reason} ->
        {:rejected, reason, state}
    end
  end

  defp check_arrival(%__MODULE__{grid: grid, rules: rules} = state, id, x, y) do
    cond do
      not Grid.in_bounds?(grid, x, y) or not inside?(state, x, y) ->
        {:rejected, :out_of_bounds}

      blocked?(state, x, y) ->
        {:rejected, :blocked}

      is_map_key(state.entities, id) ->
        {:rejected, :occupied}

      rules.exclusive and taken?(state, x, y) ->
        {:rejected, :occupied}

      live?(state, x, y) ->
        {:rejected, :occupied}

      true ->
        :ok
    end
  end

  @doc """
  The target zone took the entity: forget it here and free its old cell.
  Returns the operations deferred during the handoff, oldest first, to be
  forwarded to the new zone.
  """
  @spec finish_handoff(t(), Entity.id()) :: {Entity.t() | nil, [term()], t()}
  def finish_handoff(%__MODULE__{} = state, id) do
    {leaving, state} = pop_leaving(state, id)
    {entity, state} = remove(state, id)
    {entity, deferred(leaving), state}
  end

  @doc """
  The target zone refused the entity: it stays where it was. Returns the
  handoff's tag (for the refused move's outcome) and the deferred operations,
  oldest first, to be applied here now.
  """
  @spec cancel_handoff(t(), Entity.id()) :: {:ok, term(), [term()], t()} | {:error, :not_leaving}
  def cancel_handoff(%__MODULE__{} = state, id) do
    case pop_leaving(state, id) do
      {nil, _state} -> {:error, :not_leaving}
      {leaving, state} -> {:ok, leaving.tag, deferred(leaving), state}
    end
  end

  @doc """
  Queues an operation for an entity that is being handed over, or whose
  action runs in another zone; bounded, except for `:owner_down` (the
  owner died), which must never be lost.
  """
  @spec defer(t(), Entity.id(), term()) :: {:ok, t()} | {:error, :busy}
  def defer(%__MODULE__{} = state, id, operation) do
    case state.leaving do
      %{^id => leaving} ->
        case queue(leaving, operation) do
          {:ok, leaving} -> {:ok, %{state | leaving: Map.put(state.leaving, id, leaving)}}
          :full -> {:error, :busy}
        end

      _ ->
        %{^id => acting} = state.acting

        case queue(acting, operation) do
          {:ok, acting} -> {:ok, %{state | acting: Map.put(state.acting, id, acting)}}
          :full -> {:error, :busy}
        end
    end
  end

  @doc """
  Records the epoch of the target zone's placement a handoff was sent to:
  only a run of that zone older than the one sent to can have lost it.
  """
  @spec sent_to(t(), Entity.id(), non_neg_integer()) :: t()
  def sent_to(%__MODULE__{leaving: leaving} = state, id, epoch) do
    case leaving do
      %{^id => handoff} -> %{state | leaving: %{leaving | id => %{handoff | epoch: epoch}}}
      _ -> state
    end
  end

  @doc """
  The handoffs sent to runs of these zones that are gone: `lost` maps a
  zone to the epoch of the run that replaced them.
  """
  @spec lost_handoffs(t(), %{Grid.zone_index() => non_neg_integer()}) :: [Entity.id()]
  def lost_handoffs(%__MODULE__{leaving: leaving}, lost) do
    for {id, %{to: to, epoch: epoch}} <- leaving,
        is_map_key(lost, to) and epoch < Map.fetch!(lost, to),
        do: id
  end

  defp queue(%{deferred: deferred} = pending, operation)
       when operation == :owner_down or length(deferred) < @max_deferred,
       do: {:ok, %{pending | deferred: [operation | deferred]}}

  defp queue(_pending, _operation), do: :full

  @doc "Handoffs started before `cutoff` (milliseconds) that have had no answer."
  @spec stale_handoffs(t(), integer()) :: [Entity.id()]
  def stale_handoffs(%__MODULE__{leaving: leaving}, cutoff) do
    for {id, %{since: since}} <- leaving, since < cutoff, do: id
  end

  @doc """
  An entity goes for good (it left, or its owner died): with a game, its
  `leave/2` hook first, then `remove/2`.
  """
  @spec drop(t(), Entity.id()) :: {Entity.t() | nil, t()}
  def drop(%__MODULE__{game: nil} = state, id), do: remove(state, id)

  def drop(%__MODULE__{} = state, id) do
    if is_map_key(state.entities, id),
      do: state |> Game.left(id) |> remove(id),
      else: {nil, state}
  end

  @doc """
  Removes an entity (it left, its owner died, it went to another zone); a
  pending handoff is dropped with it.
  """
  @spec remove(t(), Entity.id()) :: {Entity.t() | nil, t()}
  def remove(%__MODULE__{} = state, id) do
    case Map.pop(state.entities, id) do
      {nil, _} ->
        {nil, state}

      {entity, entities} ->
        state = %{state | entities: entities, leaving: Map.delete(state.leaving, id)}
        state = vacate(state, entity)

        state =
          if state.watched,
            do: %{
              state
              | changed: Map.delete(state.changed, id),
                departed: Map.put(state.departed, id, true),
                arrived: Map.delete(state.arrived, id)
            },
            else: state

        {entity, state}
    end
  end

  @doc "The entity with this id, if this zone holds it."
  @spec fetch(t(), Entity.id()) :: {:ok, Entity.t()} | :error
  def fetch(%__MODULE__{entities: entities}, id), do: Map.fetch(entities, id)

  @doc "True while a handoff of this entity waits for its answer."
  @spec leaving?(t(), Entity.id()) :: boolean()
  def leaving?(%__MODULE__{leaving: leaving}, id), do: is_map_key(leaving, id)

  @doc """
  True while this entity waits for another zone: a handoff, or an action
  that runs there. Its operations are deferred meanwhile.
  """
  @spec away?(t(), Entity.id()) :: boolean()
  def away?(%__MODULE__{leaving: leaving, acting: acting}, id),
    do: is_map_key(leaving, id) or is_map_key(acting, id)

  @doc "Marks an entity as acting in zone `to`: its operations wait for the answer."
  @spec start_acting(t(), Entity.id(), Grid.zone_index(), pid(), term(), integer()) :: t()
  def start_acting(%__MODULE__{} = state, id, to, owner, tag, now) do
    acting = %{to: to, tag: tag, owner: owner, since: now, deferred: [], epoch: 0}
    %{state | acting: Map.put(state.acting, id, acting)}
  end

  @doc """
  Records the epoch of the target zone's placement an action was sent to,
  as `sent_to/3` does for a handoff.
  """
  @spec acting_at(t(), Entity.id(), non_neg_integer()) :: t()
  def acting_at(%__MODULE__{acting: acting} = state, id, epoch) do
    case acting do
      %{^id => action} -> %{state | acting: %{acting | id => %{action | epoch: epoch}}}
      _ -> state
    end
  end

  @doc """
  The answer to an action that ran in another zone came (or never will):
  the entry and the operations deferred meanwhile, oldest first.
  """
  @spec stop_acting(t(), Entity.id()) :: {acting() | nil, [term()], t()}
  def stop_acting(%__MODULE__{} = state, id) do
    case Map.pop(state.acting, id) do
      {nil, _} -> {nil, [], state}
      {acting, rest} -> {acting, deferred(acting), %{state | acting: rest}}
    end
  end

  @doc "Actions started before `cutoff` (milliseconds) in another zone that have had no answer."
  @spec stale_acts(t(), integer()) :: [Entity.id()]
  def stale_acts(%__MODULE__{acting: acting}, cutoff) do
    for {id, %{since: since}} <- acting, since < cutoff, do: id
  end

  @doc "Restores entities (from the zone's table after a restart) without checks."
  @spec restore(t(), [Entity.t()]) :: t()
  def restore(%__MODULE__{} = state, entities) do
    Enum.reduce(entities, state, fn entity, state -> insert(state, %{entity | monitor: nil}) end)
  end

  @doc "Sets an entity's game attributes and look (no hook, no check): `Zone.Game`'s effects."
  @spec put_attrs(t(), Entity.id(), term(), byte()) :: t()
  def put_attrs(%__MODULE__{} = state, id, attrs, look) do
    %{^id => entity} = state.entities
    put_entity(state, %{entity | attrs: attrs, look: look})
  end

  @doc "Replaces an entity's record, e.g. to store its owner's monitor."
  @spec put_entity(t(), Entity.t()) :: t()
  def put_entity(%__MODULE__{} = state, %Entity{id: id} = entity),
    do: %{state | entities: Map.put(state.entities, id, entity)}

  @doc "Starts or stops collecting changes for deltas; starting discards nothing pending."
  @spec watch(t(), boolean()) :: t()
  def watch(%__MODULE__{} = state, true), do: %{state | watched: true}

  def watch(%__MODULE__{} = state, false),
    do:
      Game.unwatched(%{
        state
        | watched: false,
          changed: %{},
          departed: %{},
          arrived: %{},
          events: []
      })

  @doc """
  Adds a message for the viewers of a cell of this zone (`x`, `y` inside
  it), caused by entity `id` (0 for none): it goes out with the next delta,
  in the area's `events`. Dropped while nobody watches the zone.
  `name` is an atom; `data` a small map (see `Grove.Game.data?/1`).
  """
  @spec event(t(), Entity.id(), Grid.cell(), atom(), map()) :: t()
  def event(%__MODULE__{watched: false} = state, _id, _cell, _name, _data), do: state

  def event(%__MODULE__{} = state, id, {x, y}, name, data),
    do: %{state | events: [{id, x, y, name, data} | state.events]}

  @doc """
  What else the next delta carries besides moves (see
  `Grove.World.ViewFormat.extra/0`): the `names` given (the labels
  `flush/1` handed over), the game's cells and looks that changed, and the
  events, oldest first; `nil` when there is none of these (always, in a
  world without a game, names or events).
  """
  @spec flush_extra(t(), [label_entry()]) :: {ViewFormat.extra() | nil, t()}
  def flush_extra(%__MODULE__{game: nil, events: []} = state, []), do: {nil, state}

  def flush_extra(%__MODULE__{} = state, names) do
    {cells, looks, state} = Game.flush(state)

    case {names, cells, looks, state.events} do
      {[], [], [], []} ->
        {nil, state}

      {names, cells, looks, events} ->
        extra = %{names: names, cells: cells, looks: looks, events: Enum.reverse(events)}
        {extra, %{state | events: []}}
    end
  end

  @doc """
  What a snapshot carries besides the entities: the names of the labelled
  entities, the game's visible cells and looks; `nil` when none.
  """
  @spec snapshot_extra(t()) :: ViewFormat.extra() | nil
  def snapshot_extra(%__MODULE__{game: nil} = state) do
    case labels(state) do
      [] -> nil
      names -> %{names: names, cells: [], looks: [], events: []}
    end
  end

  def snapshot_extra(%__MODULE__{} = state),
    do: Map.put(Game.snapshot(state), :names, labels(state))

  @doc """
  True when the next delta has something to carry: an entity that moved,
  arrived or left, a label, an event, or a game's cell or look that
  changed since the last flush (nothing is collected while nobody
  watches).
  """
  @spec pending?(t()) :: boolean()
  def pending?(%__MODULE__{changed: changed, departed: departed, arrived: arrived} = state),
    do:
      map_size(changed) > 0 or map_size(departed) > 0 or map_size(arrived) > 0 or
        state.events != [] or Game.pending?(state)

  @doc """
  Hands over what changed since the last flush: entities that moved or
  arrived, with their final cell and kind, ids that left or disappeared,
  and the labels of the labelled entities that arrived.
  """
  @spec flush(t()) ::
          {[{Entity.id(), non_neg_integer(), non_neg_integer(), byte()}], [Entity.id()],
           [label_entry()], t()}
  def flush(%__MODULE__{changed: changed, departed: departed, arrived: arrived} = state) do
    changes = for {id, {x, y, kind}} <- changed, do: {id, x, y, kind}
    labels = for {id, {name, avatar}} <- arrived, do: {id, name, avatar}
    {changes, Map.keys(departed), labels, %{state | changed: %{}, departed: %{}, arrived: %{}}}
  end

  @doc "The game's visible cells as `{x, y, code}`, for a snapshot (none without a game)."
  @spec cells(t()) :: [{non_neg_integer(), non_neg_integer(), 1..255}]
  def cells(%__MODULE__{} = state), do: Game.cells(state)

  @doc "The label of every labelled entity in the zone, for a snapshot."
  @spec labels(t()) :: [label_entry()]
  def labels(%__MODULE__{entities: entities}) do
    for {id, %Entity{label: {name, avatar}}} <- entities, do: {id, name, avatar}
  end

  @doc "Every entity in the zone as `{id, x, y, kind}`, its bacteria included."
  @spec snapshot(t()) :: [{Entity.id(), non_neg_integer(), non_neg_integer(), byte()}]
  def snapshot(%__MODULE__{entities: entities} = state) do
    bacteria =
      case state.bacteria do
        nil -> []
        board -> for {x, y} <- Board.cells(board), do: bacterium(state, x, y)
      end

    bacteria ++ for {id, %Entity{x: x, y: y, kind: kind}} <- entities, do: {id, x, y, kind}
  end

  @doc """
  The zone's bacteria within `{x0, y0, x1, y1}` (upper bounds exclusive),
  as `snapshot/1` lists them.
  """
  @spec bacteria_within(t(), {integer(), integer(), integer(), integer()}) ::
          [{Entity.id(), non_neg_integer(), non_neg_integer(), byte()}]
  def bacteria_within(%__MODULE__{bacteria: nil}, _bounds), do: []

  def bacteria_within(%__MODULE__{bacteria: board} = state, bounds),
    do: for({x, y} <- Board.cells_within(board, bounds), do: bacterium(state, x, y))

  @doc "Puts the zone's bacteria (a restored or initial generation) without recording changes."
  @spec put_bacteria(t(), Board.t()) :: t()
  def put_bacteria(%__MODULE__{} = state, %Board{} = board), do: %{state | bacteria: board}

  @doc """
  The zone's next generation of bacteria: `born` and `died` are the cells
  that changed, recorded for the next delta like arrivals and departures.
  """
  @spec next_generation(t(), Board.t(), [Grid.cell()], [Grid.cell()]) :: t()
  def next_generation(%__MODULE__{watched: false} = state, board, _born, _died),
    do: %{state | bacteria: board}

  def next_generation(%__MODULE__{} = state, board, born, died) do
    {changed, departed} =
      Enum.reduce(died, {state.changed, state.departed}, fn {x, y}, {changed, departed} ->
        id = Life.bacterium_id(state.grid, {x, y})
        {Map.delete(changed, id), Map.put(departed, id, true)}
      end)

    {changed, departed} =
      Enum.reduce(born, {changed, departed}, fn {x, y}, {changed, departed} ->
        {id, x, y, kind} = bacterium(state, x, y)
        {Map.put(changed, id, {x, y, kind}), Map.delete(departed, id)}
      end)

    %{state | bacteria: board, changed: changed, departed: departed}
  end

  @doc "True when a bacterium lives on the cell, which must lie in the zone."
  @spec live?(t(), non_neg_integer(), non_neg_integer()) :: boolean()
  def live?(%__MODULE__{bacteria: nil}, _x, _y), do: false
  def live?(%__MODULE__{bacteria: board}, x, y), do: Board.alive?(board, x, y)

  @doc "True when an entity stands on the cell (in a world where they do not share cells)."
  @spec occupied?(t(), non_neg_integer(), non_neg_integer()) :: boolean()
  def occupied?(%__MODULE__{} = state, x, y), do: inside?(state, x, y) and taken?(state, x, y)

  @doc "The id of an entity on the cell, which must lie in the zone, or nil."
  @spec occupant(t(), non_neg_integer(), non_neg_integer()) :: Entity.id() | nil
  def occupant(%__MODULE__{rules: %Rules{exclusive: true}} = state, x, y) do
    if inside?(state, x, y), do: Map.get(row(state, y), x)
  end

  def occupant(%__MODULE__{} = state, x, y) do
    Enum.find_value(state.entities, fn
      {id, %Entity{x: ^x, y: ^y}} -> id
      _other -> nil
    end)
  end

  @doc """
  True when nothing may step onto the cell, which must lie in the zone:
  its ground blocks (where the rules say ground blocks), unless the
  game's layer frees it, or the game's layer blocks it.
  """
  @spec blocked?(t(), non_neg_integer(), non_neg_integer()) :: boolean()
  def blocked?(%__MODULE__{game: nil, rules: rules, terrain: terrain}, x, y),
    do: rules.blocking and Terrain.blocked?(terrain, x, y)

  def blocked?(%__MODULE__{} = state, x, y), do: Game.blocked?(state, x, y)

  # A cell of another zone: its ground is all this zone knows of it (the
  # zone holds the ground a cell around it; across a wrapped edge, the
  # zone that takes the entity tells), and a game that may free cells
  # leaves the answer to the cell's zone.
  defp blocked_elsewhere?(%__MODULE__{game: nil} = state, x, y),
    do: ground_elsewhere?(state, x, y)

  defp blocked_elsewhere?(%__MODULE__{game: %{spec: %{hooks: %{blocks: true}}}}, _x, _y),
    do: false

  defp blocked_elsewhere?(state, x, y), do: ground_elsewhere?(state, x, y)

  defp ground_elsewhere?(%__MODULE__{rules: rules, terrain: terrain}, x, y),
    do: rules.blocking and Terrain.covers?(terrain, x, y) and Terrain.blocked?(terrain, x, y)

  defp bacterium(state, x, y), do: {Life.bacterium_id(state.grid, {x, y}), x, y, Life.kind()}

  @doc "The number of entities in the zone, those leaving included."
  @spec size(t()) :: non_neg_integer()
  def size(%__MODULE__{entities: entities}), do: map_size(entities)

  @doc """
  Checks the zone's own invariants and returns a list of problems (empty when
  sound): every entity inside the zone, none on blocking ground, none sharing
  a cell, and the cell index agreeing with the entities.
  """
  @spec audit(t()) :: [String.t()]
  def audit(%__MODULE__{grid: grid, rules: rules} = state) do
    entity_problems =
      for {id, %Entity{x: x, y: y}} <- state.entities,
          problem = entity_problem(state, x, y),
          do: "entity #{id} at {#{x}, #{y}}: #{problem}"

    cell_problems =
      if rules.exclusive do
        {_x0, y0, _x1, _y1} = state.bounds

        held =
          for {row, i} <-
                state.cells
                |> Tuple.to_list()
                |> Enum.flat_map(&Tuple.to_list/1)
                |> Enum.with_index(),
              {x, id} <- row,
              do: {Grid.cell_key(grid, x, y0 + i), id}

        indexed =
          for {key, id} <- held,
              not match?(%{^id => %Entity{}}, state.entities) or
                Grid.cell_key(grid, state.entities[id].x, state.entities[id].y) != key,
              do: "cell #{key} claims entity #{id}, which is elsewhere"

        sharing =
          state.entities
          |> Enum.group_by(fn {_id, e} -> {e.x, e.y} end, fn {id, _e} -> id end)
          |> Enum.filter(fn {_cell, ids} -> length(ids) > 1 end)
          |> Enum.map(fn {cell, ids} -> "entities #{inspect(ids)} share #{inspect(cell)}" end)

        count =
          if length(held) == map_size(state.entities),
            do: [],
            else: ["#{length(held)} cells held for #{map_size(state.entities)} entities"]

        indexed ++ sharing ++ count
      else
        []
      end

    entity_problems ++ cell_problems
  end

  defp entity_problem(%__MODULE__{grid: grid, rules: rules} = state, x, y) do
    cond do
      not Grid.in_bounds?(grid, x, y) -> "outside the world"
      not inside?(state, x, y) -> "outside its zone"
      rules.blocking and Terrain.blocked?(state.terrain, x, y) -> "on blocking ground"
      live?(state, x, y) -> "on a live bacterium"
      true -> nil
    end
  end

  ## Helpers

  @doc "True when the cell lies in this zone."
  @spec inside?(t(), integer(), integer()) :: boolean()
  def inside?(%__MODULE__{bounds: {x0, y0, x1, y1}}, x, y),
    do: x >= x0 and x < x1 and y >= y0 and y < y1

  defp insert(%__MODULE__{game: nil} = state, entity) do
    state |> occupy(entity) |> put_entity(entity) |> record(entity) |> record_arrival(entity)
  end

  defp insert(state, entity) do
    state
    |> occupy(entity)
    |> put_entity(entity)
    |> record(entity)
    |> record_arrival(entity)
    |> Game.arrived(entity)
  end

  defp occupy(%__MODULE__{rules: %Rules{exclusive: false}} = state, _entity), do: state

  defp occupy(state, %Entity{id: id, x: x, y: y}),
    do: %{state | cells: put_row(state, y, Map.put(row(state, y), x, id))}

  defp vacate(%__MODULE__{rules: %Rules{exclusive: false}} = state, _entity), do: state

  defp vacate(state, %Entity{x: x, y: y}),
    do: %{state | cells: put_row(state, y, Map.delete(row(state, y), x))}

  # Who stands where, by row (`cells`): the cell must lie in the zone.
  defp taken?(state, x, y), do: is_map_key(row(state, y), x)

  defp row(%__MODULE__{cells: cells, bounds: {_x0, y0, _x1, _y1}}, y), do: row_of(cells, y - y0)

  defp put_row(%__MODULE__{cells: cells, bounds: {_x0, y0, _x1, _y1}}, y, row),
    do: put_row_of(cells, y - y0, row)

  # The zone's row `i` (from 0 at its top) in `cells`, and `cells` with
  # it replaced.
  defp row_of(cells, i), do: cells |> elem(div(i, @group)) |> elem(rem(i, @group))

  defp put_row_of(cells, i, row) do
    group = div(i, @group)
    put_elem(cells, group, put_elem(elem(cells, group), rem(i, @group), row))
  end

  # A step from one cell of the zone to another: within a row, one update
  # of it.
  defp move_cell(state, fx, y, x, y, id),
    do: put_row(state, y, state |> row(y) |> Map.delete(fx) |> Map.put(x, id))

  defp move_cell(%__MODULE__{cells: cells, bounds: {_x0, y0, _x1, _y1}}, fx, fy, x, y, id) do
    cells
    |> put_row_of(fy - y0, Map.delete(row_of(cells, fy - y0), fx))
    |> then(&put_row_of(&1, y - y0, Map.put(row_of(&1, y - y0), x, id)))
  end

  defp record(%__MODULE__{watched: false} = state, _entity), do: state

  defp record(%__MODULE__{} = state, %Entity{id: id, x: x, y: y, kind: kind}),
    do: %{
      state
      | changed: Map.put(state.changed, id, {x, y, kind}),
        departed: Map.delete(state.departed, id)
    }

  defp record_arrival(%__MODULE__{watched: true} = state, %Entity{id: id, label: label})
       when label != nil,
       do: %{state | arrived: Map.put(state.arrived, id, label)}

  defp record_arrival(state, _entity), do: state

  defp pop_leaving(state, id) do
    {leaving, rest} = Map.pop(state.leaving, id)
    {leaving, %{state | leaving: rest}}
  end

  defp deferred(nil), do: []
  defp deferred(%{deferred: deferred}), do: Enum.reverse(deferred)

  defp take_token(rules, entity, now) do
    case book(rules, entity, now) do
      {:ok, paced} -> {:ok, %{entity | paced_until: paced}}
      :empty -> :empty
    end
  end

  # The entity's booking on its rate after one more step, not yet written.
  defp book(%Rules{move_limit: nil}, entity, _now), do: {:ok, entity.paced_until}

  defp book(%Rules{move_limit: limit}, %Entity{paced_until: paced_until}, now) do
    case RateLimit.allow(limit, paced_until, now) do
      {:ok, _booked} = booked -> booked
      :limited -> :empty
    end
  end
end
