defmodule Grove.GatewayTest do
  # Yaws runs one server per node, so these tests share one gateway and run alone.
  use ExUnit.Case, async: false

  import Grove.WorldCase, only: [eventually: 1, eventually: 2]
  import Grove.WsConn, only: [connect: 1, connect: 2, push: 2, push_raw: 2, expect: 2, expect: 3]

  alias Grove.{Gateway, Protocol, World}
  alias Grove.World.Grid
  alias Grove.{WsClient, WsConn}

  @moduletag :gateway

  @token "secret-admin-token"

  setup_all do
    Grove.TestInstance.start!("gateway",
      world: [
        width: 60,
        height: 60,
        zone_size: 20,
        tick: 50,
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]
      ],
      actors: [count: 0],
      gateway: [
        port: 0,
        max_frame: 512,
        move_rate: 20,
        move_burst: 10,
        max_errors: 10,
        stats_interval: 100,
        density_interval: 100,
        view_backlog: 2048,
        slow_backlog: 4096,
        # Also how long a slow consumer has to take its goodbye once it
        # reads again: what a busy machine needs to read what piled up.
        slow_seconds: 3,
        # Long enough that a test reads a goodbye whenever it gets to it;
        # each test's sockets close with its process.
        close_timeout: 600_000,
        max_sessions: 40,
        sndbuf: 2048,
        max_body: 1024,
        admin_token: @token
      ],
      metrics: [interval: 50]
    )
  end

  # Most tests read one area a frame, as version 3 sends them; version 4's
  # `areas` has tests of its own ("version 4"), and the session's property
  # tests (Grove.Gateway.SessionTilesTest) check both.
  @version 3

  defp broadcaster, do: Gateway.broadcaster()

  # Every message up to the first of `type`, that one included.
  defp read_until(conn, type, acc \\ []) do
    {message, conn} =
      expect(conn, [
        type,
        :stats,
        :density,
        :colonies,
        :places,
        :area,
        :names,
        :ground,
        :area_closed
      ])

    if message.type == type,
      do: {Enum.reverse([message | acc]), conn},
      else: read_until(conn, type, [message | acc])
  end

  defp join(conn, opts \\ %{}) do
    push(
      conn,
      Map.merge(
        %{type: :join, protocol: @version, view_radius: 8, name: "", token: ""},
        opts
      )
    )

    {welcome, conn} = expect(conn, :welcome)
    {welcome, conn}
  end

  describe "starting" do
    test "on a port another program holds, it says so in one line" do
      {:ok, holder} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
      {:ok, port} = :inet.port(holder)

      log =
        ExUnit.CaptureLog.capture_log(fn ->
          assert {:error, {:port_in_use, ^port}} =
                   Gateway.start_link(instance: :nowhere, port: port)
        end)

      assert log =~ "port #{port} on 127.0.0.1 is in use by another program"
      assert log =~ "GROVE_PORT"
      refute log =~ "badbind"
      :gen_tcp.close(holder)
    end
  end

  describe "HTTP" do
    test "serves the legend of entity kinds: each actor kind's code, name and emoji", %{
      port: port
    } do
      {:ok, {{_, 200, _}, _headers, body}} =
        :httpc.request(:get, {~c"http://127.0.0.1:#{port}/kinds", []}, [], body_format: :binary)

      assert %{"kinds" => kinds} = :jiffy.decode(body, [:return_maps])

      assert Enum.take(kinds, 4) == [
               %{"code" => 0, "name" => "actor", "emoji" => ""},
               %{"code" => 1, "name" => "player", "emoji" => ""},
               %{"code" => 2, "name" => "bacterium", "emoji" => "🦠"},
               %{"code" => 3, "name" => "walker", "emoji" => ""}
             ]

      {:ok, {{_, 405, _}, _, _}} =
        :httpc.request(
          :post,
          {~c"http://127.0.0.1:#{port}/kinds", [], ~c"text/plain", ""},
          [],
          []
        )
    end

    test "serves web fonts as font/woff2, for a year, and nothing else from their folder", %{
      port: port
    } do
      # A font as the client's build leaves it, under a name of its own.
      dir = Path.join(Application.app_dir(:grove, "priv/static"), "assets/fonts")
      name = "test-#{System.unique_integer([:positive])}.woff2"
      File.mkdir_p!(dir)
      File.write!(Path.join(dir, name), "wOF2 not really a font")
      on_exit(fn -> File.rm(Path.join(dir, name)) end)
      get = &:httpc.request(:get, {~c"http://127.0.0.1:#{port}/assets/fonts/#{&1}", []}, [], [])

      {:ok, {{_, 200, _}, headers, body}} = get.(name)
      assert {~c"content-type", ~c"font/woff2"} in headers
      assert {~c"cache-control", ~c"public, max-age=31536000, immutable"} in headers
      assert to_string(body) == "wOF2 not really a font"

      for bad <- ["missing.woff2", "..%2F..%2Findex.html", "x.ttf", "%2Fetc%2Fpasswd"] do
        assert {:ok, {{_, 404, _}, _, _}} = get.(bad)
      end
    end

    test "serves the terrain, compressed when asked", %{port: port, world: world} do
      {:ok, {{_, 200, _}, headers, body}} =
        :httpc.request(:get, {~c"http://127.0.0.1:#{port}/terrain", []}, [], body_format: :binary)

      assert {~c"x-grove-width", ~c"60"} in headers
      assert body == World.terrain(world).cells

      {:ok, {{_, 200, _}, headers, gzipped}} =
        :httpc.request(
          :get,
          {~c"http://127.0.0.1:#{port}/terrain", [{~c"accept-encoding", ~c"gzip"}]},
          [],
          body_format: :binary
        )

      assert {~c"content-encoding", ~c"gzip"} in headers
      assert :zlib.gunzip(gzipped) == body
    end

    test "a malformed Range header is ignored; a good one is served", %{port: port} do
      url = ~c"http://127.0.0.1:#{port}/index.html"
      {:ok, {{_, 200, _}, _, whole}} = :httpc.request(:get, {url, []}, [], body_format: :binary)

      # A last byte before the first: RFC 9110 says to ignore the header.
      assert {:ok, {{_, 200, _}, _, ^whole}} =
               :httpc.request(:get, {url, [{~c"range", ~c"bytes=5-1"}]}, [], body_format: :binary)

      assert {:ok, {{_, 206, _}, _, part}} =
               :httpc.request(:get, {url, [{~c"range", ~c"bytes=0-9"}]}, [], body_format: :binary)

      assert part == binary_part(whole, 0, 10)
    end

    test "unknown paths and methods get JSON errors", %{port: port} do
      {:ok, {{_, 404, _}, _, body}} =
        :httpc.request(:get, {~c"http://127.0.0.1:#{port}/nowhere", []}, [], body_format: :binary)

      assert %{"error" => "not_found"} = :jiffy.decode(body, [:return_maps])

      {:ok, {{_, 405, _}, _, _}} =
        :httpc.request(
          :post,
          {~c"http://127.0.0.1:#{port}/terrain", [], ~c"text/plain", ~c"x"},
          [],
          []
        )
    end

    test "a WebSocket asking for a subprotocol or an unknown encoding is told how to ask", %{
      port: port
    } do
      assert {:error, {:http_status, 400}} =
               WsClient.connect("127.0.0.1", port, "/ws",
                 headers: [{"Sec-WebSocket-Protocol", "grove.v1.json"}]
               )

      assert {:error, {:http_status, 400}} =
               WsClient.connect("127.0.0.1", port, "/ws?encoding=xml")
    end

    test "a query string whose escapes are not escapes is refused, not a crash", %{port: port} do
      for query <- ["encoding=js%zz", "encoding=%", "encoding=json%e"] do
        assert {:error, {:http_status, 400}} =
                 WsClient.connect("127.0.0.1", port, "/ws?" <> query)
      end

      # A parameter nobody reads may be as broken as it likes.
      assert {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws?%zz=1&encoding=json")
      WsClient.close(client)

      # Sent raw: :httpc refuses to send such a URL.
      for path <- ["/dashboard/data?since=%zz", "/api/admin/chat?limit=1%", "/metrics?token=%g0"] do
        {:ok, socket} = :gen_tcp.connect(~c"127.0.0.1", port, [:binary, active: false])

        :ok =
          :gen_tcp.send(
            socket,
            "GET #{path} HTTP/1.1\r\nHost: grove\r\nConnection: close\r\n\r\n"
          )

        {:ok, "HTTP/1.1 " <> <<status::binary-size(3), _::binary>>} =
          :gen_tcp.recv(socket, 0, 5000)

        :gen_tcp.close(socket)
        assert status in ["400", "401"], "#{path} answered #{status}"
      end
    end
  end

  describe "operators' endpoints" do
    test "/metrics needs the admin token and serves Prometheus text", %{port: port} do
      url = ~c"http://127.0.0.1:#{port}/metrics"
      assert {:ok, {{_, 401, _}, _, _}} = :httpc.request(:get, {url, []}, [], [])

      {:ok, {{_, 200, _}, headers, body}} =
        :httpc.request(:get, {url, [{~c"authorization", ~c"Bearer #{@token}"}]}, [],
          body_format: :binary
        )

      assert {~c"content-type", ~c"text/plain; version=0.0.4"} in headers
      assert body =~ "# TYPE grove_sessions gauge"
      assert body =~ ~s(grove_bytes_out_total{encoding="json"})

      assert {:ok, {{_, 200, _}, _, _}} =
               :httpc.request(:get, {~c"#{url}?token=#{@token}", []}, [], [])

      assert {:ok, {{_, 401, _}, _, _}} =
               :httpc.request(:get, {~c"#{url}?token=wrong-token-xx", []}, [], [])
    end

    test "a person opening the dashboard without the token gets a page that asks for it", %{
      port: port
    } do
      url = "http://127.0.0.1:#{port}/dashboard"

      {:ok, {{_, 401, _}, headers, body}} =
        :httpc.request(:get, {to_charlist(url), []}, [], body_format: :binary)

      assert {~c"content-type", ~c"text/html"} in headers
      assert body =~ ~s(name="token")
      refute body =~ "not the one"

      {:ok, {{_, 401, _}, _, body}} =
        :httpc.request(:get, {~c"#{url}?token=wrong-token-xx", []}, [], body_format: :binary)

      assert body =~ "not the one"

      # Its data stays JSON for programs.
      {:ok, {{_, 401, _}, headers, _}} =
        :httpc.request(:get, {~c"#{url}/data", []}, [], body_format: :binary)

      assert {~c"content-type", ~c"application/json"} in headers
    end

    # In the page's address the token would stay in the browser's history,
    # in copied links and in any proxy's log.
    test "logging in on the dashboard's form gives a cookie, not an address with the token, and the cookie opens the dashboard",
         %{port: port} do
      url = "http://127.0.0.1:#{port}/dashboard"
      form = fn token -> {~c"#{url}/login", [], ~c"application/x-www-form-urlencoded", token} end

      assert {303, headers, _} = http(:post, form.("token=#{@token}"))
      assert {~c"location", ~c"/dashboard"} in headers
      cookie = set_cookie(headers)

      assert cookie =~
               ~r/^grove_admin=\d+\.[\w-]+; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Strict$/

      refute cookie =~ @token
      session = cookie |> String.split(";") |> hd()

      for path <- ["", "/data?since=0"] do
        assert {200, _, _} = http(:get, {~c"#{url}#{path}", [{~c"cookie", to_charlist(session)}]})
      end

      # A forged or a wrong one opens nothing; a wrong token gets the form again.
      [_, expires, _signature] = Regex.run(~r/=(\d+)\.([\w-]+)/, session)
      forged = ~c"grove_admin=#{expires}.AAAA"
      assert {401, _, _} = http(:get, {~c"#{url}/data?since=0", [{~c"cookie", forged}]})
      assert {401, headers, body} = http(:post, form.("token=wrong-token-xx"))
      assert body =~ "not the one"
      assert set_cookie(headers) == nil

      # An address that still carries the token sheds it; behind TLS the cookie is Secure.
      assert {303, headers, _} =
               http(:get, {~c"#{url}?token=#{@token}", [{~c"x-forwarded-proto", ~c"https"}]})

      assert {~c"location", ~c"/dashboard"} in headers
      assert set_cookie(headers) =~ ~r/; Secure$/
    end

    @tag :capture_log
    test "a crash report leaves out the request's query, which may carry a token" do
      report =
        ~c"Reason: boom\nReq: {http_request,'GET',{abs_path,\"/dashboard/data?token=#{@token}\"},{1,1}}"

      log =
        ExUnit.CaptureLog.capture_log(fn -> Grove.Gateway.Errors.crashmsg(nil, nil, report) end)

      assert log =~ ~S|{abs_path,"/dashboard/data?(query left out)"}|
      refute log =~ @token
    end

    test "the dashboard's data: history and the zone heat map", %{port: port} do
      Grove.WorldCase.eventually(fn ->
        %{"samples" => samples, "zones" => zones} =
          get_json(port, "/dashboard/data?since=0&token=#{@token}")

        assert length(samples) > 1
        assert %{"moves_per_s" => _, "sessions" => _, "memory_mb" => _, "t" => _} = hd(samples)
        # Each kind of actor, for the line of kinds.
        assert [%{"name" => "walker", "emoji" => "", "actors" => 0, "moves_per_s" => 0}] =
                 List.last(samples)["kinds"]

        assert zones["cols"] * zones["rows"] == 9
        assert length(zones["moves_per_s"]) == 9
      end)
    end

    test "the dashboard's data: a single node is a cluster of one that runs every zone", %{
      port: port
    } do
      %{"cluster" => cluster} = get_json(port, "/dashboard/data?since=0&token=#{@token}")
      this = Atom.to_string(node())

      assert %{"node" => ^this, "zone_count" => 9, "members" => [member]} = cluster
      # Where each zone runs, by zone index.
      assert cluster["placement"] == List.duplicate(this, 9)

      assert %{
               "node" => ^this,
               "self" => true,
               "member" => true,
               "reachable" => true,
               "zones" => 9,
               "players" => players,
               "actors" => actors,
               "sessions" => sessions
             } = member

      assert Enum.all?([players, actors, sessions], &(is_integer(&1) and &1 >= 0))
    end

    test "load runs report their progress, which the dashboard shows", %{port: port} do
      report =
        ~s({"players":120,"moves_per_s":118,"p50_ms":1.5,"p99_ms":7.25,"errors":0,"knee":null,"phase":"ramp"})

      assert {202, _} = post(port, "/api/load/report?token=#{@token}", report)

      Grove.WorldCase.eventually(fn ->
        %{"samples" => samples} = get_json(port, "/dashboard/data?since=0&token=#{@token}")

        assert %{"players" => 120, "p99_ms" => 7.25, "phase" => "ramp"} =
                 run = List.last(samples)["load_run"]

        # What the report said, and nothing of the server's insides.
        assert Map.keys(run) --
                 ~w(players moves_per_s p50_ms p99_ms errors knee phase) == []
      end)

      {:ok, {{_, 200, _}, _, body}} =
        :httpc.request(
          :get,
          {~c"http://127.0.0.1:#{port}/dashboard/data?since=0&token=#{@token}", []},
          [],
          body_format: :binary
        )

      refute body =~ "Elixir."

      assert {400, %{"error" => "bad_json"}} =
               post(port, "/api/load/report?token=#{@token}", "{oops")

      assert {413, %{"error" => "too_large"}} =
               post(port, "/api/load/report?token=#{@token}", String.duplicate(" ", 5000))

      assert {401, _} = post(port, "/api/load/report", report)
    end
  end

  describe "playing over JSON and binary" do
    for encoding <- [:json, :binary] do
      test "join, the areas around one, move with outcome, ping (#{encoding})", %{
        port: port,
        world: world
      } do
        conn = connect(port, unquote(encoding))
        {welcome, conn} = join(conn)
        assert %{protocol: 3, width: 60, height: 60, view_radius: 8, view_ms: 1000} = welcome
        assert World.position(world, welcome.id) == {welcome.x, welcome.y}

        # A full snapshot of every tile the viewport reaches, one's own among them.
        tiles = Grid.view_tiles(World.grid(world), {welcome.x, welcome.y}, 8)
        {areas, conn} = collect_areas(conn, length(tiles))
        assert Enum.sort(Map.keys(areas)) == tiles
        assert Enum.all?(Map.values(areas), & &1.full)
        own = Grid.tile_of(World.grid(world), welcome.x, welcome.y)
        assert {welcome.id, welcome.x, welcome.y, 1} in areas[own].entities

        direction = if welcome.x < 30, do: :e, else: :w
        push(conn, %{type: :move, seq: 41, dir: direction})
        {outcome, conn} = expect(conn, :outcome)
        assert %{seq: 41, result: :ok} = outcome
        assert World.position(world, welcome.id) == {outcome.x, outcome.y}

        push(conn, %{type: :ping, t: 123_456})
        assert {%{type: :pong, t: 123_456}, _conn} = expect(conn, :pong)
      end
    end

    for encoding <- [:json, :binary] do
      test "each area's snapshot comes after its ground, only names between (#{encoding})", %{
        port: port,
        world: world
      } do
        conn = connect(port, unquote(encoding))
        {welcome, conn} = join(conn)
        grid = World.grid(world)
        tiles = Grid.view_tiles(grid, {welcome.x, welcome.y}, 8)
        {messages, _conn} = messages_until_snapshots(conn, length(tiles))

        for {%{type: :area, full: true} = area, index} <- Enum.with_index(messages) do
          # Right before it, or before the names of the players it shows.
          ground =
            messages
            |> Enum.take(index)
            |> Enum.reverse()
            |> Enum.drop_while(&(&1.type == :names))
            |> hd()

          {x0, y0, x1, y1} = Grid.tile_bounds(grid, area.area)

          number = area.area
          assert %{type: :ground, area: ^number, x: ^x0, y: ^y0} = ground
          assert {ground.width, ground.height} == {x1 - x0, y1 - y0}

          assert ground.cells ==
                   IO.iodata_to_binary(
                     Grove.World.Terrain.rows(World.terrain(world), x0, y0, x1, y1)
                   )
        end
      end
    end

    for encoding <- [:json, :binary] do
      test "version 4: the snapshots of the areas in view come in areas frames, each after its ground (#{encoding})",
           %{port: port, world: world} do
        conn = connect(port, unquote(encoding))
        {welcome, conn} = join(conn, %{protocol: 4})
        assert welcome.protocol == 4
        grid = World.grid(world)
        tiles = Grid.view_tiles(grid, {welcome.x, welcome.y}, 8)
        {messages, _conn} = messages_until_snapshots(conn, length(tiles))
        refute Enum.any?(messages, &(&1.type == :area))

        snapshots =
          for {%{type: :areas, areas: parts}, index} <- Enum.with_index(messages),
              {area, true, entities, []} <- parts do
            before = Enum.take(messages, index)
            {x0, y0, _x1, _y1} = Grid.tile_bounds(grid, area)

            assert %{x: ^x0, y: ^y0} =
                     Enum.find(before, &(&1.type == :ground and &1.area == area))

            assert {welcome.id, welcome.x, welcome.y, 1} in entities or
                     area != Grid.tile_of(grid, welcome.x, welcome.y)

            area
          end

        assert Enum.sort(snapshots) == Enum.sort(tiles)

        # The snapshots of a zone's tiles are its one answer to the session,
        # joined into one frame but where a `names` frame (the player's own,
        # here) closes the run: between two frames holding them there is a
        # names frame, and nothing else but the grounds of the next run.
        # Deltas may come in frames of their own.
        frames_of_zones =
          for {%{type: :areas, areas: parts}, index} <- Enum.with_index(messages),
              {area, true, _entities, _gone} <- parts,
              uniq: true,
              do: {Grid.tile_zone(grid, area), index}

        for {zone, indexes} <- Enum.group_by(frames_of_zones, &elem(&1, 0), &elem(&1, 1)),
            {from, to} <- Enum.zip(indexes, tl(indexes)) do
          between = messages |> Enum.slice((from + 1)..(to - 1)//1) |> Enum.map(& &1.type)
          assert {zone, :names in between} == {zone, true}
          assert {zone, Enum.reject(between, &(&1 in [:names, :ground]))} == {zone, []}
        end
      end
    end

    test "a client of protocol version 2 is still served, as version 2 says it, in a world that fits",
         %{port: port, world: world} do
      {client, :binary} = connect(port, :binary)

      frame = Protocol.encode(%{type: :join, protocol: 2, view_radius: 8}, :binary, 2)
      :ok = WsClient.send_frame(client, {:binary, IO.iodata_to_binary(frame)})
      {messages, client} = read_version(client, 2, [], &(&1.type == :area and &1.full))
      [welcome | _] = for %{type: :welcome} = w <- messages, do: w
      assert welcome.protocol == 2
      refute Enum.any?(messages, &(&1.type == :ground))

      direction = if welcome.x < 30, do: :e, else: :w
      move = Protocol.encode(%{type: :move, seq: 5, dir: direction}, :binary, 2)
      :ok = WsClient.send_frame(client, {:binary, IO.iodata_to_binary(move)})
      {messages, _client} = read_version(client, 2, [], &(&1.type == :outcome))
      outcome = List.last(messages)
      assert %{seq: 5, result: :ok} = outcome
      assert World.position(world, welcome.id) == {outcome.x, outcome.y}
    end

    test "others are seen moving without moving oneself", %{port: port, world: world} do
      conn = connect(port)
      {welcome, conn} = join(conn)
      {x, y} = {welcome.x, welcome.y}

      # Every snapshot of the viewport first: one made after the other
      # joined and moved shows it there too, as a snapshot and not a move.
      held = Grid.view_tiles(World.grid(world), {x, y}, 8)
      {_areas, conn} = collect_areas(conn, length(held))

      neighbour = if x < 30, do: {x + 2, y}, else: {x - 2, y}
      {:ok, other, _} = World.join(world, at: neighbour)
      # Towards the middle, so the step stays on the 60 x 60 world.
      :ok = World.move(world, other, if(y < 30, do: :s, else: :n), 1)
      assert_receive {:grove_move, ^other, 1, {:ok, {_, _} = moved}}

      {area, _conn} = wait_for_entity(conn, other, moved)
      refute area.full
    end

    test "an area the viewport leaves is closed; the one it enters comes as a snapshot", %{
      port: port,
      world: world
    } do
      conn = connect(port)
      {welcome, conn} = join(conn)
      grid = World.grid(world)

      held = Grid.view_tiles(grid, {welcome.x, welcome.y}, 8)
      {_areas, conn} = collect_areas(conn, length(held))

      # Walk east or west until the viewport's tiles change.
      direction = if welcome.x < 30, do: :e, else: :w

      {{change, seen}, conn} = walk_until_tiles_change(conn, grid, MapSet.new(held), direction, 1)

      wanted =
        MapSet.new(
          Enum.map(change.opened, &{:opened, &1}) ++ Enum.map(change.closed, &{:closed, &1})
        )

      assert MapSet.size(wanted) > 0
      # The areas may come before the step's outcome: the zone asks for them first.
      assert await_changes(conn, MapSet.difference(wanted, seen)) == :ok
    end

    test "resync brings every area in view again, as snapshots", %{port: port, world: world} do
      conn = connect(port, :binary)
      {welcome, conn} = join(conn)
      tiles = Grid.view_tiles(World.grid(world), {welcome.x, welcome.y}, 8)
      {_areas, conn} = collect_areas(conn, length(tiles))
      push(conn, %{type: :resync})
      {areas, _conn} = collect_areas(conn, length(tiles))
      assert Enum.sort(Map.keys(areas)) == tiles
      assert Enum.all?(Map.values(areas), & &1.full)
    end

    test "stats and the density map arrive by themselves", %{port: port} do
      conn = connect(port)
      {_welcome, conn} = join(conn)
      # The first are the latest posted, from before one joined; later ones count one.
      {stats, conn} = expect_where(conn, :stats, &(&1.players >= 1))
      assert stats.entities >= 1
      {density, _conn} = expect(conn, :density)
      assert byte_size(density.cells) == density.cols * density.rows
    end

    test "a player that joins without the minimap is sent none", %{port: port} do
      blind = connect(port, :binary)
      {_welcome, blind} = join(blind, %{minimap: false})
      seeing = connect(port)
      {_welcome, seeing} = join(seeing)
      # The latest at its join, then one posted since: after the other joined.
      {_density, seeing} = expect(seeing, :density)
      {_density, _seeing} = expect(seeing, :density)
      # Whatever the other was sent since it joined, up to an answer it
      # asked for now, holds no minimap.
      push(blind, %{type: :ping, t: 7})
      {messages, _blind} = read_until(blind, :pong)
      refute Enum.any?(messages, &(&1.type in [:density, :colonies, :places]))
    end

    test "a broadcaster that crashes, again and again, restarts alone: players stay connected",
         %{port: port} do
      conn = connect(port)
      {_welcome, conn} = join(conn)
      {_stats, conn} = expect(conn, :stats)

      # More often than the gateway's own restart limit (3 in 10 s) allows.
      for _ <- 1..6 do
        eventually(fn -> assert is_pid(broadcaster()) end)
        broadcaster = broadcaster()
        ref = Process.monitor(broadcaster)
        Process.exit(broadcaster, :kill)
        assert_receive {:DOWN, ^ref, :process, ^broadcaster, :killed}
        eventually(fn -> assert is_pid(broadcaster()) and broadcaster() != broadcaster end)
      end

      push(conn, %{type: :ping, t: 7})
      {pong, conn} = expect(conn, [:pong, :bye])
      assert pong == %{type: :pong, t: 7}
      assert {%{type: :stats}, _conn} = expect(conn, [:stats, :bye])
    end

    test "a move whose zone dies holding it is settled: interrupted, where the player stands",
         %{port: port, world: world} do
      conn = connect(port)
      {welcome, conn} = join(conn)
      id = welcome.id
      zone = World.zone_of(world, id)
      :ok = :sys.suspend(zone)
      push(conn, %{type: :move, seq: 1, dir: if(welcome.x < 30, do: :e, else: :w)})

      # The move waits in the suspended zone's mailbox; the zone dies with it.
      eventually(fn ->
        {:messages, mail} = Process.info(zone, :messages)
        assert Enum.any?(mail, &match?({:"$gen_cast", {:move, ^id, _, _, 1, _}}, &1))
      end)

      Process.exit(zone, :kill)
      {outcome, conn} = expect(conn, :outcome, timeout: 15_000)
      assert %{seq: 1, result: :interrupted} = outcome
      assert {outcome.x, outcome.y} == {welcome.x, welcome.y}

      # The restarted zone plays on.
      push(conn, %{type: :move, seq: 2, dir: if(welcome.x < 30, do: :e, else: :w)})
      assert {%{seq: 2, result: :ok}, _conn} = expect(conn, :outcome)
    end

    test "a closed connection's entity disappears at once", %{port: port, world: world} do
      {client, _} = conn = connect(port)
      {welcome, _conn} = join(conn)
      assert World.position(world, welcome.id) != nil
      WsClient.close(client)
      eventually(fn -> assert World.position(world, welcome.id) == nil end)
    end

    test "a reset connection's entity disappears at once too", %{port: port, world: world} do
      {client, _} = conn = connect(port)
      {welcome, _conn} = join(conn)
      assert World.position(world, welcome.id) != nil
      :ok = :inet.setopts(client.socket, linger: {true, 0})
      :gen_tcp.close(client.socket)
      eventually(fn -> assert World.position(world, welcome.id) == nil end)
      assert {200, _, _} = healthz(port)
    end
  end

  describe "names" do
    test "a guest plays under the name it gives, or one made up", %{port: port} do
      {welcome, _conn} = join(connect(port, :binary), %{name: "  Ada   Lovelace 🦊 "})
      assert %{name: "Ada Lovelace 🦊", avatar: "😀"} = welcome

      {welcome, _conn} = join(connect(port))
      assert welcome.name =~ ~r/^\S+ \S+$/
    end

    test "a bad name is refused with the reason, and the connection may join again", %{port: port} do
      conn = connect(port)

      for {name, why} <- [
            {"evil\u202Eeman", "U+202E, a character that reorders the text around it"},
            {"two\nlines", "U+000A, a control character"},
            {String.duplicate("x", 25), "at most 24 characters"},
            {"   ", "at least one character"}
          ] do
        push(conn, %{
          type: :join,
          protocol: Protocol.version(),
          view_radius: 8,
          name: name,
          token: ""
        })

        assert {%{type: :error, code: :invalid_name, message: message}, _} = expect(conn, :error)
        assert message =~ why
      end

      {welcome, _conn} = join(conn, %{name: "Good"})
      assert welcome.name == "Good"
    end

    test "others are named once, as they come into view, never with their moves", %{
      port: port,
      world: world
    } do
      conn = connect(port)
      {welcome, conn} = join(conn, %{name: "Ada"})

      # One's own name comes with the snapshot of one's own area, first.
      {names, conn} = expect(conn, :names)
      assert {welcome.id, "Ada", "😀"} in names.names
      {area, conn} = expect(conn, :area)
      assert area.area == names.area and area.full

      # Someone comes in next to the player, inside its area: named, then shown.
      {x, y} = {welcome.x, welcome.y}
      {zx0, zy0, zx1, _} = Grid.tile_bounds(World.grid(world), area.area)
      step = if x + 3 < zx1, do: 1, else: -1
      near = {x + 2 * step, y}
      {:ok, bo, _} = World.join(world, at: near, kind: :player, label: {"Bo", "🐻"})
      {names, conn} = expect_where(conn, :names, &(&1.area == area.area))
      assert names.names == [{bo, "Bo", "🐻"}]
      {_area, conn} = wait_for_entity(conn, bo, near)

      # It walks about the area: every frame until its last cell shows,
      # and no name among them.
      towards = if y > zy0 + 2, do: :n, else: :s

      last =
        Enum.reduce(1..3, near, fn seq, _cell ->
          :ok = World.move(world, bo, towards, seq)
          assert_receive {:grove_move, ^bo, ^seq, {:ok, cell}}
          cell
        end)

      frames = frames_until_shown(conn, bo, last)
      assert Enum.count(frames, &(&1.type == :area)) >= 1
      refute Enum.any?(frames, &(&1.type == :names))
      assert zx0 < zx1
    end
  end

  describe "views and moves" do
    test "a player who moved and stopped still gets what changes around it, without moving again",
         %{port: port, world: world} do
      conn = connect(port)
      {welcome, conn} = join(conn)
      {x, y} = {welcome.x, welcome.y}
      grid = World.grid(world)
      {zx0, zy0, zx1, _} = Grid.tile_bounds(grid, Grid.tile_of(grid, x, y))

      # The player steps once along its area and stands: its views waited
      # for its outcome, and wait a little longer for a next move that
      # does not come.
      step = if x + 4 < zx1, do: 1, else: -1
      push(conn, %{type: :move, seq: 1, dir: if(step == 1, do: :e, else: :w)})
      {outcome, conn} = expect(conn, :outcome)
      assert %{seq: 1, result: :ok} = outcome

      # Someone walks in its area meanwhile: shown without another move.
      near = {outcome.x + 2 * step, y}
      {:ok, bo, _} = World.join(world, at: near, kind: :player, label: {"Bo", "🐻"})
      {_area, conn} = wait_for_entity(conn, bo, near)
      towards = if y > zy0 + 2, do: :n, else: :s
      :ok = World.move(world, bo, towards, 1)
      assert_receive {:grove_move, ^bo, 1, {:ok, cell}}
      frames = frames_until_shown(conn, bo, cell)
      refute Enum.any?(frames, &(&1.type == :outcome))
      assert zx0 < zx1
    end
  end

  describe "an old client" do
    for encoding <- [:json, :binary] do
      test "of protocol version 1 is told in words to update, then let go (#{encoding})", %{
        port: port
      } do
        {client, encoding} = conn = connect(port, unquote(encoding))
        # Version 1's join: no `protocol` in JSON, tag 1 in binary.
        old =
          if encoding == :json,
            do: {:text, ~s({"type":"join"})},
            else: {:binary, <<1, 8, 0, 0, 0, 0>>}

        push_raw({client, encoding}, old)
        {error, conn} = expect(conn, :error)

        assert error.code == :unsupported_protocol and
                 error.message =~ "protocol #{Protocol.version()}"

        {bye, conn} = expect(conn, :bye)
        assert bye.reason == :unsupported_protocol
        assert {{:close, 1002, _}, _} = expect(conn, [])
      end
    end
  end

  describe "the WebSocket endpoint" do
    test "plain HTTP gets a 400 that says to upgrade", %{port: port} do
      {:ok, {{_, 400, _}, _, body}} =
        :httpc.request(:get, {~c"http://127.0.0.1:#{port}/ws", []}, [], body_format: :binary)

      assert %{"error" => "upgrade_required"} = :jiffy.decode(body, [:return_maps])
    end

    test "answers pings, and a close with a close", %{port: port} do
      # Passive, so that the pong stays on the socket for raw_frame/1
      # instead of arriving as a message before it looks.
      {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws", active: false)
      :ok = WsClient.send_frame(client, {:ping, "hello"})
      {:ok, socket_data} = raw_frame(client)
      # A pong is a control frame: FIN, opcode 10, the same payload.
      assert socket_data == <<0x8A, 5, "hello">>
      :ok = WsClient.send_frame(client, {:close, 1000, "bye"})
      assert {:ok, {:close, 1000, _}, _} = WsClient.recv(client, 2000)
    end

    test "an unmasked client frame breaks the protocol: closed with 1002", %{port: port} do
      {client, _} = connect(port)
      :ok = :gen_tcp.send(client.socket, :cow_ws.frame({:text, ~s({"type":"ping","t":1})}, %{}))
      assert {:ok, {:close, 1002, _}, _} = WsClient.recv(client, 2000)
    end

    test "a message in fragments is put together before it is read", %{port: port} do
      {client, _} = connect(port)
      ping = ~s({"type":"ping","t":99})
      <<first::binary-size(5), rest::binary>> = ping
      # A text frame without FIN, then a continuation with it.
      :ok = :gen_tcp.send(client.socket, masked(0, 1, first))
      :ok = :gen_tcp.send(client.socket, masked(1, 0, rest))
      assert {%{type: :pong, t: 99}, _} = expect({client, :json}, :pong)
    end

    test "a full server refuses the next player with 503 and counts it", %{port: port} do
      # The connections of earlier tests close on their own time: wait for
      # them, or one that ends meanwhile leaves the server short of full.
      eventually(fn -> assert Gateway.stats().sessions == 0 end, 1000)
      before = Gateway.stats()
      room = Gateway.config().max_sessions

      conns =
        for _ <- 1..room do
          {client, _} = connect(port)
          client
        end

      eventually(fn -> assert Gateway.stats().sessions == Gateway.config().max_sessions end)
      assert {:error, {:http_status, 503}} = WsClient.connect("127.0.0.1", port, "/ws")
      assert Gateway.stats().refused == before.refused + 1
      for client <- conns, do: WsClient.close(client)
      eventually(fn -> assert Gateway.stats().sessions <= before.sessions end)
    end
  end

  describe "bad input gets a clear answer and the connection stays" do
    test "malformed JSON, unknown types, wrong fields, moves before join, a second join", %{
      port: port
    } do
      errors = fn ->
        {_, :counter, _, values} =
          List.keyfind(Grove.Gateway.Metrics.metrics(nil), "grove_protocol_errors_total", 0)

        Map.new(values, fn {[code: code], n} -> {code, n} end)
      end

      before = errors.()
      conn = connect(port)
      push_raw(conn, {:text, "{not json"})
      assert {%{code: :bad_json}, conn} = expect(conn, :error)
      push_raw(conn, {:text, ~s({"type":"fly"})})
      assert {%{code: :unknown_type}, conn} = expect(conn, :error)
      push_raw(conn, {:text, ~s({"type":"move","seq":1,"dir":"up"})})
      assert {%{code: :bad_field, message: "dir: " <> _}, conn} = expect(conn, :error)
      push(conn, %{type: :move, seq: 1, dir: :n})
      assert {%{code: :not_joined}, conn} = expect(conn, :error)
      push_raw(conn, {:binary, <<2, 0, 0, 0, 1, 0>>})
      assert {%{code: :bad_frame}, conn} = expect(conn, :error)

      {_welcome, conn} = join(conn)

      push(conn, %{type: :join, protocol: Protocol.version(), view_radius: 8, name: "", token: ""})

      assert {%{code: :already_joined}, conn} = expect(conn, :error)
      push(conn, %{type: :ping, t: 7})
      assert {%{type: :pong, t: 7}, _} = expect(conn, :pong)

      # Each counted under its code (before its answer was written).
      now = errors.()

      for code <- [:bad_json, :unknown_type, :bad_field, :not_joined, :bad_frame, :already_joined],
          do: assert(now[code] - before[code] == 1, "#{code}: #{now[code] - before[code]}")
    end

    test "random bytes on a binary connection", %{port: port} do
      conn = connect(port, :binary)

      conn =
        Enum.reduce(1..5, conn, fn n, conn ->
          push_raw(conn, {:binary, :crypto.strong_rand_bytes(n * 7) |> then(&(<<200>> <> &1))})
          {%{code: :bad_frame}, conn} = expect(conn, :error)
          conn
        end)

      {welcome, _conn} = join(conn)
      assert welcome.protocol == 3
    end

    test "bytes that are not frames at all, after the handshake: closed with 1002", %{
      port: port
    } do
      {client, _} = connect(port)
      # RSV bits set, no extension agreed: not a frame.
      :ok = :gen_tcp.send(client.socket, <<0xFF, 0xFF>> <> :crypto.strong_rand_bytes(64))
      assert {:ok, {:close, 1002, _}, _} = WsClient.recv(client, 2000)
      assert {200, _, _} = healthz(port)
    end

    test "moves faster than the connection's rate get the outcome rate_limited, each move one outcome, and nobody is cut off",
         %{port: port} do
      conn = connect(port)
      # No minimap: this instance sends one every 100 ms, and a test that
      # reads only outcomes on a busy machine would pile them up past the
      # slow-consumer limit (4 KB for 3 s) and be cut off for it.
      {welcome, conn} = join(conn, %{minimap: false})

      for seq <- 1..30,
          do: push(conn, %{type: :move, seq: seq, dir: if(rem(seq, 2) == 0, do: :e, else: :w)})

      {outcomes, errors, conn} = collect(conn, 30, {[], []})
      assert errors == []
      assert outcomes |> Enum.map(& &1.seq) |> Enum.sort() == Enum.to_list(1..30)
      limited = Enum.filter(outcomes, &(&1.result == :rate_limited))
      assert length(limited) > 0 and length(outcomes) - length(limited) >= 10

      # A refused move says where the player stands: where the last move
      # answered before it left it.
      Enum.reduce(Enum.reverse(outcomes), {welcome.x, welcome.y}, fn outcome, cell ->
        if outcome.result == :rate_limited, do: assert({outcome.x, outcome.y} == cell)
        {outcome.x, outcome.y}
      end)

      # Still playing.
      push(conn, %{type: :ping, t: 1})
      assert {%{type: :pong}, _conn} = expect(conn, :pong)
    end

    @tag :capture_log
    test "a frame over the size limit gets the error too_large, then a close with 1009", %{
      port: port
    } do
      conn = connect(port)
      push_raw(conn, {:text, String.duplicate("x", 2000)})
      assert {%{type: :error, code: :too_large}, conn} = expect(conn, [:error])
      assert {{:close, 1009, _}, _} = expect(conn, [])
    end

    test "a client that keeps sending garbage is cut off", %{port: port} do
      conn = connect(port)
      for _ <- 1..12, do: push_raw(conn, {:text, "nope"})

      {bye, conn} = expect(conn, :bye)
      assert bye.reason == :too_many_errors
      assert {{:close, 1008, _}, _} = expect(conn, [])
    end
  end

  describe "backpressure" do
    test "a client that stops reading has its views held back, then is disconnected as a slow consumer",
         %{port: port} do
      before = Gateway.stats()
      {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws?encoding=json", recbuf: 1024)
      conn = {client, :json}
      {_welcome, conn} = join(conn)
      # Stop reading, but keep asking: every ping is answered, and the answers pile up.
      for t <- 1..600, do: push(conn, %{type: :ping, t: t})

      eventually(
        fn -> assert Gateway.stats().slow_consumers > before.slow_consumers end,
        1000
      )

      assert Gateway.stats().views_held > before.views_held

      # However long the client takes to read its way to the goodbye, it
      # reads, so it is not reset.
      {bye, conn} = expect(conn, :bye)
      assert bye.reason == :slow_consumer
      assert {{:close, 1008, _}, _} = expect(conn, [])
      assert Gateway.stats().goodbyes_reset == before.goodbyes_reset
    end
  end

  defp http(method, request) do
    {:ok, {{_, status, _}, headers, body}} =
      :httpc.request(method, request, [autoredirect: false], body_format: :binary)

    {status, headers, body}
  end

  defp set_cookie(headers) do
    case List.keyfind(headers, ~c"set-cookie", 0) do
      {_, value} -> to_string(value)
      nil -> nil
    end
  end

  defp healthz(port) do
    {:ok, {{_, status, _}, headers, body}} =
      :httpc.request(:get, {~c"http://127.0.0.1:#{port}/healthz", []}, [], body_format: :binary)

    {status, headers, body}
  end

  defp get_json(port, path) do
    {:ok, {{_, 200, _}, _, body}} =
      :httpc.request(:get, {~c"http://127.0.0.1:#{port}#{path}", []}, [], body_format: :binary)

    :jiffy.decode(body, [:return_maps])
  end

  defp post(port, path, body) do
    {:ok, {{_, status, _}, _, response}} =
      :httpc.request(
        :post,
        {~c"http://127.0.0.1:#{port}#{path}", [], ~c"application/json", body},
        [],
        body_format: :binary
      )

    {status, :jiffy.decode(response, [:return_maps])}
  end

  defp wait_for_entity(conn, id, cell, tries \\ 40) do
    {area, conn} = expect(conn, :area)

    cond do
      Enum.any?(area.entities, fn {eid, x, y, _} -> eid == id and {x, y} == cell end) ->
        {area, conn}

      tries > 0 ->
        wait_for_entity(conn, id, cell, tries - 1)

      true ->
        flunk("entity #{id} never shown at #{inspect(cell)}")
    end
  end

  # The first `count` different areas to arrive as snapshots, by zone.
  defp collect_areas(conn, count, acc \\ %{})
  defp collect_areas(conn, count, acc) when map_size(acc) == count, do: {acc, conn}

  defp collect_areas(conn, count, acc) do
    case expect(conn, :area) do
      {%{full: true} = area, conn} -> collect_areas(conn, count, Map.put(acc, area.area, area))
      {_delta, conn} -> collect_areas(conn, count, acc)
    end
  end

  # Every message until `count` snapshots came, in order.
  defp messages_until_snapshots({client, encoding}, count, acc \\ []) do
    if snapshots(acc) == count do
      {Enum.reverse(acc), {client, encoding}}
    else
      {:ok, {_kind, data}, client} = WsClient.recv(client, 2000)
      {:ok, message} = WsConn.decode({client, encoding}, data)
      messages_until_snapshots({client, encoding}, count, [message | acc])
    end
  end

  defp snapshots(messages) do
    Enum.reduce(messages, 0, fn
      %{type: :area, full: true}, n -> n + 1
      %{type: :areas, areas: parts}, n -> n + Enum.count(parts, &elem(&1, 1))
      _other, n -> n
    end)
  end

  # Binary frames decoded in a version of the protocol, until one passes `done?`.
  defp read_version(client, version, acc, done?) do
    {:ok, {:binary, data}, client} = WsClient.recv(client, 2000)
    {:ok, message} = Protocol.decode(data, :binary, version)
    acc = [message | acc]

    if done?.(message),
      do: {Enum.reverse(acc), client},
      else: read_version(client, version, acc, done?)
  end

  # Every message until an area shows entity `id` at `cell`, that one included.
  defp frames_until_shown({client, encoding}, id, cell, acc \\ []) do
    {:ok, {_kind, data}, client} = WsClient.recv(client, 2000)
    {:ok, message} = WsConn.decode({client, encoding}, data)
    acc = [message | acc]

    shown? =
      message.type == :area and
        Enum.any?(message.entities, fn {eid, x, y, _} -> eid == id and {x, y} == cell end)

    if shown?, do: Enum.reverse(acc), else: frames_until_shown({client, encoding}, id, cell, acc)
  end

  defp expect_where(conn, type, check, tries \\ 50) do
    {message, conn} = expect(conn, type)

    cond do
      check.(message) -> {message, conn}
      tries > 0 -> expect_where(conn, type, check, tries - 1)
      true -> flunk("no #{type} as expected arrived")
    end
  end

  # Reads until every `{:opened, tile}` came as a snapshot and every
  # `{:closed, tile}` as an `area_closed`.
  defp await_changes(conn, wanted) do
    if MapSet.size(wanted) == 0 do
      :ok
    else
      case expect(conn, [:area, :area_closed]) do
        {%{type: :area, full: true, area: zone}, conn} ->
          await_changes(conn, MapSet.delete(wanted, {:opened, zone}))

        {%{type: :area_closed, area: zone}, conn} ->
          await_changes(conn, MapSet.delete(wanted, {:closed, zone}))

        {_delta, conn} ->
          await_changes(conn, wanted)
      end
    end
  end

  # Steps in one direction until the tiles held change: those the viewport
  # comes to overlap open; those further out than the margin (two cells),
  # or in a zone the viewport left, close. Returns the tiles opened and
  # closed by the last step, with the snapshots and closings that came
  # while the walk waited for its outcomes (as `await_changes/2` names them).
  defp walk_until_tiles_change(conn, grid, held, direction, seq, seen \\ MapSet.new()) do
    push(conn, %{type: :move, seq: seq, dir: direction})

    case outcome_noting_areas(conn, seen) do
      {%{type: :outcome, result: :rate_limited}, conn, seen} ->
        # Faster than the connection's move rate: wait for the next slot and step again.
        receive do
        after
          60 -> walk_until_tiles_change(conn, grid, held, direction, seq + 1, seen)
        end

      {%{type: :outcome} = outcome, conn, seen} ->
        assert outcome.result == :ok
        cell = {outcome.x, outcome.y}
        wanted = MapSet.new(Grid.view_tiles(grid, cell, 8))
        zones = Grid.view_zones(grid, cell, 8)

        kept =
          for tile <- Grid.view_tiles(grid, cell, 10),
              Grid.tile_zone(grid, tile) in zones,
              into: MapSet.new(),
              do: tile

        opened = MapSet.difference(wanted, held)
        closed = MapSet.difference(held, kept)

        if MapSet.size(opened) == 0 and MapSet.size(closed) == 0,
          do:
            walk_until_tiles_change(
              conn,
              grid,
              MapSet.union(MapSet.intersection(held, kept), wanted),
              direction,
              seq + 1,
              seen
            ),
          else: {{%{opened: MapSet.to_list(opened), closed: MapSet.to_list(closed)}, seen}, conn}
    end
  end

  defp outcome_noting_areas(conn, seen) do
    case expect(conn, [:outcome, :area, :area_closed]) do
      {%{type: :outcome} = outcome, conn} ->
        {outcome, conn, seen}

      {%{type: :area, full: true, area: zone}, conn} ->
        outcome_noting_areas(conn, MapSet.put(seen, {:opened, zone}))

      {%{type: :area_closed, area: zone}, conn} ->
        outcome_noting_areas(conn, MapSet.put(seen, {:closed, zone}))

      {_delta, conn} ->
        outcome_noting_areas(conn, seen)
    end
  end

  # A client frame by hand (cowlib's builds no fragments): a zero mask key
  # leaves the payload as it is, and still marks the frame as masked.
  defp masked(fin, opcode, payload),
    do: <<fin::1, 0::3, opcode::4, 1::1, byte_size(payload)::7, 0::32, payload::binary>>

  # The next frame's raw bytes off a passive socket, for control frames;
  # the socket is active-once again after.
  defp raw_frame(client) do
    result = :gen_tcp.recv(client.socket, 0, 2000)
    :ok = :inet.setopts(client.socket, active: :once)
    result
  end

  defp collect(conn, 0, {outcomes, errors}), do: {outcomes, errors, conn}

  defp collect(conn, left, {outcomes, errors}) do
    case expect(conn, [:outcome, :error]) do
      {%{type: :outcome} = o, conn} -> collect(conn, left - 1, {[o | outcomes], errors})
      {%{type: :error} = e, conn} -> collect(conn, left - 1, {outcomes, [e | errors]})
    end
  end
end
