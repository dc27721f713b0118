defmodule Grove.Gateway.DrainTest do
  # Starts and stops its own gateway: Yaws allows one per node, so not async.
  use ExUnit.Case, async: false

  alias Grove.Protocol
  alias Grove.WsClient

  @moduletag :gateway

  test "shutting down tells every client goodbye and closes cleanly" do
    %{sup: sup, port: port} =
      Grove.TestInstance.start!("drain",
        world: [width: 40, height: 40, zone_size: 20, tick: 50],
        actors: [count: 20]
      )

    clients =
      for encoding <- [:json, :binary, :json] do
        {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws?encoding=#{encoding}")
        kind = if encoding == :json, do: :text, else: :binary

        join =
          Protocol.encode(
            %{type: :join, protocol: Protocol.version(), view_radius: 8, name: "", token: ""},
            encoding
          )

        :ok = WsClient.send_frame(client, {kind, IO.iodata_to_binary(join)})
        {:ok, {^kind, welcome}, client} = WsClient.recv(client)
        assert {:ok, %{type: :welcome}} = Protocol.decode(welcome, encoding)
        {client, encoding}
      end

    :ok = Supervisor.stop(sup, :normal, 10_000)

    for {client, encoding} <- clients do
      assert {:bye, 1001} == read_until_close(client, encoding, nil)
    end
  end

  test "the supervisor waits as long as the drain may take" do
    Grove.TestInstance.start!("drain",
      world: [width: 40, height: 40, zone_size: 20, tick: :manual],
      gateway: [port: 0, drain_timeout: 30_000]
    )

    {:ok, spec} = :supervisor.get_childspec(Grove.Gateway, Grove.Gateway.Drainer)
    assert spec.shutdown > 30_000
  end

  # Every frame up to the close must decode: nothing half-written.
  defp read_until_close(client, encoding, bye) do
    case WsClient.recv(client, 5000) do
      {:ok, {:close, code, _reason}, _client} ->
        {bye, code}

      {:ok, {_kind, data}, client} ->
        assert {:ok, message} = Protocol.decode(data, encoding)

        case message do
          %{type: :bye, reason: :shutdown} -> read_until_close(client, encoding, :bye)
          _ -> read_until_close(client, encoding, bye)
        end

      {:error, reason} ->
        flunk("the connection ended without a close frame: #{inspect(reason)}")
    end
  end
end
