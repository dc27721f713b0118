defmodule Grove.Gateway.HealthTest do
  # Starts and stops its own gateways: Yaws allows one per node, so not async.
  use ExUnit.Case, async: false

  import Grove.WorldCase, only: [eventually: 1]

  alias Grove.WsClient
  alias Grove.Protocol

  @moduletag :gateway

  setup do
    Grove.TestInstance.start!("health",
      sqlite: true,
      world: [width: 40, height: 40, zone_size: 20, tick: :manual],
      actors: [count: 0],
      gateway: [port: 0, drain_timeout: 60_000]
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
    {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws")

    join =
      Protocol.encode(%{type: :join, protocol: 2, view_radius: 8, name: "", token: ""}, :json)

    :ok = WsClient.send_frame(client, {:text, IO.iodata_to_binary(join)})
    {:ok, {:text, _welcome}, client} = WsClient.recv(client)

    # Held still, the session cannot close, so the drain waits for it.
    [session] = Grove.Gateway.sessions()
    :ok = :sys.suspend(session)
    stopping = Task.async(fn -> Supervisor.stop(sup, :normal, 70_000) end)

    eventually(fn ->
      assert {503, %{"ready" => false, "checks" => %{"gateway" => "draining"}}} =
               get(port, "/readyz")
    end)

    # Nothing was said to the player before that.
    assert {:error, :timeout} = WsClient.recv(client, 0)

    :ok = :sys.resume(session)
    assert :ok = Task.await(stopping, 70_000)
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
