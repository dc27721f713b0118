defmodule Grove.Protocol.Codec do
  @moduledoc """
  Codec combinators: small descriptions of a value's type from which both
  wire encodings follow, in the spirit of OpenPoker's picklers. A message is
  defined once, as a list of fields with codecs; the binary and JSON forms
  of every message come from these functions and nothing else.

  Codecs:

    * `:u8`, `:u16`, `:u32` - unsigned big-endian integers
    * `:uvar` - an unsigned integer below 2^53 (so that JavaScript's
      numbers hold it exactly) in as few bytes as it needs: seven bits a
      byte, least significant first, the high bit set on every byte but
      the last (LEB128); 0 to 127 is one byte, up to 16,383 two, up to
      2,097,151 three
    * `:bool` - one byte, 0 or 1; JSON `true`/`false`
    * `{:enum, [atom]}` - one byte, the atom's position; JSON the atom's name
    * `{:coded, [atom]}` - as `{:enum, [atom]}` in binary; JSON the atom's
      position too, a number (a server's enumerations from version 7 on;
      its name is read too, as a message sent as an object names it)
    * `:string` - UTF-8, a u16 byte length then the bytes; JSON a string
    * `:text` - like `:string` on the wire, but its bytes are left for the
      message's handler to check (a `say`'s line is answered with what is
      wrong with it, bad UTF-8 included, rather than refused as a frame)
    * `:bytes` - a u32 byte length then the bytes; JSON a base64 string
    * `{:list, codec}` - a u16 count then the items; JSON an array
    * `{:vlist, codec}` - a `:uvar` count then the items (one byte for up
      to 127 of them, where most lists are short); JSON an array
    * `{:tuple, [codec]}` - the items one after another; JSON an array
    * `:parts` - the areas' parts of an `areas` message from version 5
      on, each `{area, full, entities, gone}`, each entity `{id, at, kind}`
      with `at` its cell counted row by row from the area's north-west
      corner (`dy * width + dx`, the area's width as its ground gives it);
      in binary a `:uvar` count, then each part: the area (`:uvar`),
      `full` (`:bool`), the entities (a `:vlist` of `:uvar`, `:uvar`,
      `:u8`) and the gone ids (a `:vlist` of `:uvar`); in JSON one array
      of the parts one after another, each the area, its entities as one
      flat array `[id, at, kind, id, at, kind, ...]`, then its gone ids
      unless there are none and the part is no snapshot, then `true` if
      it is one: `[941, [20001, 63, 3], 942, [], [377], 943, [], [], true]`
    * `:lean_parts` - the areas' parts of an `areas` message from version 6
      on: as `:parts`, but in a delta an entity that was in the area
      already comes without its kind (`{id, at, nil}`: the client knows
      it), and only one that came into the area with it; a snapshot
      lists every entity with its kind, and no gone ids. In binary a
      delta's entity is its id (`:uvar`), then `2 * at + 1` and its kind
      (`:u8`) when it has one, else `2 * at` (`:uvar`); a snapshot's as in
      `:parts`. In JSON a delta's entity is `id, at` or, with its kind,
      `-id, at, kind` (an entity's id is at least 1), all in its area's
      one flat array; a snapshot's `id, at, kind`, the part ending in
      `true` with no gone ids: `[941, [20001, 63], 942, [-20002, 7, 3],
      [377], 943, [20003, 12, 3], true]`
    * `{:spread, codec}` - the last field of a server's message whose JSON
      array is spread into the message's own array (from version 7 on,
      an `areas` message's parts: `[82, 941, [20001, 63], 942, [], [377]]`);
      in binary the codec itself
    * `:ground` - an area's ground cells (codes 0 to 7) from version 5 on:
      in binary as `:bytes`; in JSON a string of two cells a character,
      the character of base64's alphabet (`A`-`Z`, `a`-`z`, `0`-`9`, `+`,
      `/`) at 8 x the first cell + the second, and `=` after the last
      character when the count is odd (its second cell is none)
    * `:data` - a game's small data: a u8 count, then for each entry its
      name (a string) and its value, a type byte (0 a signed 32-bit
      integer, 1 a string, 2 a boolean) and the value; JSON an object.
      At most #{16} entries, names of at most 32 bytes; decoded names are
      strings, never atoms

  ## Examples

      iex> alias Grove.Protocol.Codec
      iex> codec = {:list, {:tuple, [:u32, {:enum, [:a, :b]}]}}
      iex> binary = IO.iodata_to_binary(Codec.encode(codec, [{7, :b}]))
      iex> Codec.decode(codec, binary)
      {:ok, [{7, :b}], ""}
      iex> Codec.from_json(codec, Codec.to_json(codec, [{7, :b}]))
      {:ok, [{7, :b}]}
  """

  @type t ::
          :u8
          | :u16
          | :u32
          | :uvar
          | :bool
          | :string
          | :text
          | :bytes
          | {:enum, [atom()]}
          | {:coded, [atom()]}
          | {:spread, t()}
          | {:list, t()}
          | {:vlist, t()}
          | {:tuple, [t()]}
          | :parts
          | :lean_parts
          | :ground
          | :data

  import Bitwise

  @max_u8 0xFF
  @max_u16 0xFFFF
  @max_u32 0xFFFFFFFF
  @min_i32 -0x80000000
  @max_i32 0x7FFFFFFF
  @max_data 16
  @max_name 32

  @max_uvar 0x1FFFFFFFFFFFFF

  # An area's entities in a part of `areas` from version 5 on: id, cell, kind.
  @part_entities {:vlist, {:tuple, [:uvar, :uvar, :u8]}}

  # Two ground cells a character, in JSON from version 5 on.
  @alphabet ~c"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

  @doc """
  The codec a versioned one of the protocol's definitions is in a version
  of the protocol: `:coord` (a coordinate or a size of the world), `:id`
  (an entity's id) and `:area_id` (an area's number) are 16, 32 and 32
  bits in version 2, `:uvar` from version 3 on; `:area_part` (an area's
  part of `areas`) is `:part` from version 5 on, before it a tuple of the
  area, `full`, its entities with their cells and its gone ids; any other
  is itself.

      iex> Grove.Protocol.Codec.versioned({:list, {:tuple, [:id, :coord, :u8]}}, 2)
      {:list, {:tuple, [:u32, :u16, :u8]}}
  """
  @spec versioned(term(), pos_integer()) :: t()
  def versioned(:coord, 2), do: :u16
  def versioned(:id, 2), do: :u32
  def versioned(:area_id, 2), do: :u32
  def versioned(codec, _version) when codec in [:coord, :id, :area_id], do: :uvar
  # The parts of `areas`: their entities' cells counted from their
  # area's corner from version 5 on.
  # From version 7 on, spread into the message's array in JSON.
  def versioned(:area_parts, version) when version >= 7, do: {:spread, :lean_parts}
  def versioned(:area_parts, 6), do: :lean_parts
  def versioned(:area_parts, 5), do: :parts

  def versioned(:area_parts, version),
    do:
      versioned(
        {:vlist,
         {:tuple,
          [:area_id, :bool, {:vlist, {:tuple, [:id, :coord, :coord, :u8]}}, {:vlist, :id}]}},
        version
      )

  def versioned(:ground_cells, version) when version >= 5, do: :ground
  def versioned(:ground_cells, _version), do: :bytes

  def versioned({:list, item}, version), do: {:list, versioned(item, version)}
  def versioned({:vlist, item}, version), do: {:vlist, versioned(item, version)}
  def versioned({:tuple, items}, version), do: {:tuple, Enum.map(items, &versioned(&1, version))}
  def versioned(codec, _version), do: codec

  @doc """
  A server's codec from version 7 on, where an enumeration is its position
  in JSON as in binary (`{:coded, values}`), a number where its name took
  a string.

      iex> Grove.Protocol.Codec.coded({:tuple, [:u32, {:enum, [:ok, :blocked]}]})
      {:tuple, [:u32, {:coded, [:ok, :blocked]}]}
  """
  @spec coded(t()) :: t()
  def coded({:enum, values}), do: {:coded, values}
  def coded({:list, item}), do: {:list, coded(item)}
  def coded({:vlist, item}), do: {:vlist, coded(item)}
  def coded({:tuple, items}), do: {:tuple, Enum.map(items, &coded/1)}
  def coded(codec), do: codec

  ## Binary

  @doc "Encodes a value; raises `ArgumentError` when it does not fit the codec."
  @spec encode(t(), term()) :: iodata()
  def encode(:u8, n) when is_integer(n) and n >= 0 and n <= @max_u8, do: <<n::8>>
  def encode(:u16, n) when is_integer(n) and n >= 0 and n <= @max_u16, do: <<n::16>>
  def encode(:u32, n) when is_integer(n) and n >= 0 and n <= @max_u32, do: <<n::32>>
  def encode(:uvar, n) when is_integer(n) and n >= 0 and n <= @max_uvar, do: uvar(n)
  def encode(:bool, true), do: <<1>>
  def encode(:bool, false), do: <<0>>

  def encode({:enum, values} = codec, value) when is_atom(value) do
    case Enum.find_index(values, &(&1 == value)) do
      nil -> bad(codec, value)
      index -> <<index::8>>
    end
  end

  def encode({:coded, values}, value), do: encode({:enum, values}, value)
  def encode({:spread, codec}, value), do: encode(codec, value)
  def encode(:text, s), do: encode(:string, s)

  def encode(:string, s) when is_binary(s) and byte_size(s) <= @max_u16,
    do: [<<byte_size(s)::16>>, s]

  def encode(:bytes, b) when is_binary(b) and byte_size(b) <= @max_u32,
    do: [<<byte_size(b)::32>>, b]

  def encode({:list, item}, list) when is_list(list) and length(list) <= @max_u16,
    do: [<<length(list)::16>> | encode_items(item, list)]

  def encode({:vlist, item}, list) when is_list(list) and length(list) <= @max_uvar,
    do: [uvar(length(list)) | encode_items(item, list)]

  # Walked by position: views encode thousands of these tuples a second.
  def encode({:tuple, codecs}, tuple)
      when is_tuple(tuple) and tuple_size(tuple) == length(codecs),
      do: encode_elements(codecs, tuple, 1)

  def encode(:parts, parts) when is_list(parts),
    do: [uvar(length(parts)) | Enum.map(parts, &encode_part/1)]

  def encode(:lean_parts, parts) when is_list(parts),
    do: [uvar(length(parts)) | Enum.map(parts, &encode_lean_part/1)]

  def encode(:ground, cells), do: encode(:bytes, cells)

  def encode(:data, data) when is_map(data) and map_size(data) <= @max_data,
    do: [<<map_size(data)::8>> | Enum.map(data, &encode_entry/1)]

  def encode(codec, value), do: bad(codec, value)

  defp encode_part({area, full, entities, gone})
       when is_boolean(full) and is_list(entities) and is_list(gone),
       do: [
         encode(:uvar, area),
         encode(:bool, full),
         encode({:vlist, {:tuple, [:uvar, :uvar, :u8]}}, entities),
         encode({:vlist, :uvar}, gone)
       ]

  defp encode_part(part), do: bad(:parts, part)

  defp encode_lean_part({area, true, entities, []}) when is_list(entities),
    do: [encode(:uvar, area), 1, encode(@part_entities, entities), 0]

  defp encode_lean_part({area, false, entities, gone})
       when is_list(entities) and is_list(gone),
       do: [
         encode(:uvar, area),
         0,
         uvar(length(entities)),
         Enum.map(entities, &encode_lean_entity/1),
         encode({:vlist, :uvar}, gone)
       ]

  defp encode_lean_part(part), do: bad(:lean_parts, part)

  defp encode_lean_entity({id, at, nil}) when is_integer(at) and at >= 0 and at < @max_uvar / 2,
    do: [encode(:uvar, id), uvar(2 * at)]

  defp encode_lean_entity({id, at, kind})
       when is_integer(at) and at >= 0 and at < @max_uvar / 2,
       do: [encode(:uvar, id), uvar(2 * at + 1), encode(:u8, kind)]

  defp encode_lean_entity(entity), do: bad(:lean_parts, entity)

  defp encode_entry({name, value}) do
    name = name_string(name)
    if byte_size(name) > @max_name, do: bad(:data, name)
    [encode(:string, name) | encode_value(value)]
  end

  defp encode_value(n) when is_integer(n) and n >= @min_i32 and n <= @max_i32,
    do: <<0, n::signed-32>>

  defp encode_value(s) when is_binary(s), do: [1 | encode(:string, s)]
  defp encode_value(true), do: <<2, 1>>
  defp encode_value(false), do: <<2, 0>>
  defp encode_value(other), do: bad(:data, other)

  defp name_string(name) when is_atom(name), do: Atom.to_string(name)
  defp name_string(name) when is_binary(name), do: name
  defp name_string(other), do: bad(:data, other)

  @doc """
  An unsigned integer below 2^53 as `:uvar` bytes; for encoders written
  by hand.

      iex> Grove.Protocol.Codec.uvar(300)
      <<172, 2>>
  """
  @spec uvar(non_neg_integer()) :: binary()
  def uvar(n) when n < 0x80, do: <<n>>
  def uvar(n) when n < 0x4000, do: <<(n &&& 0x7F) ||| 0x80, n >>> 7>>

  def uvar(n) when n < 0x200000,
    do: <<(n &&& 0x7F) ||| 0x80, (n >>> 7 &&& 0x7F) ||| 0x80, n >>> 14>>

  def uvar(n), do: <<(n &&& 0x7F) ||| 0x80, uvar(n >>> 7)::binary>>

  defp encode_items(_item, []), do: []
  defp encode_items(item, [value | rest]), do: [encode(item, value) | encode_items(item, rest)]

  defp encode_elements([], _tuple, _index), do: []

  defp encode_elements([codec | codecs], tuple, index),
    do: [encode(codec, elem(tuple, index - 1)) | encode_elements(codecs, tuple, index + 1)]

  @doc "Decodes one value from the front of a binary, returning the rest."
  @spec decode(t(), binary()) :: {:ok, term(), binary()} | {:error, String.t()}
  def decode(:u8, <<n::8, rest::binary>>), do: {:ok, n, rest}
  def decode(:u16, <<n::16, rest::binary>>), do: {:ok, n, rest}
  def decode(:u32, <<n::32, rest::binary>>), do: {:ok, n, rest}
  def decode(:uvar, binary) when byte_size(binary) > 0, do: decode_uvar(binary, 0, 0)
  def decode(:bool, <<0, rest::binary>>), do: {:ok, false, rest}
  def decode(:bool, <<1, rest::binary>>), do: {:ok, true, rest}
  def decode(:bool, <<_, _::binary>>), do: {:error, "a boolean must be 0 or 1"}

  def decode({:enum, values}, <<index::8, rest::binary>>) do
    case Enum.at(values, index) do
      nil -> {:error, "#{index} is not one of #{length(values)} known values"}
      value -> {:ok, value, rest}
    end
  end

  def decode({:coded, values}, binary), do: decode({:enum, values}, binary)
  def decode({:spread, codec}, binary), do: decode(codec, binary)

  def decode(:string, <<size::16, s::binary-size(size), rest::binary>>) do
    if String.valid?(s), do: {:ok, s, rest}, else: {:error, "a string is not valid UTF-8"}
  end

  def decode(:text, <<size::16, s::binary-size(size), rest::binary>>), do: {:ok, s, rest}

  def decode(:bytes, <<size::32, b::binary-size(size), rest::binary>>), do: {:ok, b, rest}
  def decode({:list, item}, <<count::16, rest::binary>>), do: decode_items(item, count, rest, [])

  def decode({:vlist, item}, binary) when byte_size(binary) > 0 do
    with {:ok, count, rest} <- decode_uvar(binary, 0, 0) do
      # Each item takes a byte at least: a count over what is left is a lie.
      if count <= byte_size(rest),
        do: decode_items(item, count, rest, []),
        else: {:error, "truncated: expected #{count} items"}
    end
  end

  def decode({:tuple, codecs}, binary), do: decode_tuple(codecs, binary, [])

  def decode(:parts, binary),
    do: decode({:vlist, {:tuple, [:uvar, :bool, @part_entities, {:vlist, :uvar}]}}, binary)

  def decode(:lean_parts, binary) when byte_size(binary) > 0 do
    with {:ok, count, rest} <- decode_uvar(binary, 0, 0) do
      if count <= byte_size(rest),
        do: decode_lean_parts(count, rest, []),
        else: {:error, "truncated: expected #{count} items"}
    end
  end

  def decode(:ground, binary), do: decode(:bytes, binary)

  def decode(:data, <<count::8, rest::binary>>) when count <= @max_data,
    do: decode_data(count, rest, %{})

  def decode(:data, <<count::8, _::binary>>),
    do: {:error, "#{count} entries, at most #{@max_data}"}

  def decode(codec, _binary), do: {:error, "truncated: expected #{describe(codec)}"}

  defp decode_lean_parts(0, rest, acc), do: {:ok, Enum.reverse(acc), rest}

  defp decode_lean_parts(count, binary, acc) do
    with {:ok, area, rest} <- decode(:uvar, binary),
         {:ok, full, rest} <- decode(:bool, rest),
         {:ok, entities, rest} <- lean_entities(full, rest),
         {:ok, gone, rest} <- decode({:vlist, :uvar}, rest) do
      if full and gone != [],
        do: {:error, "a snapshot with gone ids"},
        else: decode_lean_parts(count - 1, rest, [{area, full, entities, gone} | acc])
    end
  end

  defp lean_entities(true, binary), do: decode(@part_entities, binary)

  defp lean_entities(false, binary) when byte_size(binary) > 0 do
    with {:ok, count, rest} <- decode_uvar(binary, 0, 0) do
      if count <= byte_size(rest),
        do: lean_entities(count, rest, []),
        else: {:error, "truncated: expected #{count} items"}
    end
  end

  defp lean_entities(false, _binary), do: {:error, "truncated: expected #{describe(:uvar)}"}

  defp lean_entities(0, rest, acc), do: {:ok, Enum.reverse(acc), rest}

  defp lean_entities(count, binary, acc) do
    with {:ok, id, rest} <- decode(:uvar, binary),
         {:ok, at2, rest} <- decode(:uvar, rest),
         {:ok, kind, rest} <- if(rem(at2, 2) == 1, do: decode(:u8, rest), else: {:ok, nil, rest}) do
      lean_entities(count - 1, rest, [{id, div(at2, 2), kind} | acc])
    end
  end

  # At most eight bytes: 56 bits hold 2^53 - 1.
  defp decode_uvar(<<byte, rest::binary>>, shift, acc) when shift <= 49 do
    acc = acc ||| (byte &&& 0x7F) <<< shift

    cond do
      byte < 0x80 and acc <= @max_uvar -> {:ok, acc, rest}
      byte < 0x80 -> {:error, "an integer over #{@max_uvar}"}
      rest == <<>> -> {:error, "truncated: expected #{describe(:uvar)}"}
      true -> decode_uvar(rest, shift + 7, acc)
    end
  end

  defp decode_uvar(_binary, _shift, _acc), do: {:error, "an integer over #{@max_uvar}"}

  defp decode_items(_item, 0, rest, acc), do: {:ok, Enum.reverse(acc), rest}

  defp decode_items(item, count, binary, acc) do
    case decode(item, binary) do
      {:ok, value, rest} -> decode_items(item, count - 1, rest, [value | acc])
      error -> error
    end
  end

  defp decode_data(0, rest, acc), do: {:ok, acc, rest}

  defp decode_data(count, binary, acc) do
    with {:ok, name, rest} <- decode(:string, binary),
         :ok <-
           if(byte_size(name) <= @max_name,
             do: :ok,
             else: {:error, "a name is longer than #{@max_name} bytes"}
           ),
         {:ok, value, rest} <- decode_value(rest) do
      decode_data(count - 1, rest, Map.put(acc, name, value))
    end
  end

  defp decode_value(<<0, n::signed-32, rest::binary>>), do: {:ok, n, rest}
  defp decode_value(<<1, rest::binary>>), do: decode(:string, rest)
  defp decode_value(<<2, 0, rest::binary>>), do: {:ok, false, rest}
  defp decode_value(<<2, 1, rest::binary>>), do: {:ok, true, rest}

  defp decode_value(<<type, _::binary>>) when type > 2,
    do: {:error, "#{type} is not a value's type (0, 1 or 2)"}

  defp decode_value(_), do: {:error, "truncated: expected a value"}

  defp decode_tuple([], rest, acc), do: {:ok, acc |> Enum.reverse() |> List.to_tuple(), rest}

  defp decode_tuple([codec | codecs], binary, acc) do
    case decode(codec, binary) do
      {:ok, value, rest} -> decode_tuple(codecs, rest, [value | acc])
      error -> error
    end
  end

  ## JSON (the terms jiffy reads and writes)

  @doc "The JSON term for a value (as jiffy encodes it)."
  @spec to_json(t(), term()) :: term()
  def to_json(:bytes, b), do: Base.encode64(b)
  def to_json({:enum, _values}, value), do: Atom.to_string(value)

  def to_json({:coded, values} = codec, value) do
    case Enum.find_index(values, &(&1 == value)) do
      nil -> bad(codec, value)
      index -> index
    end
  end

  def to_json({:spread, codec}, value), do: to_json(codec, value)
  def to_json({:list, item}, list), do: Enum.map(list, &to_json(item, &1))
  def to_json({:vlist, item}, list), do: Enum.map(list, &to_json(item, &1))

  def to_json({:tuple, codecs}, tuple), do: json_elements(codecs, tuple, 1)

  def to_json(:parts, parts), do: Enum.flat_map(parts, &json_part/1)
  def to_json(:lean_parts, parts), do: Enum.flat_map(parts, &json_lean_part/1)
  def to_json(:ground, cells), do: ground_text(cells, [])

  def to_json(:data, data),
    do: {Enum.map(data, fn {name, value} -> {name_string(name), value} end)}

  def to_json(_codec, value), do: value

  defp json_part({area, full, entities, gone}) do
    flat = Enum.flat_map(entities, fn {id, at, kind} -> [id, at, kind] end)

    cond do
      full -> [area, flat, gone, true]
      gone != [] -> [area, flat, gone]
      true -> [area, flat]
    end
  end

  defp json_lean_part({area, true, entities, []}),
    do: [area, json_snapshot_entities(entities), true]

  defp json_lean_part({area, false, entities, gone}) do
    flat = Enum.flat_map(entities, &json_lean_entity/1)
    if gone == [], do: [area, flat], else: [area, flat, gone]
  end

  defp json_lean_part(part), do: bad(:lean_parts, part)

  defp json_snapshot_entities(entities) do
    Enum.flat_map(entities, fn
      {id, at, kind} when is_integer(kind) -> [id, at, kind]
      entity -> bad(:lean_parts, entity)
    end)
  end

  defp json_lean_entity({id, at, nil}), do: [id, at]
  defp json_lean_entity({id, at, kind}) when is_integer(id) and id > 0, do: [-id, at, kind]
  defp json_lean_entity(entity), do: bad(:lean_parts, entity)

  for {char, index} <- Enum.with_index(@alphabet) do
    defp pair_char(unquote(index)), do: unquote(char)
    defp char_pair(unquote(char)), do: {:ok, unquote(index)}
  end

  defp char_pair(_char), do: :error

  defp ground_text(<<a, b, rest::binary>>, acc) when a < 8 and b < 8,
    do: ground_text(rest, [pair_char(a * 8 + b) | acc])

  defp ground_text(<<a>>, acc) when a < 8, do: ground_text(<<>>, [?=, pair_char(a * 8) | acc])
  defp ground_text(<<>>, acc), do: acc |> Enum.reverse() |> List.to_string()
  defp ground_text(_cells, _acc), do: bad(:ground, "a cell code over 7")

  defp ground_cells(<<>>, acc), do: {:ok, IO.iodata_to_binary(Enum.reverse(acc))}

  defp ground_cells(<<char, ?=>>, acc) do
    case char_pair(char) do
      {:ok, pair} when rem(pair, 8) == 0 -> ground_cells(<<>>, [div(pair, 8) | acc])
      _ -> {:error, "expected #{describe(:ground)}"}
    end
  end

  defp ground_cells(<<char, rest::binary>>, acc) do
    case char_pair(char) do
      {:ok, pair} -> ground_cells(rest, [<<div(pair, 8), rem(pair, 8)>> | acc])
      :error -> {:error, "expected #{describe(:ground)}"}
    end
  end

  # The parts of `areas` in JSON, one after another: each an area, its
  # entities, then perhaps its gone ids, then perhaps `true`.
  defp json_parts([], acc), do: {:ok, Enum.reverse(acc)}

  defp json_parts([area, flat | rest], acc) when is_list(flat) do
    {gone, full, rest} =
      case rest do
        [gone, true | rest] when is_list(gone) -> {gone, true, rest}
        [gone | rest] when is_list(gone) -> {gone, false, rest}
        rest -> {[], false, rest}
      end

    with {:ok, area} <- from_json(:uvar, area),
         {:ok, entities} <- json_triples(flat, []),
         {:ok, gone} <- from_json({:vlist, :uvar}, gone) do
      json_parts(rest, [{area, full, entities, gone} | acc])
    end
  end

  defp json_parts(_rest, _acc), do: {:error, "expected #{describe(:parts)}"}

  # Version 6's parts in JSON: each an area, its entities, then perhaps
  # its gone ids (a delta's) or `true` (a snapshot, which has none).
  defp json_lean_parts([], acc), do: {:ok, Enum.reverse(acc)}

  defp json_lean_parts([area, flat | rest], acc) when is_list(flat) do
    {gone, full, rest} =
      case rest do
        [true | rest] -> {[], true, rest}
        [gone | rest] when is_list(gone) -> {gone, false, rest}
        rest -> {[], false, rest}
      end

    entities = if full, do: json_triples(flat, []), else: json_lean_entities(flat, [])

    with {:ok, area} <- from_json(:uvar, area),
         {:ok, entities} <- entities,
         {:ok, gone} <- from_json({:vlist, :uvar}, gone) do
      json_lean_parts(rest, [{area, full, entities, gone} | acc])
    end
  end

  defp json_lean_parts(_rest, _acc), do: {:error, "expected #{describe(:lean_parts)}"}

  defp json_lean_entities([], acc), do: {:ok, Enum.reverse(acc)}

  defp json_lean_entities([id, at, kind | rest], acc) when is_integer(id) and id < 0 do
    case from_json({:tuple, [:uvar, :uvar, :u8]}, [-id, at, kind]) do
      {:ok, entity} -> json_lean_entities(rest, [entity | acc])
      error -> error
    end
  end

  defp json_lean_entities([id, at | rest], acc) do
    case from_json({:tuple, [:uvar, :uvar]}, [id, at]) do
      {:ok, {id, at}} -> json_lean_entities(rest, [{id, at, nil} | acc])
      error -> error
    end
  end

  defp json_lean_entities(_rest, _acc),
    do: {:error, "expected a delta's entities as id, cell or -id, cell, kind, one after another"}

  defp json_elements([], _tuple, _index), do: []

  defp json_elements([codec | codecs], tuple, index),
    do: [to_json(codec, elem(tuple, index - 1)) | json_elements(codecs, tuple, index + 1)]

  @doc "Reads a value from its JSON term, checking its type and range."
  @spec from_json(t(), term()) :: {:ok, term()} | {:error, String.t()}
  def from_json(:u8, n) when is_integer(n) and n >= 0 and n <= @max_u8, do: {:ok, n}
  def from_json(:u16, n) when is_integer(n) and n >= 0 and n <= @max_u16, do: {:ok, n}
  def from_json(:u32, n) when is_integer(n) and n >= 0 and n <= @max_u32, do: {:ok, n}
  def from_json(:uvar, n) when is_integer(n) and n >= 0 and n <= @max_uvar, do: {:ok, n}
  def from_json(:bool, b) when is_boolean(b), do: {:ok, b}

  def from_json({:enum, values}, s) when is_binary(s) do
    value = existing_atom(s)

    if value != nil and value in values,
      do: {:ok, value},
      else:
        {:error, "#{inspect(s)} is not one of #{Enum.map_join(values, ", ", &Atom.to_string/1)}"}
  end

  def from_json({:coded, values}, n) when is_integer(n) and n >= 0 and n < length(values),
    do: {:ok, Enum.at(values, n)}

  # A message sent as an object (an error before a `join`, in version 4's
  # JSON, which a client of any version reads) names the value.
  def from_json({:coded, values}, s) when is_binary(s), do: from_json({:enum, values}, s)

  def from_json({:spread, codec}, list), do: from_json(codec, list)

  def from_json(:string, s) when is_binary(s) and byte_size(s) <= @max_u16, do: {:ok, s}
  def from_json(:text, s), do: from_json(:string, s)

  def from_json(:bytes, s) when is_binary(s) do
    case Base.decode64(s) do
      {:ok, b} -> {:ok, b}
      :error -> {:error, "not base64"}
    end
  end

  def from_json({:list, item}, list) when is_list(list) and length(list) <= @max_u16,
    do: map_ok(list, &from_json(item, &1))

  def from_json({:vlist, item}, list) when is_list(list), do: map_ok(list, &from_json(item, &1))

  def from_json({:tuple, codecs}, list) when is_list(list) and length(list) == length(codecs) do
    codecs
    |> Enum.zip(list)
    |> map_ok(fn {c, v} -> from_json(c, v) end)
    |> then(fn
      {:ok, values} -> {:ok, List.to_tuple(values)}
      error -> error
    end)
  end

  def from_json(:parts, list) when is_list(list), do: json_parts(list, [])
  def from_json(:lean_parts, list) when is_list(list), do: json_lean_parts(list, [])
  def from_json(:ground, text) when is_binary(text), do: ground_cells(text, [])

  def from_json(:data, {pairs}) when is_list(pairs) and length(pairs) <= @max_data do
    Enum.reduce_while(pairs, {:ok, %{}}, fn {name, value}, {:ok, acc} ->
      cond do
        byte_size(name) > @max_name ->
          {:halt, {:error, "#{inspect(name)}: a name is longer than #{@max_name} bytes"}}

        (is_integer(value) and value >= @min_i32 and value <= @max_i32) or is_boolean(value) or
            (is_binary(value) and byte_size(value) <= @max_u16) ->
          {:cont, {:ok, Map.put(acc, name, value)}}

        true ->
          {:halt, {:error, "#{name}: expected a 32-bit integer, a string or a boolean"}}
      end
    end)
  end

  def from_json(codec, _value), do: {:error, "expected #{describe(codec)}"}

  defp json_triples([], acc), do: {:ok, Enum.reverse(acc)}

  defp json_triples([id, at, kind | rest], acc) do
    case from_json({:tuple, [:uvar, :uvar, :u8]}, [id, at, kind]) do
      {:ok, entity} -> json_triples(rest, [entity | acc])
      error -> error
    end
  end

  defp json_triples(_rest, _acc),
    do: {:error, "expected an area's entities as id, cell, kind, one after another"}

  # Every enumeration's values are atoms already: a name that is no atom is no value.
  defp existing_atom(s) do
    String.to_existing_atom(s)
  rescue
    ArgumentError -> nil
  end

  defp map_ok(items, fun) do
    Enum.reduce_while(items, {:ok, []}, fn item, {:ok, acc} ->
      case fun.(item) do
        {:ok, value} -> {:cont, {:ok, [value | acc]}}
        error -> {:halt, error}
      end
    end)
    |> case do
      {:ok, acc} -> {:ok, Enum.reverse(acc)}
      error -> error
    end
  end

  @doc "A human description of a codec, for error messages and docs."
  @spec describe(t()) :: String.t()
  def describe(:u8), do: "an integer in 0..255"
  def describe(:u16), do: "an integer in 0..65535"
  def describe(:u32), do: "an integer in 0..4294967295"
  def describe(:uvar), do: "an integer in 0..#{@max_uvar}"
  def describe(:bool), do: "a boolean"
  def describe(:string), do: "a string"
  def describe(:text), do: "a string"
  def describe(:bytes), do: "bytes (base64 in JSON)"
  def describe({:enum, values}), do: "one of " <> Enum.map_join(values, ", ", &Atom.to_string/1)

  def describe({:coded, values}),
    do:
      "the position of one of " <>
        Enum.map_join(values, ", ", &Atom.to_string/1) <> ", counted from 0"

  def describe({:spread, codec}), do: describe(codec)
  def describe({:list, item}), do: "a list of " <> describe(item)
  def describe({:vlist, item}), do: "a list of " <> describe(item)
  def describe({:tuple, codecs}), do: "[" <> Enum.map_join(codecs, ", ", &describe/1) <> "]"

  def describe(:parts),
    do:
      "the areas' parts, each an area, its entities [id, at, kind, ...], perhaps its gone ids and true"

  def describe(:lean_parts),
    do:
      "the areas' parts, each an area, its entities [id, at, ...] (-id, at, kind with a kind), perhaps its gone ids or true"

  def describe(:ground), do: "ground cells, two a character of base64's alphabet"

  def describe(:data),
    do: "an object of at most #{@max_data} names to 32-bit integers, strings or booleans"

  defp bad(codec, value),
    do: raise(ArgumentError, "#{inspect(value, limit: 5)} does not fit #{describe(codec)}")
end
