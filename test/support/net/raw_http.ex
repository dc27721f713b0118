defmodule Grove.RawHTTP do
  @moduledoc false
  # One HTTP request over a socket of its own, its answer read raw: for
  # the answers `:httpc` hides (it asks again on a 503 with Retry-After)
  # and for a WebSocket upgrade's, which `:httpc` does not speak.

  @doc """
  Asks for a WebSocket upgrade of `/ws`: the answer's status, headers
  (names in lower case) and body (JSON decoded, but a 101's left as it
  came). `wait` is how long the answer's first bytes may take.
  """
  def upgrade(port, wait \\ 1000) do
    request(
      port,
      [
        "GET /ws HTTP/1.1\r\nHost: grove\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
      ],
      wait
    )
  end

  @doc "POSTs `body` as JSON to `path`; the answer as `upgrade/2` gives it."
  def post(port, path, body, wait \\ 1000) do
    body = :jiffy.encode(body)

    request(
      port,
      [
        "POST #{path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n",
        "content-type: application/json\r\ncontent-length: #{byte_size(body)}\r\n\r\n",
        body
      ],
      wait
    )
  end

  defp request(port, request, wait) do
    {:ok, socket} = :gen_tcp.connect(~c"127.0.0.1", port, [:binary, active: false])
    :ok = :gen_tcp.send(socket, request)
    # The first bytes may be a while coming; the rest follow at once.
    {:ok, first} = :gen_tcp.recv(socket, 0, wait)
    response = read(socket, first)
    :gen_tcp.close(socket)
    parse(response)
  end

  # Until the server closes, or has nothing more to say.
  defp read(socket, acc) do
    case :gen_tcp.recv(socket, 0, 1000) do
      {:ok, data} -> read(socket, acc <> data)
      {:error, _closed_or_timeout} -> acc
    end
  end

  defp parse(response) do
    [head, body] = String.split(response, "\r\n\r\n", parts: 2)
    ["HTTP/1.1 " <> <<status::binary-size(3)>> <> _ | lines] = String.split(head, "\r\n")

    headers =
      for line <- lines, [name, value] = String.split(line, ":", parts: 2), into: %{} do
        {String.downcase(name), String.trim(value)}
      end

    status = String.to_integer(status)
    {status, headers, if(status == 101, do: body, else: :jiffy.decode(body, [:return_maps]))}
  end
end
