defmodule Grove.BusyServer do
  @moduledoc false
  # A stand-in HTTP server too busy for its first requests: it refuses
  # them `503 server_busy` with a `Retry-After` of a second, as a gateway
  # too busy to take them does, and answers the rest as the test says.
  # For the clients that must try again after it.

  @doc """
  Starts one, linked to the test and killed at its end, and returns its
  port. The first `refusals` requests (every one with `:always`) are
  refused; each one after is handed to `answer.(socket, head)` with the
  request's head read. A socket `answer` does not close stays open, held
  by the server, until the test ends.
  """
  @spec start(non_neg_integer() | :always, (:gen_tcp.socket(), binary() -> any())) ::
          :inet.port_number()
  def start(refusals, answer) do
    {:ok, listener} = :gen_tcp.listen(0, [:binary, active: false, reuseaddr: true])
    {:ok, port} = :inet.port(listener)
    server = spawn_link(fn -> serve(listener, refusals, answer) end)
    ExUnit.Callbacks.on_exit(fn -> Process.exit(server, :kill) end)
    port
  end

  defp serve(listener, refusals, answer) do
    {:ok, socket} = :gen_tcp.accept(listener)
    head = read_head(socket, <<>>)

    if refusals == :always or refusals > 0 do
      body = ~s({"error":"server_busy","message":"try again shortly"})

      :ok =
        :gen_tcp.send(socket, [
          "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\n",
          "content-length: #{byte_size(body)}\r\nconnection: close\r\n\r\n",
          body
        ])

      :gen_tcp.close(socket)
      serve(listener, if(refusals == :always, do: :always, else: refusals - 1), answer)
    else
      answer.(socket, head)
      serve(listener, 0, answer)
    end
  end

  defp read_head(socket, acc) do
    if String.contains?(acc, "\r\n\r\n") do
      acc
    else
      {:ok, data} = :gen_tcp.recv(socket, 0)
      read_head(socket, acc <> data)
    end
  end
end
