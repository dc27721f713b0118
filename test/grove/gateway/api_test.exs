defmodule Grove.Gateway.ApiTest do
  # Yaws runs one server per node, so these tests share one gateway and run alone.
  use ExUnit.Case, async: false

  import Grove.WorldCase, only: [eventually: 1]
  import Grove.WsConn, only: [connect: 1, push: 2, expect: 2]

  alias Grove.{Protocol, World}
  alias Grove.WsClient

  @moduletag :gateway

  setup_all do
    Grove.TestInstance.start!("api",
      sqlite: true,
      world: [
        width: 40,
        height: 40,
        zone_size: 20,
        tick: 50,
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]
      ],
      accounts: [
        password_cost: 1000,
        guests: false,
        ip_rate: 1000,
        ip_burst: 1000,
        account_rate: 1000,
        account_burst: 1000,
        save_interval: 50
      ],
      gateway: [port: 0, max_body: 2048]
    )
  end

  defp request(port, method, path, body \\ nil, token \\ nil) do
    headers = if token, do: [{~c"authorization", ~c"Bearer #{token}"}], else: []
    url = ~c"http://127.0.0.1:#{port}#{path}"

    req =
      if body,
        do:
          {url, headers, ~c"application/json",
           if(is_binary(body), do: body, else: :jiffy.encode(body))},
        else: {url, headers}

    {:ok, {{_, status, _}, response_headers, response}} =
      :httpc.request(method, req, [], body_format: :binary)

    decoded =
      if response == "", do: nil, else: :jiffy.decode(response, [:return_maps, null_term: nil])

    {status, decoded, response_headers}
  end

  describe "accounts over HTTP" do
    test "device login creates, then logs in; me answers with the account", %{port: port} do
      assert {201, %{"token" => token, "account" => account, "created" => true}, _} =
               request(port, :post, "/api/device_login", %{"device_id" => "browser-0001"})

      assert {200, %{"token" => _, "account" => ^account, "created" => false}, _} =
               request(port, :post, "/api/device_login", %{"device_id" => "browser-0001"})

      assert {200, %{"account" => ^account}, _} = request(port, :get, "/api/me", nil, token)
      assert %{"id" => id, "name" => nil, "avatar" => "😀"} = account
      assert is_integer(id)
    end

    test "a device account without a name plays under the one it joins with, as its avatar", %{
      port: port
    } do
      {201, %{"token" => token}, _} =
        request(port, :post, "/api/device_login", %{"device_id" => "browser-names-1"})

      {200, _, _} = request(port, :patch, "/api/me", %{"avatar" => "🦉"}, token)
      {conn, welcome} = join(port, token, "Owl Face")
      assert %{name: "Owl Face", avatar: "🦉"} = welcome
      {client, _} = conn
      WsClient.close(client)
    end

    test "register, log in, change, log out: me is never stale, then refused", %{port: port} do
      assert {201, %{"token" => token}, _} =
               request(port, :post, "/api/register", %{
                 "name" => "grace",
                 "password" => "hopper1906",
                 "avatar" => "🐢"
               })

      assert {401, %{"error" => "invalid_credentials"}, _} =
               request(port, :post, "/api/login", %{
                 "name" => "grace",
                 "password" => "wrong-password"
               })

      assert {200, %{"token" => token2}, _} =
               request(port, :post, "/api/login", %{"name" => "grace", "password" => "hopper1906"})

      assert {200, %{"account" => %{"name" => "grace", "avatar" => "🐢"}}, _} =
               request(port, :get, "/api/me", nil, token2)

      assert {200, %{"account" => %{"avatar" => "🦉"}}, _} =
               request(port, :patch, "/api/me", %{"avatar" => "🦉"}, token)

      assert {200, %{"account" => %{"avatar" => "🦉"}}, _} =
               request(port, :get, "/api/me", nil, token2)

      # A NUL made the database layer raise (500); it is a bad avatar.
      for avatar <- ["\u0000", "", "<b>", "<img src=x onerror=alert(1)>"] do
        assert {400, %{"error" => "invalid_avatar"}, _} =
                 request(port, :patch, "/api/me", %{"avatar" => avatar}, token)

        assert {400, %{"error" => "invalid_avatar"}, _} =
                 request(port, :post, "/api/register", %{
                   "name" => "nul_avatar",
                   "password" => "long enough",
                   "avatar" => avatar
                 })
      end

      assert {200, %{"ok" => true}, _} = request(port, :post, "/api/logout", %{}, token)
      assert {401, %{"error" => "revoked"}, _} = request(port, :get, "/api/me", nil, token)
      assert {200, _, _} = request(port, :get, "/api/me", nil, token2)

      assert {409, %{"error" => "name_taken"}, _} =
               request(port, :post, "/api/register", %{
                 "name" => "grace",
                 "password" => "another one"
               })
    end

    test "a body sent in chunks is read whole, up to the limit", %{port: port} do
      body = ~s({"device_id":"chunked-device-01"})
      chunks = for <<piece::binary-size(8) <- body>>, do: piece
      rest = binary_part(body, 8 * length(chunks), byte_size(body) - 8 * length(chunks))
      assert {201, %{"token" => _}} = chunked_post(port, "/api/device_login", chunks ++ [rest])

      # 3 KB in 1 KB chunks, over the 2 KB limit.
      big = List.duplicate(String.duplicate("x", 1024), 3)
      assert {413, %{"error" => "too_large"}} = chunked_post(port, "/api/device_login", big)
    end

    test "bad input gets a clear 4xx JSON error with a code", %{port: port} do
      assert {400, %{"error" => "bad_json"}, _} =
               request(port, :post, "/api/device_login", "{nope")

      assert {400, %{"error" => "bad_json"}, _} =
               request(port, :post, "/api/device_login", "[1, 2]")

      assert {400, %{"error" => "bad_field", "message" => "device_id is missing"}, _} =
               request(port, :post, "/api/device_login", %{})

      assert {400, %{"error" => "bad_field"}, _} =
               request(port, :post, "/api/device_login", %{"device_id" => 42})

      assert {400, %{"error" => "invalid_device"}, _} =
               request(port, :post, "/api/device_login", %{"device_id" => "x"})

      assert {400, %{"error" => "invalid_name"}, _} =
               request(port, :post, "/api/register", %{
                 "name" => "x'; DROP TABLE accounts; --",
                 "password" => "long enough"
               })

      assert {400, %{"error" => "weak_password"}, _} =
               request(port, :post, "/api/register", %{"name" => "shorty", "password" => "short"})

      assert {413, %{"error" => "too_large"}, _} =
               request(port, :post, "/api/device_login", %{
                 "device_id" => String.duplicate("x", 5000)
               })

      assert {401, %{"error" => "unauthorized"}, _} = request(port, :get, "/api/me")

      assert {401, %{"error" => "invalid_token"}, _} =
               request(port, :get, "/api/me", nil, "v1.forged.token")

      assert {404, %{"error" => "not_found"}, _} = request(port, :get, "/api/nothing")
      assert {405, %{"error" => "method_not_allowed"}, _} = request(port, :get, "/api/login")
      # Nothing was written by any of that.
      assert {401, _, _} =
               request(port, :post, "/api/login", %{"name" => "shorty", "password" => "short"})
    end
  end

  describe "playing with an account" do
    test "a join with a token plays that account, and starts where it last stood", %{
      port: port,
      instance: instance
    } do
      {201, %{"token" => token}, _} =
        request(port, :post, "/api/register", %{
          "name" => "wanda",
          "password" => "wander1ng",
          "avatar" => "🐺"
        })

      # An account with a name plays under it, whatever the join says.
      {conn, welcome} = join(port, token, "someone else")
      assert %{name: "wanda", avatar: "🐺"} = welcome
      direction = if welcome.x < 20, do: :e, else: :w
      push(conn, %{type: :move, seq: 1, dir: direction})
      {%{type: :outcome, result: :ok, x: x, y: y}, conn} = expect(conn, :outcome)
      {client, _} = conn
      WsClient.close(client)

      # The saver writes within its interval once the session has left.
      accounts = :"#{instance}.Accounts"
      {200, %{"account" => %{"id" => id}}, _} = request(port, :get, "/api/me", nil, token)
      eventually(fn -> assert Grove.Accounts.last_position(accounts, id) == {:ok, {x, y}} end)

      {_conn, again} = join(port, token)
      assert {again.x, again.y} == {x, y}
    end

    test "a player whose cell someone took meanwhile comes back next to it", %{
      port: port,
      instance: instance,
      world: world
    } do
      {201, %{"token" => token, "account" => %{"id" => id}}, _} =
        request(port, :post, "/api/device_login", %{"device_id" => "cell-taken-0001"})

      {{client, _}, welcome} = join(port, token)
      cell = {welcome.x, welcome.y}
      WsClient.close(client)
      accounts = :"#{instance}.Accounts"
      eventually(fn -> assert Grove.Accounts.last_position(accounts, id) == {:ok, cell} end)
      eventually(fn -> assert {:ok, _, ^cell} = World.join(world, at: cell) end)

      {_conn, again} = join(port, token)
      assert {again.x, again.y} != cell
      assert abs(again.x - welcome.x) <= 2 and abs(again.y - welcome.y) <= 2
    end

    test "a store that cannot say where a player stood places it anyway, and it is counted", %{
      port: port,
      instance: instance
    } do
      {201, %{"token" => token}, _} =
        request(port, :post, "/api/device_login", %{"device_id" => "store-stalled-0001"})

      before = Grove.Gateway.stats().positions_unavailable
      # Every store call waits for this process, and gets :unavailable at its deadline.
      queue = Process.whereis(:"#{instance}.Store.Queue")
      :sys.suspend(queue)

      try do
        {_conn, welcome} = join(port, token)
        assert is_integer(welcome.x) and is_integer(welcome.y)
      after
        :sys.resume(queue)
      end

      assert Grove.Gateway.stats().positions_unavailable == before + 1
    end

    test "a second connection of an account replaces the first, where its player stood", %{
      port: port,
      world: world
    } do
      {201, %{"token" => token}, _} =
        request(port, :post, "/api/device_login", %{"device_id" => "two-tabs-0001"})

      players_before = World.stats(world).players
      {first, welcome} = join(port, token)
      direction = if welcome.x < 20, do: :e, else: :w
      push(first, %{type: :move, seq: 1, dir: direction})
      {%{type: :outcome, result: :ok, x: x, y: y}, first} = expect(first, :outcome)

      {_second, again} = join(port, token)
      assert {again.x, again.y} == {x, y}

      {bye, {client, _}} = expect(first, :bye)
      assert bye.reason == :replaced
      assert {:ok, {:close, 1000, _}, _} = WsClient.recv(client, 3000)
      assert World.stats(world).players == players_before + 1
    end

    test "a connection that claims its account again (a join tried again) keeps it" do
      claims = Task.async(fn -> {Grove.Gateway.claim(987_654), Grove.Gateway.claim(987_654)} end)
      assert Task.await(claims) == {:ok, :ok}
    end

    test "an account held by a connection that does not step aside is busy, not taken twice" do
      test = self()

      holder =
        spawn(fn ->
          {:ok, _} = Registry.register(Grove.Gateway.config().players, 4242, nil)
          send(test, :holding)
          # Never answers the call to step aside.
          receive do: (:done -> :ok)
        end)

      assert_receive :holding
      claims = Task.async(fn -> Grove.Gateway.claim(4242, 1) end)
      assert Task.await(claims, 30_000) == :busy
      send(holder, :done)
    end

    test "a reload right after a step comes back where the step ended", %{port: port} do
      {201, %{"token" => token}, _} =
        request(port, :post, "/api/device_login", %{"device_id" => "reload-0001"})

      for round <- 1..5 do
        {conn, welcome} = join(port, token)
        direction = if welcome.x < 20, do: :e, else: :w
        push(conn, %{type: :move, seq: round, dir: direction})

        {%{type: :outcome, result: :ok, x: x, y: y}, {client, _}} = expect(conn, :outcome)
        WsClient.close(client)

        # At once: the closing connection may not have noticed yet.
        {next, again} = join(port, token)
        assert {again.x, again.y} == {x, y}, "round #{round}"
        {client, _} = next
        WsClient.close(client)
      end
    end

    test "after a second tab closes, a reload of the first comes back where the second left off",
         %{port: port} do
      {201, %{"token" => token}, _} =
        request(port, :post, "/api/device_login", %{"device_id" => "two-tabs-reload-0001"})

      {first, _welcome} = join(port, token)
      {second, at} = join(port, token)
      {%{type: :bye, reason: :replaced}, _} = expect(first, :bye)
      direction = if at.x < 20, do: :e, else: :w
      push(second, %{type: :move, seq: 1, dir: direction})
      {%{type: :outcome, result: :ok, x: x, y: y}, {client, _}} = expect(second, :outcome)
      WsClient.close(client)

      # The first tab reloads at once.
      {_third, again} = join(port, token)
      assert {again.x, again.y} == {x, y}
    end

    # A reload may claim the account as soon as the connection's process
    # is no longer alive, before the zone hears that it died: had the
    # connection left its player in the world until then, the reload
    # would find the cell taken (by itself) and land next to it. The zone
    # is held still to see what a connection does last.
    test "a connection that ends takes its player out of the world before it is gone", %{
      port: port,
      world: world
    } do
      {201, %{"token" => token, "account" => %{"id" => account}}, _} =
        request(port, :post, "/api/device_login", %{"device_id" => "gone-0001"})

      {{client, _}, welcome} = join(port, token)
      [{connection, _}] = Registry.lookup(Grove.Gateway.config().players, account)
      ref = Process.monitor(connection)
      zone = World.zone_of(world, welcome.id)
      :ok = :sys.suspend(zone)

      try do
        WsClient.close(client)

        # Whichever comes first: the player leaving, or the connection's end.
        messages =
          eventually(fn ->
            {:messages, messages} = Process.info(zone, :messages)
            assert Enum.any?(messages, &about?(&1, connection))
            messages
          end)

        refute Enum.any?(messages, &match?({:DOWN, _, :process, ^connection, _}, &1)),
               "the connection was gone with its player still in the world"
      after
        :sys.resume(zone)
      end

      assert_receive {:DOWN, ^ref, :process, ^connection, _}, 5000
      assert World.position(world, welcome.id) == nil
    end

    test "another spelling of a good token's bytes is refused, over HTTP and in a join", %{
      port: port
    } do
      {201, %{"token" => token}, _} =
        request(port, :post, "/api/device_login", %{"device_id" => "spelling-0001"})

      ["v1", payload, signature] = String.split(token, ".")

      for other <- ["v1.#{payload}=.#{signature}", "v1.#{payload}.#{signature}="] do
        assert {401, %{"error" => "invalid_token"}, _} =
                 request(port, :get, "/api/me", nil, other)

        {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws")
        conn = {client, :json}

        push(conn, %{
          type: :join,
          protocol: Protocol.version(),
          view_radius: 8,
          name: "",
          token: other
        })

        assert {%{type: :error, code: :unauthorized}, _} = expect(conn, :error)
        WsClient.close(client)
      end

      assert {200, _, _} = request(port, :get, "/api/me", nil, token)
    end

    test "without a token, or with a bad one, this server admits nobody", %{port: port} do
      {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws")
      conn = {client, :json}

      push(conn, %{type: :join, protocol: Protocol.version(), view_radius: 8, name: "", token: ""})

      assert {%{type: :error, code: :unauthorized}, conn} = expect(conn, :error)

      push(conn, %{
        type: :join,
        protocol: Protocol.version(),
        view_radius: 8,
        name: "",
        token: "v1.not.valid"
      })

      assert {%{type: :error, code: :unauthorized}, _} = expect(conn, :error)
    end
  end

  defp chunked_post(port, path, chunks) do
    {:ok, socket} = :gen_tcp.connect(~c"127.0.0.1", port, [:binary, active: false])

    head =
      "POST #{path} HTTP/1.1\r\nHost: grove\r\nContent-Type: application/json\r\n" <>
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"

    encoded =
      for chunk <- chunks,
          chunk != "",
          do: [Integer.to_string(byte_size(chunk), 16), "\r\n", chunk, "\r\n"]

    :ok = :gen_tcp.send(socket, [head, encoded, "0\r\n\r\n"])
    response = read_all(socket, "")
    [status_line | _] = String.split(response, "\r\n")
    [_, status | _] = String.split(status_line, " ")
    [_, body] = String.split(response, "\r\n\r\n", parts: 2)
    {String.to_integer(status), :jiffy.decode(body, [:return_maps])}
  end

  defp read_all(socket, acc) do
    case :gen_tcp.recv(socket, 0, 5000) do
      {:ok, data} -> read_all(socket, acc <> data)
      {:error, :closed} -> acc
    end
  end

  # A call to a zone from this process, or the news that it is gone.
  defp about?({:"$gen_call", {pid, _tag}, _request}, pid), do: true
  defp about?({:DOWN, _ref, :process, pid, _reason}, pid), do: true
  defp about?(_message, _pid), do: false

  defp join(port, token, name \\ "") do
    conn = connect(port)

    push(conn, %{
      type: :join,
      protocol: Protocol.version(),
      view_radius: 8,
      name: name,
      token: token
    })

    {welcome, conn} = expect(conn, :welcome)
    {conn, welcome}
  end
end
