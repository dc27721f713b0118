defmodule Grove.Gateway.WebSocketTest do
  use ExUnit.Case, async: true
  doctest Grove.Gateway.WebSocket

  import Grove.PropCase

  alias Grove.Gateway.WebSocket

  # A client frame: masked, as clients must.
  defp masked(frame), do: IO.iodata_to_binary(:cow_ws.masked_frame(frame, %{}))

  defp raw(fin, opcode, payload, mask \\ <<1, 2, 3, 4>>) do
    <<key::32>> = mask
    size = byte_size(payload)
    stream = binary_part(:binary.copy(mask, div(size, 4) + 1), 0, size)
    <<fin::1, 0::3, opcode::4, 1::1, size::7, key::32, :crypto.exor(payload, stream)::binary>>
  end

  test "the handshake answers the client's key as RFC 6455 says" do
    # The example of RFC 6455, section 1.3.
    answer = IO.iodata_to_binary(WebSocket.handshake("dGhlIHNhbXBsZSBub25jZQ=="))
    assert answer =~ "HTTP/1.1 101 Switching Protocols\r\n"
    assert answer =~ "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
    assert String.ends_with?(answer, "\r\n\r\n")
  end

  test "server frames carry their length in 7, 16 or 64 bits, unmasked" do
    assert <<0x82, 3, "abc">> = WebSocket.frame(:binary, "abc")

    assert <<0x81, 126, 200::16, _::binary-size(200)>> =
             WebSocket.frame(:text, :binary.copy("x", 200))

    assert <<0x82, 127, 70_000::64, _::binary-size(70_000)>> =
             WebSocket.frame(:binary, :binary.copy("x", 70_000))

    assert <<0x88, 5, 1001::16, "bye">> = WebSocket.close_frame(1001, "bye")
  end

  test "frames are read whole, whatever pieces the bytes arrive in" do
    frames = [{:text, "hello"}, {:binary, <<0, 1, 2>>}, {:ping, "p"}, {:close, 1000, "done"}]
    stream = IO.iodata_to_binary(Enum.map(frames, &masked/1))

    property =
      forall(:proper_types.list(:proper_types.integer(1, 8)), fn cuts ->
        {pieces, rest} =
          Enum.reduce(cuts, {[], stream}, fn cut, {pieces, rest} ->
            cut = min(cut, byte_size(rest))
            <<piece::binary-size(cut), rest::binary>> = rest
            {[piece | pieces], rest}
          end)

        {read, _parser} =
          Enum.reduce(Enum.reverse([rest | pieces]), {[], WebSocket.parser()}, fn piece,
                                                                                  {read, parser} ->
            {:ok, got, parser} = WebSocket.parse(parser, piece, 1000)
            {read ++ got, parser}
          end)

        assert read == frames
      end)

    check(property, numtests: 300)
  end

  test "a fragmented message is put together, with control frames read in between" do
    bytes = raw(0, 1, "hel") <> masked({:ping, "x"}) <> raw(0, 0, "lo ") <> raw(1, 0, "you")

    assert {:ok, [{:ping, "x"}, {:text, "hello you"}], _} =
             WebSocket.parse(WebSocket.parser(), bytes, 100)
  end

  test "a client that breaks the protocol is told how, with the frames before it" do
    parser = WebSocket.parser()
    unmasked = IO.iodata_to_binary(:cow_ws.frame({:text, "hi"}, %{}))
    assert {:error, [], {1002, _}} = WebSocket.parse(parser, unmasked, 100)

    big = masked({:text, :binary.copy("x", 101)})

    assert {:error, [{:text, "ok"}], {1009, _}} =
             WebSocket.parse(parser, masked({:text, "ok"}) <> big, 100)

    # Too large counts the fragments so far.
    assert {:error, [], {1009, _}} =
             WebSocket.parse(
               parser,
               raw(0, 1, :binary.copy("x", 60)) <> raw(1, 0, :binary.copy("y", 60)),
               100
             )

    assert {:error, [], {1007, _}} = WebSocket.parse(parser, raw(1, 1, <<0xFF, 0xFE>>), 100)
    assert {:error, [], {1002, _}} = WebSocket.parse(parser, <<0x83, 0x80, 0::32>>, 100)
  end
end
