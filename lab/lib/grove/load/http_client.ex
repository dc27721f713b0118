defmodule Grove.Load.HttpClient do
  @moduledoc """
  A small HTTP/1.1 client on `:gen_tcp` with a kept-alive connection, for the
  load lab: each virtual user holds one connection, as a browser would,
  without any pool or process between it and the socket.

      {:ok, conn} = HttpClient.connect("127.0.0.1", 4000)
      {:ok, 200, _headers, body, conn} = HttpClient.request(conn, "GET", "/api/me", [{"authorization", "Bearer ..."}])

  Responses must carry a `Content-Length` or be chunked. A connection the
  server closed is reopened once, transparently, for the next request.
  """

  defstruct [:host, :port, :socket, :source, buffer: <<>>]

  @type t :: %__MODULE__{}

  @doc """
  Opens a connection. Options: `:timeout` (default 5000 ms) and `:source`,
  the local address to connect from (`nil`, the default, lets the system
  choose): a load from one machine that spreads its connections over
  several loopback addresses (`{127, 0, 0, n}`) has that many times the
  ports to connect from.
  """
  @spec connect(String.t(), :inet.port_number(), keyword()) :: {:ok, t()} | {:error, term()}
  def connect(host, port, opts \\ []) do
    opts = Keyword.validate!(opts, timeout: 5000, source: nil)
    conn = %__MODULE__{host: host, port: port, source: opts[:source]}
    reopen(conn, opts[:timeout])
  end

  defp reopen(%__MODULE__{} = conn, timeout) do
    if conn.socket, do: :gen_tcp.close(conn.socket)

    case :gen_tcp.connect(
           String.to_charlist(conn.host),
           conn.port,
           [:binary, active: false, packet: :raw, nodelay: true] ++
             if(conn.source, do: [ip: conn.source], else: []),
           timeout
         ) do
      {:ok, socket} -> {:ok, %{conn | socket: socket, buffer: <<>>}}
      {:error, reason} -> {:error, reason}
    end
  end

  @doc "Sends a request and reads its response."
  @spec request(
          t(),
          String.t(),
          String.t(),
          [{String.t(), String.t()}],
          iodata() | nil,
          timeout()
        ) ::
          {:ok, pos_integer(), [{String.t(), String.t()}], binary(), t()} | {:error, term(), t()}
  def request(conn, method, path, headers \\ [], body \\ nil, timeout \\ 10_000) do
    case send_request(conn, method, path, headers, body) do
      :ok ->
        case read_response(conn, timeout) do
          {:error, :closed, conn} -> retry(conn, method, path, headers, body, timeout)
          result -> result
        end

      {:error, _} ->
        retry(conn, method, path, headers, body, timeout)
    end
  end

  # The server may close a kept-alive connection between requests; one new
  # connection is tried before the request counts as failed.
  defp retry(conn, method, path, headers, body, timeout) do
    case reopen(conn, timeout) do
      {:ok, conn} ->
        with :ok <- send_request(conn, method, path, headers, body) do
          read_response(conn, timeout)
        else
          {:error, reason} -> {:error, reason, conn}
        end

      {:error, reason} ->
        {:error, reason, %{conn | socket: nil}}
    end
  end

  defp send_request(%__MODULE__{socket: nil}, _m, _p, _h, _b), do: {:error, :closed}

  defp send_request(conn, method, path, headers, body) do
    body = body || ""

    request = [
      method,
      " ",
      path,
      " HTTP/1.1\r\nhost: ",
      conn.host,
      "\r\ncontent-length: ",
      Integer.to_string(IO.iodata_length(body)),
      "\r\n",
      for({name, value} <- headers, do: [name, ": ", value, "\r\n"]),
      "\r\n",
      body
    ]

    :gen_tcp.send(conn.socket, request)
  end

  defp read_response(conn, timeout) do
    with {:ok, head, rest, conn} <- read_head(conn, conn.buffer, timeout),
         {:ok, status, headers} <- parse_head(head),
         {:ok, body, rest, conn} <- read_body(conn, headers, rest, timeout) do
      conn = %{conn | buffer: rest}

      conn =
        if List.keyfind(headers, "connection", 0) == {"connection", "close"} do
          :gen_tcp.close(conn.socket)
          %{conn | socket: nil}
        else
          conn
        end

      {:ok, status, headers, body, conn}
    end
  end

  defp read_head(conn, acc, timeout) do
    case :binary.split(acc, "\r\n\r\n") do
      [head, rest] ->
        {:ok, head, rest, conn}

      [_] ->
        case :gen_tcp.recv(conn.socket, 0, timeout) do
          {:ok, data} -> read_head(conn, acc <> data, timeout)
          {:error, reason} -> {:error, reason, conn}
        end
    end
  end

  defp parse_head(head) do
    [status_line | lines] = String.split(head, "\r\n")

    case String.split(status_line, " ", parts: 3) do
      ["HTTP/1." <> _, code | _] ->
        headers =
          for line <- lines,
              [name, value] <- [String.split(line, ":", parts: 2)],
              do: {String.downcase(String.trim(name)), String.trim(value)}

        {:ok, String.to_integer(code), headers}

      _ ->
        {:error, {:bad_status_line, status_line}}
    end
  end

  defp read_body(conn, headers, rest, timeout) do
    cond do
      length = header(headers, "content-length") ->
        read_exactly(conn, rest, String.to_integer(length), timeout)

      header(headers, "transfer-encoding") == "chunked" ->
        read_chunks(conn, rest, [], timeout)

      true ->
        {:ok, "", rest, conn}
    end
  end

  defp read_exactly(conn, buffer, length, _timeout) when byte_size(buffer) >= length do
    <<body::binary-size(length), rest::binary>> = buffer
    {:ok, body, rest, conn}
  end

  defp read_exactly(conn, buffer, length, timeout) do
    case :gen_tcp.recv(conn.socket, 0, timeout) do
      {:ok, data} -> read_exactly(conn, buffer <> data, length, timeout)
      {:error, reason} -> {:error, reason, conn}
    end
  end

  defp read_chunks(conn, buffer, acc, timeout) do
    case :binary.split(buffer, "\r\n") do
      [size_line, rest] ->
        {size, _} = Integer.parse(size_line, 16)

        if size == 0 do
          {:ok, _trailer, rest, conn} = read_head(conn, "\r\n" <> rest, timeout)
          {:ok, IO.iodata_to_binary(Enum.reverse(acc)), rest, conn}
        else
          with {:ok, chunk, rest, conn} <- read_exactly(conn, rest, size + 2, timeout) do
            read_chunks(conn, rest, [binary_part(chunk, 0, size) | acc], timeout)
          end
        end

      [_] ->
        case :gen_tcp.recv(conn.socket, 0, timeout) do
          {:ok, data} -> read_chunks(conn, buffer <> data, acc, timeout)
          {:error, reason} -> {:error, reason, conn}
        end
    end
  end

  defp header(headers, name) do
    case List.keyfind(headers, name, 0) do
      {_, value} -> value
      nil -> nil
    end
  end

  @doc "Closes the connection."
  @spec close(t()) :: :ok
  def close(%__MODULE__{socket: nil}), do: :ok
  def close(%__MODULE__{socket: socket}), do: :gen_tcp.close(socket)
end
