defmodule Grove.World.ViewFormat do
  @moduledoc """
  The form in which a viewer reads what zones publish.

  A client that joins with `updates: :view` names its format as
  `view_format: {module, format}`. Each zone its viewport overlaps encodes
  its snapshot for that viewer, and every delta once per tick for all the
  viewers that read the same format, by calling `module.encode_view/5`; the
  result is what the viewer receives in a snapshot message and reads from
  the world's feed (`Grove.World.view_deltas/4`). Encoding once per format
  and per tick, whatever the number of viewers, is what lets a zone serve
  many of them: the gateway's format is a finished WebSocket frame that the
  same bytes carry to every socket.

  `Grove.World.View` implements the `:raw` format that in-VM clients use.

  An encoder runs inside the zone process, so it must be quick and must not
  raise: it is part of the server, not of the client.

  ## Beyond entities

  A snapshot or a delta may carry more than entities (`extra/0`): the
  names of players; in a world with a game (`Grove.Game`), the visible
  cells of the game's layer and the looks of entities; and events told to
  the viewers of a cell (`Grove.World.Zone.State.event/5`: a game's, a
  chat's). A format that shows them implements `encode_view/6`, which then
  gets every snapshot and delta that carries any of them, with all four
  keys, most often empty lists; a format without it gets them through
  `encode_view/5`, without the extra. A snapshot's `extra` names every
  labelled entity in the zone and lists every visible cell and every look
  other than 0; a delta's, the names of the labelled entities that came
  into the zone (joined, or walked in from another zone; never those that
  only moved within it: a name crosses once per entity and zone, not with
  every move), the cells that changed (a cell back to nothing has code 0)
  and the looks of entities that changed or came into the zone, and the
  events since the last delta, oldest first.
  """

  alias Grove.World.{Entity, Grid}

  @typedoc "An entity as views show it: id, cell and kind."
  @type entry :: {Entity.id(), non_neg_integer(), non_neg_integer(), byte()}

  @typedoc "A labelled entity (a player) as views name it: id, name and avatar."
  @type name :: {Entity.id(), String.t(), String.t()}

  @typedoc """
  What a view carries beyond entities (see "Beyond entities" above):
  `names` of labelled entities (players), the game's visible `cells` as
  `{x, y, code}`, entities' `looks` as `{id, code}`, and `events` as `{id,
  x, y, name, data}` (who caused it, 0 for nobody; where; what; small
  data). A snapshot also carries the zone's `ground` (its own cells,
  `Grove.World.Terrain.crop/2`), for formats that send it, or that ground
  as the format encoded it before (`encode_ground/3`).
  """
  @type extra :: %{
          required(:names) => [name()],
          required(:cells) => [{non_neg_integer(), non_neg_integer(), byte()}],
          required(:looks) => [{Entity.id(), byte()}],
          required(:events) => [
            {Entity.id(), non_neg_integer(), non_neg_integer(), atom(), map()}
          ],
          optional(:ground) => Grove.World.Terrain.Area.t() | {:encoded, term()}
        }

  @doc """
  Encodes a zone's snapshot (every entity in it; `departed` is `[]`) or a
  delta (entities that moved into or within the zone, with their new cell,
  and the ids of those that left it or the world).
  """
  @callback encode_view(
              format :: term(),
              :snapshot | :delta | {:delta, %{Entity.id() => true}},
              Grid.zone_index(),
              entries :: [entry()],
              departed :: [Entity.id()]
            ) :: term()

  @doc """
  The same, with what the view carries beyond entities (`extra`), called
  only for a snapshot or a delta that carries some; a format without it
  gets those through `encode_view/5`, without the extra.
  """
  @callback encode_view(
              format :: term(),
              :snapshot | :delta | {:delta, %{Entity.id() => true}},
              Grid.zone_index(),
              entries :: [entry()],
              departed :: [Entity.id()],
              extra()
            ) :: term()

  @doc """
  True when viewers of `format` read zones tile by tile (`Grove.World.Grid`'s
  view tiles). Then a zone encodes each delta once per tile that changed,
  `index` being the tile's number, and the feed holds, for the format, a
  list of `{tile, data}`; a viewer that subscribes is told
  `{:grove_view, zone, :subscribed, seq}` instead of a snapshot, and asks
  for the tiles it wants (`Grove.World.request_tiles/4`). A format without
  this callback reads whole zones.

  A tiled format's deltas come as `{:delta, stayed}` rather than
  `:delta`: `stayed` holds (as keys of a map) the ids of the entries that
  were in the tile already, which every viewer of the tile knows, so that
  the format may leave out what does not change (their kind); an entry
  not in it came into the tile (joined, or crossed from another tile or
  zone), or was away from it when a snapshot of the tile was taken since
  the last delta.
  """
  @callback tiled?(format :: term()) :: boolean()

  @doc """
  A snapshot's `ground`, encoded as `encode_view/6` would encode it within
  the snapshot, for zone or tile `index`. A zone keeps what it returns for
  each of its view tiles and format (the ground does not change) and
  passes it back in the snapshots of that tile as `ground: {:encoded,
  part}`, which `encode_view/6` then puts where it puts the ground; a
  format without this callback gets the ground itself in every snapshot.
  """
  @callback encode_ground(format :: term(), Grid.zone_index(), Grove.World.Terrain.Area.t()) ::
              term()

  @optional_callbacks encode_view: 6, tiled?: 1, encode_ground: 3
end
