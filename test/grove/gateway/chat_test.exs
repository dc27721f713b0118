defmodule Grove.Gateway.ChatTest do
  @moduledoc """
  Nearby chat over the WebSocket: `say` and `said`, the line as a `chat`
  event of the speaker's area to those who watch it and to nobody else,
  refusals (empty, too long, bad characters, bad UTF-8, floods) in both
  encodings, the operator's announcements and the recent log.
  """
  # Yaws runs one server per node, so these tests share one gateway and run alone.
  use ExUnit.Case, async: false

  import Grove.WsConn, only: [connect: 2, push: 2, push_raw: 2, expect: 2, expect: 3]

  alias Grove.{Walk, WsClient}

  @moduletag :gateway

  @token "chat-admin-token-4b1f"

  # Four areas in a row, 10 x 10 cells each; a viewport of radius 1
  # reaches at most two of them.
  setup_all do
    Grove.TestInstance.start!("gateway_chat",
      world: [
        width: 40,
        height: 10,
        zone_size: 10,
        tick: 20,
        chat_log: 3,
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
        rules: [move_rate: nil]
      ],
      actors: [count: 0],
      gateway: [
        port: 0,
        say_rate: 1,
        say_burst: 3,
        say_max: 20,
        max_errors: 1000,
        move_rate: 10_000,
        move_burst: 10_000,
        admin_token: @token
      ],
      metrics: [interval: 50]
    )
  end

  # A player with a viewport of radius 1, walked to `cell`.
  defp player_at(port, encoding, cell), do: Walk.player_at(port, encoding, cell, 1)

  defp say(conn, seq, text) do
    push(conn, %{type: :say, seq: seq, text: text})
    expect(conn, :said, where: &(&1.seq == seq))
  end

  defp chat_event?(message, id, text) do
    message.type == :area and
      Enum.any?(message.events, &match?({^id, _x, _y, "chat", %{"text" => ^text}}, &1))
  end

  defp admin(port, method, path, body, headers) do
    url = ~c"http://127.0.0.1:#{port}#{path}"

    request = if body, do: {url, headers, ~c"application/json", body}, else: {url, headers}

    {:ok, {{_, status, _}, _headers, response}} =
      :httpc.request(method, request, [], body_format: :binary)

    {status, :jiffy.decode(response, [:return_maps])}
  end

  # The status the server closed the connection with, what came before passed over.
  defp closed({client, encoding}) do
    case WsClient.recv(client, 5000) do
      {:ok, {:close, status, _reason}, _client} -> status
      {:ok, _frame, client} -> closed({client, encoding})
      other -> flunk("the connection was not closed: #{inspect(other)}")
    end
  end

  defp bearer(token), do: [{~c"authorization", ~c"Bearer #{token}"}]

  defp metrics(port) do
    {:ok, {{_, 200, _}, _, body}} =
      :httpc.request(:get, {~c"http://127.0.0.1:#{port}/metrics", bearer(@token)}, [],
        body_format: :binary
      )

    body
  end

  defp metric(body, line) do
    case Regex.run(~r/^#{Regex.escape(line)} (\d+)$/m, body) do
      [_, value] -> String.to_integer(value)
      nil -> flunk("no #{line} in /metrics")
    end
  end

  for {encoding, speaker_at, near_at, far_at} <- [
        {:json, {2, 2}, {4, 2}, {35, 2}},
        {:binary, {2, 7}, {4, 7}, {35, 7}}
      ] do
    test "a line reaches those who see the speaker's area, and no one else (#{encoding})", %{
      port: port
    } do
      {speaker, speaking} = player_at(port, unquote(encoding), unquote(speaker_at))
      {_near, near} = player_at(port, unquote(encoding), unquote(near_at))
      {_far, far} = player_at(port, unquote(encoding), unquote(far_at))

      {said, speaking} = say(speaking, 1, "  hello   there ")
      assert said == %{type: :said, seq: 1, result: :ok, reason: ""}

      # Trimmed and squeezed, at the speaker's cell, to the speaker too.
      {x, y} = unquote(speaker_at)
      {area, _near} = expect(near, :area, where: &chat_event?(&1, speaker, "hello there"))
      assert {speaker, x, y, "chat", %{"text" => "hello there"}} in area.events

      {_area, _speaking} =
        expect(speaking, :area, where: &chat_event?(&1, speaker, "hello there"))

      # The near player has read the delta, so it is in the feed: a
      # viewer of that area would get it with its next write at the
      # latest. The far one's pong is such a write.
      push(far, %{type: :ping, t: 7})
      {_pong, _far, before} = expect(far, :pong, seen: [])
      refute Enum.any?(before, &chat_event?(&1, speaker, "hello there"))
    end
  end

  for encoding <- [:json, :binary] do
    test "lines that may not be said are refused with the reason (#{encoding})", %{port: port} do
      {_id, conn} = player_at(port, unquote(encoding), {15, 5})

      {said, conn} = say(conn, 1, "   ")
      assert %{result: :empty, reason: "a line needs at least one character"} = said

      {said, conn} = say(conn, 2, String.duplicate("é", 21))
      assert %{result: :too_long, reason: "a line is at most 20 characters"} = said

      # Checked after the rate: these three are the connection's burst.
      {said, _conn} = say(conn, 3, "two\nlines")
      assert %{result: :bad_character, reason: "a line may not hold U+000A" <> _} = said
    end
  end

  test "bad UTF-8: in binary the line is refused with its reason; in JSON the text frame fails",
       %{port: port} do
    {_id, binary} = player_at(port, :binary, {15, 2})
    # say, seq 5, a 3-byte text of which the last two are no UTF-8.
    push_raw(binary, <<8, 5::32, 3::16, ?a, 0xC3, 0x28>>)
    {said, binary} = expect(binary, :said, where: &(&1.seq == 5))
    assert said == %{type: :said, seq: 5, result: :bad_utf8, reason: "a line must be valid UTF-8"}

    # The connection goes on.
    {said, _binary} = say(binary, 6, "still here")
    assert said.result == :ok

    {_id, json} = player_at(port, :json, {15, 7})
    start = ~s({"type":"say","seq":5,"text":"a)
    push_raw(json, start <> <<0xC3, 0x28>> <> ~s("}))
    # A text frame must be UTF-8 (RFC 6455): the connection is failed.
    assert closed(json) == 1007
  end

  for encoding <- [:json, :binary] do
    test "a frame over the limit is too large and closes the connection (#{encoding})", %{
      port: port
    } do
      {_id, conn} = player_at(port, unquote(encoding), {25, 5})
      push(conn, %{type: :say, seq: 1, text: String.duplicate("a", 5000)})
      {error, conn} = expect(conn, :error)
      assert error.code == :too_large
      assert closed(conn) == 1009
    end

    test "a flood of lines: each answered once, those past the rate rate_limited (#{encoding})",
         %{port: port} do
      {_id, conn} = player_at(port, unquote(encoding), {25, 2})
      before = metric(metrics(port), ~s(grove_chat_refused_total{reason="rate_limited"}))

      # Fifty lines at one a second, bursts of three, would take 47 s to pass.
      for seq <- 1..50, do: push(conn, %{type: :say, seq: seq, text: "line #{seq}"})

      {results, conn} =
        Enum.reduce(1..50, {%{}, conn}, fn _, {results, conn} ->
          {said, conn} = expect(conn, :said)
          refute Map.has_key?(results, said.seq)
          {Map.put(results, said.seq, said.result), conn}
        end)

      assert Map.keys(results) |> Enum.sort() == Enum.to_list(1..50)
      assert Enum.all?(Map.values(results), &(&1 in [:ok, :rate_limited]))
      limited = Enum.count(Map.values(results), &(&1 == :rate_limited))
      assert limited > 0

      # Not an error: the connection goes on, and the refusals are counted.
      push(conn, %{type: :ping, t: 1})
      {_pong, _conn} = expect(conn, :pong)

      after_flood = metric(metrics(port), ~s(grove_chat_refused_total{reason="rate_limited"}))
      assert after_flood - before >= limited
    end
  end

  test "a line before joining is refused", %{port: port} do
    conn = connect(port, :json)
    push(conn, %{type: :say, seq: 1, text: "hi"})
    {error, _conn} = expect(conn, :error)
    assert error.code == :not_joined
  end

  test "the operator's announcement reaches every player, with the admin token in a header only",
       %{port: port} do
    {_a, json} = player_at(port, :json, {32, 2})
    {_b, binary} = player_at(port, :binary, {32, 7})
    body = ~s({"text":"  The orchard closes at noon  "})

    assert {401, %{"error" => "unauthorized"}} =
             admin(port, :post, "/api/admin/announce", body, [])

    assert {401, %{"error" => "unauthorized"}} =
             admin(port, :post, "/api/admin/announce?token=#{@token}", body, [])

    assert {401, _} = admin(port, :post, "/api/admin/announce", body, bearer("wrong-token"))

    assert {400, %{"error" => "empty"}} =
             admin(port, :post, "/api/admin/announce", ~s({"text":"  "}), bearer(@token))

    assert {400, %{"error" => "bad_field"}} =
             admin(port, :post, "/api/admin/announce", ~s({"text":7}), bearer(@token))

    assert {202, %{"announced" => true}} =
             admin(port, :post, "/api/admin/announce", body, bearer(@token))

    {announcement, json} = expect(json, :announcement)
    assert announcement == %{type: :announcement, text: "The orchard closes at noon"}
    {announcement, _binary} = expect(binary, :announcement)
    assert announcement.text == "The orchard closes at noon"

    # Someone who comes later is not told what was announced before.
    {_c, late} = player_at(port, :json, {33, 5})

    assert {202, _} =
             admin(port, :post, "/api/admin/announce", ~s({"text":"Second"}), bearer(@token))

    {_announcement, _json, seen} =
      expect(json, :announcement, where: &(&1.text == "Second"), seen: [])

    refute Enum.any?(seen, &(&1.type == :announcement))
    {announcement, _late, seen} = expect(late, :announcement, seen: [])
    assert announcement.text == "Second"
    refute Enum.any?(seen, &(&1.type == :announcement))

    assert metric(metrics(port), "grove_announcements_total") >= 2
  end

  test "the recent log keeps the last lines only, for the operator", %{port: port} do
    {_id, conn} = player_at(port, :json, {22, 5})
    {said, conn} = say(conn, 1, "first")
    assert said.result == :ok
    {said, conn} = say(conn, 2, "second")
    assert said.result == :ok
    {said, _conn} = say(conn, 3, "third")
    assert said.result == :ok

    assert {401, _} = admin(port, :get, "/api/admin/chat", nil, [])
    assert {200, %{"lines" => lines}} = admin(port, :get, "/api/admin/chat", nil, bearer(@token))
    # The world keeps three (`chat_log: 3`), whoever said them.
    assert Enum.map(lines, & &1["text"]) == ["first", "second", "third"]
    assert %{"id" => _, "x" => 22, "y" => 5, "at" => _} = hd(lines)

    body = metrics(port)
    assert metric(body, ~s(grove_chat_log_lines{kept="now"})) == 3
    assert metric(body, ~s(grove_chat_log_lines{kept="max"})) == 3
    assert metric(body, "grove_chat_lines_total") >= 3
  end
end
