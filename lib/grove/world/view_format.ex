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
  """

  alias Grove.World.{Entity, Grid}

  @typedoc "An entity as views show it: id, cell and kind."
  @type entry :: {Entity.id(), non_neg_integer(), non_neg_integer(), byte()}

  @typedoc "A labelled entity (a player) as views name it: id, name and avatar."
  @type name :: {Entity.id(), String.t(), String.t()}

  @typedoc """
  What a view carries beyond entities: `names`, the labelled entities
  (players) the viewers have not been told of in this zone. In a snapshot
  every labelled entity in it; in a delta those that came into the zone
  since the last (joined, or walked in from another zone), never those
  that only moved within it: a name crosses once per entity and zone, not
  with every move.
  """
  @type extra :: %{names: [name()]}

  @doc """
  Encodes a zone's snapshot (every entity in it; `departed` is `[]`) or a
  delta (entities that moved into or within the zone, with their new cell,
  and the ids of those that left it or the world).
  """
  @callback encode_view(
              format :: term(),
              :snapshot | :delta,
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
              :snapshot | :delta,
              Grid.zone_index(),
              entries :: [entry()],
              departed :: [Entity.id()],
              extra()
            ) :: term()

  @optional_callbacks encode_view: 6
end
