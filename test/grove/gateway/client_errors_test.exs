defmodule Grove.Gateway.ClientErrorsTest do
  # What ordinary clients do wrong: close or fall silent in the middle of a
  # request. Yaws runs one server per node, so these tests run alone.
  use ExUnit.Case, async: false

  import ExUnit.CaptureLog
  import Grove.WorldCase, only: [eventually: 1]

  alias Grove.Gateway
  alias Grove.WsClient
  alias Grove.Protocol

  @moduletag :gateway

  setup_all do
    Grove.TestInstance.start!("client_errors",
      world: [width: 40, height: 40, zone_size: 20, tick: :manual],
      actors: [count: 0],
      # Short, so that a client that falls silent is let go soon.
      gateway: [port: 0, http_timeout: 300]
    )
  end

  defp open(port, data) do
    {:ok, socket} = :gen_tcp.connect(~c"127.0.0.1", port, [:binary, active: false])
    :ok = :gen_tcp.send(socket, data)
    socket
  end

  # What the server sends until it closes; `:silent` if it neither answers
  # nor closes well within the 15 s a connection waits by default.
  defp until_closed(socket, acc \\ "") do
    case :gen_tcp.recv(socket, 0, 5000) do
      {:ok, data} -> until_closed(socket, acc <> data)
      {:error, :closed} -> {:closed, acc}
      {:error, :timeout} -> :silent
    end
  end

  test "a client that falls silent in the middle of a head is let go after http_timeout", %{
    port: port
  } do
    socket = open(port, "GET /healthz HTTP/1.1\r\nHost: grove\r\n")
    assert {:closed, ""} = until_closed(socket)
    assert Gateway.config().http_timeout == 300
  end

  # Provokes one case, then waits until the gateway counted it: no error
  # may be logged meanwhile.
  defp counted_not_logged(provoke) do
    before = Gateway.stats().client_errors

    log =
      capture_log([level: :error], fn ->
        provoke.()
        eventually(fn -> assert Gateway.stats().client_errors == before + 1 end)
      end)

    assert log == ""
  end

  describe "a client that closes or falls silent mid-request is counted, not logged as an error" do
    test "closed in the middle of a head", %{port: port} do
      counted_not_logged(fn ->
        socket = open(port, "GET /healthz HTTP/1.1\r\nHost: grove\r\n")
        :gen_tcp.close(socket)
      end)
    end

    test "silent in the middle of a head", %{port: port} do
      counted_not_logged(fn ->
        socket = open(port, "GET /healthz HTTP/1.1\r\nHost: grove\r\n")
        assert {:closed, ""} = until_closed(socket)
      end)
    end

    test "closed in the middle of a body", %{port: port} do
      counted_not_logged(fn ->
        socket =
          open(
            port,
            "POST /api/login HTTP/1.1\r\nHost: grove\r\nContent-Length: 100\r\n\r\n{\"na"
          )

        :gen_tcp.close(socket)
      end)
    end

    test "silent in the middle of a body", %{port: port} do
      counted_not_logged(fn ->
        socket =
          open(
            port,
            "POST /api/login HTTP/1.1\r\nHost: grove\r\nContent-Length: 100\r\n\r\n{\"na"
          )

        assert {:closed, ""} = until_closed(socket)
      end)
    end

    test "reset before a word", %{port: port} do
      log =
        capture_log([level: :error], fn ->
          for _ <- 1..20 do
            {:ok, socket} = :gen_tcp.connect(~c"127.0.0.1", port, [:binary, active: false])
            :ok = :inet.setopts(socket, linger: {true, 0})
            :gen_tcp.close(socket)
          end

          # The server still answers.
          socket = open(port, "GET /healthz HTTP/1.1\r\nHost: grove\r\n\r\n")
          assert {:ok, "HTTP/1.1 200" <> _} = :gen_tcp.recv(socket, 0, 5000)
          :gen_tcp.close(socket)
        end)

      refute log =~ "[error]"
    end

    test "reset in the middle of a head", %{port: port} do
      counted_not_logged(fn ->
        socket = open(port, "GET /healthz HTTP/1.1\r\nHost: grove\r\n")
        :ok = :inet.setopts(socket, linger: {true, 0})
        :gen_tcp.close(socket)
      end)
    end
  end

  test "the filter knows Yaws's reports of clients gone, and nothing else" do
    stats = Grove.Gateway.Stats.new()

    report = fn format, args ->
      %{
        level: :error,
        meta: %{},
        msg: {:report, %{label: {:error_logger, :error_msg}, format: format, args: args}}
      }
    end

    gone = report.(~c"Unhandled reply from yaws:do_recv(): ~p~n", [{:error, :closed}])
    # Debug is off in the tests: dropped, and counted.
    assert Grove.Gateway.ClientErrors.filter(gone, stats) == :stop
    assert Grove.Gateway.Stats.get(stats, :client_errors) == 1

    for other <- [
          report.(~c"Unhandled reply from yaws:do_recv(): ~p~n", [{:error, :emsgsize}]),
          report.(~c"get_client_data: ~p~n", [{:ok, "x"}]),
          report.(~c"Yaws process died: ~p~n", [{:error, :closed}]),
          %{level: :error, meta: %{}, msg: {:string, "get_client_data: {error,closed}"}}
        ] do
      assert Grove.Gateway.ClientErrors.filter(other, stats) == :ignore
    end

    assert Grove.Gateway.Stats.get(stats, :client_errors) == 1
  end

  test "the filter is there while the gateway runs, and gone when it stops" do
    filters = fn -> Keyword.keys(:logger.get_primary_config().filters) end
    assert :grove_gateway_client_errors in filters.()

    :ok = Supervisor.terminate_child(Gateway, Grove.Gateway.ClientErrors)
    refute :grove_gateway_client_errors in filters.()

    {:ok, _} = Supervisor.restart_child(Gateway, Grove.Gateway.ClientErrors)
    assert :grove_gateway_client_errors in filters.()
  end

  describe "no error is logged when" do
    test "a plain GET asks for the WebSocket endpoint", %{port: port} do
      log =
        capture_log([level: :error], fn ->
          socket = open(port, "GET /ws HTTP/1.1\r\nHost: grove\r\n\r\n")
          assert {:ok, "HTTP/1.1 400 " <> _} = :gen_tcp.recv(socket, 0, 5000)
          :gen_tcp.close(socket)
        end)

      assert log == ""
    end

    test "a player resets the connection after joining, or mid-frame", %{port: port} do
      join =
        Protocol.encode(
          %{type: :join, protocol: Protocol.version(), view_radius: 8, name: "", token: ""},
          :json
        )

      log =
        capture_log([level: :error], fn ->
          for cut <- [:after_join, :mid_frame] do
            {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws")
            :ok = WsClient.send_frame(client, {:text, IO.iodata_to_binary(join)})
            {:ok, {:text, _welcome}, client} = WsClient.recv(client)
            playing = Gateway.stats().sessions

            if cut == :mid_frame do
              frame =
                IO.iodata_to_binary(:cow_ws.masked_frame({:text, ~s({"type":"ping","t":1})}, %{}))

              :ok = :gen_tcp.send(client.socket, binary_part(frame, 0, 5))
            end

            :ok = :inet.setopts(client.socket, linger: {true, 0})
            :gen_tcp.close(client.socket)
            eventually(fn -> assert Gateway.stats().sessions == playing - 1 end)
          end
        end)

      assert log == ""
    end
  end

  # Yaws's last accepted connection can outlive its server when a stop
  # ends it, and crash on the server's tables: a request the stop cut,
  # counted; the same crash while the server runs is an error.
  test "a request that a stop cuts is counted, not logged as an error; the same crash at any other time is" do
    died = fn -> :error_logger.error_msg(~c"Yaws process died: ~p~n", [{:badarg, []}]) end
    before = Gateway.stats().cut_by_stop
    assert capture_log([level: :error], died) =~ "Yaws process died"
    assert Gateway.stats().cut_by_stop == before

    draining = Gateway.config().draining
    :atomics.put(draining, 1, 1)

    try do
      assert capture_log([level: :error], died) == ""
      assert Gateway.stats().cut_by_stop == before + 1
    after
      :atomics.put(draining, 1, 0)
    end
  end
end
