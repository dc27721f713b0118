defmodule Grove.World.Zone.Views do
  @moduledoc false
  # The zone's side of views (the viewer's side is Grove.World.View), as
  # plain data: who watches the zone, in which format and from which node
  # (`Zone.Subscriptions`), the number of the last delta it published, and
  # the rules by which viewers follow their entities from zone to zone. Each
  # function returns the effects the zone process carries out, in order
  # (`Grove.World.Zone`'s `run_effects/2`), and the new structure, as
  # `Zone.Handoff` does; it sends nothing, writes no table and starts no
  # timer itself.
  #
  # Viewers subscribe (the zone of a viewer's entity does it for them as it
  # moves) and get a snapshot in their format at once. While anyone
  # watches, each tick that changed something encodes the delta once per
  # format and publishes it in the world's feed (Grove.World.Feed), where
  # viewers read it when they are ready: the zone sends nothing per viewer
  # and per tick.
  #
  # Viewers on other nodes read their own node's feed: the zone sends each
  # delta, as encoded for the feed, once to each such node's relay
  # (Grove.World.Relay), which publishes it there under the same number. A
  # node that starts watching is first told the number the zone is at, and
  # what goes to one viewer there alone (its snapshot, the end of its
  # subscription) goes through its relay too, behind the deltas before it.
  #
  # Tiles: a format read tile by tile (its module's `tiled?/1`, as the
  # gateway's frames are) gets each delta cut by the grid's view tiles,
  # each tile that changed encoded once, and the feed holds the list of
  # `{tile, data}`; a viewer of it that subscribes is told so
  # (`{:grove_view, zone, :subscribed, seq}`) and asks for the tiles it
  # wants (`snapshot_tiles/5`, answered with `{:grove_view, zone, :tiles,
  # seq, [{tile, data}]}`). Which tiles a viewer holds is its own affair:
  # the zone keeps no per-viewer tile sets. An entity that crosses from one
  # tile into another is gone from the first and comes into the second
  # (named there, when it has a name); to tell, the zone keeps each
  # entity's tile (`placed`) while it is watched, and the tiles a snapshot
  # showed it in since the last delta (`shown`: it may have moved since
  # that delta, and move or leave again before the next). A tiled delta
  # also tells which of its entities were in the tile already, so that a
  # format may leave out what a viewer of the tile knows of them (their
  # kind): those that did not cross into it, unless a snapshot of their
  # tile was taken since the last delta while they were away from it
  # (`away`: that snapshot's viewer does not know them; they are named
  # there, too, as if they had crossed).
  #
  # The effects:
  #
  #   * `{:send, zone, {:subscribe | :unsubscribe, pid, id, format}}` - a
  #     viewer's subscription to another zone, which its entity's viewport
  #     now overlaps or no longer does;
  #   * `{:remember, pid, id, format}`, `{:forget, pid, id, format}` and
  #     `{:forget_viewer, pid, format}` - the world's table of
  #     subscriptions, from which a restarted or handed-over zone rebuilds
  #     this structure;
  #   * `{:monitor, viewer}` - a new viewer: the zone monitors it and gives
  #     the reference back with `monitored/3`; `{:demonitor, ref}` - one
  #     that watches no more;
  #   * `{:tell, pid, message}` - a message to one viewer (a snapshot, or
  #     `{:grove_view, zone, :closed}`);
  #   * `{:feed_from, node, seq}` - the first viewer on another node: that
  #     node's relay learns the number the zone is at;
  #   * `{:publish, seq, encoded}` - a delta, one encoding per format read,
  #     into this node's feed; `{:relay, node, seq, encoded}` - the same to
  #     another node with viewers;
  #   * `{:watch, boolean}` - the zone starts or stops being watched: its
  #     core collects changes for deltas, and it ticks, only while it is;
  #   * `{:count, stat}` - one more in a `Grove.World.Stats` counter.
  #
  # A move that leaves a viewer's viewport over the same zones, by far the
  # most common, returns no effect and the structure unchanged.

  alias Grove.World.{Entity, Feed, Grid, Terrain, ViewFormat}
  alias Grove.World.Zone.{State, Subscriptions}

  defstruct [
    :index,
    :grid,
    :subscriptions,
    seq: 0,
    placed: nil,
    shown: %{},
    away: %{},
    grounds: %{}
  ]

  @type t :: %__MODULE__{
          index: Grid.zone_index(),
          grid: Grid.t(),
          subscriptions: Subscriptions.t(),
          seq: non_neg_integer(),
          placed: %{Entity.id() => Grid.tile_index()} | nil,
          shown: %{Entity.id() => [Grid.tile_index()]},
          away: %{Entity.id() => true},
          grounds: %{{Feed.format(), Grid.tile_index()} => term()}
        }

  @type message ::
          {:grove_view, Grid.zone_index(), :snapshot, non_neg_integer(), term()}
          | {:grove_view, Grid.zone_index(), :subscribed, non_neg_integer()}
          | {:grove_view, Grid.zone_index(), :tiles, non_neg_integer(),
             [{Grid.tile_index(), term()}]}
          | {:grove_view, Grid.zone_index(), :closed}

  @type effect ::
          {:send, Grid.zone_index(),
           {:subscribe | :unsubscribe, pid(), Entity.id(), Feed.format()}}
          | {:remember, pid(), Entity.id(), Feed.format()}
          | {:forget, pid(), Entity.id(), Feed.format()}
          | {:forget_viewer, pid(), Feed.format()}
          | {:monitor, Subscriptions.viewer()}
          | {:demonitor, reference()}
          | {:tell, pid(), message()}
          | {:feed_from, node(), non_neg_integer()}
          | {:publish, pos_integer(), [{Feed.format(), term()}]}
          | {:relay, node(), pos_integer(), [{Feed.format(), term()}]}
          | {:watch, boolean()}
          | {:count, :snapshots_sent | :deltas_published}

  @doc """
  Nobody watching zone `index` of `grid` yet, on `node`, whose last delta
  was number `seq` (a restarted zone carries on from its last).
  """
  @spec new(Grid.zone_index(), Grid.t(), node(), non_neg_integer()) :: t()
  def new(index, %Grid{} = grid, node, seq),
    do: %__MODULE__{index: index, grid: grid, subscriptions: Subscriptions.new(node), seq: seq}

  @doc "True while anyone watches."
  @spec watched?(t()) :: boolean()
  def watched?(%__MODULE__{subscriptions: subs}), do: Subscriptions.watched?(subs)

  @doc "True when the process `pid` is the zone's only viewer (`:any`: when it has one)."
  @spec alone?(t(), pid() | :any) :: boolean()
  def alone?(%__MODULE__{subscriptions: subs}, pid), do: Subscriptions.only?(subs, pid)

  @doc "True when the viewer (its process and format) watches the zone."
  @spec member?(t(), Subscriptions.viewer()) :: boolean()
  def member?(%__MODULE__{subscriptions: subs}, viewer), do: Subscriptions.member?(subs, viewer)

  @doc """
  Keeps a viewing entity subscribed to exactly the zones its viewport
  overlaps; `before` is the cell it came from (`nil` on joining), and only
  the differences are sent. `core` is this zone's, for a snapshot.
  """
  @spec follow(t(), State.t(), Entity.t(), Grid.cell() | nil) :: {[effect()], t()}
  def follow(%__MODULE__{grid: grid} = views, core, %Entity{} = now, before) do
    # Most steps leave the viewport over the same zones: tell that cheaply.
    if before != nil and
         Grid.view_span(grid, {now.x, now.y}, now.view_radius) ==
           Grid.view_span(grid, before, now.view_radius) do
      {[], views}
    else
      wanted = Grid.view_zones(grid, {now.x, now.y}, now.view_radius)
      had = if before, do: Grid.view_zones(grid, before, now.view_radius), else: []
      {effects, views} = subscriptions(views, core, had -- wanted, :unsubscribe, now, [])
      subscriptions(views, core, wanted -- had, :subscribe, now, effects)
    end
  end

  @doc "A viewing entity gone from the zone: it watches none of the zones it did."
  @spec drop(t(), Entity.t()) :: {[effect()], t()}
  def drop(%__MODULE__{grid: grid} = views, %Entity{} = entity) do
    zones = Grid.view_zones(grid, {entity.x, entity.y}, entity.view_radius)
    subscriptions(views, nil, zones, :unsubscribe, entity, [])
  end

  @doc """
  A viewing entity subscribes to zone `to` again (it runs anew, empty,
  after its node was lost); `core` is this zone's, should `to` be it.
  """
  @spec subscribe_to(t(), State.t(), Entity.t(), Grid.zone_index()) :: {[effect()], t()}
  def subscribe_to(views, core, %Entity{} = entity, to),
    do: subscriptions(views, core, [to], :subscribe, entity, [])

  # Subscriptions here are taken at once; to other zones, sent.
  defp subscriptions(views, _core, [], _action, _entity, effects), do: {effects, views}

  defp subscriptions(%__MODULE__{index: index} = views, core, [to | rest], action, entity, acc) do
    {effects, views} =
      case {to, action} do
        {^index, :subscribe} ->
          subscribe(views, core, entity.owner, entity.id, entity.view_format)

        {^index, :unsubscribe} ->
          unsubscribe(views, entity.owner, entity.id, entity.view_format)

        {to, action} ->
          {[{:send, to, {action, entity.owner, entity.id, entity.view_format}}], views}
      end

    subscriptions(views, core, rest, action, entity, acc ++ effects)
  end

  @doc """
  A viewer watches the zone through entity `id`, in `format`, and gets a
  snapshot of `core` at once. Subscribing is idempotent: subscribing again
  only sends a fresh snapshot.
  """
  @spec subscribe(t(), State.t(), pid(), Entity.id(), Feed.format()) :: {[effect()], t()}
  def subscribe(%__MODULE__{} = views, core, pid, id, format) do
    viewer = {pid, format}
    was_watched = watched?(views)
    {subs, result} = Subscriptions.subscribe(views.subscriptions, viewer, id, nil)
    views = %{views | subscriptions: subs}
    views = if was_watched, do: views, else: place_all(views, core)

    # A node that starts watching is told the number the zone is at before
    # any delta, so that its feed matches the snapshots its viewers get.
    joined =
      case result do
        :added -> []
        :new -> [{:monitor, viewer}]
        {:new, node} -> [{:monitor, viewer}, {:feed_from, node, views.seq}]
      end

    {[{:remember, pid, id, format} | joined] ++
       snapshot_effects(views, core, pid, format) ++ watch(was_watched, views), views}
  end

  @doc """
  A fresh snapshot of the given view tiles of `core` for a viewer of a
  tiled format (one that reads the zone tile by tile, see "Tiles" above),
  as one message; tiles of other zones are left out, and a viewer that
  does not watch gets nothing.
  """
  @spec snapshot_tiles(t(), State.t(), pid(), Feed.format(), [Grid.tile_index()]) ::
          {[effect()], t()}
  def snapshot_tiles(%__MODULE__{} = views, core, pid, format, tiles) do
    if member?(views, {pid, format}) do
      tiles = for tile <- tiles, Grid.tile_zone(views.grid, tile) == views.index, do: tile
      shown = in_tiles(views.grid, core, tiles)
      views = away(views, core, tiles)
      {grounds, views} = grounds(views, core, format, tiles)
      {tiles_effects(views, core, pid, format, grounds, shown), show(views, shown)}
    else
      {[], views}
    end
  end

  @doc """
  A viewer stops watching through entity `id`; when that was its last, its
  monitor goes and it is told.
  """
  @spec unsubscribe(t(), pid(), Entity.id(), Feed.format()) :: {[effect()], t()}
  def unsubscribe(%__MODULE__{} = views, pid, id, format) do
    forget = {:forget, pid, id, format}

    case Subscriptions.unsubscribe(views.subscriptions, {pid, format}, id) do
      {subs, {:last, ref}} ->
        views = unplace(%{views | subscriptions: subs})
        closed = {:tell, pid, {:grove_view, views.index, :closed}}
        {[forget, {:demonitor, ref}, closed | watch(true, views)], views}

      {subs, _kept_or_none} ->
        {[forget], %{views | subscriptions: subs}}
    end
  end

  @doc "A viewer that died: its subscriptions here in that format go, all at once."
  @spec down(t(), pid(), Feed.format()) :: {[effect()], t()}
  def down(%__MODULE__{} = views, pid, format) do
    was_watched = watched?(views)

    views =
      unplace(%{views | subscriptions: Subscriptions.down(views.subscriptions, {pid, format})})

    {[{:forget_viewer, pid, format} | watch(was_watched, views)], views}
  end

  @doc """
  A fresh snapshot of `core` for a viewer that asks for one (it fell
  behind the feed, or lost track); none for one that does not watch.
  """
  @spec snapshot(t(), State.t(), pid(), Feed.format()) :: {[effect()], t()}
  def snapshot(%__MODULE__{} = views, core, pid, format) do
    if member?(views, {pid, format}),
      do: {snapshot_effects(views, core, pid, format), views},
      else: {[], views}
  end

  @doc "The monitor the zone put on a viewer (after `{:monitor, viewer}`)."
  @spec monitored(t(), Subscriptions.viewer(), reference()) :: t()
  def monitored(%__MODULE__{} = views, viewer, ref),
    do: %{views | subscriptions: Subscriptions.monitored(views.subscriptions, viewer, ref)}

  @doc "A monitor for every viewer again (the zone dropped them all for a handover that failed)."
  @spec monitor_all(t()) :: {[effect()], t()}
  def monitor_all(%__MODULE__{} = views),
    do:
      {for({viewer, _ref} <- Subscriptions.viewers(views.subscriptions), do: {:monitor, viewer}),
       views}

  @doc """
  A tick's delta (the entries that changed, the ids that left and what
  else it carries), encoded once per format read and published under the
  next number, here and on each other node with viewers; nothing when
  nothing changed. A tiled format gets it cut by view tile, each tile
  that changed encoded once; `core` is this zone's, after the changes.
  """
  @spec publish(t(), State.t(), [ViewFormat.entry()], [Entity.id()], ViewFormat.extra() | nil) ::
          {[effect()], t()}
  def publish(views, _core, [], [], nil), do: {[], views}

  def publish(%__MODULE__{} = views, core, changes, departed, extra) do
    seq = views.seq + 1
    subs = views.subscriptions
    formats = Subscriptions.formats(subs)
    {tiled, whole} = Enum.split_with(formats, &tiled?/1)

    # Cut whatever the formats, so that where each entity is stays known
    # for a tiled viewer that comes later.
    {cut, views} = cut(views, core, changes, departed, extra)

    encoded =
      for(
        format <- whole,
        do: {format, encode(format, :delta, views.index, changes, departed, extra)}
      ) ++
        for format <- tiled,
            do:
              {format,
               for(
                 {tile, entries, gone, tile_extra, stayed} <- cut,
                 do: {tile, encode(format, {:delta, stayed}, tile, entries, gone, tile_extra)}
               )}

    relays = for node <- Subscriptions.nodes(subs), do: {:relay, node, seq, encoded}
    {[{:publish, seq, encoded}, {:count, :deltas_published} | relays], %{views | seq: seq}}
  end

  @doc """
  True when a format reads the zone tile by tile: its module says so with
  `tiled?/1` (`Grove.World.ViewFormat`).
  """
  @spec tiled?(Feed.format()) :: boolean()
  def tiled?({module, name}),
    do: function_exported?(module, :tiled?, 1) and module.tiled?(name)

  def tiled?(_format), do: false

  # A zone of one tile: the delta is the tile's.
  defp cut(
         %__MODULE__{grid: %Grid{tile_size: size, zone_size: size}} = views,
         _core,
         changes,
         departed,
         extra
       ),
       do: {[{tile_of_zone(views), changes, departed, extra, %{}}], views}

  # The delta cut by tile: an entity that crossed from one tile into
  # another within the zone is gone from the first and comes into the
  # second, named there if it has a name (a viewer may hold the second
  # alone); what left the zone is gone from the tile it was last in.
  defp cut(%__MODULE__{grid: grid} = views, core, changes, departed, extra) do
    entities = core.entities
    placed = views.placed || %{}
    shown = views.shown
    away = views.away

    {tiles, placed} =
      Enum.reduce(changes, {%{}, placed}, fn {id, x, y, _kind} = entry, {tiles, placed} ->
        tile = Grid.tile_of(grid, x, y)

        case placed do
          # Nearly every change: an entity that stays in its tile, which
          # no snapshot showed since the last delta: its entry, and that
          # it stayed, in one update of the tile's part.
          %{^id => ^tile} when not is_map_key(shown, id) and not is_map_key(away, id) ->
            {stayed(tiles, tile, entry, id), placed}

          _moved_or_shown ->
            tiles = add(tiles, tile, 0, entry)
            tiles = Enum.reduce(held_in(placed, shown, id, tile), tiles, &add(&2, &1, 1, id))

            # Stayed in its tile, and no snapshot of it was taken while it
            # was away: every viewer of the tile knows it. Else it crossed
            # from another tile, or such a snapshot did not show it: named
            # in this one.
            tiles =
              case {placed, entities} do
                {%{^id => ^tile}, _} when not is_map_key(away, id) ->
                  add(tiles, tile, 6, id)

                {%{^id => _}, %{^id => %Entity{label: {name, avatar}}}} ->
                  add(tiles, tile, 2, {id, name, avatar})

                _new_or_unnamed ->
                  tiles
              end

            {tiles, Map.put(placed, id, tile)}
        end
      end)

    {tiles, placed} =
      Enum.reduce(departed, {tiles, placed}, fn id, {tiles, placed} ->
        tiles = Enum.reduce(held_in(placed, shown, id, nil), tiles, &add(&2, &1, 1, id))
        {tiles, Map.delete(placed, id)}
      end)

    tiles =
      case extra do
        nil ->
          tiles

        %{} ->
          tiles = by_entity(extra.names, tiles, placed, 2)
          tiles = by_entity(extra.looks, tiles, placed, 4)

          tiles =
            Enum.reduce(extra.cells, tiles, fn {x, y, _code} = cell, tiles ->
              add(tiles, Grid.tile_of(grid, x, y), 3, cell)
            end)

          Enum.reduce(extra.events, tiles, fn {_id, x, y, _name, _data} = event, tiles ->
            add(tiles, Grid.tile_of(grid, x, y), 5, event)
          end)
      end

    cut =
      for {tile, {entries, gone, names, cells, looks, events, stayed}} <- tiles do
        tile_extra =
          if extra == nil and names == [],
            do: nil,
            else: %{
              names: Enum.reverse(names),
              cells: Enum.reverse(cells),
              looks: Enum.reverse(looks),
              events: Enum.reverse(events)
            }

        {tile, Enum.reverse(entries), Enum.reverse(gone), tile_extra,
         :maps.from_keys(stayed, true)}
      end

    {cut, %{views | placed: placed, shown: %{}, away: %{}}}
  end

  # One more item in a tile's part of the delta: its entries (0), gone
  # (1), names (2), cells (3), looks (4), events (5) or the ids of entries
  # that were in the tile already (6), newest first.
  defp add(tiles, tile, at, item) do
    case tiles do
      %{^tile => parts} ->
        %{tiles | tile => put_elem(parts, at, [item | elem(parts, at)])}

      _none ->
        Map.put(tiles, tile, put_elem({[], [], [], [], [], [], []}, at, [item]))
    end
  end

  # An entry that stayed in its tile (0 and 6 at once).
  defp stayed(tiles, tile, entry, id) do
    case tiles do
      %{^tile => {entries, gone, names, cells, looks, events, stayed}} ->
        %{tiles | tile => {[entry | entries], gone, names, cells, looks, events, [id | stayed]}}

      _none ->
        Map.put(tiles, tile, {[entry], [], [], [], [], [], [id]})
    end
  end

  # Names and looks go to the tile their entity is in now.
  defp by_entity(items, tiles, placed, at) do
    Enum.reduce(items, tiles, fn item, tiles ->
      case Map.fetch(placed, elem(item, 0)) do
        {:ok, tile} -> add(tiles, tile, at, item)
        :error -> tiles
      end
    end)
  end

  defp tile_of_zone(%__MODULE__{grid: grid, index: index}) do
    {x0, y0, _x1, _y1} = Grid.zone_bounds(grid, index)
    Grid.tile_of(grid, x0, y0)
  end

  # The entities a snapshot of `tiles` leaves out though the last delta
  # had them there: they moved away (or out of the zone) since, and may
  # come back before the next delta, which must then bring them to the
  # snapshot's viewer whole, kind and name.
  defp away(%__MODULE__{placed: nil} = views, _core, _tiles), do: views

  # Only an entity that moved or left since the last delta can be away
  # from the tile it had there: the core's changes since then (`changed`,
  # `departed`, which the next delta takes) name every one, so those alone
  # are looked at, not every entity and bacterium the zone placed.
  defp away(%__MODULE__{placed: placed, grid: grid, away: away} = views, core, tiles) do
    wanted = Map.new(tiles, &{&1, true})
    entities = core.entities

    away_of = fn id, _value, away ->
      case placed do
        %{^id => tile} when is_map_key(wanted, tile) ->
          here =
            case entities do
              %{^id => %Entity{x: x, y: y}} -> Grid.tile_of(grid, x, y) == tile
              _gone -> false
            end

          if here, do: away, else: Map.put(away, id, true)

        _elsewhere ->
          away
      end
    end

    away = :maps.fold(away_of, :maps.fold(away_of, away, core.changed), core.departed)
    %{views | away: away}
  end

  # Where each entity of the zone is, by tile, from the moment it is
  # watched: the next deltas tell which crossed from one tile to another.
  # A zone of one tile needs none of it.
  defp place_all(%__MODULE__{grid: %Grid{tile_size: size, zone_size: size}} = views, _core),
    do: views

  defp place_all(%__MODULE__{grid: grid} = views, core) do
    placed =
      for {id, x, y, _kind} <- State.snapshot(core),
          into: %{},
          do: {id, Grid.tile_of(grid, x, y)}

    %{views | placed: placed}
  end

  # The entities a snapshot of `tiles` shows, by tile (`in_tiles/3`), are
  # remembered as shown there: the next delta takes them from there too,
  # should they have moved or left meanwhile.
  defp show(%__MODULE__{placed: nil} = views, _shown), do: views

  defp show(views, shown_by_tile) do
    shown =
      :maps.fold(
        fn tile, {there, _names, _looks}, shown ->
          Enum.reduce(there, shown, fn {id, _x, _y, _kind}, shown ->
            Map.update(shown, id, [tile], &[tile | &1])
          end)
        end,
        views.shown,
        shown_by_tile
      )

    %{views | shown: shown}
  end

  # What a snapshot of `tiles` shows in each, by tile: its entries (the
  # zone's bacteria there, then its entities, in the order of
  # `State.snapshot/1`), and the names and looks (with a game) of the
  # entities among them, as `State.snapshot_extra/1` lists them for those
  # shown alone; tiles with no entry are left out. One pass over the
  # zone's entities finds each one's tile once for all three; its
  # bacteria are read from the tiles' rectangles alone, not listed whole
  # (a zone of 50 cells a side has 25 tiles, and a viewer asks for few).
  defp in_tiles(_grid, _core, []), do: %{}

  defp in_tiles(grid, core, tiles) do
    wanted = Map.new(tiles, &{&1, true})
    looks? = core.game != nil

    entities =
      for {id, %Entity{x: x, y: y} = entity} <- core.entities,
          tile = Grid.tile_of(grid, x, y),
          is_map_key(wanted, tile),
          reduce: %{} do
        acc ->
          {there, names, looks} = Map.get(acc, tile, {[], [], []})

          names =
            case entity.label do
              {name, avatar} -> [{id, name, avatar} | names]
              nil -> names
            end

          looks = if looks? and entity.look != 0, do: [{id, entity.look} | looks], else: looks
          Map.put(acc, tile, {[{id, x, y, entity.kind} | there], names, looks})
      end

    Enum.reduce(Map.keys(wanted), %{}, fn tile, acc ->
      bacteria = State.bacteria_within(core, Grid.tile_bounds(grid, tile))
      {there, names, looks} = Map.get(entities, tile, {[], [], []})

      case bacteria ++ Enum.reverse(there) do
        [] -> acc
        there -> Map.put(acc, tile, {there, Enum.reverse(names), Enum.reverse(looks)})
      end
    end)
  end

  # Where a viewer may hold an entity now, but in `now`: the tile of the
  # last delta, and those of snapshots since.
  # Nearly every change is of an entity no snapshot showed since the last
  # delta, which stays in its tile: told without building a list.
  defp held_in(placed, shown, id, now) do
    case {shown, placed} do
      {%{^id => before}, _placed} -> held_in(before, Map.get(placed, id), now)
      {_none, %{^id => ^now}} -> []
      {_none, %{^id => tile}} -> [tile]
      _never_placed -> []
    end
  end

  defp held_in(before, tile, now) do
    before = if tile, do: [tile | before], else: before
    before |> Enum.uniq() |> List.delete(now)
  end

  defp unplace(views),
    do: if(watched?(views), do: views, else: %{views | placed: nil, shown: %{}, away: %{}})

  # The zone as it is now, for a viewer that starts (or starts again) from
  # the number of the last delta published: the deltas after it complete
  # the picture. The zone's ground goes with every snapshot, for the
  # formats that send it.
  # A viewer of a tiled format is told it watches, and asks for the tiles
  # it wants (`snapshot_tiles/5`).
  defp snapshot_effects(views, core, pid, format) do
    if tiled?(format),
      do: [{:tell, pid, {:grove_view, views.index, :subscribed, views.seq}}],
      else: whole_snapshot(views, core, pid, format)
  end

  # Each tile as it is now, as a snapshot of its own (its entities, the
  # names, cells and looks in it, its ground), all in one message.
  defp tiles_effects(_views, _core, _pid, _format, [], _shown), do: []

  defp tiles_effects(%__MODULE__{grid: grid} = views, core, pid, format, grounds, shown) do
    wanted = Map.new(grounds, &{elem(&1, 0), true})

    in_tile = fn x, y ->
      tile = Grid.tile_of(grid, x, y)
      if is_map_key(wanted, tile), do: tile
    end

    cells = Enum.group_by(State.cells(core), fn {x, y, _code} -> in_tile.(x, y) end)

    data =
      for {tile, ground} <- grounds do
        {there, names, looks} = Map.get(shown, tile, {[], [], []})

        tile_extra = %{
          names: names,
          cells: Map.get(cells, tile, []),
          looks: looks,
          events: [],
          ground: ground
        }

        {tile, encode(format, :snapshot, tile, there, [], tile_extra)}
      end

    [
      {:count, :snapshots_sent},
      {:tell, pid, {:grove_view, views.index, :tiles, views.seq, data}}
    ]
  end

  # Each tile's ground, for a snapshot of it: encoded by a format that
  # encodes it apart (`ViewFormat.encode_ground/3`), the first time alone,
  # and kept for the snapshots after (a tile's ground never changes; the
  # zone keeps at most one a tile for each format read); else the ground
  # itself, cut from the zone's each time.
  defp grounds(%__MODULE__{grid: grid} = views, core, {module, name} = format, tiles) do
    if function_exported?(module, :encode_ground, 3) do
      Enum.map_reduce(tiles, views, fn tile, views ->
        case views.grounds do
          %{{^format, ^tile} => part} ->
            {{tile, {:encoded, part}}, views}

          _first ->
            ground = Terrain.crop(core.terrain, Grid.tile_bounds(grid, tile))
            part = module.encode_ground(name, tile, ground)
            grounds = Map.put(views.grounds, {format, tile}, part)
            {{tile, {:encoded, part}}, %{views | grounds: grounds}}
        end
      end)
    else
      {for(tile <- tiles, do: {tile, Terrain.crop(core.terrain, Grid.tile_bounds(grid, tile))}),
       views}
    end
  end

  defp whole_snapshot(views, core, pid, format) do
    extra = State.snapshot_extra(core) || %{names: [], cells: [], looks: [], events: []}
    extra = Map.put(extra, :ground, Terrain.crop(core.terrain, core.bounds))
    data = encode(format, :snapshot, views.index, State.snapshot(core), [], extra)

    [
      {:count, :snapshots_sent},
      {:tell, pid, {:grove_view, views.index, :snapshot, views.seq, data}}
    ]
  end

  defp watch(was_watched, views) do
    case watched?(views) do
      ^was_watched -> []
      watched -> [{:watch, watched}]
    end
  end

  # What a world without names, a game or events publishes goes through
  # `encode_view/5` alone; the rest (`extra`: players' names, the game's
  # cells and looks, the events) to formats that take it, `encode_view/6`.
  @doc false
  @spec encode(
          Feed.format(),
          :snapshot | :delta | {:delta, %{Entity.id() => true}},
          Grid.zone_index(),
          [ViewFormat.entry()],
          [Entity.id()],
          ViewFormat.extra() | nil
        ) :: term()
  def encode({module, name}, what, index, entries, departed, nil),
    do: module.encode_view(name, what, index, entries, departed)

  def encode({module, name}, what, index, entries, departed, extra) do
    if function_exported?(module, :encode_view, 6),
      do: module.encode_view(name, what, index, entries, departed, extra),
      else: module.encode_view(name, what, index, entries, departed)
  end
end
