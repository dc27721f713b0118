defmodule Grove.ProtocolTest do
  use ExUnit.Case, async: true
  doctest Grove.Protocol
  doctest Grove.Protocol.Codec

  import Grove.PropCase

  alias Grove.Gateway.{Frames, WebSocket}
  alias Grove.Protocol
  alias Grove.Protocol.Codec
  alias Grove.Test.ProtocolGenerators

  # Every frame in the version it is checked in: a message of one version
  # (`areas` of 4, `ground` of 3) may not exist in another.
  defp binary_frame(message, version),
    do: IO.iodata_to_binary(Protocol.encode(message, :binary, version))

  defp json_frame(message, version),
    do: IO.iodata_to_binary(Protocol.encode(message, :json, version))

  test "every message of every version round-trips through both encodings" do
    for version <- Protocol.versions() do
      property =
        forall(ProtocolGenerators.message(version), fn message ->
          assert Protocol.decode(binary_frame(message, version), :binary, version) ==
                   {:ok, message}

          assert Protocol.decode(json_frame(message, version), :json, version) == {:ok, message}
        end)

      check(property, numtests: 1500)
    end
  end

  test "version 3 carries coordinates, area numbers and ids of any world, each in as few bytes as it needs" do
    # A million cells a side, a bacterium's id near 2^53.
    area = %{
      type: :area,
      area: 399_999_999,
      full: true,
      entities: [{9_007_199_252_740_990, 999_999, 999_998, 2}, {7, 3, 4, 1}],
      gone: [12],
      cells: [{999_999, 999_998, 3}],
      looks: [{9_007_199_252_740_990, 1}],
      events: [{7, 999_999, 999_998, "grew", %{"n" => 1}}]
    }

    assert Protocol.decode(binary_frame(area, 3), :binary, 3) == {:ok, area}
    assert Protocol.decode(json_frame(area, 3), :json, 3) == {:ok, area}

    # One byte below 128, two below 16,384, three below 2,097,152.
    for {n, size} <- [{0, 1}, {127, 1}, {128, 2}, {16_383, 2}, {16_384, 3}, {2_097_151, 3}] do
      assert byte_size(Grove.Protocol.Codec.uvar(n)) == size
    end

    # Version 2 cannot say it.
    assert_raise ArgumentError, fn -> Protocol.encode(area, :binary, 2) end

    # Nothing over 2^53 - 1, in either encoding, nor longer than eight bytes.
    assert {:error, :bad_frame, "area: " <> _} =
             Protocol.decode(<<73, 255, 255, 255, 255, 255, 255, 255, 127>>, :binary)

    assert {:error, :bad_frame, "area: truncated" <> _} = Protocol.decode(<<73, 200>>, :binary)

    assert {:error, :bad_field, "area: " <> _} =
             Protocol.decode(~s({"type":"area_closed","area":9007199254740992}), :json)
  end

  test "a session speaks the version its client asks for, if the world fits it" do
    assert Protocol.negotiate(3, {1000, 1000}) == {:ok, 3}
    assert Protocol.negotiate(2, {65_535, 100}) == {:ok, 2}
    assert Protocol.negotiate(3, {1_000_000, 1_000_000}) == {:ok, 3}
    assert {:error, text} = Protocol.negotiate(2, {65_536, 100})
    assert text =~ "65536 x 100" and text =~ "protocol 3"
    assert Protocol.negotiate(4, {1_000_000, 1_000_000}) == {:ok, 4}
    assert Protocol.negotiate(5, {1_000_000, 1_000_000}) == {:ok, 5}
    assert Protocol.negotiate(6, {1_000_000, 1_000_000}) == {:ok, 6}
    assert Protocol.negotiate(7, {1_000_000, 1_000_000}) == {:ok, 7}
    assert {:error, text} = Protocol.negotiate(9, {100, 100})
    assert text =~ "protocol 7, your client 9"
  end

  test "ground is a message of version 3 only" do
    ground = %{type: :ground, area: 5, x: 250, y: 0, width: 2, height: 1, cells: <<1, 3>>}
    assert Protocol.decode(json_frame(ground, 3), :json, 3) == {:ok, ground}
    assert_raise ArgumentError, fn -> Protocol.encode(ground, :json, 2) end
    assert {:error, :unknown_type, _} = Protocol.decode(json_frame(ground, 3), :json, 2)
    assert {:error, :bad_frame, _} = Protocol.decode(binary_frame(ground, 3), :binary, 2)
  end

  test "the binary form is smaller than the JSON form of every message" do
    # Version 5's JSON (and 6's and 7's) writes a small number in fewer
    # bytes than binary's fixed sizes: the next test compares it with
    # version 4's.
    for version <- Protocol.versions() -- [5, 6, 7] do
      property =
        forall(ProtocolGenerators.message(version), fn message ->
          assert byte_size(binary_frame(message, version)) <
                   byte_size(json_frame(message, version))
        end)

      check(property, numtests: 1000)
    end
  end

  test "in version 5 a server's message in JSON is an array, smaller than version 4's object" do
    server = for {type, _tag, :server, _fields} <- Protocol.messages(5), type != :areas, do: type

    property =
      forall(
        :proper_types.oneof(Enum.map(server, &ProtocolGenerators.message(&1, 5))),
        fn message ->
          compact = json_frame(message, 5)
          assert [tag | _] = :jiffy.decode(compact)
          assert is_integer(tag)
          assert byte_size(compact) < byte_size(json_frame(message, 4))
        end
      )

    check(property, numtests: 1000)

    # What a client sends stays an object, in every version.
    move = %{type: :move, seq: 7, dir: :ne}
    assert json_frame(move, 5) == json_frame(move, 4)

    assert Protocol.decode(~s([2,7,"ne"]), :json, 5) ==
             {:error, :unknown_type, "unknown message tag 2"}

    # An array names its message by tag; its optional fields at the end may be left out.
    assert Protocol.decode(~s([65,7,"ok",413,96]), :json, 5) ==
             {:ok, %{type: :outcome, seq: 7, result: :ok, x: 413, y: 96}}

    assert Protocol.decode(~s([82,[941,[20001,36,1],942,[],[377],943,[],[],true]]), :json, 5) ==
             {:ok,
              %{
                type: :areas,
                areas: [
                  {941, false, [{20001, 36, 1}], []},
                  {942, false, [], [377]},
                  {943, true, [], []}
                ]
              }}

    assert {:error, :bad_field, "areas: " <> _} =
             Protocol.decode(~s([82,[941,[20001,36]]]), :json, 5)

    assert {:error, :bad_field, "areas: " <> _} = Protocol.decode(~s([82,[941]]), :json, 5)

    # Two ground cells a character: 8 x 0 + 1 is "B", 8 x 3 + 4 "c", and
    # an odd count ends with "=".
    ground = %{
      type: :ground,
      area: 5,
      x: 250,
      y: 0,
      width: 5,
      height: 1,
      cells: <<0, 1, 3, 4, 2>>
    }

    assert json_frame(ground, 5) == ~s([80,5,250,0,5,1,"BcQ="])
    assert Protocol.decode(json_frame(ground, 5), :json) == {:ok, ground}

    assert {:error, :bad_field, "cells: " <> _} =
             Protocol.decode(~s([80,5,250,0,5,1,"B=c"]), :json)

    assert {:error, :bad_field, "x: missing"} = Protocol.decode(~s([65,7,"ok"]), :json, 5)
    assert {:error, :bad_field, "1 values after" <> _} = Protocol.decode(~s([73,7,8]), :json)
    assert {:error, :unknown_type, _} = Protocol.decode(~s([99]), :json)
    assert {:error, :bad_message, _} = Protocol.decode(~s([65,7,"ok",4,9]), :json, 4)
  end

  test "random bytes never crash the decoders" do
    property =
      forall(:proper_types.binary(), fn bytes ->
        for encoding <- [:binary, :json] do
          assert match?({:ok, %{type: _}}, Protocol.decode(bytes, encoding)) or
                   match?(
                     {:error, code, text} when is_atom(code) and is_binary(text),
                     Protocol.decode(bytes, encoding)
                   )
        end
      end)

    check(property, numtests: 3000)
  end

  test "truncated and corrupted frames give a clear error, never a crash" do
    for version <- Protocol.versions() do
      property =
        forall(
          {ProtocolGenerators.message(version), :proper_types.non_neg_integer(),
           :proper_types.byte()},
          fn {message, at, byte} ->
            for {frame, encoding} <- [
                  {binary_frame(message, version), :binary},
                  {json_frame(message, version), :json}
                ] do
              cut = rem(at, byte_size(frame))
              truncated = binary_part(frame, 0, cut)
              <<before::binary-size(cut), _, rest::binary>> = frame
              corrupted = before <> <<byte>> <> rest

              for bad <- [truncated, corrupted] do
                case Protocol.decode(bad, encoding, version) do
                  {:ok, %{type: _}} ->
                    :ok

                  {:error, code, text} ->
                    assert code in Protocol.error_codes() and is_binary(text)
                end
              end
            end
          end
        )

      check(property, numtests: 1000)
    end
  end

  test "JSON input errors name the problem" do
    assert {:error, :bad_json, _} = Protocol.decode("{\"type\": ", :json)
    assert {:error, :bad_message, _} = Protocol.decode("[]", :json)
    assert {:error, :bad_message, _} = Protocol.decode(~s({"kind":"move"}), :json)
    assert {:error, :unknown_type, msg} = Protocol.decode(~s({"type":"teleport"}), :json)
    assert msg =~ "teleport"

    assert {:error, :bad_field, "seq: missing"} =
             Protocol.decode(~s({"type":"move","dir":"n"}), :json)

    assert {:error, :bad_field, "seq: " <> _} =
             Protocol.decode(~s({"type":"move","seq":"7","dir":"n"}), :json)

    assert {:error, :bad_field, "seq: " <> _} =
             Protocol.decode(~s({"type":"move","seq":1.5,"dir":"n"}), :json)

    assert {:error, :bad_field, "view_radius: " <> _} =
             Protocol.decode(~s({"type":"join","protocol":2,"view_radius":300}), :json)
  end

  test "optional join fields take their defaults" do
    assert {:ok, %{type: :join, protocol: 2, view_radius: 8, name: "", token: ""}} =
             Protocol.decode(~s({"type":"join","protocol":2}), :json)
  end

  test "a join of protocol version 1 is told, in words, the version the server speaks" do
    # Version 1's join: JSON without `protocol`; binary tag 1.
    for {frame, encoding} <- [{~s({"type":"join"}), :json}, {<<1, 8, 0, 0, 0, 0>>, :binary}] do
      assert {:error, :unsupported_protocol, text} = Protocol.decode(frame, encoding)
      assert text =~ "protocol #{Protocol.version()}" and text =~ "reload"
    end
  end

  test "the gateway's own encoders of areas and outcomes say what the definitions say" do
    # Version 4's and 5's areas are the next tests'.
    for version <- Protocol.versions() -- [4, 5, 6, 7] do
      property =
        forall(
          {ProtocolGenerators.message(:area, version),
           ProtocolGenerators.message(:outcome, version),
           ProtocolGenerators.message(:names, version)},
          fn {area, outcome, names} ->
            what = if area.full, do: :snapshot, else: :delta
            extra = %{names: [], cells: area.cells, looks: area.looks, events: area.events}

            for encoding <- [:json, :binary] do
              kind = Frames.kind(encoding)
              format = {encoding, version}
              by_definition = WebSocket.frame(kind, Protocol.encode(area, encoding, version))

              by_hand =
                Frames.encode_view(format, what, area.area, area.entities, area.gone, extra)

              # JSON leaves the empty game fields out (they default to []);
              # binary has every field, byte for byte.
              if encoding == :binary,
                do: assert(IO.iodata_to_binary(by_hand) == IO.iodata_to_binary(by_definition)),
                else: assert(Protocol.decode(payload(by_hand), :json, version) == {:ok, area})

              without_game = %{area | cells: [], looks: [], events: []}
              plain = Frames.encode_view(format, what, area.area, area.entities, area.gone)
              assert Protocol.decode(payload(plain), encoding, version) == {:ok, without_game}

              # Names come first, in a frame of their own, for the area's
              # number; none when there are none.
              names_frame =
                if names.names == [],
                  do: [],
                  else:
                    WebSocket.frame(
                      kind,
                      Protocol.encode(%{names | area: area.area}, encoding, version)
                    )

              named =
                Frames.encode_view(format, what, area.area, area.entities, area.gone, %{
                  extra
                  | names: names.names
                })

              assert IO.iodata_to_binary(named) == IO.iodata_to_binary([names_frame, by_hand])

              assert_outcome_by_hand(outcome, encoding, version, kind)
            end
          end
        )

      check(property, numtests: 100, deep_numtests: 3000)
    end
  end

  test "version 4 joins the parts of areas in one frame, as the definition of areas says" do
    # Sizes bounded as a tick's are (a few areas of a few entities), at
    # every depth (`max_size` below): PropEr's own sizes nest lists of
    # lists into frames of megabytes, a hundred of which took a busy
    # machine past the test's minute. The next test takes a part's lists
    # past 127 items.
    property =
      forall(
        {:proper_types.list(ProtocolGenerators.message(:area, 4)),
         ProtocolGenerators.message(:names, 4)},
        fn {areas, names} ->
          assert length(areas) <= 6 and length(names.names) <= 6

          for area <- areas,
              list <- [area.entities, area.gone, area.cells, area.looks, area.events],
              do: assert(length(list) <= 6)

          for encoding <- [:json, :binary] do
            kind = Frames.kind(encoding)
            format = {encoding, 4}

            parts =
              for area <- areas do
                what = if area.full, do: :snapshot, else: :delta
                Frames.encode_view(format, what, area.area, area.entities, area.gone)
              end

            expected = %{
              type: :areas,
              areas: for(a <- areas, do: {a.area, a.full, a.entities, a.gone})
            }

            joined = IO.iodata_to_binary(Frames.join(parts, encoding))

            # Byte for byte in binary; one message in either.
            if areas == [],
              do: assert(joined == ""),
              else: assert(decode_frames(joined, encoding, 4) == [expected])

            if encoding == :binary and areas != [],
              do: assert(joined == WebSocket.frame(kind, Protocol.encode(expected, :binary, 4)))

            for area <- areas do
              what = if area.full, do: :snapshot, else: :delta

              extra = %{
                names: names.names,
                cells: area.cells,
                looks: area.looks,
                events: area.events
              }

              frames =
                Frames.encode_view(format, what, area.area, area.entities, area.gone, extra)

              messages =
                decode_frames(IO.iodata_to_binary(Frames.join(frames, encoding)), encoding, 4)

              # The names first, in a frame of their own; then an area of
              # its own when it shows a game, as in version 3, else a part.
              {named, [last]} = Enum.split(messages, -1)
              assert named == if(names.names == [], do: [], else: [%{names | area: area.area}])

              if area.cells == [] and area.looks == [] and area.events == [],
                do:
                  assert(
                    last == %{
                      type: :areas,
                      areas: [{area.area, area.full, area.entities, area.gone}]
                    }
                  ),
                else: assert(last.type == :area and last.area == area.area)
            end
          end
        end
      )

    check(property, numtests: 100, deep_numtests: 1000, max_size: 6)
  end

  test "versions 5 to 7 place a part's entities from its area's corner, and join the parts in one frame; 6 and 7 leave out the kind of what stayed in its area" do
    # Worlds whose width is not a multiple of the tile's side: the tiles
    # at the east edge are narrower.
    cases =
      :proper_types.bind(
        {:proper_types.integer(1, 12), :proper_types.integer(1, 60),
         :proper_types.integer(1, 60)},
        fn {side, width, height} ->
          grid = Grove.World.Grid.new(width, height, side * 2, side)
          tiles = grid.tiles_x * div(height + side - 1, side)
          tile = :proper_types.integer(0, tiles - 1)
          kinds = :proper_types.list(:proper_types.integer(0, 255))

          {grid, :proper_types.list({tile, :proper_types.boolean(), kinds}),
           ProtocolGenerators.message(:outcome, 5)}
        end,
        false
      )

    property =
      forall(cases, fn {grid, areas, outcome} ->
        areas =
          for {tile, full, kinds} <- Enum.take(areas, 6) do
            {x0, y0, x1, y1} = Grove.World.Grid.tile_bounds(grid, tile)
            cells = for y <- y0..(y1 - 1), x <- x0..(x1 - 1), do: {x, y}

            entities =
              for {kind, n} <- Enum.with_index(Enum.take(kinds, 6)) do
                {x, y} = Enum.at(cells, rem(n * 7, length(cells)))
                {n * 1000 + tile + 1, x, y, kind}
              end

            {tile, full, entities, if(full, do: [], else: Enum.map(kinds, &(&1 + 1)))}
          end

        # Every other entity of a delta stayed in its area.
        stayed =
          for {_tile, false, entities, _gone} <- areas,
              {{id, _x, _y, _kind}, n} <- Enum.with_index(entities),
              rem(n, 2) == 0,
              into: %{},
              do: {id, true}

        for version <- [5, 6, 7], encoding <- [:json, :binary] do
          {Frames, format} = Frames.view_format(encoding, version, grid)
          kind = Frames.kind(encoding)

          parts =
            for {tile, full, entities, gone} <- areas do
              what = if full, do: :snapshot, else: {:delta, stayed}
              Frames.encode_view(format, what, tile, entities, gone, %{names: [], events: []})
            end

          joined = IO.iodata_to_binary(Frames.join(parts, encoding, version))

          # Versions 6 and 7 leave out the kind of what stayed.
          areas =
            if version >= 6,
              do:
                for(
                  {tile, full, entities, gone} <- areas,
                  do:
                    {tile, full,
                     for(
                       {id, x, y, k} <- entities,
                       do: {id, x, y, if(not full and is_map_key(stayed, id), do: nil, else: k)}
                     ), gone}
                ),
              else: areas

          if areas == [] do
            assert joined == ""
          else
            assert [%{type: :areas, areas: decoded} = message] =
                     decode_frames(joined, encoding, version)

            # Each entity where it stands, once its area's corner and width are known.
            placed =
              for {tile, full, entities, gone} <- decoded do
                {x0, y0, x1, _y1} = Grove.World.Grid.tile_bounds(grid, tile)
                width = x1 - x0

                {tile, full,
                 for(
                   {id, at, k} <- entities,
                   do: {id, x0 + rem(at, width), y0 + div(at, width), k}
                 ), gone}
              end

            assert placed == areas

            assert joined == WebSocket.frame(kind, Protocol.encode(message, encoding, version))
          end

          assert_outcome_by_hand(outcome, encoding, version, kind)
        end
      end)

    check(property, numtests: 200, deep_numtests: 2000, max_size: 12)
  end

  test "in version 6 a delta's entity comes with its kind only when it came into its area, a snapshot's always" do
    json = ~s([82,[941,[20001,63],942,[-20002,7,3],[377],943,[20003,12,3],true]])

    parts = [
      {941, false, [{20_001, 63, nil}], []},
      {942, false, [{20_002, 7, 3}], [377]},
      {943, true, [{20_003, 12, 3}], []}
    ]

    assert Protocol.decode(json, :json, 6) == {:ok, %{type: :areas, areas: parts}}
    assert json_frame(%{type: :areas, areas: parts}, 6) == json

    # In binary a delta's cell is doubled, plus one when the kind follows.
    assert binary_frame(%{type: :areas, areas: parts}, 6) ==
             IO.iodata_to_binary([
               <<82, 3>>,
               [Codec.uvar(941), 0, 1, Codec.uvar(20_001), Codec.uvar(126), 0],
               [Codec.uvar(942), 0, 1, Codec.uvar(20_002), Codec.uvar(15), 3, 1, Codec.uvar(377)],
               [Codec.uvar(943), 1, 1, Codec.uvar(20_003), Codec.uvar(12), 3, 0]
             ])

    # A snapshot lists every kind, and has no gone ids.
    for bad <- [{943, true, [{20_003, 12, nil}], []}, {943, true, [], [5]}],
        encoding <- [:json, :binary] do
      assert_raise ArgumentError, fn ->
        Protocol.encode(%{type: :areas, areas: [bad]}, encoding, 6)
      end
    end

    assert {:error, :bad_field, _} = Protocol.decode(~s([82,[943,[20003,12],true]]), :json, 6)
  end

  test "in version 7 an `areas` message's parts are spread in its array, and a server's enumerations are their codes in JSON" do
    json = ~s([82,941,[20001,63],942,[-20002,7,3],[377],943,[20003,12,3],true])

    parts = [
      {941, false, [{20_001, 63, nil}], []},
      {942, false, [{20_002, 7, 3}], [377]},
      {943, true, [{20_003, 12, 3}], []}
    ]

    assert Protocol.decode(json, :json, 7) == {:ok, %{type: :areas, areas: parts}}
    assert json_frame(%{type: :areas, areas: parts}, 7) == json

    # Binary is version 6's, byte for byte.
    for message <- [
          %{type: :areas, areas: parts},
          %{type: :outcome, seq: 7, result: :blocked, x: 413, y: 96}
        ] do
      assert binary_frame(message, 7) == binary_frame(message, 6)
    end

    outcome = %{type: :outcome, seq: 7, result: :ok, x: 413, y: 96}
    assert json_frame(outcome, 7) == ~s([65,7,0,413,96])
    assert Protocol.decode(~s([65,7,0,413,96]), :json, 7) == {:ok, outcome}

    # Every server enumeration is its position in its list, as in binary.
    blocked = Enum.find_index(Protocol.messages(7) |> outcome_results(), &(&1 == :blocked))
    assert json_frame(%{outcome | result: :blocked}, 7) == ~s([65,7,#{blocked},413,96])

    bye = %{type: :bye, reason: :replaced, message: "elsewhere"}
    assert json_frame(bye, 7) == ~s([71,3,"elsewhere"])
    assert json_frame(bye, 6) == ~s([71,"replaced","elsewhere"])

    # A code past the list, or a name not in it, is refused; a name in it
    # is read (an error before a `join` is version 4's object).
    assert {:error, :bad_field, "result: " <> _} = Protocol.decode(~s([65,7,99,413,96]), :json, 7)

    assert {:error, :bad_field, "result: " <> _} =
             Protocol.decode(~s([65,7,"fine",413,96]), :json, 7)

    error = ~s({"type":"error","code":"unsupported_protocol","message":"m"})

    assert Protocol.decode(error, :json, 7) ==
             {:ok, %{type: :error, code: :unsupported_protocol, message: "m"}}

    # A client's message is an object with names, in every version.
    move = %{type: :move, seq: 7, dir: :ne}
    assert json_frame(move, 7) == ~s({"type":"move","seq":7,"dir":"ne"})
    assert Protocol.decode(~s({"type":"move","seq":7,"dir":"ne"}), :json, 7) == {:ok, move}

    # Parts that do not end where the message does are refused.
    assert {:error, :bad_field, "areas: " <> _} = Protocol.decode(~s([82,941]), :json, 7)

    assert {:error, :bad_field, "areas: " <> _} =
             Protocol.decode(~s([82,[941,[20001,63]]]), :json, 7)
  end

  defp outcome_results(definitions) do
    [{:outcome, _tag, :server, fields}] = for {:outcome, _, _, _} = d <- definitions, do: d
    {:result, {:coded, results}} = List.keyfind(fields, :result, 0)
    results
  end

  test "version 5's JSON is a third of version 4's for a walker's step" do
    grid = Grove.World.Grid.new(1000, 1000, 50, 10)
    step = [{20_001, 413, 96, 3}]

    sizes =
      for version <- [4, 5, 6, 7] do
        {Frames, format} = Frames.view_format(:json, version, grid)
        part = Frames.encode_view(format, {:delta, %{20_001 => true}}, 941, step, [])
        byte_size(IO.iodata_to_binary(Frames.join([part], :json, version)))
      end

    # Version 6 leaves out the kind of a walker that stayed in its area;
    # 7 the brackets around the parts.
    assert sizes == [
             byte_size(~s({"type":"areas","areas":[[941,false,[[20001,413,96,3]],[]]]})) + 2,
             byte_size(~s([82,[941,[20001,63,3]]])) + 2,
             byte_size(~s([82,[941,[20001,63]]])) + 2,
             byte_size(~s([82,941,[20001,63]])) + 2
           ]
  end

  test "in version 4 a part's lists of more than 127 items are counted in two bytes" do
    entities = for id <- 1..200, do: {id, id, 300 - id, 1}
    gone = Enum.to_list(1_000..1_129)

    for encoding <- [:json, :binary] do
      parts = [
        Frames.encode_view({encoding, 4}, :delta, 3, entities, gone),
        Frames.encode_view({encoding, 4}, :snapshot, 4, [], [])
      ]

      joined = IO.iodata_to_binary(Frames.join(parts, encoding))

      assert decode_frames(joined, encoding, 4) == [
               %{type: :areas, areas: [{3, false, entities, gone}, {4, true, [], []}]}
             ]
    end
  end

  test "in version 4 the grounds of snapshots go ahead of their run, which stays one frame" do
    ground = %Grove.World.Terrain.Area{x0: 50, y0: 0, x1: 52, y1: 2, cells: <<0, 1, 3, 4>>}

    for encoding <- [:json, :binary] do
      snapshot = fn area ->
        Frames.encode_view({encoding, 4}, :snapshot, area, [{7, 50, 1, 1}], [], %{
          names: [],
          cells: [],
          looks: [],
          events: [],
          ground: %{ground | x0: 50 + area}
        })
      end

      frames = Frames.join([snapshot.(1), snapshot.(2)], encoding)
      messages = decode_frames(IO.iodata_to_binary(frames), encoding, 4)

      assert [%{type: :ground, area: 1, x: 51}, %{type: :ground, area: 2, x: 52}, areas] =
               messages

      assert areas == %{
               type: :areas,
               areas: [{1, true, [{7, 50, 1, 1}], []}, {2, true, [{7, 50, 1, 1}], []}]
             }
    end
  end

  test "a snapshot of version 3 brings its area's ground first; version 2 has none" do
    ground = %Grove.World.Terrain.Area{x0: 50, y0: 0, x1: 52, y1: 2, cells: <<0, 1, 3, 4>>}

    for encoding <- [:json, :binary] do
      frames =
        Frames.encode_view({encoding, 3}, :snapshot, 1, [{7, 50, 1, 1}], [], %{
          names: [],
          ground: ground
        })

      [ground_message, area_message] = decode_frames(IO.iodata_to_binary(frames), encoding)

      assert ground_message ==
               %{type: :ground, area: 1, x: 50, y: 0, width: 2, height: 2, cells: <<0, 1, 3, 4>>}

      assert area_message.type == :area and area_message.entities == [{7, 50, 1, 1}]

      old =
        Frames.encode_view({encoding, 2}, :snapshot, 1, [{7, 50, 1, 1}], [], %{
          names: [],
          ground: ground
        })

      assert [%{type: :area}] = decode_frames(IO.iodata_to_binary(old), encoding, 2)
    end
  end

  # The outcome's hand encoder (`Frames.outcome/6`) writes what its
  # definition does.
  defp assert_outcome_by_hand(outcome, encoding, version, kind) do
    by_hand = Frames.outcome(encoding, version, outcome.seq, outcome.result, outcome.x, outcome.y)

    assert by_hand == WebSocket.frame(kind, Protocol.encode(outcome, encoding, version))
  end

  # Server frames as this server writes them (unmasked, unfragmented).
  defp decode_frames(<<>>, _encoding, _version), do: []

  defp decode_frames(
         <<_fin_op, 127, size::64, payload::binary-size(size), rest::binary>>,
         encoding,
         version
       ),
       do: [decoded(payload, encoding, version) | decode_frames(rest, encoding, version)]

  defp decode_frames(
         <<_fin_op, 126, size::16, payload::binary-size(size), rest::binary>>,
         encoding,
         version
       ),
       do: [decoded(payload, encoding, version) | decode_frames(rest, encoding, version)]

  defp decode_frames(
         <<_fin_op, size, payload::binary-size(size), rest::binary>>,
         encoding,
         version
       )
       when size < 126,
       do: [decoded(payload, encoding, version) | decode_frames(rest, encoding, version)]

  defp decode_frames(binary, encoding), do: decode_frames(binary, encoding, 3)

  defp decoded(payload, encoding, version) do
    {:ok, message} = Protocol.decode(payload, encoding, version)
    message
  end

  # What a server frame (never masked) carries.
  defp payload(frame) do
    case IO.iodata_to_binary(frame) do
      <<_fin_op, 127, size::64, data::binary-size(size)>> -> data
      <<_fin_op, 126, size::16, data::binary-size(size)>> -> data
      <<_fin_op, size, data::binary-size(size)>> when size < 126 -> data
    end
  end

  test "a game's small data travels both ways, and bad data is named" do
    data = %{"carrying" => 2, "who" => "ada", "full" => false, "n" => -5}

    for encoding <- [:json, :binary] do
      message = %{type: :acted, seq: 1, result: :ok, data: data, reason: ""}

      assert {:ok, ^message} =
               Protocol.decode(IO.iodata_to_binary(Protocol.encode(message, encoding)), encoding)
    end

    assert {:ok, %{type: :act, action: "pick", dir: :here, args: %{}}} =
             Protocol.decode(~s({"type":"act","seq":1,"action":"pick"}), :json)

    assert {:error, :bad_field, "args: " <> _} =
             Protocol.decode(~s({"type":"act","seq":1,"action":"pick","args":{"n":1.5}}), :json)

    assert {:error, :bad_field, "args: " <> _} =
             Protocol.decode(~s({"type":"act","seq":1,"action":"pick","args":[1]}), :json)

    assert {:error, :bad_field, "dir: " <> _} =
             Protocol.decode(~s({"type":"act","seq":1,"action":"pick","dir":"up"}), :json)

    too_many = Enum.map_join(1..17, ",", &~s("a#{&1}":1))

    assert {:error, :bad_field, "args: " <> _} =
             Protocol.decode(
               ~s({"type":"act","seq":1,"action":"pick","args":{#{too_many}}}),
               :json
             )

    # Binary: an unknown value type, and more entries than allowed.
    assert {:error, :bad_frame, "args: 3 is not" <> _} =
             Protocol.decode(<<7, 1::32, 4::16, "pick", 0, 1, 1::16, "n", 3, 0>>, :binary)

    assert {:error, :bad_frame, "args: 17 entries" <> _} =
             Protocol.decode(<<7, 1::32, 4::16, "pick", 0, 17>>, :binary)
  end

  test "binary input errors name the problem" do
    assert {:error, :bad_frame, "empty frame"} = Protocol.decode(<<>>, :binary)
    assert {:error, :bad_frame, "unknown message tag 200"} = Protocol.decode(<<200>>, :binary)
    assert {:error, :bad_frame, "dir: " <> _} = Protocol.decode(<<2, 0, 0, 0, 1, 9>>, :binary)

    assert {:error, :bad_frame, "1 unexpected bytes" <> _} =
             Protocol.decode(<<2, 0, 0, 0, 1, 0, 0>>, :binary)
  end

  test "in binary, optional fields at the end are left out when they take their defaults" do
    join = %{type: :join, protocol: 2, view_radius: 8, name: "", token: "", minimap: true}
    assert IO.iodata_to_binary(Protocol.encode(join, :binary)) == <<5, 2>>

    for frame <- [<<5, 2>>, <<5, 2, 8>>, <<5, 2, 8, 0, 0>>, <<5, 2, 8, 0, 0, 0, 0>>],
        do: assert(Protocol.decode(frame, :binary) == {:ok, join})

    assert Protocol.decode(<<5, 2, 8, 0, 0, 0, 0, 0>>, :binary) == {:ok, %{join | minimap: false}}

    assert IO.iodata_to_binary(Protocol.encode(%{join | minimap: false}, :binary)) ==
             <<5, 2, 8, 0, 0, 0, 0, 0>>

    assert IO.iodata_to_binary(Protocol.encode(%{join | name: "A"}, :binary)) ==
             <<5, 2, 8, 0, 1, ?A>>

    # A required field is never left out; an optional one before a
    # required one never is either.
    assert {:error, :bad_frame, "dir: " <> _} = Protocol.decode(<<2, 0, 0, 0, 7>>, :binary)

    # An area without a game's fields is what it was before games.
    area = %{
      type: :area,
      area: 1,
      full: false,
      entities: [],
      gone: [],
      cells: [],
      looks: [],
      events: []
    }

    assert IO.iodata_to_binary(Protocol.encode(area, :binary, 2)) ==
             <<72, 1::32, 0, 0::16, 0::16>>

    assert IO.iodata_to_binary(Protocol.encode(area, :binary)) == <<72, 1, 0, 0::16, 0::16>>
  end

  test "encoding a message that breaks its definition is a bug and raises" do
    assert_raise ArgumentError, fn ->
      Protocol.encode(%{type: :move, seq: -1, dir: :n}, :binary)
    end

    assert_raise ArgumentError, fn -> Protocol.encode(%{type: :move, dir: :n}, :json) end
    assert_raise ArgumentError, fn -> Protocol.encode(%{type: :nope}, :json) end
  end

  test "a move in JSON as clients write it decodes as any other JSON does, or fails as it would" do
    # The text a client writes, with what may go wrong in each part; the
    # same text after a space goes through the JSON parser.
    seq =
      :proper_types.tuple([
        :proper_types.elements([:plain, :zero, :minus, :none, :float]),
        :proper_types.integer(0, 8_589_934_592)
      ])

    dir =
      :proper_types.elements(["n", "ne", "e", "se", "s", "sw", "w", "nw", "x", "north", "", "N"])

    tail = :proper_types.elements([~s("}), ~s("} ), ~s(","x":1}), ~s("}}), ~s("), ""])

    property =
      forall(
        :proper_types.tuple([seq, dir, tail, :proper_types.elements(Protocol.versions())]),
        fn {{form, n}, dir, tail, version} ->
          digits =
            case form do
              :plain -> Integer.to_string(n)
              :zero -> "0" <> Integer.to_string(n)
              :minus -> "-" <> Integer.to_string(n)
              :none -> ""
              :float -> Integer.to_string(n) <> ".5"
            end

          frame = ~s({"type":"move","seq":#{digits},"dir":"#{dir}#{tail})

          assert Protocol.decode(frame, :json, version) ==
                   Protocol.decode(" " <> frame, :json, version)
        end
      )

    check(property, numtests: 2000)

    assert Protocol.decode(~s({"type":"move","seq":4294967295,"dir":"nw"}), :json) ==
             {:ok, %{type: :move, seq: 4_294_967_295, dir: :nw}}

    assert {:error, :bad_field, _} =
             Protocol.decode(~s({"type":"move","seq":4294967296,"dir":"nw"}), :json)

    assert {:error, :bad_json, _} = Protocol.decode(~s({"type":"move","seq":07,"dir":"n"}), :json)
  end
end
