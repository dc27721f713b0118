defmodule Grove.Gateway.Frames do
  @moduledoc false
  # Protocol messages as finished WebSocket frames, and the view format the
  # gateway's sessions watch zones in (Grove.World.ViewFormat): a zone
  # encodes each of its deltas once per encoding, as a whole `area` frame,
  # and every socket watching that zone is written those very bytes.
  #
  # `area` and `outcome` are the messages sent thousands of times a second
  # (a zone's every tick, a player's every move), so they have encoders of
  # their own, written out by hand; every other message goes through the
  # definitions in Grove.Protocol. The protocol tests check that both give
  # the same messages, byte for byte in binary.

  @behaviour Grove.World.ViewFormat

  import Bitwise, only: [&&&: 2, |||: 2, >>>: 2]

  alias Grove.Gateway.WebSocket
  alias Grove.Protocol
  alias Grove.Protocol.Codec
  alias Grove.World.Grid
  alias Grove.World.Terrain.Area

  @area_tag 72
  @areas_tag 82
  @outcome_tag 65
  @results [:ok | Grove.World.rejections()]
  # What an area shows of a game: its cells, entities' looks, and events
  # (who, where, what, and its data); `Grove.Protocol`'s `area` fields.
  @cell {:tuple, [:coord, :coord, :u8]}
  @look {:tuple, [:id, :u8]}
  @event {:tuple, [:id, :coord, :coord, :string, :data]}

  @doc "A message as one frame of the connection's encoding, in a version of the protocol."
  @spec message(Protocol.message(), Protocol.encoding(), pos_integer()) :: binary()
  def message(message, encoding, version \\ Protocol.version()),
    do: WebSocket.frame(kind(encoding), Protocol.encode(message, encoding, version))

  @doc "An `outcome` frame."
  @spec outcome(
          Protocol.encoding(),
          pos_integer(),
          non_neg_integer(),
          atom(),
          non_neg_integer(),
          non_neg_integer()
        ) ::
          binary()
  def outcome(:binary, 2, seq, result, x, y),
    do: WebSocket.frame(:binary, <<@outcome_tag, seq::32, result_code(result), x::16, y::16>>)

  def outcome(:binary, _version, seq, result, x, y),
    do:
      WebSocket.frame(:binary, [
        <<@outcome_tag, seq::32, result_code(result)>>,
        Codec.uvar(x),
        Codec.uvar(y)
      ])

  # From version 7 on, the result is its code in JSON, as in binary.
  def outcome(:json, version, seq, result, x, y) when version >= 7 do
    WebSocket.frame(:text, [
      "[65,",
      Integer.to_string(seq),
      ?,,
      Integer.to_string(result_code(result)),
      ?,,
      Integer.to_string(x),
      ?,,
      Integer.to_string(y),
      "]"
    ])
  end

  def outcome(:json, version, seq, result, x, y) when version >= 5 do
    WebSocket.frame(:text, [
      "[65,",
      Integer.to_string(seq),
      ~s(,"),
      Atom.to_string(result),
      ~s(",),
      Integer.to_string(x),
      ?,,
      Integer.to_string(y),
      "]"
    ])
  end

  def outcome(:json, _version, seq, result, x, y) do
    WebSocket.frame(:text, [
      ~s({"type":"outcome","seq":),
      Integer.to_string(seq),
      ~s(,"result":"),
      Atom.to_string(result),
      ~s(","x":),
      Integer.to_string(x),
      ~s(,"y":),
      Integer.to_string(y),
      "}"
    ])
  end

  for {result, code} <- Enum.with_index(@results) do
    defp result_code(unquote(result)), do: unquote(code)
  end

  @typedoc "What a broadcast is read in: JSON as objects (before version 5), as arrays (from it on), or binary."
  @type bulletin_encoding :: :json | :json_arrays | :binary

  @doc "The form a connection of this encoding and version reads broadcasts in."
  @spec bulletin_encoding(Protocol.encoding(), pos_integer()) :: bulletin_encoding()
  def bulletin_encoding(:json, version) when version >= 5, do: :json_arrays
  def bulletin_encoding(encoding, _version), do: encoding

  @doc "The frame type a connection of this encoding speaks in."
  @spec kind(Protocol.encoding()) :: :text | :binary
  def kind(:json), do: :text
  def kind(:binary), do: :binary

  @doc """
  The view format of a connection of this encoding and version of the
  protocol, in a world cut as `grid` is: from version 5 on, a part places
  its entities from its area's corner, so the format knows the tiles'
  side and the world's width.
  """
  @spec view_format(Protocol.encoding(), pos_integer(), Grid.t() | nil) ::
          Grove.World.Feed.format()
  def view_format(encoding, version \\ Protocol.version(), grid \\ nil)

  def view_format(encoding, version, %Grid{tile_size: side, width: width}) when version >= 5,
    do: {__MODULE__, {encoding, version, {side, width}}}

  def view_format(_encoding, version, nil) when version >= 5,
    do: raise(ArgumentError, "version #{version}'s view format needs the world's grid")

  def view_format(encoding, version, _grid), do: {__MODULE__, {encoding, version}}

  # Players are sent the view tiles their viewport overlaps, not whole zones.
  @impl Grove.World.ViewFormat
  def tiled?(_format), do: true

  # From version 4 on, an area's entities and departures are a part of an
  # `areas` message rather than a frame of their own: the zone encodes the
  # part once, and each session joins the parts it sends together into one
  # frame (`join/2`).
  #
  # From version 6 on, a delta's part leaves out the kind of each entity
  # that was in its tile already (`{:delta, stayed}`, from the zone's cut
  # by tile): every viewer of the tile knows it. Before, a delta is a
  # delta.
  @impl Grove.World.ViewFormat
  def encode_view({encoding, version, geometry}, what, zone, entries, departed)
      when version >= 6,
      do: {:part, lean_part(encoding, geometry, what, zone, entries, departed)}

  def encode_view(format, {:delta, _stayed}, zone, entries, departed),
    do: encode_view(format, :delta, zone, entries, departed)

  def encode_view({encoding, _version, geometry}, what, zone, entries, departed),
    do: {:part, part(encoding, geometry, what, zone, entries, departed)}

  def encode_view({encoding, version}, what, zone, entries, departed) when version >= 4,
    do: {:part, part(encoding, what, zone, entries, departed)}

  def encode_view({encoding, version}, what, zone, entries, departed),
    do: area(encoding, version, what, zone, entries, departed)

  # The area's ground (a snapshot's, from version 3 on) and the names of
  # the players coming into view go first, each in a frame of its own, so
  # that the client knows them when the `area` frame draws them; then the
  # area, with what it shows of the game and its events in its last three
  # fields (left out when empty: an area without them is byte for byte an
  # area of a world without a game).
  @impl Grove.World.ViewFormat
  def encode_view(format, what, zone, entries, departed, extra) do
    {encoding, version} = {elem(format, 0), elem(format, 1)}

    names =
      case extra do
        %{names: [_ | _] = names} ->
          [message(%{type: :names, area: zone, names: names}, encoding, version)]

        _none ->
          []
      end

    ground =
      case extra do
        %{ground: %Area{} = ground} -> ground_part(encoding, version, zone, ground)
        %{ground: {:encoded, part}} -> part
        _none -> []
      end

    [ground, names | area_or_part(format, what, zone, entries, departed, game(extra))]
  end

  # A snapshot's ground, as `encode_view/6` puts it first: a zone keeps it
  # for each view tile (the ground does not change) and passes it back as
  # `{:encoded, part}`.
  @impl Grove.World.ViewFormat
  def encode_ground(format, zone, %Area{} = ground),
    do: ground_part(elem(format, 0), elem(format, 1), zone, ground)

  # From version 4 on, a ground may go ahead of the parts before it in
  # the same `areas` (`join/2`): it is the ground's, whatever they say.
  defp ground_part(encoding, version, zone, ground) when version >= 4,
    do: [{:before, ground(encoding, version, zone, ground)}]

  defp ground_part(encoding, version, zone, ground) when version >= 3,
    do: [ground(encoding, version, zone, ground)]

  defp ground_part(_encoding, _version, _zone, _ground), do: []

  # An area that shows something of a game is an `area` of its own in
  # every version; the `areas` parts carry entities alone.
  defp area_or_part(format, what, zone, entries, departed, game) do
    if elem(format, 1) >= 4 and game == %{cells: [], looks: [], events: []},
      do: encode_view(format, what, zone, entries, departed),
      else: area(elem(format, 0), elem(format, 1), plain(what), zone, entries, departed, game)
  end

  defp plain({:delta, _stayed}), do: :delta
  defp plain(what), do: what

  @doc """
  A tile's snapshot (`encode_view/6`'s) without the ground that goes
  ahead of it: from version 6 on, a session sends an area's ground once
  a connection.
  """
  @spec without_ground(term()) :: term()
  def without_ground([[{:before, _ground}] | rest]), do: [[] | rest]
  def without_ground(frames), do: frames

  @doc """
  Views as version 4 sends them: each run of area parts side by side in
  the frames given (a deep list, in order, of finished frames and
  `{:part, part}` from `encode_view/5,6`) joined into one `areas` frame,
  the other frames left where they stand, so that the order of what the
  client reads is the order of the list; but a ground (`{:before,
  frame}`) goes ahead of the run it is in, so that the snapshots of
  several areas still come in one frame. A session only joins the parts:
  each was encoded once, by its zone, for every session that holds it.
  """
  @spec join(term(), Protocol.encoding(), pos_integer()) :: iodata()
  def join(frames, encoding, version \\ 4)

  # From version 7 on, JSON's parts are spread in the message's array.
  def join(frames, :json, version) when version >= 7 do
    {out, run} = join(frames, :json7, [], [])
    flush(out, run, :json7)
  end

  def join(frames, :json, version) when version >= 5 do
    {out, run} = join(frames, :json5, [], [])
    flush(out, run, :json5)
  end

  def join(frames, encoding, _version) do
    {out, run} = join(frames, encoding, [], [])
    flush(out, run, encoding)
  end

  defp join([], _encoding, out, run), do: {out, run}

  defp join([head | tail], encoding, out, run) do
    {out, run} = join(head, encoding, out, run)
    join(tail, encoding, out, run)
  end

  defp join({:part, part}, _encoding, out, run), do: {out, [part | run]}
  defp join({:before, frame}, _encoding, out, run), do: {[out | frame], run}
  defp join(frame, encoding, out, run), do: {[flush(out, run, encoding) | frame], []}

  defp flush(out, [], _encoding), do: out
  defp flush(out, run, encoding), do: [out | areas(encoding, Enum.reverse(run))]

  defp areas(:binary, parts),
    do: WebSocket.frame(:binary, [@areas_tag, Codec.uvar(length(parts)) | parts])

  defp areas(:json, parts),
    do: WebSocket.frame(:text, [~s({"type":"areas","areas":[), Enum.intersperse(parts, ?,), "]}"])

  defp areas(:json5, parts),
    do: WebSocket.frame(:text, [~s([82,[), Enum.intersperse(parts, ?,), "]]"])

  defp areas(:json7, parts),
    do: WebSocket.frame(:text, [~s([82,), Enum.intersperse(parts, ?,), "]"])

  # From version 5 on, an area's part places each entity by its cell
  # counted row by row from the area's north-west corner (`Codec`'s
  # `:part`): one or two digits in JSON, one byte in binary, in a tile of
  # 10 x 10. Tiles start at multiples of their side; those at the world's
  # east edge may be narrower.
  defp part(encoding, {side, width}, what, zone, entries, departed),
    do: part5(encoding, what, zone, entries, departed, at(side, width))

  # Version 6's part (`Codec`'s `:lean_parts`): a snapshot as version
  # 5's, without its empty gone ids in JSON; in a delta, an entity that
  # was in the tile already without its kind.
  defp lean_part(encoding, geometry, :snapshot, zone, entries, departed),
    do: lean_part(encoding, geometry, {:snapshot, nil}, zone, entries, departed)

  defp lean_part(encoding, geometry, :delta, zone, entries, departed),
    do: lean_part(encoding, geometry, {:delta, %{}}, zone, entries, departed)

  # Binary: written into one binary as it grows, entry by entry (a zone
  # encodes a part for every tile that changed at each of its ticks).
  defp lean_part(:binary, {side, width}, {what, stayed}, zone, entries, departed) do
    part = <<Codec.uvar(zone)::binary, if(what == :snapshot, do: 1, else: 0)>>
    part = put_uvar(part, length(entries))
    part = lean_entries(entries, what, stayed, side, width, part)
    lean_ids(departed, put_uvar(part, length(departed)))
  end

  defp lean_part(:json, {side, width}, {:snapshot, _}, zone, entries, _departed) do
    at = at(side, width)
    IO.iodata_to_binary([Integer.to_string(zone), ",[", json_flat(entries, at), "],true"])
  end

  defp lean_part(:json, {side, width}, {:delta, stayed}, zone, entries, departed) do
    at = at(side, width)

    IO.iodata_to_binary([
      Integer.to_string(zone),
      ",[",
      json_lean(entries, stayed, at),
      if(departed == [], do: "]", else: ["],[", json_ids(departed), "]"])
    ])
  end

  defp json_lean([], _stayed, _at), do: []
  defp json_lean([entry], stayed, at), do: json_lean_entry(entry, stayed, at)

  defp json_lean([entry | rest], stayed, at),
    do: [json_lean_entry(entry, stayed, at), ?, | json_lean(rest, stayed, at)]

  defp json_lean_entry({id, x, y, kind}, stayed, at) do
    if is_map_key(stayed, id),
      do: [Integer.to_string(id), ?,, Integer.to_string(at.(x, y))],
      else: [
        ?-,
        Integer.to_string(id),
        ?,,
        Integer.to_string(at.(x, y)),
        ?,,
        Integer.to_string(kind)
      ]
  end

  defp lean_entries([], _what, _stayed, _side, _width, part), do: part

  defp lean_entries([{id, x, y, kind} | rest], what, stayed, side, width, part) do
    dx = rem(x, side)
    at = rem(y, side) * min(side, width - (x - dx)) + dx

    part =
      cond do
        what == :snapshot -> <<put_uvar(put_uvar(part, id), at)::binary, kind::8>>
        is_map_key(stayed, id) -> put_uvar(put_uvar(part, id), 2 * at)
        true -> <<put_uvar(put_uvar(part, id), 2 * at + 1)::binary, kind::8>>
      end

    lean_entries(rest, what, stayed, side, width, part)
  end

  defp lean_ids([], part), do: part
  defp lean_ids([id | rest], part), do: lean_ids(rest, put_uvar(part, id))

  # `Codec.uvar/1`, appended to a binary.
  defp put_uvar(part, n) when n < 0x80, do: <<part::binary, n>>
  defp put_uvar(part, n) when n < 0x4000, do: <<part::binary, (n &&& 0x7F) ||| 0x80, n >>> 7>>
  defp put_uvar(part, n), do: <<part::binary, Codec.uvar(n)::binary>>

  # A cell counted row by row from its tile's north-west corner; the tiles
  # at the world's east edge may be narrower.
  defp at(side, width) do
    fn x, y ->
      dx = rem(x, side)
      rem(y, side) * min(side, width - (x - dx)) + dx
    end
  end

  defp part5(:binary, what, zone, entries, departed, at) do
    IO.iodata_to_binary([
      Codec.uvar(zone),
      full(what),
      Codec.uvar(length(entries)),
      for(
        {id, x, y, kind} <- entries,
        into: <<>>,
        do: <<Codec.uvar(id)::binary, Codec.uvar(at.(x, y))::binary, kind::8>>
      ),
      Codec.uvar(length(departed)),
      for(id <- departed, into: <<>>, do: Codec.uvar(id))
    ])
  end

  # The parts follow one another in the message's list (`Codec`'s
  # `:parts`): the area, its entities, then its gone ids and `true` when
  # there are any and for a snapshot.
  defp part5(:json, what, zone, entries, departed, at) do
    IO.iodata_to_binary([
      Integer.to_string(zone),
      ",[",
      json_flat(entries, at),
      case {what, departed} do
        {:snapshot, _} -> ["],[", json_ids(departed), "],true"]
        {:delta, []} -> "]"
        {:delta, _} -> ["],[", json_ids(departed), "]"]
      end
    ])
  end

  defp json_flat([], _at), do: []
  defp json_flat([entry], at), do: json_triple(entry, at)
  defp json_flat([entry | rest], at), do: [json_triple(entry, at), ?, | json_flat(rest, at)]

  defp json_triple({id, x, y, kind}, at),
    do: [Integer.to_string(id), ?,, Integer.to_string(at.(x, y)), ?,, Integer.to_string(kind)]

  # One area's part of an `areas` message: [area, full, entities, gone].
  defp part(:binary, what, zone, entries, departed) do
    IO.iodata_to_binary([
      Codec.uvar(zone),
      full(what),
      Codec.uvar(length(entries)),
      for(
        {id, x, y, kind} <- entries,
        into: <<>>,
        do: <<Codec.uvar(id)::binary, Codec.uvar(x)::binary, Codec.uvar(y)::binary, kind::8>>
      ),
      Codec.uvar(length(departed)),
      for(id <- departed, into: <<>>, do: Codec.uvar(id))
    ])
  end

  defp part(:json, what, zone, entries, departed) do
    IO.iodata_to_binary([
      ?[,
      Integer.to_string(zone),
      if(what == :snapshot, do: ",true,[", else: ",false,["),
      json_entries(entries),
      "],[",
      json_ids(departed),
      "]]"
    ])
  end

  defp ground(encoding, version, zone, %Area{x0: x0, y0: y0, x1: x1, y1: y1, cells: cells}) do
    message(
      %{type: :ground, area: zone, x: x0, y: y0, width: x1 - x0, height: y1 - y0, cells: cells},
      encoding,
      version
    )
  end

  defp game(extra),
    do: %{
      cells: Map.get(extra, :cells, []),
      looks: Map.get(extra, :looks, []),
      events: Map.get(extra, :events, [])
    }

  defp area(encoding, version, what, zone, entries, departed, %{cells: [], looks: [], events: []}),
    do: area(encoding, version, what, zone, entries, departed)

  defp area(:binary, version, what, zone, entries, departed, game),
    do:
      WebSocket.frame(:binary, [
        area_fields(version, what, zone, entries, departed),
        game_fields(version, game)
      ])

  defp area(:json, version, what, zone, entries, departed, game),
    do:
      WebSocket.frame(:text, [
        json_area(what, zone, entries, departed),
        json_extra(version, game),
        ?}
      ])

  defp area(:binary, version, what, zone, entries, departed),
    do: WebSocket.frame(:binary, area_fields(version, what, zone, entries, departed))

  defp area(:json, _version, what, zone, entries, departed),
    do: WebSocket.frame(:text, [json_area(what, zone, entries, departed), ?}])

  defp area_fields(2, what, zone, entries, departed) do
    [
      <<@area_tag, zone::32, full(what), length(entries)::16>>,
      for({id, x, y, kind} <- entries, into: <<>>, do: <<id::32, x::16, y::16, kind::8>>),
      <<length(departed)::16>>,
      for(id <- departed, into: <<>>, do: <<id::32>>)
    ]
  end

  defp area_fields(_version, what, zone, entries, departed) do
    [
      @area_tag,
      Codec.uvar(zone),
      full(what),
      <<length(entries)::16>>,
      for(
        {id, x, y, kind} <- entries,
        into: <<>>,
        do: <<Codec.uvar(id)::binary, Codec.uvar(x)::binary, Codec.uvar(y)::binary, kind::8>>
      ),
      <<length(departed)::16>>,
      for(id <- departed, into: <<>>, do: Codec.uvar(id))
    ]
  end

  # All but the closing brace.
  defp json_area(what, zone, entries, departed) do
    [
      ~s({"type":"area","area":),
      Integer.to_string(zone),
      if(what == :snapshot,
        do: ~s(,"full":true,"entities":[),
        else: ~s(,"full":false,"entities":[)
      ),
      json_entries(entries),
      ~s(],"gone":[),
      json_ids(departed),
      ?]
    ]
  end

  # Up to the last field that is not empty.
  defp game_fields(version, %{cells: cells, looks: looks, events: events}) do
    list = fn item, values -> Codec.encode({:list, Codec.versioned(item, version)}, values) end

    [
      list.(@cell, cells)
      | cond do
          events != [] -> [list.(@look, looks), list.(@event, named(events))]
          looks != [] -> list.(@look, looks)
          true -> []
        end
    ]
  end

  defp json_extra(version, game) do
    [
      if(game.cells == [],
        do: [],
        else: [~s(,"cells":), :jiffy.encode(for({x, y, code} <- game.cells, do: [x, y, code]))]
      ),
      if(game.looks == [],
        do: [],
        else: [~s(,"looks":), :jiffy.encode(for({id, look} <- game.looks, do: [id, look]))]
      ),
      if(game.events == [],
        do: [],
        else: [
          ~s(,"events":),
          :jiffy.encode(
            Codec.to_json({:list, Codec.versioned(@event, version)}, named(game.events))
          )
        ]
      )
    ]
  end

  defp named(events),
    do: for({id, x, y, name, data} <- events, do: {id, x, y, to_string(name), data})

  defp full(:snapshot), do: 1
  defp full(:delta), do: 0

  defp json_entries([]), do: []
  defp json_entries([entry]), do: json_entry(entry)
  defp json_entries([entry | rest]), do: [json_entry(entry), ?, | json_entries(rest)]

  defp json_entry({id, x, y, kind}) do
    [
      ?[,
      Integer.to_string(id),
      ?,,
      Integer.to_string(x),
      ?,,
      Integer.to_string(y),
      ?,,
      Integer.to_string(kind),
      ?]
    ]
  end

  defp json_ids([]), do: []
  defp json_ids([id]), do: Integer.to_string(id)
  defp json_ids([id | rest]), do: [Integer.to_string(id), ?, | json_ids(rest)]
end
