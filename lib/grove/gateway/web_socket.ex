defmodule Grove.Gateway.WebSocket do
  @moduledoc false
  # The WebSocket protocol (RFC 6455) on the server's side, as pure
  # functions: the opening handshake's answer, frames to send (built once,
  # so the same bytes can go to many sockets), and an incremental parser for
  # what clients send, on cowlib's `cow_ws`. Grove's connections use it
  # instead of Yaws's WebSocket process; see docs/decisions.md.

  # A parser's state: bytes not yet parsed, the fragmented message being
  # reassembled, and its parts so far.
  defstruct buffer: <<>>, fragment: :undefined, parts: [], size: 0

  @type t :: %__MODULE__{}
  @type frame ::
          {:text, binary()}
          | {:binary, binary()}
          | {:ping, binary()}
          | {:pong, binary()}
          | {:close, non_neg_integer(), binary()}

  @doc "The `101 Switching Protocols` answer to a client's `Sec-WebSocket-Key`."
  @spec handshake(binary(), [{String.t(), String.t()}]) :: iodata()
  def handshake(key, extra_headers \\ []) do
    [
      "HTTP/1.1 101 Switching Protocols\r\n",
      "Upgrade: websocket\r\nConnection: Upgrade\r\n",
      "Sec-WebSocket-Accept: ",
      :cow_ws.encode_key(key),
      "\r\n",
      for({name, value} <- extra_headers, do: [name, ": ", value, "\r\n"]),
      "\r\n"
    ]
  end

  @doc """
  A whole server frame (servers do not mask) as one binary, so that many
  sockets can be handed the very same bytes.

      iex> Grove.Gateway.WebSocket.frame(:text, "hi")
      <<0x81, 2, ?h, ?i>>
  """
  @spec frame(:text | :binary | :ping | :pong, iodata()) :: binary()
  def frame(kind, payload) do
    size = IO.iodata_length(payload)
    IO.iodata_to_binary([<<1::1, 0::3, opcode(kind)::4>>, length_bytes(size), payload])
  end

  @doc "A close frame with a status code and a reason (at most 123 bytes, cut to fit)."
  @spec close_frame(non_neg_integer(), binary()) :: binary()
  def close_frame(code, reason) do
    reason = if byte_size(reason) > 123, do: binary_part(reason, 0, 123), else: reason
    frame(:close, [<<code::16>>, reason])
  end

  defp opcode(:text), do: 1
  defp opcode(:binary), do: 2
  defp opcode(:close), do: 8
  defp opcode(:ping), do: 9
  defp opcode(:pong), do: 10

  defp length_bytes(size) when size < 126, do: <<0::1, size::7>>
  defp length_bytes(size) when size < 65_536, do: <<0::1, 126::7, size::16>>
  defp length_bytes(size), do: <<0::1, 127::7, size::64>>

  ## Parsing what clients send

  @doc "A parser with nothing buffered."
  @spec parser() :: t()
  def parser, do: %__MODULE__{}

  @doc """
  Feeds bytes from the socket. Returns the complete frames in them (data
  messages reassembled from their fragments, control frames as they come)
  and the parser for what follows; or, for a client that breaks the
  protocol, the frames before the fault and `{:error, close_code, reason}`.
  Data messages larger than `max_size` bytes are a fault (1009); clients
  must mask their frames (1002).
  """
  @spec parse(t(), binary(), pos_integer()) ::
          {:ok, [frame()], t()} | {:error, [frame()], {non_neg_integer(), String.t()}}
  # What clients send most (one whole, small, unfragmented message per
  # read) is taken apart here directly; everything else goes through cowlib.
  def parse(
        %__MODULE__{buffer: <<>>, fragment: :undefined} = parser,
        <<1::1, 0::3, opcode::4, 1::1, size::7, key::32, payload::binary-size(size)>>,
        max_size
      )
      when opcode in [1, 2] and size < 126 and size <= max_size do
    case checked(if(opcode == 1, do: :text, else: :binary), xor(payload, key), parser) do
      {:frame, frame, parser} -> {:ok, [frame], parser}
      {:error, reason} -> {:error, [], reason}
    end
  end

  def parse(%__MODULE__{} = parser, data, max_size) do
    parse_frames(%{parser | buffer: parser.buffer <> data}, max_size, [])
  end

  defp parse_frames(parser, max_size, acc) do
    case :cow_ws.parse_header(parser.buffer, %{}, parser.fragment) do
      :more ->
        {:ok, Enum.reverse(acc), parser}

      :error ->
        {:error, Enum.reverse(acc), {1002, "malformed frame"}}

      {_type, _fragment, _rsv, _length, :undefined, _rest} ->
        {:error, Enum.reverse(acc), {1002, "client frames must be masked"}}

      {type, _fragment, _rsv, length, _mask, _rest}
      when type in [:text, :binary, :fragment] and length + parser.size > max_size ->
        {:error, Enum.reverse(acc), {1009, "message too large"}}

      {type, fragment, rsv, length, mask, rest} when byte_size(rest) >= length ->
        <<payload::binary-size(length), rest::binary>> = rest
        parser = %{parser | buffer: rest}

        with {:ok, payload} <- unmask(type, payload, mask, length, fragment, rsv),
             {:frame, frame, parser} <- message(parser, type, fragment, payload) do
          parse_frames(parser, max_size, [frame | acc])
        else
          {:more, parser} -> parse_frames(parser, max_size, acc)
          {:error, reason} -> {:error, Enum.reverse(acc), reason}
        end

      {_type, _fragment, _rsv, _length, _mask, _rest} ->
        {:ok, Enum.reverse(acc), parser}
    end
  end

  # UTF-8 of text messages is checked once they are whole (below).
  defp unmask(:close, payload, mask, length, fragment, rsv) do
    case :cow_ws.parse_payload(payload, mask, 0, 0, :close, length, fragment, %{}, rsv) do
      {:ok, code, reason, _utf8, _rest} -> {:ok, {code, reason}}
      {:ok, _empty, _utf8, _rest} -> {:ok, {1000, <<>>}}
      _ -> {:error, {1002, "bad close frame"}}
    end
  end

  defp unmask(_type, payload, mask, _length, _fragment, _rsv), do: {:ok, xor(payload, mask)}

  defp message(parser, :close, _fragment, {code, reason}),
    do: {:frame, {:close, code, reason}, parser}

  defp message(parser, type, _fragment, payload) when type in [:ping, :pong],
    do: {:frame, {type, payload}, parser}

  defp message(parser, type, fragment, payload) when type in [:text, :binary] do
    case fragment do
      :undefined ->
        checked(type, payload, parser)

      {:nofin, _, _} ->
        {:more, %{parser | fragment: fragment, parts: [payload], size: byte_size(payload)}}
    end
  end

  defp message(parser, :fragment, fragment, payload) do
    parts = [payload | parser.parts]

    case fragment do
      {:fin, kind, _rsv} ->
        whole = parts |> Enum.reverse() |> IO.iodata_to_binary()
        checked(kind, whole, %{parser | fragment: :undefined, parts: [], size: 0})

      {:nofin, _kind, _rsv} ->
        size = parser.size + byte_size(payload)
        {:more, %{parser | fragment: fragment, parts: parts, size: size}}
    end
  end

  defp checked(:text, payload, parser) do
    if utf8?(payload),
      do: {:frame, {:text, payload}, parser},
      else: {:error, {1007, "text is not UTF-8"}}
  end

  defp checked(:binary, payload, parser), do: {:frame, {:binary, payload}, parser}

  # A BIF, where String.valid?/1 walks the bytes in Erlang.
  defp utf8?(payload), do: is_binary(:unicode.characters_to_binary(payload))

  # Masking is XOR with the 4-byte key repeated.
  defp xor(<<>>, _key), do: <<>>

  defp xor(payload, key) do
    size = byte_size(payload)
    keystream = binary_part(:binary.copy(<<key::32>>, div(size, 4) + 1), 0, size)
    :crypto.exor(payload, keystream)
  end
end
