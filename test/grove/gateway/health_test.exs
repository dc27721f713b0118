defmodule Grove.Gateway.HealthTest do
  # Starts and stops its own gateways: Yaws allows one per node, so not async.
  use ExUnit.Case, async: false

  import Grove.WorldCase, only: [eventually: 1]
  import Grove.WsConn, only: [connect: 1, push: 2, expect: 2]

  alias Grove.Gateway.Drainer
  alias Grove.RawHTTP
  alias Grove.WsClient
  alias Grove.Protocol

  @moduletag :gateway

  setup context do
    Grove.TestInstance.start!("health",
      sqlite: true,
      world: [width: 40, height: 40, zone_size: 20, tick: :manual],
      actors: [count: 0],
      accounts: [guests: true],
      gateway: Keyword.merge([port: 0, drain_timeout: 60_000], context[:gateway_opts] || [])
    )
  end

  test "/healthz answers while the node runs; other methods are refused", %{port: port} do
    assert {200, %{"status" => "ok"}} = get(port, "/healthz")
    assert {405, %{"error" => "method_not_allowed"}} = request(port, :post, "/healthz")
  end

  test "/readyz says ready, and which check fails when the store is gone", %{
    port: port,
    sup: sup,
    instance: instance
  } do
    assert {200, %{"ready" => true, "checks" => checks}} = get(port, "/readyz")
    assert checks == %{"world" => "ok", "store" => "ok", "gateway" => "ok"}

    store = :"#{instance}.Store"
    :ok = Supervisor.terminate_child(sup, store)

    assert {503, %{"ready" => false, "checks" => %{"store" => "unreachable", "world" => "ok"}}} =
             get(port, "/readyz")

    {:ok, _} = Supervisor.restart_child(sup, store)
    eventually(fn -> assert {200, %{"ready" => true}} = get(port, "/readyz") end)
  end

  test "a drain turns /readyz to 503 before any session is told goodbye", %{
    port: port,
    sup: sup
  } do
    conn = connect(port)

    push(conn, %{type: :join, protocol: Protocol.version(), view_radius: 8, name: "", token: ""})

    {%{type: :welcome}, conn} = expect(conn, :welcome)

    # Held still, the session cannot close, so the drain waits for it.
    [session] = Grove.Gateway.sessions()
    :ok = :sys.suspend(session)
    stopping = Task.async(fn -> Supervisor.stop(sup, :normal, 70_000) end)

    eventually(fn ->
      assert {503, %{"ready" => false, "checks" => %{"gateway" => "draining"}}} =
               get(port, "/readyz")
    end)

    # Nothing was said to the player before that.
    refute_bye(conn)

    :ok = :sys.resume(session)
    assert :ok = Task.await(stopping, 70_000)
  end

  # Stats are posted every two seconds: those posted before a player
  # joined said "0 players" to the one player there was.
  test "a player is counted in the first stats it is sent", %{port: port} do
    conn = connect(port)

    push(conn, %{type: :join, protocol: Protocol.version(), view_radius: 8, name: "", token: ""})

    {%{type: :welcome}, conn} = expect(conn, :welcome)
    assert {%{type: :stats, players: 1}, _conn} = expect(conn, :stats)
  end

  # The moment before the drain, as long as a test needs: the drainer is
  # stopped by hand to end it.
  @tag capture_log: true
  @tag gateway_opts: [unready_ms: 600_000]
  test "a stop answers /readyz 503 for a while first: its players play on, new ones are refused",
       %{port: port, sup: sup} do
    conn = connect(port)

    push(conn, %{type: :join, protocol: Protocol.version(), view_radius: 8, name: "", token: ""})

    {%{type: :welcome}, conn} = expect(conn, :welcome)
    {_, drainer, _, _} = List.keyfind(Supervisor.which_children(Grove.Gateway), Drainer, 0)
    stopping = Task.async(fn -> Supervisor.stop(sup, :normal, 70_000) end)

    eventually(fn ->
      assert {503, %{"ready" => false, "checks" => %{"gateway" => "draining"}}} =
               get(port, "/readyz")
    end)

    assert {503, _headers, %{"error" => "server_stopping"}} = RawHTTP.upgrade(port)
    push(conn, %{type: :move, seq: 1, dir: :e})
    {%{type: :outcome, seq: 1}, conn} = expect(conn, :outcome)
    refute_bye(conn)

    Process.exit(drainer, :kill)
    assert :ok = Task.await(stopping, 70_000)
  end

  # What the connection sent so far says no goodbye.
  defp refute_bye({client, encoding}) do
    case WsClient.recv(client, 0) do
      {:ok, {:text, data}, client} ->
        assert {:ok, message} = Protocol.decode(data, encoding)
        refute message.type == :bye
        refute_bye({client, encoding})

      {:error, :timeout} ->
        :ok
    end
  end

  defp get(port, path), do: request(port, :get, path)

  defp request(port, method, path) do
    url = ~c"http://127.0.0.1:#{port}#{path}"

    request = if method == :post, do: {url, [], ~c"application/json", "{}"}, else: {url, []}

    {:ok, {{_, status, _}, _headers, body}} =
      :httpc.request(method, request, [], body_format: :binary)

    {status, :jiffy.decode(body, [:return_maps])}
  end
end
