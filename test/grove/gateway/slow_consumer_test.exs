defmodule Grove.Gateway.SlowConsumerTest do
  # Gateways of its own: Yaws allows one per node, so not async.
  use ExUnit.Case, async: false

  import Grove.WorldCase, only: [eventually: 2]
  import Grove.WsConn, only: [connect: 3, push: 2, expect: 2]

  alias Grove.{Gateway, Protocol}
  alias Grove.WsClient

  @moduletag :gateway

  # A small queue that fills at once; each test says how long the server
  # waits for a client to take its goodbye, and for its close frame.
  setup context do
    Grove.TestInstance.start!("slow",
      world: [
        width: 60,
        height: 60,
        zone_size: 20,
        tick: 50,
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]
      ],
      actors: [count: 0],
      gateway: [port: 0, view_backlog: 2048, slow_backlog: 4096, sndbuf: 2048] ++ context.closing
    )
  end

  # The goodbye waits behind what the client did not read; the server
  # waits for it to go before it closes (here it would not wait at all
  # for the client's close frame).
  @tag closing: [slow_seconds: 60, close_timeout: 1]
  test "a client that stops reading gets bye and a close frame behind what it had not read",
       %{port: port} do
    before = Gateway.stats()
    {conn, connection} = stop_reading(port)
    socket = :sys.get_state(connection).socket

    # What it was doing is looked at once, when the wait is over.
    try do
      eventually(fn -> assert Gateway.stats().slow_consumers > before.slow_consumers end, 1000)
    rescue
      ExUnit.AssertionError ->
        flunk("not found slow: #{inspect(doing(connection, socket, conn), limit: :infinity)}")
    end

    # While the goodbye waits for the client (or, were the connection to
    # give up on it, once it is gone), the client still sends: bytes nobody
    # reads make the socket's close a reset, which destroys the goodbye on
    # its way.
    eventually(
      fn -> assert not Process.alive?(connection) or goodbye_queued?(connection) end,
      1000
    )

    for t <- 1..50, do: push(conn, %{type: :ping, t: t})

    {bye, {client, _}} = expect(conn, :bye)
    assert bye.reason == :slow_consumer
    assert {:ok, {:close, 1008, _reason}, _client} = WsClient.recv(client, 5000)
    assert Gateway.stats().goodbyes_reset == before.goodbyes_reset
  end

  @tag closing: [slow_seconds: 1]
  test "a client that does not take its goodbye is reset, and counted", %{port: port} do
    before = Gateway.stats()
    {{client, _}, _connection} = stop_reading(port)
    eventually(fn -> assert Gateway.stats().goodbyes_reset > before.goodbyes_reset end, 1000)
    assert Gateway.stats().slow_consumers > before.slow_consumers
    assert {:error, _reset} = read_all(client)
  end

  # A player that joins, then sends pings and reads nothing: every answer
  # piles up, until the server gives up on it. With its connection. The
  # answers are some 20 KB (a `pong` is 10 or 11 bytes in version 5's
  # JSON), past what the socket's buffers and the queue hold.
  defp stop_reading(port) do
    conn = connect(port, :json, recbuf: 1024)

    push(conn, %{type: :join, protocol: Protocol.version(), view_radius: 8, name: "", token: ""})

    {%{type: :welcome}, conn} = expect(conn, :welcome)
    [connection] = Gateway.sessions()
    for t <- 1..2000, do: push(conn, %{type: :ping, t: t})
    {conn, connection}
  end

  # What the connection is doing, for a failure's message, and where the
  # client's pings are: not yet given to the kernel (the client's queue),
  # sent and not yet read (the client's bytes out against the server's
  # bytes in), or read and not yet parsed (the parser's buffer); whether
  # the server's socket still reads (`active`), and both ends as the
  # kernel sees them (queues, windows, timers, retransmissions).
  defp doing(connection, socket, {client, _encoding}) do
    counters = [:recv_oct, :recv_cnt, :send_oct, :send_cnt, :send_pend]

    [
      process:
        Process.info(connection, [:status, :message_queue_len, :current_stacktrace, :reductions]),
      queued: :erlang.port_info(socket, :queue_size),
      stats: Map.take(Gateway.stats(), [:writes_json, :bytes_out_json, :views_held, :frames_in]),
      server: [
        active: :inet.getopts(socket, [:active]),
        counters: :inet.getstat(socket, counters),
        unparsed: unparsed(connection)
      ],
      client: [
        queued: :erlang.port_info(client.socket, :queue_size),
        counters: :inet.getstat(client.socket, counters)
      ],
      kernel: kernel(client.socket)
    ]
  end

  defp unparsed(connection) do
    byte_size(:sys.get_state(connection).parser.buffer)
  catch
    :exit, _gone -> :gone
  end

  # `ss`'s lines for the client's connection, both ends, where it is installed.
  defp kernel(socket) do
    with {:ok, {_address, port}} <- :inet.sockname(socket),
         ss when ss != nil <- System.find_executable("ss") do
      {out, _status} =
        System.cmd(ss, ["-tnmie", "( sport = :#{port} or dport = :#{port} )"],
          stderr_to_stdout: true
        )

      out
    end
  end

  defp goodbye_queued?(connection), do: Map.get(:sys.get_state(connection), :goodbye_by) != nil

  defp read_all(client) do
    case WsClient.recv(client, 5000) do
      {:ok, _frame, client} -> read_all(client)
      other -> other
    end
  end
end
