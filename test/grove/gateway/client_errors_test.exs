defmodule Grove.Gateway.ClientErrorsTest do
  # What ordinary clients do wrong: close or fall silent in the middle of a
  # request. Yaws runs one server per node, so these tests run alone.
  use ExUnit.Case, async: false

  alias Grove.Gateway

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
end
