defmodule Grove.World.View do
  @moduledoc """
  A client's viewport, assembled from what the zones publish.

  A client that joined with `updates: :view` (and the default
  `view_format: {Grove.World.View, :raw}`) receives, from each zone its
  viewport overlaps, a snapshot message; after it, the zone publishes one
  delta per tick that changed something, the same for every viewer, in the
  world's feed. The client keeps a `View`, feeds it the messages it
  receives and its own move outcomes, calls `catch_up/2` when it wants to
  be current, and takes from it what changed inside its square viewport
  since it last asked. Apart from `catch_up/2`, which reads the feed (and
  asks a zone for a snapshot when it has fallen too far behind), it is a
  pure data structure the client process owns.

  ## Examples

      view = View.new({10, 10}, 8)
      # in the client's receive loop:
      {:grove_view, _zone, :snapshot, _seq, _data} = message -> View.apply_message(view, message)
      {:grove_view, _zone, :closed} = message -> View.apply_message(view, message)
      {:grove_move, ^id, _tag, {:ok, cell}} -> View.recenter(view, cell)
      # whenever the client is ready to draw or send:
      {changes, view} = view |> View.catch_up(world) |> View.take_changes()

  The first `take_changes/1` returns the full view (`full: true`: the client
  replaces what it had), and so does the first after `resync/1`; the others
  return only what moved in, moved within, or left the viewport.

  The same assembly serves any client that receives areas already decoded
  (the load lab's bots do): `put_area/3`, `update_area/4` and `drop_area/2`.

  In a world with a game, a view also keeps what the areas show of it
  (`Grove.World.ViewFormat`, "Beyond entities"): the visible codes of the
  game's cells (`game_cells/1`), the entities' looks (`looks/1`), and the
  events they told, until taken (`take_events/1`).
  """

  @behaviour Grove.World.ViewFormat

  alias Grove.World
  alias Grove.World.Grid

  @format {__MODULE__, :raw}

  defstruct center: {0, 0},
            radius: 8,
            self: nil,
            self_kind: 1,
            mirrors: %{},
            seqs: %{},
            where: %{},
            shown: %{},
            dirty: %{},
            rescan: true,
            complete: true,
            cells: %{},
            looks: %{},
            events: []

  @typedoc "An entity as a view shows it: id, cell and kind."
  @type entry :: {non_neg_integer(), non_neg_integer(), non_neg_integer(), byte()}

  @typedoc """
  What changed in the viewport: entities to draw (new or moved) and ids to
  erase; with `full: true`, everything in view, to replace what was shown.
  """
  @type changes :: %{shown: [entry()], gone: [non_neg_integer()], full: boolean()}

  @type t :: %__MODULE__{
          center: Grid.cell(),
          radius: non_neg_integer(),
          self: non_neg_integer() | nil,
          self_kind: byte(),
          mirrors: %{
            Grid.zone_index() => %{
              non_neg_integer() => {non_neg_integer(), non_neg_integer(), byte()}
            }
          },
          seqs: %{Grid.zone_index() => non_neg_integer() | :awaiting},
          where: %{non_neg_integer() => Grid.zone_index()},
          shown: %{non_neg_integer() => {non_neg_integer(), non_neg_integer(), byte()}},
          dirty: %{non_neg_integer() => true},
          rescan: boolean(),
          complete: boolean(),
          cells: %{Grid.zone_index() => %{Grid.cell() => byte()}},
          looks: %{non_neg_integer() => byte()},
          events: [tuple()]
        }

  @doc """
  A view centred on `center` seeing `radius` cells in each direction. The
  entity `self` (the client's own, if given, of kind `self_kind`) appears in
  full views only, always at the centre: the client learns its own moves from
  their outcomes, which run ahead of the zones' ticks, so a delta that would
  only say "you moved" is not worth a frame, and a full view taken while the
  entity is between two zones still shows it where it stands.
  """
  @spec new(Grid.cell(), non_neg_integer(), non_neg_integer() | nil, byte()) :: t()
  def new(center, radius \\ 8, self \\ nil, self_kind \\ 1),
    do: %__MODULE__{center: center, radius: radius, self: self, self_kind: self_kind}

  ## The raw format

  @impl Grove.World.ViewFormat
  def encode_view(:raw, :snapshot, _zone, entries, _departed), do: encode_entries(entries)

  def encode_view(:raw, :delta, _zone, entries, departed),
    do: {encode_entries(entries), for(id <- departed, into: <<>>, do: <<id::32>>)}

  # Names alone (nothing of a game, no events) are not for in-VM clients.
  @impl Grove.World.ViewFormat
  def encode_view(:raw, what, zone, entries, departed, %{cells: [], looks: [], events: []}),
    do: encode_view(:raw, what, zone, entries, departed)

  def encode_view(:raw, :snapshot, zone, entries, departed, extra),
    do: {encode_view(:raw, :snapshot, zone, entries, departed), extra}

  def encode_view(:raw, :delta, zone, entries, departed, extra) do
    {moved, gone} = encode_view(:raw, :delta, zone, entries, departed)
    {moved, gone, extra}
  end

  defp encode_entries(entries),
    do: for({id, x, y, kind} <- entries, into: <<>>, do: <<id::32, x::16, y::16, kind::8>>)

  defp decode_entries(binary),
    do: for(<<id::32, x::16, y::16, kind::8 <- binary>>, do: {id, x, y, kind})

  ## Messages and the feed

  @doc """
  Applies one message from a zone: `{:grove_view, zone, :snapshot, seq,
  entries}`, `{:grove_view, zone, :closed}`, or a delta as the feed holds it,
  `{:grove_view, zone, :delta, entries, departed}` (raw binaries).
  """
  @spec apply_message(t(), tuple()) :: t()
  def apply_message(%__MODULE__{} = view, {:grove_view, zone, :snapshot, seq, {entries, extra}}) do
    view = apply_message(view, {:grove_view, zone, :snapshot, seq, entries})
    cells = Map.new(extra.cells, fn {x, y, code} -> {{x, y}, code} end)
    # Looks of entities no area holds any more go here, where it is cheap.
    looks = Map.filter(view.looks, fn {id, _look} -> is_map_key(view.where, id) end)
    looks = Enum.reduce(extra.looks, looks, fn {id, look}, looks -> Map.put(looks, id, look) end)
    %{view | cells: Map.put(view.cells, zone, cells), looks: looks}
  end

  def apply_message(%__MODULE__{} = view, {:grove_view, zone, :snapshot, seq, entries}) do
    view = put_area(view, zone, decode_entries(entries))
    %{view | seqs: Map.put(view.seqs, zone, seq)}
  end

  def apply_message(%__MODULE__{} = view, {:grove_view, zone, :delta, moved, departed, extra}) do
    view = apply_message(view, {:grove_view, zone, :delta, moved, departed})

    case view.mirrors do
      %{^zone => _} ->
        cells =
          Enum.reduce(extra.cells, Map.get(view.cells, zone, %{}), fn
            {x, y, 0}, cells -> Map.delete(cells, {x, y})
            {x, y, code}, cells -> Map.put(cells, {x, y}, code)
          end)

        looks =
          Enum.reduce(extra.looks, view.looks, fn {id, look}, looks ->
            Map.put(looks, id, look)
          end)

        %{
          view
          | cells: Map.put(view.cells, zone, cells),
            looks: looks,
            events: Enum.reverse(extra.events, view.events)
        }

      _ ->
        view
    end
  end

  def apply_message(%__MODULE__{} = view, {:grove_view, zone, :delta, moved, departed}) do
    update_area(view, zone, decode_entries(moved), for(<<id::32 <- departed>>, do: id))
  end

  def apply_message(%__MODULE__{} = view, {:grove_view, zone, :closed}) do
    %{
      drop_area(view, zone)
      | seqs: Map.delete(view.seqs, zone),
        cells: Map.delete(view.cells, zone)
    }
  end

  @doc "The visible codes of the game's cells in the areas held, by cell."
  @spec game_cells(t()) :: %{Grid.cell() => byte()}
  def game_cells(%__MODULE__{cells: cells}),
    do: Enum.reduce(cells, %{}, fn {_zone, zone_cells}, acc -> Map.merge(acc, zone_cells) end)

  @doc "The looks of the entities the view has been told of, by id (0 when not listed)."
  @spec looks(t()) :: %{non_neg_integer() => byte()}
  def looks(%__MODULE__{looks: looks}), do: looks

  @doc "The events the areas told since the last call, oldest first, and the view without them."
  @spec take_events(t()) :: {[tuple()], t()}
  def take_events(%__MODULE__{events: events} = view),
    do: {Enum.reverse(events), %{view | events: []}}

  @doc """
  Reads the deltas the zones in view published since the view last read
  them, and applies them. A zone whose deltas are no longer all in the
  feed is asked for a snapshot, and skipped until it arrives.
  """
  @spec catch_up(t(), World.name() | World.t()) :: t()
  def catch_up(%__MODULE__{} = view, world) do
    Enum.reduce(view.seqs, view, fn
      {_zone, :awaiting}, view ->
        view

      {zone, seq}, view ->
        case World.view_deltas(world, zone, seq, @format) do
          {[], ^seq} ->
            view

          {deltas, latest} ->
            view =
              Enum.reduce(deltas, view, fn
                {moved, departed}, view ->
                  apply_message(view, {:grove_view, zone, :delta, moved, departed})

                {moved, departed, extra}, view ->
                  apply_message(view, {:grove_view, zone, :delta, moved, departed, extra})
              end)

            %{view | seqs: Map.put(view.seqs, zone, latest)}

          :gone ->
            :ok = World.request_snapshot(world, zone, @format)
            %{view | seqs: Map.put(view.seqs, zone, :awaiting)}
        end
    end)
  end

  ## Areas

  @doc "Replaces what the view holds of one zone (an area) with `entries`."
  @spec put_area(t(), Grid.zone_index(), [entry()]) :: t()
  def put_area(%__MODULE__{} = view, zone, entries) do
    old = Map.get(view.mirrors, zone, %{})
    mirror = Map.new(entries, fn {id, x, y, kind} -> {id, {x, y, kind}} end)

    where =
      Enum.reduce(old, view.where, fn {id, _}, where ->
        if where[id] == zone and not is_map_key(mirror, id),
          do: Map.delete(where, id),
          else: where
      end)

    where = Enum.reduce(mirror, where, fn {id, _}, where -> Map.put(where, id, zone) end)
    %{view | mirrors: Map.put(view.mirrors, zone, mirror), where: where, rescan: true}
  end

  @doc """
  Applies a zone's delta: `moved` entities are drawn at their new cell,
  `gone` ids leave the area. A delta for an area the view does not hold is
  ignored (its snapshot will cover it).
  """
  @spec update_area(t(), Grid.zone_index(), [entry()], [non_neg_integer()]) :: t()
  def update_area(%__MODULE__{} = view, zone, moved, gone) do
    case view.mirrors do
      %{^zone => mirror} ->
        {mirror, where, dirty} =
          Enum.reduce(moved, {mirror, view.where, view.dirty}, fn {id, x, y, kind},
                                                                  {mirror, where, dirty} ->
            {Map.put(mirror, id, {x, y, kind}), Map.put(where, id, zone),
             Map.put(dirty, id, true)}
          end)

        {mirror, where, dirty} =
          Enum.reduce(gone, {mirror, where, dirty}, fn id, {mirror, where, dirty} ->
            # An entity that crossed into a neighbour may already be listed
            # there; only the zone that last reported it may remove it.
            where = if where[id] == zone, do: Map.delete(where, id), else: where
            {Map.delete(mirror, id), where, Map.put(dirty, id, true)}
          end)

        %{view | mirrors: Map.put(view.mirrors, zone, mirror), where: where, dirty: dirty}

      _ ->
        view
    end
  end

  @doc "Forgets a zone the viewport no longer reaches."
  @spec drop_area(t(), Grid.zone_index()) :: t()
  def drop_area(%__MODULE__{} = view, zone) do
    {old, mirrors} = Map.pop(view.mirrors, zone, %{})

    where =
      Enum.reduce(old, view.where, fn {id, _}, where ->
        if where[id] == zone, do: Map.delete(where, id), else: where
      end)

    %{view | mirrors: mirrors, where: where, rescan: true}
  end

  @doc "Every entity the view holds, in any area, viewport or not, by id."
  @spec known(t()) :: %{non_neg_integer() => {non_neg_integer(), non_neg_integer(), byte()}}
  def known(%__MODULE__{} = view) do
    for {zone, mirror} <- view.mirrors,
        {id, entry} <- mirror,
        view.where[id] == zone,
        into: %{},
        do: {id, entry}
  end

  @doc "Moves the viewport's centre, normally to the client's own new cell."
  @spec recenter(t(), Grid.cell()) :: t()
  def recenter(%__MODULE__{center: center} = view, center), do: view
  def recenter(%__MODULE__{} = view, center), do: %{view | center: center, rescan: true}

  @doc "Makes the next `take_changes/1` hand over the whole view again."
  @spec resync(t()) :: t()
  def resync(%__MODULE__{} = view), do: %{view | shown: %{}, rescan: true, complete: true}

  @doc "True when `take_changes/1` may have something to hand over."
  @spec pending?(t()) :: boolean()
  def pending?(%__MODULE__{complete: complete, rescan: rescan, dirty: dirty}),
    do: complete or rescan or map_size(dirty) > 0

  @doc "Everything inside the viewport now, by id."
  @spec visible(t()) :: %{non_neg_integer() => {non_neg_integer(), non_neg_integer(), byte()}}
  def visible(%__MODULE__{} = view) do
    for {zone, mirror} <- view.mirrors,
        {id, {x, y, _kind} = entry} <- mirror,
        view.where[id] == zone,
        Grid.in_view?(view.center, view.radius, {x, y}),
        into: %{},
        do: {id, entry}
  end

  @doc """
  What changed inside the viewport since the last call, and the view that
  remembers it was handed over. Returns `:none` instead of changes when
  nothing did.
  """
  @spec take_changes(t()) :: {changes() | :none, t()}
  def take_changes(%__MODULE__{complete: true} = view) do
    now = with_self(visible(view), view)
    shown = for {id, entry} <- now, do: flat(id, entry)

    {%{shown: shown, gone: [], full: true},
     %{view | shown: now, dirty: %{}, rescan: false, complete: false}}
  end

  def take_changes(%__MODULE__{rescan: true, self: self} = view) do
    now = visible(view)
    shown = for {id, entry} <- now, id != self, view.shown[id] != entry, do: flat(id, entry)
    gone = for {id, _} <- view.shown, id != self, not is_map_key(now, id), do: id
    result(shown, gone, %{view | shown: now, dirty: %{}, rescan: false})
  end

  def take_changes(%__MODULE__{dirty: dirty} = view) when map_size(dirty) == 0, do: {:none, view}

  def take_changes(%__MODULE__{} = view) do
    {shown, gone, now} =
      Enum.reduce(view.dirty, {[], [], view.shown}, fn {id, true}, {shown, gone, now} ->
        current = current(view, id)

        case {current, now[id]} do
          {same, same} -> {shown, gone, now}
          {nil, _before} when id == view.self -> {shown, gone, Map.delete(now, id)}
          {entry, _before} when id == view.self -> {shown, gone, Map.put(now, id, entry)}
          {nil, _before} -> {shown, [id | gone], Map.delete(now, id)}
          {entry, _before} -> {[flat(id, entry) | shown], gone, Map.put(now, id, entry)}
        end
      end)

    result(shown, gone, %{view | shown: now, dirty: %{}})
  end

  defp result([], [], view), do: {:none, view}
  defp result(shown, gone, view), do: {%{shown: shown, gone: gone, full: false}, view}

  defp current(view, id) do
    with zone when zone != nil <- view.where[id],
         %{^id => {x, y, _kind} = entry} <- view.mirrors[zone],
         true <- Grid.in_view?(view.center, view.radius, {x, y}) do
      entry
    else
      _ -> nil
    end
  end

  defp flat(id, {x, y, kind}), do: {id, x, y, kind}

  defp with_self(now, %__MODULE__{self: nil}), do: now

  defp with_self(now, %__MODULE__{self: self, center: {x, y}} = view),
    do: Map.put(now, self, {x, y, view.self_kind})
end
