defmodule Grove.Gateway.UpgradeTest do
  # How WebSocket upgrades are started in a join storm: under supervisors
  # side by side, so that one start held up does not hold up the others;
  # one that waited past the upgrade deadline gets a 503 the client may
  # retry, at once; and however many come at once, no more players than
  # `max_sessions` get in. Starts its own gateways: not async.
  use ExUnit.Case, async: false

  import Grove.WorldCase, only: [eventually: 1]

  alias Grove.Gateway
  alias Grove.Gateway.Seats
  alias Grove.RawHTTP
  alias Grove.WsClient

  @moduletag :gateway

  setup context do
    Grove.TestInstance.start!("upgrade",
      world: [width: 40, height: 40, zone_size: 20, tick: :manual],
      actors: [count: 0],
      gateway: Keyword.merge([port: 0], context[:gateway_opts] || [])
    )
  end

  @tag gateway_opts: [session_supervisors: 4]
  test "a connection's start held up under one supervisor holds up no upgrade under the others",
       %{port: port} do
    supervisors =
      for {_, pid, _, _} <- PartitionSupervisor.which_children(Gateway.config().sessions),
          do: pid

    assert length(supervisors) == 4
    [held | _] = supervisors
    :ok = :sys.suspend(held)

    # Each upgrade is served by a process of its own, which picks the
    # supervisor: of 16, those that picked the held one wait, the rest are
    # players (all 16 held back by one supervisor: 4^-16).
    me = self()

    upgrades =
      for _ <- 1..16 do
        Task.async(fn ->
          {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws", timeout: 60_000)
          # The socket outlives the task that opened it.
          :ok = :gen_tcp.controlling_process(client.socket, me)
          client
        end)
      end

    eventually(fn -> assert Gateway.stats().sessions >= 1 end)

    :ok = :sys.resume(held)
    clients = for task <- upgrades, do: Task.await(task, 60_000)
    eventually(fn -> assert Gateway.stats().sessions == 16 end)
    for client <- clients, do: WsClient.close(client)
  end

  @tag gateway_opts: [upgrade_deadline: 0]
  test "an upgrade past the upgrade deadline gets 503 server_busy with Retry-After, counted",
       %{port: port, instance: instance} do
    assert {503, headers, %{"error" => "server_busy", "message" => message}} =
             RawHTTP.upgrade(port)

    assert headers["retry-after"] == "1"
    assert message =~ "try again"
    assert Gateway.stats().sessions == 0
    # The seat it took is given back.
    assert Seats.taken(Gateway.config().seats) == 0

    metrics = IO.iodata_to_binary(Grove.Metrics.Prometheus.render(instance))
    assert metrics =~ ~s(grove_http_late_total{stage="upgrade"} 1)
  end

  # The deadline covers the wait for a supervisor too: an upgrade whose
  # connection was started only after it had passed is refused all the
  # same, and the connection started for it stopped.
  @tag gateway_opts: [session_supervisors: 1, upgrade_deadline: 300]
  test "an upgrade whose start waited past the upgrade deadline gets 503 server_busy",
       %{port: port, instance: instance} do
    supervisor = suspend_sessions!()

    upgrade = Task.async(fn -> RawHTTP.upgrade(port, 60_000) end)

    # The upgrade passed the first check and waits for the supervisor; its
    # request began before this instant, so its deadline is at most 300 ms
    # past it (and the clock's milliseconds round down).
    eventually(fn ->
      assert {:message_queue_len, 1} = Process.info(supervisor, :message_queue_len)
    end)

    wait_until(System.monotonic_time(:millisecond) + 301)
    :ok = :sys.resume(supervisor)

    assert {503, headers, %{"error" => "server_busy", "message" => message}} =
             Task.await(upgrade, 60_000)

    assert headers["retry-after"] == "1"
    assert message =~ "try again"
    assert Gateway.stats().sessions == 0
    eventually(fn -> assert %{active: 0} = DynamicSupervisor.count_children(supervisor) end)
    # The seat it took is given back, by the connection stopped for it.
    eventually(fn -> assert Seats.taken(Gateway.config().seats) == 0 end)

    metrics = IO.iodata_to_binary(Grove.Metrics.Prometheus.render(instance))
    assert metrics =~ ~s(grove_http_late_total{stage="upgrade"} 1)
  end

  # Every upgrade passes its check before any of their connections has
  # started: held at a suspended supervisor, they are all in flight at
  # once, and no more of them than there is room for may go on.
  # A slow machine may take seconds to queue them all: a deadline that
  # cannot pass keeps every seated upgrade from turning late.
  @tag gateway_opts: [session_supervisors: 1, max_sessions: 4, upgrade_deadline: 60_000]
  test "upgrades at once at the session limit never take more players than it allows",
       %{port: port, instance: instance} do
    supervisor = suspend_sessions!()

    me = self()

    upgrades =
      for _ <- 1..24 do
        Task.async(fn ->
          case WsClient.connect("127.0.0.1", port, "/ws", timeout: 60_000) do
            {:ok, client} ->
              :ok = :gen_tcp.controlling_process(client.socket, me)
              {:ok, client}

            refused ->
              refused
          end
        end)
      end

    # Each upgrade either waits for the supervisor or was refused.
    eventually(fn ->
      {:message_queue_len, waiting} = Process.info(supervisor, :message_queue_len)
      assert waiting + Gateway.stats().refused == 24
    end)

    :ok = :sys.resume(supervisor)
    results = for task <- upgrades, do: Task.await(task, 60_000)
    clients = for {:ok, client} <- results, do: client
    assert length(clients) == 4
    assert Enum.count(results, &(&1 == {:error, {:http_status, 503}})) == 20
    eventually(fn -> assert Gateway.stats().sessions == 4 end)
    assert Seats.taken(Gateway.config().seats) == 4
    # What the limit is checked against, for an operator to see.
    metrics = IO.iodata_to_binary(Grove.Metrics.Prometheus.render(instance))
    assert metrics =~ "grove_sessions_seats 4\n"

    # A player that leaves gives its seat back: the next upgrade takes it.
    [first | rest] = clients
    WsClient.close(first)
    eventually(fn -> assert Seats.taken(Gateway.config().seats) == 3 end)
    assert {:ok, next} = WsClient.connect("127.0.0.1", port, "/ws", timeout: 60_000)
    assert {:error, {:http_status, 503}} = WsClient.connect("127.0.0.1", port, "/ws")
    for client <- [next | rest], do: WsClient.close(client)
    eventually(fn -> assert Seats.taken(Gateway.config().seats) == 0 end)
  end

  # A connection can end without its `terminate/2`: killed (as the chaos
  # lab's `:session` fault does), or by an exit signal. Its seat comes
  # back all the same, or after `max_sessions` such ends nobody gets in,
  # and it is no longer counted in the sessions.
  @tag gateway_opts: [max_sessions: 1]
  test "a connection killed gives its seat back and leaves the sessions", %{
    port: port,
    instance: instance
  } do
    assert {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws", timeout: 60_000)
    eventually(fn -> assert [_] = Gateway.sessions() end)
    eventually(fn -> assert Gateway.stats().sessions == 1 end)
    [connection] = Gateway.sessions()
    Process.exit(connection, :kill)
    :gen_tcp.close(client.socket)

    eventually(fn -> assert Seats.taken(Gateway.config().seats) == 0 end)
    eventually(fn -> assert Gateway.stats().sessions == 0 end)
    metrics = IO.iodata_to_binary(Grove.Metrics.Prometheus.render(instance))
    assert metrics =~ "grove_sessions 0\n"

    assert {:ok, next} = WsClient.connect("127.0.0.1", port, "/ws", timeout: 60_000)
    eventually(fn -> assert Gateway.stats().sessions == 1 end)
    WsClient.close(next)
    eventually(fn -> assert Gateway.stats().sessions == 0 end)
  end

  # An upgrade's process can be killed too, after it took its seat and
  # before it handed it to a connection (here while it waits for its
  # connection to start): the seat comes back all the same.
  @tag gateway_opts: [session_supervisors: 1, max_sessions: 1, upgrade_deadline: 60_000]
  test "an upgrade killed before it handed its seat over gives it back", %{port: port} do
    supervisor = suspend_sessions!()
    {:ok, socket} = :gen_tcp.connect(~c"127.0.0.1", port, [:binary, active: false])

    :ok =
      :gen_tcp.send(socket, [
        "GET /ws HTTP/1.1\r\nHost: grove\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
      ])

    eventually(fn ->
      assert {:message_queue_len, 1} = Process.info(supervisor, :message_queue_len)
    end)

    assert Seats.taken(Gateway.config().seats) == 1
    {:messages, [{:"$gen_call", {upgrading, _tag}, _start}]} = Process.info(supervisor, :messages)
    Process.exit(upgrading, :kill)
    eventually(fn -> assert Seats.taken(Gateway.config().seats) == 0 end)
    # The socket went with the process that owned it.
    assert {:error, _closed} = :gen_tcp.recv(socket, 0, 60_000)
    :gen_tcp.close(socket)

    # The start it asked for is dropped with the supervisor, which restarts.
    Process.exit(supervisor, :kill)

    connect_after_restart!(port, supervisor)
  end

  # A start whose supervisor is gone meanwhile (its partition restarting)
  # exits: the upgrade gets a 503 it may retry, and its seat comes back.
  @tag gateway_opts: [session_supervisors: 1, max_sessions: 1, upgrade_deadline: 60_000]
  test "an upgrade whose supervisor died under its start gets 503 and gives its seat back",
       %{port: port} do
    [{_, supervisor, _, _}] = PartitionSupervisor.which_children(Gateway.config().sessions)
    :ok = :sys.suspend(supervisor)
    upgrade = Task.async(fn -> RawHTTP.upgrade(port, 60_000) end)

    eventually(fn ->
      assert {:message_queue_len, 1} = Process.info(supervisor, :message_queue_len)
    end)

    Process.exit(supervisor, :kill)

    assert {503, headers, %{"error" => "server_busy"}} = Task.await(upgrade, 60_000)
    assert headers["retry-after"] == "1"
    assert Seats.taken(Gateway.config().seats) == 0

    # Its partition restarted, the seat is there for the next player.
    connect_after_restart!(port, supervisor)
  end

  # An upgrade that will not hand its connection the socket (late, or its
  # client gone) does not wait for it to stop: it tells it, and goes on.
  test "a connection abandoned before its socket stops, told so, with :shutdown" do
    sessions = {:via, PartitionSupervisor, {Gateway.config().sessions, self()}}
    {:ok, socket} = :gen_tcp.listen(0, [])
    on_exit(fn -> :gen_tcp.close(socket) end)

    {:ok, connection} =
      DynamicSupervisor.start_child(sessions, {Gateway.Connection, {:json, socket}})

    ref = Process.monitor(connection)
    send(connection, :grove_abandon)
    assert_receive {:DOWN, ^ref, :process, ^connection, reason}, 60_000
    assert reason == :shutdown
  end

  test "an upgrade within the upgrade deadline is started", %{port: port} do
    assert {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws")
    eventually(fn -> assert Gateway.stats().sessions == 1 end)
    WsClient.close(client)
  end

  # A join storm's upgrades wait for a server busy starting players: their
  # wait for the handler is a stage of its own, so that it neither hides
  # in the API's waits nor they in it.
  test "an upgrade's wait for its handler is counted in the upgrade stage, the API's in handler",
       %{port: port, instance: instance} do
    assert {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws")
    # This server has no accounts: a 404, from the API's handler all the same.
    assert {404, _headers, _body} = RawHTTP.post(port, "/api/device_login", %{}, 60_000)

    metrics = IO.iodata_to_binary(Grove.Metrics.Prometheus.render(instance))
    assert metrics =~ ~s(grove_request_wait_seconds_count{stage="upgrade"} 1\n)
    assert metrics =~ ~s(grove_request_wait_seconds_count{stage="handler"} 1\n)
    WsClient.close(client)
  end

  # The sessions' partition, its supervisor killed, restarted with another;
  # then a player connects.
  defp connect_after_restart!(port, supervisor) do
    eventually(fn ->
      assert [{_, pid, _, _}] = PartitionSupervisor.which_children(Gateway.config().sessions)
      assert is_pid(pid) and pid != supervisor
    end)

    assert {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws", timeout: 60_000)
    WsClient.close(client)
  end

  # The instant, in monotonic milliseconds, has passed.
  defp wait_until(instant) do
    receive do
    after
      max(instant - System.monotonic_time(:millisecond), 0) -> :ok
    end
  end

  # The gateway's one sessions' supervisor, suspended: upgrades wait at it
  # for their connections. A failed test leaves none suspended (resuming
  # a running one exits: caught).
  defp suspend_sessions! do
    [{_, supervisor, _, _}] = PartitionSupervisor.which_children(Gateway.config().sessions)
    :ok = :sys.suspend(supervisor)

    on_exit(fn ->
      try do
        :sys.resume(supervisor)
      catch
        _, _ -> :ok
      end
    end)

    supervisor
  end
end
