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

  alias Grove.Gateway.WebSocket
  alias Grove.Protocol
  alias Grove.Protocol.Codec

  @area_tag 72
  @outcome_tag 65
  @results [:ok | Grove.World.rejections()]
  # An event in an area: who, where, what, and its data.
  @event {:tuple, [:u32, :u16, :u16, :string, :data]}

  @doc "A message as one frame of the connection's encoding."
  @spec message(Protocol.message(), Protocol.encoding()) :: binary()
  def message(message, encoding),
    do: WebSocket.frame(kind(encoding), Protocol.encode(message, encoding))

  @doc "An `outcome` frame."
  @spec outcome(
          Protocol.encoding(),
          non_neg_integer(),
          atom(),
          non_neg_integer(),
          non_neg_integer()
        ) ::
          binary()
  def outcome(:binary, seq, result, x, y),
    do: WebSocket.frame(:binary, <<@outcome_tag, seq::32, result_code(result), x::16, y::16>>)

  def outcome(:json, seq, result, x, y) do
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

  @doc "The frame type a connection of this encoding speaks in."
  @spec kind(Protocol.encoding()) :: :text | :binary
  def kind(:json), do: :text
  def kind(:binary), do: :binary

  @doc "The view format of a connection of this encoding."
  @spec view_format(Protocol.encoding()) :: Grove.World.Feed.format()
  def view_format(encoding), do: {__MODULE__, encoding}

  @impl Grove.World.ViewFormat
  def encode_view(encoding, what, zone, entries, departed),
    do: area(encoding, what, zone, entries, departed)

  # The names of the players coming into view go first, in a `names`
  # frame of their own, so that the client knows them when the `area`
  # frame draws them; then the area, with what it shows of the game and
  # its events in its last three fields (left out when empty: an area
  # without them is byte for byte an area of a world without a game).
  @impl Grove.World.ViewFormat
  def encode_view(encoding, what, zone, entries, departed, %{names: []} = extra),
    do: area(encoding, what, zone, entries, departed, extra)

  def encode_view(encoding, what, zone, entries, departed, %{names: names} = extra),
    do: [
      message(%{type: :names, area: zone, names: names}, encoding)
      | area(encoding, what, zone, entries, departed, extra)
    ]

  defp area(encoding, what, zone, entries, departed, %{cells: [], looks: [], events: []}),
    do: area(encoding, what, zone, entries, departed)

  defp area(:binary, what, zone, entries, departed, extra) do
    WebSocket.frame(:binary, [
      <<@area_tag, zone::32, full(what), length(entries)::16>>,
      for({id, x, y, kind} <- entries, into: <<>>, do: <<id::32, x::16, y::16, kind::8>>),
      <<length(departed)::16>>,
      for(id <- departed, into: <<>>, do: <<id::32>>),
      game_fields(extra)
    ])
  end

  defp area(:json, what, zone, entries, departed, extra) do
    WebSocket.frame(:text, [
      ~s({"type":"area","area":),
      Integer.to_string(zone),
      if(what == :snapshot,
        do: ~s(,"full":true,"entities":[),
        else: ~s(,"full":false,"entities":[)
      ),
      json_entries(entries),
      ~s(],"gone":[),
      json_ids(departed),
      ?],
      json_extra(extra),
      ?}
    ])
  end

  defp area(:binary, what, zone, entries, departed) do
    WebSocket.frame(:binary, [
      <<@area_tag, zone::32, full(what), length(entries)::16>>,
      for({id, x, y, kind} <- entries, into: <<>>, do: <<id::32, x::16, y::16, kind::8>>),
      <<length(departed)::16>>,
      for(id <- departed, into: <<>>, do: <<id::32>>)
    ])
  end

  defp area(:json, what, zone, entries, departed) do
    WebSocket.frame(:text, [
      ~s({"type":"area","area":),
      Integer.to_string(zone),
      if(what == :snapshot,
        do: ~s(,"full":true,"entities":[),
        else: ~s(,"full":false,"entities":[)
      ),
      json_entries(entries),
      ~s(],"gone":[),
      json_ids(departed),
      "]}"
    ])
  end

  # Up to the last field that is not empty.
  defp game_fields(%{cells: cells, looks: looks, events: events}) do
    [
      <<length(cells)::16>>,
      for({x, y, code} <- cells, into: <<>>, do: <<x::16, y::16, code::8>>)
      | cond do
          events != [] -> [looks_field(looks), Codec.encode({:list, @event}, named(events))]
          looks != [] -> looks_field(looks)
          true -> []
        end
    ]
  end

  defp looks_field(looks),
    do: [<<length(looks)::16>>, for({id, look} <- looks, into: <<>>, do: <<id::32, look::8>>)]

  defp json_extra(extra) do
    [
      if(extra.cells == [],
        do: [],
        else: [~s(,"cells":), :jiffy.encode(for({x, y, code} <- extra.cells, do: [x, y, code]))]
      ),
      if(extra.looks == [],
        do: [],
        else: [~s(,"looks":), :jiffy.encode(for({id, look} <- extra.looks, do: [id, look]))]
      ),
      if(extra.events == [],
        do: [],
        else: [~s(,"events":), :jiffy.encode(Codec.to_json({:list, @event}, named(extra.events)))]
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
