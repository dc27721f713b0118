defmodule Grove.Protocol do
  @moduledoc """
  The wire protocol between clients and the gateway, version 7: every
  message defined once (below), with a JSON form for text frames and a
  compact binary form for binary frames, both derived from the definitions
  by `Grove.Protocol.Codec`. `docs/protocol.md` is the reference for client
  authors.

  The world around a player comes as areas (the view tiles its viewport
  overlaps, `Grove.World.Grid`), each a snapshot and then deltas that every
  player holding the area gets byte for byte alike; the client assembles
  its viewport from them.

  Versions: a client names the one it speaks in its `join`, and the
  session speaks it from then on (`negotiate/2`, the one place that
  decides). Version 7's JSON spreads an `areas` message's parts in its
  own array and writes a server's enumerations as their codes, as binary
  does (its binary is version 6's). Version 6 sends an entity's kind
  only with a snapshot and when it comes into an area, not with every
  step, and an area's ground once a connection (`Grove.Gateway.Session`);
  version 5 sends the server's JSON as arrays and places an area's
  entities from its corner.
  Version 4 sends the areas that changed together in one
  `areas` message, each area's part the same bytes for every player
  holding it, where version 3 sends an `area` message per area. Version 3
  carries coordinates, area numbers and entity ids as
  `:uvar` (any size a world may have, a million cells a side and more, in
  as few bytes as each needs) and each area's ground (`ground`, before its
  snapshot); version 2, where they are 16 and 32 bits, is still served in
  a world that fits it (at most 65,535 cells a side). A version 1 `join` is
  answered with an `unsupported_protocol` error and the connection is
  closed.

  Messages are maps with a `:type` and their fields, for example
  `%{type: :move, seq: 7, dir: :ne}`.

  ## Examples

      iex> frame = Grove.Protocol.encode(%{type: :move, seq: 7, dir: :ne}, :json)
      iex> IO.iodata_to_binary(frame)
      ~s({"type":"move","seq":7,"dir":"ne"})
      iex> Grove.Protocol.decode(~s({"type":"move","seq":7,"dir":"ne"}), :json)
      {:ok, %{type: :move, seq: 7, dir: :ne}}
      iex> Grove.Protocol.decode(<<2, 0, 0, 0, 7, 1>>, :binary)
      {:ok, %{type: :move, seq: 7, dir: :ne}}
      iex> {:error, :unsupported_protocol, _text} = Grove.Protocol.decode(~s({"type":"join"}), :json)
      iex> Grove.Protocol.decode(~s({"type":"move","seq":-1,"dir":"ne"}), :json)
      {:error, :bad_field, "seq: expected an integer in 0..4294967295"}
      iex> frame = Grove.Protocol.encode(%{type: :area_closed, area: 400_000}, :binary)
      iex> IO.iodata_to_binary(frame)
      <<73, 128, 181, 24>>
      iex> IO.iodata_to_binary(Grove.Protocol.encode(%{type: :area_closed, area: 7}, :binary, 2))
      <<73, 0, 0, 0, 7>>
  """

  alias Grove.Protocol.Codec

  @version 7
  # Every version this server speaks, oldest first.
  @versions [2, 3, 4, 5, 6, 7]
  # Messages a version before this one does not have.
  @since %{ground: 3, areas: 4}

  @directions [:n, :ne, :e, :se, :s, :sw, :w, :nw]
  @patterns Grove.World.Life.patterns()
  # Why a seeded pattern was refused; new reasons go at the end.
  @seed_results [
    :ok,
    :out_of_bounds,
    :zone_edge,
    :blocked,
    :occupied,
    :rate_limited,
    :busy,
    :disabled,
    :not_owner,
    :unknown_entity,
    :interrupted
  ]
  # Binary outcome codes are places in this list (see `Grove.World.rejections/0`).
  @results [:ok | Grove.World.rejections()]
  # Where an action aims: the player's own cell or the next one in a direction.
  @targets [:here | @directions]
  # An action's result; new ones go at the end.
  @act_results [
    :ok,
    :refused,
    :unknown_action,
    :bad_args,
    :out_of_reach,
    :out_of_bounds,
    :rate_limited,
    :busy,
    :not_owner,
    :unknown_entity,
    :interrupted,
    :disabled
  ]
  # A said line's result: what is wrong with the line (checked by the
  # gateway), or why the world did not carry it; new ones go at the end.
  @say_results [
    :ok,
    :empty,
    :too_long,
    :bad_utf8,
    :bad_character,
    :rate_limited,
    :busy,
    :not_owner,
    :unknown_entity,
    :interrupted
  ]
  @error_codes [
    :bad_json,
    :bad_message,
    :unknown_type,
    :bad_field,
    :bad_frame,
    :too_large,
    :rate_limited,
    :not_joined,
    :already_joined,
    :join_failed,
    :unauthorized,
    :server_busy,
    :unsupported_protocol,
    :invalid_name
  ]
  @bye_reasons [
    :shutdown,
    :slow_consumer,
    :too_many_errors,
    :replaced,
    :too_large,
    :unsupported_protocol,
    :rejoin
  ]

  # The first version whose server messages are arrays in JSON.
  @compact_json 5
  # The first version whose server messages carry an enumeration's
  # position in JSON, as in binary, where its name was.
  @coded_json 7

  # Version 1's `join` (tag 1; in JSON a join without `protocol`), recognised
  # only to tell an old client, in words, that it must be updated.
  @legacy_join_tag 1

  # {type, binary tag, direction, fields}; a field is {name, codec} or
  # {name, codec, default} when it may be left out of JSON. A codec may be
  # one whose size depends on the version (`codec/2`): `:coord`, a
  # coordinate or a size of the world; `:id`, an entity's id; `:area_id`,
  # an area's number.
  @messages [
    # Client to server
    {:join, 5, :client,
     [
       {:protocol, :u8},
       {:view_radius, :u8, 8},
       {:name, :string, ""},
       {:token, :string, ""},
       {:minimap, :bool, true}
     ]},
    {:move, 2, :client, [{:seq, :u32}, {:dir, {:enum, @directions}}]},
    {:ping, 3, :client, [{:t, :u32}]},
    {:resync, 4, :client, []},
    {:seed, 6, :client,
     [{:seq, :u32}, {:pattern, {:enum, @patterns}}, {:dir, {:enum, @directions}}]},
    {:act, 7, :client,
     [
       {:seq, :u32},
       {:action, :string},
       {:dir, {:enum, @targets}, :here},
       {:args, :data, %{}}
     ]},
    {:say, 8, :client, [{:seq, :u32}, {:text, :text}]},
    # Server to client
    {:welcome, 64, :server,
     [
       {:protocol, :u8},
       {:id, :id},
       {:x, :coord},
       {:y, :coord},
       {:width, :coord},
       {:height, :coord},
       {:view_radius, :u8},
       {:tick_ms, :u16},
       {:view_ms, :u16},
       {:name, :string},
       {:avatar, :string}
     ]},
    {:outcome, 65, :server,
     [{:seq, :u32}, {:result, {:enum, @results}}, {:x, :coord}, {:y, :coord}]},
    {:error, 67, :server, [{:code, {:enum, @error_codes}}, {:message, :string}]},
    {:pong, 68, :server, [{:t, :u32}]},
    {:stats, 69, :server,
     [{:players, :u32}, {:actors, :u32}, {:entities, :u32}, {:moves_per_s, :u32}]},
    {:density, 70, :server, [{:cols, :u16}, {:rows, :u16}, {:cells, :bytes}]},
    {:bye, 71, :server, [{:reason, {:enum, @bye_reasons}}, {:message, :string}]},
    {:area, 72, :server,
     [
       {:area, :area_id},
       {:full, :bool},
       {:entities, {:list, {:tuple, [:id, :coord, :coord, :u8]}}},
       {:gone, {:list, :id}},
       {:cells, {:list, {:tuple, [:coord, :coord, :u8]}}, []},
       {:looks, {:list, {:tuple, [:id, :u8]}}, []},
       {:events, {:list, {:tuple, [:id, :coord, :coord, :string, :data]}}, []}
     ]},
    {:area_closed, 73, :server, [{:area, :area_id}]},
    {:colonies, 74, :server, [{:cols, :u16}, {:rows, :u16}, {:cells, :bytes}]},
    {:seeded, 75, :server, [{:seq, :u32}, {:result, {:enum, @seed_results}}]},
    {:acted, 76, :server,
     [{:seq, :u32}, {:result, {:enum, @act_results}}, {:data, :data}, {:reason, :string}]},
    {:names, 77, :server,
     [{:area, :area_id}, {:names, {:list, {:tuple, [:id, :string, :string]}}}]},
    {:said, 78, :server, [{:seq, :u32}, {:result, {:enum, @say_results}}, {:reason, :string}]},
    {:announcement, 79, :server, [{:text, :string}]},
    {:ground, 80, :server,
     [
       {:area, :area_id},
       {:x, :coord},
       {:y, :coord},
       {:width, :u16},
       {:height, :u16},
       {:cells, :ground_cells}
     ]},
    {:places, 81, :server,
     [{:zone_size, :u16}, {:places, {:list, {:tuple, [:u16, :u16, :u16]}}}]},
    # Several areas' snapshots or deltas in one message, each as `area`
    # without the game's fields: [area, full, entities, gone]; from
    # version 5 on, each entity's cell counted from the area's corner
    # (`:parts`, see `Grove.Protocol.Codec`); from version 6 on, a
    # delta's entity that was in the area already without its kind
    # (`:lean_parts`).
    {:areas, 82, :server, [{:areas, :area_parts}]}
  ]

  @type encoding :: :json | :binary
  @type message :: %{required(:type) => atom(), optional(atom()) => term()}
  @type error_code :: atom()

  @definitions (for version <- @versions do
                  {version,
                   for {type, tag, from, fields} <- @messages,
                       Map.get(@since, type, 0) <= version do
                     {type, tag, from,
                      Enum.map(fields, fn field ->
                        codec = Codec.versioned(elem(field, 1), version)
                        coded? = from == :server and version >= @coded_json
                        put_elem(field, 1, if(coded?, do: Codec.coded(codec), else: codec))
                      end)}
                   end}
                end)
               |> Map.new()

  @doc "The protocol's version number, the newest this server speaks."
  @spec version() :: pos_integer()
  def version, do: @version

  @doc "Every version this server speaks, oldest first."
  @spec versions() :: [pos_integer()]
  def versions, do: @versions

  @doc """
  The version a session speaks with a client that asks for `requested` in
  its `join`, in a world of `width` x `height` cells: the one it asked for,
  when this server speaks it and the world fits it, else why not.

      iex> Grove.Protocol.negotiate(3, {1_000_000, 1_000_000})
      {:ok, 3}
      iex> Grove.Protocol.negotiate(2, {1000, 1000})
      {:ok, 2}
      iex> {:error, text} = Grove.Protocol.negotiate(2, {1_000_000, 1_000_000})
      iex> text =~ "protocol 3"
      true
  """
  @spec negotiate(term(), {pos_integer(), pos_integer()}) ::
          {:ok, pos_integer()} | {:error, String.t()}
  def negotiate(2, {width, height}) when width > 65_535 or height > 65_535,
    do:
      {:error,
       "this world is #{width} x #{height} cells, more than Grove protocol 2 can say; " <>
         "speak protocol 3: reload the page or update the client (see docs/protocol.md)"}

  def negotiate(version, _size) when version in @versions, do: {:ok, version}
  def negotiate(version, _size), do: {:error, unsupported_text(version)}

  @doc "Every message definition of a version: `{type, tag, :client | :server, fields}`."
  @spec messages(pos_integer()) :: [{atom(), byte(), :client | :server, list()}]
  def messages(version \\ @version) when version in @versions,
    do: Map.fetch!(@definitions, version)

  @doc "The results an `acted` message may carry."
  @spec act_results() :: [atom()]
  def act_results, do: @act_results

  @doc "The results a `said` message may carry."
  @spec say_results() :: [atom()]
  def say_results, do: @say_results

  @doc "The error codes an `error` message may carry."
  @spec error_codes() :: [atom()]
  def error_codes, do: @error_codes

  @doc "What an old client is told when it joins: it speaks a version this server does not."
  @spec unsupported_text(term()) :: String.t()
  def unsupported_text(version),
    do:
      "this server speaks Grove protocol #{@version}, your client #{version}: " <>
        "reload the page or update the client (see docs/protocol.md)"

  for {version, definitions} <- @definitions, {type, tag, _from, fields} <- definitions do
    defp definition(unquote(type), unquote(version)),
      do: {unquote(tag), unquote(Macro.escape(fields))}

    defp by_tag(unquote(tag), unquote(version)),
      do: {unquote(type), unquote(Macro.escape(fields))}

    defp by_name(unquote(Atom.to_string(type)), unquote(version)),
      do: {unquote(type), unquote(Macro.escape(fields))}
  end

  defp definition(_, _), do: nil
  defp by_tag(_, _), do: nil
  defp by_name(_, _), do: nil

  for name <- @messages |> Enum.flat_map(&elem(&1, 3)) |> Enum.map(&elem(&1, 0)) |> Enum.uniq() do
    defp json_key(unquote(name)), do: unquote(Atom.to_string(name))
  end

  for {type, _tag, from, _fields} <- @messages do
    defp json_type(unquote(type)), do: unquote(Atom.to_string(type))
    defp server?(unquote(type)), do: unquote(from == :server)
  end

  @doc """
  Encodes a message for a connection's encoding, in a version of the
  protocol (default the newest). Raises `ArgumentError` on a message that
  does not fit its definition: that is a bug on our side.
  """
  @spec encode(message(), encoding(), pos_integer()) :: iodata()
  def encode(%{type: type} = message, encoding, version \\ @version) do
    case definition(type, version) do
      nil ->
        raise ArgumentError, "no message type #{inspect(type)} in version #{version}"

      {tag, fields} when encoding == :json and version >= @compact_json ->
        if server?(type),
          do: compact_fields(tag, fields, message),
          else: encode_fields(encoding, type, tag, fields, message)

      {tag, fields} ->
        encode_fields(encoding, type, tag, fields, message)
    end
  end

  # From version 5 on, a server's message in JSON is an array: its tag,
  # then its fields in order, those at the end that take their defaults
  # left out, as in binary; a field spread (`{:spread, codec}`, the
  # last) puts its array's items in the message's own.
  defp compact_fields(tag, fields, message) do
    values =
      fields
      |> without_defaults_at_end(message)
      |> Enum.flat_map(fn field ->
        json = Codec.to_json(codec(field), fetch_field!(message, field))
        if match?({:spread, _}, codec(field)), do: json, else: [json]
      end)

    :jiffy.encode([tag | values])
  end

  defp encode_fields(:binary, _type, tag, fields, message) do
    [
      tag
      | fields
        |> without_defaults_at_end(message)
        |> Enum.map(fn field -> Codec.encode(codec(field), fetch_field!(message, field)) end)
    ]
  end

  defp encode_fields(:json, type, _tag, fields, message) do
    pairs =
      for field <- fields do
        {json_key(name(field)), Codec.to_json(codec(field), fetch_field!(message, field))}
      end

    :jiffy.encode({[{"type", json_type(type)} | pairs]})
  end

  # In binary, the optional fields at the end of a message that all take
  # their defaults are left out (see `decode/2`).
  defp without_defaults_at_end(fields, message) do
    fields
    |> Enum.reverse()
    |> Enum.drop_while(fn
      {name, _codec, default} -> Map.get(message, name, default) == default
      _required -> false
    end)
    |> Enum.reverse()
  end

  defp fetch_field!(message, field) do
    case Map.fetch(message, name(field)) do
      {:ok, value} ->
        value

      :error when tuple_size(field) == 3 ->
        elem(field, 2)

      :error ->
        raise ArgumentError, "message #{inspect(message.type)} lacks #{inspect(name(field))}"
    end
  end

  @doc """
  Decodes one frame of a version of the protocol (default the newest;
  what clients send is the same in every version). Never raises: bad
  input gives `{:error, code, text}` with a code from `error_codes/0` and
  a sentence for a human.
  """
  @spec decode(binary(), encoding(), pos_integer()) ::
          {:ok, message()} | {:error, error_code(), String.t()}
  def decode(frame, encoding, version \\ @version)

  def decode(<<@legacy_join_tag, _::binary>>, :binary, _version),
    do: {:error, :unsupported_protocol, unsupported_text(1)}

  def decode(<<tag, body::binary>>, :binary, version) do
    case by_tag(tag, version) do
      nil -> {:error, :bad_frame, "unknown message tag #{tag}"}
      {type, fields} -> decode_binary_fields(type, fields, body, %{type: type})
    end
  end

  def decode(<<>>, :binary, _version), do: {:error, :bad_frame, "empty frame"}

  # A move as clients write it (the browser's, the client library's, the
  # load's and the peers' players): read without the JSON parser, the
  # message a player sends most, about once a second. Anything else, or
  # anything this does not take whole (other spacing or order, a number
  # JSON would refuse or the message's range would), goes the long way,
  # which answers the same message or the same error.
  def decode(<<"{\"type\":\"move\",\"seq\":", rest::binary>> = frame, :json, version)
      when version in @versions do
    case move_json(rest, 0, 0) do
      {:ok, _message} = ok -> ok
      :error -> decode_json(frame, version)
    end
  end

  def decode(frame, :json, version) when is_binary(frame), do: decode_json(frame, version)

  defp decode_json(frame, version) do
    case safe_json(frame) do
      {:ok, {pairs}} when is_list(pairs) ->
        object = Map.new(pairs)

        case Map.fetch(object, "type") do
          {:ok, "join"} when not is_map_key(object, "protocol") ->
            {:error, :unsupported_protocol, unsupported_text(1)}

          {:ok, name} when is_binary(name) ->
            case by_name(name, version) do
              nil -> {:error, :unknown_type, "unknown message type #{inspect(name)}"}
              {type, fields} -> decode_json_fields(type, fields, object)
            end

          _ ->
            {:error, :bad_message, "a message is a JSON object with a \"type\" string"}
        end

      {:ok, [tag | values]} when is_integer(tag) and version >= @compact_json ->
        case by_tag(tag, version) do
          {type, fields} -> if server?(type), do: compact_json_fields(type, fields, values)
          nil -> nil
        end || {:error, :unknown_type, "unknown message tag #{tag}"}

      {:ok, _other} ->
        {:error, :bad_message, "a message is a JSON object with a \"type\" string"}

      :error ->
        {:error, :bad_json, "the frame is not valid JSON"}
    end
  end

  defp decode_binary_fields(type, [], <<>>, acc), do: {:ok, Map.put(acc, :type, type)}

  # A message may end before optional fields at its end: they take their defaults.
  defp decode_binary_fields(type, fields, <<>>, acc) when fields != [] do
    if Enum.all?(fields, &(tuple_size(&1) == 3)),
      do: {:ok, Enum.reduce(fields, acc, &put_default/2)},
      else: decode_binary_field(type, fields, <<>>, acc)
  end

  defp decode_binary_fields(_type, [], rest, _acc),
    do: {:error, :bad_frame, "#{byte_size(rest)} unexpected bytes after the message"}

  defp decode_binary_fields(type, fields, binary, acc),
    do: decode_binary_field(type, fields, binary, acc)

  defp decode_binary_field(type, [field | fields], binary, acc) do
    case Codec.decode(codec(field), binary) do
      {:ok, value, rest} ->
        decode_binary_fields(type, fields, rest, Map.put(acc, name(field), value))

      {:error, why} ->
        {:error, :bad_frame, "#{name(field)}: #{why}"}
    end
  end

  defp put_default({name, _codec, default}, acc), do: Map.put(acc, name, default)

  defp decode_json_fields(type, fields, object), do: json_fields(fields, object, %{type: type})

  defp json_fields([], _object, acc), do: {:ok, acc}

  defp json_fields([field | fields], object, acc) do
    key = json_key(name(field))

    case Map.fetch(object, key) do
      :error when tuple_size(field) == 3 ->
        json_fields(fields, object, Map.put(acc, name(field), elem(field, 2)))

      :error ->
        {:error, :bad_field, "#{key}: missing"}

      {:ok, json} ->
        case Codec.from_json(codec(field), json) do
          {:ok, value} -> json_fields(fields, object, Map.put(acc, name(field), value))
          {:error, why} -> {:error, :bad_field, "#{key}: #{why}"}
        end
    end
  end

  defp compact_json_fields(type, fields, values), do: compact_json(fields, values, %{type: type})

  # A field spread takes every value left.
  defp compact_json([{name, {:spread, _} = codec}], values, acc) do
    case Codec.from_json(codec, values) do
      {:ok, value} -> {:ok, Map.put(acc, name, value)}
      {:error, why} -> {:error, :bad_field, "#{name}: #{why}"}
    end
  end

  defp compact_json([], [], acc), do: {:ok, acc}

  defp compact_json([], values, _acc),
    do: {:error, :bad_field, "#{length(values)} values after the message's fields"}

  defp compact_json([field | fields], [], acc) do
    if tuple_size(field) == 3 and Enum.all?(fields, &(tuple_size(&1) == 3)),
      do: {:ok, Enum.reduce([field | fields], acc, &put_default/2)},
      else: {:error, :bad_field, "#{name(field)}: missing"}
  end

  defp compact_json([field | fields], [json | values], acc) do
    case Codec.from_json(codec(field), json) do
      {:ok, value} -> compact_json(fields, values, Map.put(acc, name(field), value))
      {:error, why} -> {:error, :bad_field, "#{name(field)}: #{why}"}
    end
  end

  # The digits of a move's `seq` (no leading zero, as in JSON; within
  # u32), then its `dir`, and nothing after.
  defp move_json(<<digit, rest::binary>>, seq, digits) when digit in ?0..?9 do
    if seq == 0 and digits == 1,
      do: :error,
      else: move_json(rest, seq * 10 + digit - ?0, digits + 1)
  end

  defp move_json(<<",\"dir\":\"", rest::binary>>, seq, digits)
       when digits > 0 and seq <= 0xFFFFFFFF do
    case rest do
      <<"n\"}">> -> {:ok, %{type: :move, seq: seq, dir: :n}}
      <<"ne\"}">> -> {:ok, %{type: :move, seq: seq, dir: :ne}}
      <<"e\"}">> -> {:ok, %{type: :move, seq: seq, dir: :e}}
      <<"se\"}">> -> {:ok, %{type: :move, seq: seq, dir: :se}}
      <<"s\"}">> -> {:ok, %{type: :move, seq: seq, dir: :s}}
      <<"sw\"}">> -> {:ok, %{type: :move, seq: seq, dir: :sw}}
      <<"w\"}">> -> {:ok, %{type: :move, seq: seq, dir: :w}}
      <<"nw\"}">> -> {:ok, %{type: :move, seq: seq, dir: :nw}}
      _other -> :error
    end
  end

  defp move_json(_rest, _seq, _digits), do: :error

  # jiffy raises on bad input, and on numbers or nesting it cannot hold.
  defp safe_json(frame) do
    {:ok, :jiffy.decode(frame, [:dedupe_keys])}
  rescue
    _ -> :error
  catch
    _, _ -> :error
  end

  defp name(field), do: elem(field, 0)
  defp codec(field), do: elem(field, 1)
end
