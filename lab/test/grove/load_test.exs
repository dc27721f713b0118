defmodule Grove.LoadTest do
  # Runs the load lab's bots and virtual users against a real gateway; Yaws
  # allows one per node, so not async.
  use ExUnit.Case, async: false

  doctest Grove.Load.Report

  alias Grove.BusyServer
  alias Grove.Load.{HttpRun, Report, WsRun}

  @moduletag :gateway

  setup_all do
    Grove.TestInstance.start!("load",
      sqlite: true,
      world: [width: 80, height: 80, zone_size: 20, tick: 50, game: Grove.Games.Orchard],
      actors: [count: 200],
      accounts: [guests: true, password_cost: 1000, ip_rate: 10_000, ip_burst: 10_000],
      # These tests count the flows the load runs, not the server's
      # deadlines: on a machine busy with other suites, a login past the
      # default second is answered 503 and tried again a second or two
      # later, past a run's duration (tested apart, against a server that
      # refuses on purpose).
      gateway: [port: 0, request_deadline: 60_000]
    )
  end

  test "bots play over WebSocket and find nothing wrong", %{port: port} do
    for encoding <- [:json, :binary] do
      report =
        WsRun.run(
          url: "ws://127.0.0.1:#{port}/ws",
          players: 20,
          ramp: 40,
          duration: 2,
          every: 1,
          move_every: 200,
          encoding: encoding,
          out: fn _line -> :ok end
        )

      assert report.connected == 20
      assert report.errors == 0
      assert report.correctness_failures.total == 0, inspect(report.correctness_failures)
      assert report.disconnects.total == 0
      assert report.moves_per_s > 0 and report.views_per_s > 0
      assert report.p99_ms != nil
      assert [_ | _] = report.windows
    end
  end

  test "bots walk straight, each along a heading of its own, and the report counts what refused them",
       %{port: port} do
    report =
      WsRun.run(
        url: "ws://127.0.0.1:#{port}/ws",
        players: 20,
        ramp: 40,
        duration: 2,
        every: 1,
        move_every: 100,
        walk: :straight,
        encoding: :binary,
        out: fn _line -> :ok end
      )

    assert report.errors == 0
    assert report.correctness_failures.total == 0, inspect(report.correctness_failures)
    assert report.moves > 0 and report.p99_ms != nil
    assert Enum.sum(Map.values(report.refused)) == report.moves_refused
    # The server's zones come with every window, and each window's slowest move.
    assert [%{zones_awake: awake, max_ms: max} | _] = report.windows
    assert is_integer(awake) and awake > 0
    assert is_number(max)
  end

  test "bots act as well as move: every action answered, its round trip measured apart", %{
    port: port
  } do
    report =
      WsRun.run(
        url: "ws://127.0.0.1:#{port}/ws",
        players: 20,
        ramp: 40,
        duration: 2,
        every: 1,
        move_every: 100,
        act_every: 2,
        encoding: :binary,
        out: fn _line -> :ok end
      )

    assert report.errors == 0
    assert report.correctness_failures.total == 0, inspect(report.correctness_failures)
    assert report.acts_per_s > 0 and report.act_p99_ms != nil
    assert report.moves_per_s > 0
  end

  test "bots chat as well as move: every line answered, its round trip measured apart", %{
    port: port
  } do
    for encoding <- [:json, :binary] do
      report =
        WsRun.run(
          url: "ws://127.0.0.1:#{port}/ws",
          players: 20,
          ramp: 40,
          duration: 3,
          every: 1,
          move_every: 200,
          say_every: 1000,
          encoding: encoding,
          out: fn _line -> :ok end
        )

      assert report.errors == 0
      assert report.correctness_failures.total == 0, inspect(report.correctness_failures)
      assert report.says_per_s > 0 and report.say_p99_ms != nil
      # A line comes back to its speaker too, in its area's next delta.
      assert report.heard_per_s > 0
      assert report.says_refused == 0
    end
  end

  # Yaws runs one server per node: the second server is on a peer node, with
  # the same world (not a cluster: each node's players play on their own).
  @tag :cluster
  @tag timeout: 120_000
  test "bots spread over two servers' URLs, and the report says how each did", %{port: port} do
    home = Grove.ClusterCase.distribute!()
    {_peer, other} = Grove.ClusterCase.start_peer!(home, "load")

    Grove.ClusterCase.start_instance!(other,
      name: Grove.LoadPeerT,
      world: [width: 80, height: 80, zone_size: 20, tick: 50, game: Grove.Games.Orchard],
      actors: [count: 0],
      gateway: [port: 0],
      status_interval: false
    )

    other_port = :erpc.call(other, Grove.Gateway, :port, [])
    urls = ["http://127.0.0.1:#{port}", "ws://127.0.0.1:#{other_port}/ws"]

    report =
      WsRun.run(
        url: urls,
        players: 9,
        ramp: 20,
        duration: 2,
        every: 1,
        move_every: 200,
        out: fn _line -> :ok end
      )

    assert report.connected == 9
    assert report.errors == 0
    assert report.correctness_failures.total == 0, inspect(report.correctness_failures)
    assert [first, second] = report.by_url
    assert {first.url, second.url} == List.to_tuple(urls)
    # Players 0, 2, 4, 6, 8 to the first URL; 1, 3, 5, 7 to the second.
    assert {first.connected, second.connected} == {5, 4}
    assert {first.players, second.players} == {5, 4}
    assert first.moves_per_s > 0 and second.moves_per_s > 0
    assert first.errors == 0 and second.errors == 0

    # The second server's world, with no actors, had its four players join.
    assert :erpc.call(other, Grove.World, :stats, [Grove.world(Grove.LoadPeerT)]).joins == 4
  end

  test "the HTTP flow runs, and every acknowledged account survives for verify", %{
    port: port,
    dir: dir
  } do
    record = Path.join(dir, "acked.txt")

    report =
      HttpRun.run(
        url: "http://127.0.0.1:#{port}",
        users: 12,
        ramp: 50,
        reads: 3,
        pause_ms: 20,
        every: 1,
        record: record,
        out: fn _ -> :ok end
      )

    assert report.users == 12
    assert report.requests == 12 * 4
    assert report.success_rate == 100.0
    assert report.endpoints.me.requests == 36

    assert %{acknowledged: 12, found: 12, missing: 0} =
             HttpRun.verify(url: "http://127.0.0.1:#{port}", record: record, out: fn _ -> :ok end)
  end

  test "a login refused 503 is tried again after its Retry-After, with jitter" do
    # A server that refuses the first login and takes the second.
    port =
      BusyServer.start(1, fn socket, _head ->
        body = ~s({"token":"t","account":{"id":1},"created":true})

        :ok =
          :gen_tcp.send(socket, [
            "HTTP/1.1 201 Created\r\ncontent-length: #{byte_size(body)}\r\n",
            "connection: close\r\n\r\n",
            body
          ])

        :gen_tcp.close(socket)
      end)

    report =
      HttpRun.run(
        url: "http://127.0.0.1:#{port}",
        users: 1,
        ramp: 10,
        reads: 0,
        every: 1,
        out: fn _ -> :ok end
      )

    assert report.errors == %{"device_login 503" => 1}
    assert report.endpoints.device_login.requests == 2
    assert %{logins_retried: 1, users_without_login: 0} = report

    for _ <- 1..100 do
      assert HttpRun.backoff_ms([{"retry-after", "2"}]) in 2001..4000
      assert HttpRun.backoff_ms([{"retry-after", "soon"}]) in 1001..2000
      assert HttpRun.backoff_ms([]) in 1001..2000
    end
  end

  test "with a duration, users run the flow again as new devices until it ends", %{
    port: port,
    dir: dir
  } do
    record = Path.join(dir, "repeated.txt")

    clock =
      clock_until(fn ->
        case File.read(record) do
          {:ok, text} -> length(:binary.matches(text, "\n")) >= 6
          {:error, :enoent} -> false
        end
      end)

    report =
      HttpRun.run(
        url: "http://127.0.0.1:#{port}",
        users: 3,
        ramp: 1000,
        reads: 1,
        pause_ms: 10,
        duration: 60,
        every: 1,
        record: record,
        clock: clock,
        out: fn _ -> :ok end
      )

    logins = report.endpoints.device_login.requests
    assert logins >= 6
    assert report.endpoints.me.requests == logins
    assert report.success_rate == 100.0
    acknowledged = record |> File.read!() |> String.split("\n", trim: true)
    assert length(acknowledged) == logins
    assert length(Enum.uniq(acknowledged)) == logins
  end

  test "users connect from loopback addresses in turn and keep one connection from flow to flow" do
    {:ok, listener} = :gen_tcp.listen(0, [:binary, active: false, reuseaddr: true])
    {:ok, port} = :inet.port(listener)
    test = self()
    logins = :counters.new(1, [])
    server = spawn_link(fn -> kept_alive_server(listener, test, logins) end)
    on_exit(fn -> Process.exit(server, :kill) end)

    report =
      HttpRun.run(
        url: "http://127.0.0.1:#{port}",
        users: 3,
        ramp: 1000,
        reads: 1,
        pause_ms: 10,
        duration: 60,
        sources: 3,
        every: 1,
        clock: clock_until(fn -> :counters.get(logins, 1) >= 6 end),
        out: fn _ -> :ok end
      )

    assert report.success_rate == 100.0
    assert report.endpoints.device_login.requests >= 6

    # Each user's flows, however many, came over the one connection it opened.
    assert Enum.sort(accepted_from([])) == [{127, 0, 0, 1}, {127, 0, 0, 2}, {127, 0, 0, 3}]
  end

  defp accepted_from(acc) do
    receive do
      {:accepted, address} -> accepted_from([address | acc])
    after
      0 -> acc
    end
  end

  # A run's clock that moves a millisecond a reading until `done?` holds,
  # then past any run's end: a run with a duration repeats its flows until
  # they did what the test needs, however slow the machine (a second of the
  # wall clock was once shorter than one flow under a loaded suite).
  defp clock_until(done?) do
    readings = :counters.new(1, [])

    fn ->
      :counters.add(readings, 1, 1)
      if done?.(), do: 100_000_000, else: :counters.get(readings, 1)
    end
  end

  # Answers every request on a connection until its client closes it,
  # counts the logins, and tells the test where each connection came from.
  defp kept_alive_server(listener, test, logins) do
    {:ok, socket} = :gen_tcp.accept(listener)
    {:ok, {address, _port}} = :inet.peername(socket)
    send(test, {:accepted, address})
    handler = spawn_link(fn -> answer(socket, logins) end)
    :ok = :gen_tcp.controlling_process(socket, handler)
    kept_alive_server(listener, test, logins)
  end

  defp answer(socket, logins) do
    case :gen_tcp.recv(socket, 0) do
      {:ok, "POST" <> _} ->
        :counters.add(logins, 1, 1)
        reply(socket, logins, "201 Created", ~s({"token":"t","account":{"id":1},"created":true}))

      {:ok, _get} ->
        reply(socket, logins, "200 OK", ~s({"id":1}))

      {:error, _closed} ->
        :ok
    end
  end

  defp reply(socket, logins, status, body) do
    _ =
      :gen_tcp.send(socket, [
        "HTTP/1.1 #{status}\r\ncontent-length: #{byte_size(body)}\r\n\r\n",
        body
      ])

    answer(socket, logins)
  end

  test "a report renders as Markdown with an SVG chart", %{dir: dir} do
    report = %{
      players: 3,
      p99_ms: 1.5,
      windows: [%{t: 1, moves_per_s: 10, p99_ms: 2.0}, %{t: 2, moves_per_s: 12, p99_ms: nil}]
    }

    path = Path.join(dir, "reports/run.md")
    markdown = Report.write(path, "A run", report, ["mix", "grove.load", "ws"])
    assert markdown =~ "# A run"
    assert markdown =~ "Command: `mix grove.load ws`"
    assert markdown =~ "| p99_ms | 1.50 |"
    svg = File.read!(Path.join(dir, "reports/run.svg"))
    assert svg =~ "<svg" and svg =~ "<polyline"
    refute markdown =~ "By URL"

    # A run on several URLs has a table of them (nothing is reached at them).
    port = Grove.Ports.free()

    url = %{
      url: "http://a:#{port}",
      players: 2,
      connected: 2,
      connect_failures: 0,
      connect_pending: 1,
      connect_retries: 3,
      moves_per_s: 4,
      p50_ms: 1.25,
      p99_ms: nil,
      errors: 0,
      correctness_failures: 0
    }

    markdown =
      Report.markdown(
        "A run",
        Map.put(report, :by_url, [url, %{url | url: "http://b:#{port}"}]),
        []
      )

    assert markdown =~ "## By URL"
    # Its players still waiting to try again after a Retry-After, and its tries again.
    assert markdown =~ "| http://a:#{port} | 2 | 2 | 0 | 1 | 3 | 4 | 1.25 | - | 0 | 0 |"
    assert markdown =~ "| http://b:#{port} |"
  end
end
