defmodule Grove.Gateway.FrontDoor do
  @moduledoc false
  # The gateway's listening socket's TCP module (gen_tcp's documented
  # `{tcp_module, Module}` option, passed through Yaws's `listen_opts`): the
  # same as `:inet_tcp`, except that it sees the request heads and chunk
  # sizes Yaws reads from every connection, and answers the malformed ones
  # itself.
  #
  # Yaws 2.1.1 reads a request with the socket's `{packet, http}` parser
  # and trusts what it gets: a version it does not know (`HTTP/9.9`) or a
  # Content-Length that is not a number crashed the connection's process
  # with no answer; a Content-Length or chunk size far over any body we
  # take held the connection until its read timed out; a malformed request
  # line or header line was dropped without a word. It has no hook before
  # it has read the whole head, so the checks sit where it reads: in
  # `recv/3`, in the connection's own process, according to the packet
  # mode Yaws set for the read:
  #
  #   * `http`, the request line: the version must be HTTP/1.x (a later
  #     1.x is read as 1.1, RFC 9112 section 2.3), else 505; a line the
  #     parser cannot read is a 400;
  #   * `httph`, a header line: a Content-Length is digits, at most
  #     `:max_body` (400, 413); a Transfer-Encoding ends with `chunked`
  #     (400, RFC 9112 section 6.3), and is nothing else (501); a line the
  #     parser cannot read is a 400;
  #   * `line`, the chunked body's framing: a chunk size is hex digits, at
  #     most `:max_body` (400, 413), and a chunk's data ends with CRLF (400).
  #
  # A refused request gets its status with a JSON body like the API's
  # (`{"error": CODE, "message": TEXT}`) and `Connection: close`; what the
  # client sent after it is read and dropped for a moment (a lingering
  # close: closing over unread bytes would send a reset that can destroy
  # the answer), and the connection's process ends as Yaws ends it after a
  # client's error, with `exit(:normal)`. Each refusal is counted by status
  # in the gateway's stats.
  #
  # Nothing else changes: reads in other modes, writes, and the WebSocket
  # connections that take sockets over go straight to `:inet_tcp`.

  alias Grove.Gateway.Stats

  # How long a refused client's further bytes are read and dropped.
  @linger_ms 2000

  ## The TCP module: everything but listen, accept and recv as :inet_tcp does it

  defdelegate getserv(port), to: :inet_tcp
  defdelegate getaddr(address), to: :inet_tcp
  defdelegate getaddr(address, timer), to: :inet_tcp
  defdelegate getaddrs(address), to: :inet_tcp
  defdelegate getaddrs(address, timer), to: :inet_tcp
  defdelegate translate_ip(ip), to: :inet_tcp
  defdelegate family(), to: :inet_tcp
  defdelegate mask(mask, ip), to: :inet_tcp
  defdelegate parse_address(address), to: :inet_tcp
  defdelegate send(socket, packet), to: :inet_tcp
  defdelegate send(socket, packet, opts), to: :inet_tcp
  defdelegate unrecv(socket, data), to: :inet_tcp
  defdelegate shutdown(socket, how), to: :inet_tcp
  defdelegate close(socket), to: :inet_tcp
  defdelegate controlling_process(socket, pid), to: :inet_tcp
  defdelegate connect(address, port, opts), to: :inet_tcp
  defdelegate connect(address, port, opts, timeout), to: :inet_tcp

  # The sockets say which module serves them; ours, so that gen_tcp comes here.
  def listen(port, opts), do: :inet_tcp.listen(port, opts) |> ours()
  def accept(listener), do: :inet_tcp.accept(listener) |> ours()
  def accept(listener, timeout), do: :inet_tcp.accept(listener, timeout) |> ours()
  def fdopen(fd, opts), do: :inet_tcp.fdopen(fd, opts) |> ours()

  defp ours({:ok, socket}) do
    :inet_db.register_socket(socket, __MODULE__)
    {:ok, socket}
  end

  defp ours(error), do: error

  def recv(socket, length), do: recv(socket, length, :infinity)

  def recv(socket, length, timeout) do
    case :inet.getopts(socket, [:packet]) do
      {:ok, [packet: :http]} -> request_line(socket, timeout)
      {:ok, [packet: :httph]} -> header_line(socket, timeout)
      {:ok, [packet: :line]} -> chunk_line(socket, timeout)
      _ -> :inet_tcp.recv(socket, length, timeout)
    end
  end

  ## The request line

  defp request_line(socket, timeout) do
    case :inet_tcp.recv(socket, 0, timeout) do
      {:ok, {:http_request, method, uri, version}} ->
        # A new request: nothing of the last one's head counts for it.
        Process.put(__MODULE__, %{codings: [], chunk: :size})

        case version do
          {1, 0} ->
            {:ok, {:http_request, method, uri, version}}

          {1, _later} ->
            {:ok, {:http_request, method, uri, {1, 1}}}

          _other ->
            refuse(socket, 505, "version_not_supported", "this server speaks HTTP/1.0 and 1.1")
        end

      {:ok, {:http_error, line}} when line not in [~c"\r\n", ~c"\n"] ->
        refuse(socket, 400, "bad_request", "the request line is malformed")

      {:ok, {:http_response, _, _, _}} ->
        refuse(socket, 400, "bad_request", "a response is not a request")

      other ->
        other
    end
  end

  ## Header lines

  defp header_line(socket, timeout) do
    case :inet_tcp.recv(socket, 0, timeout) do
      {:ok, {:http_header, _, :"Content-Length", _, value}} = header ->
        check_length(socket, header, value)

      {:ok, {:http_header, _, :"Transfer-Encoding", _, value}} = header ->
        check_codings(socket, header, value)

      {:ok, {:http_error, line}} when line not in [~c"\r\n", ~c"\n"] ->
        refuse(socket, 400, "bad_request", "a header line is malformed")

      other ->
        other
    end
  end

  defp check_length(socket, header, value) do
    limit = Grove.Gateway.config().max_body

    case digits(value) do
      nil ->
        refuse(socket, 400, "bad_request", "Content-Length is not a number")

      size when size > limit ->
        refuse(socket, 413, "too_large", "request bodies are limited to #{limit} bytes")

      _size ->
        header
    end
  end

  defp digits(value) do
    text = value |> to_string() |> String.trim()
    if text =~ ~r/\A[0-9]+\z/, do: String.to_integer(text)
  end

  # Yaws joins repeated Transfer-Encoding headers into one list, so the
  # codings of the whole head are checked together.
  defp check_codings(socket, header, value) do
    state = Process.get(__MODULE__, %{codings: [], chunk: :size})

    codings =
      state.codings ++
        (value
         |> to_string()
         |> String.downcase()
         |> String.split(",")
         |> Enum.map(&String.trim/1)
         |> Enum.reject(&(&1 == "")))

    Process.put(__MODULE__, %{state | codings: codings})

    case codings do
      ["chunked"] ->
        header

      [] ->
        refuse(socket, 400, "bad_request", "Transfer-Encoding is empty")

      _ ->
        if List.last(codings) == "chunked",
          do: refuse(socket, 501, "not_implemented", "only the chunked transfer coding is read"),
          else:
            refuse(socket, 400, "bad_request", "a body's last transfer coding must be chunked")
    end
  end

  ## The chunked body's framing

  # Yaws reads a chunk's size line, its data (in raw mode), then the CRLF
  # that ends the data, all in line mode but the data.
  defp chunk_line(socket, timeout) do
    state = Process.get(__MODULE__, %{codings: [], chunk: :size})

    case {state.chunk, :inet_tcp.recv(socket, 0, timeout)} do
      {:size, {:ok, line}} ->
        limit = Grove.Gateway.config().max_body

        case chunk_size(line) do
          nil ->
            refuse(socket, 400, "bad_request", "a chunk size is malformed")

          size when size > limit ->
            refuse(socket, 413, "too_large", "request bodies are limited to #{limit} bytes")

          0 ->
            {:ok, line}

          _size ->
            Process.put(__MODULE__, %{state | chunk: :crlf})
            {:ok, line}
        end

      {:crlf, {:ok, line}} when line in ["\r\n", ~c"\r\n"] ->
        Process.put(__MODULE__, %{state | chunk: :size})
        {:ok, line}

      {:crlf, {:ok, _line}} ->
        refuse(socket, 400, "bad_request", "a chunk is longer than its size")

      {_, {:error, :emsgsize}} ->
        refuse(socket, 400, "bad_request", "a chunk size line is too long")

      {_, other} ->
        other
    end
  end

  defp chunk_size(line) do
    case Regex.run(~r/\A[ \t]*([0-9A-Fa-f]+)[ \t]*(;[^\r\n]*)?\r?\n\z/, to_string(line)) do
      [_ | [hex | _]] -> String.to_integer(hex, 16)
      nil -> nil
    end
  end

  ## Refusing

  defp refuse(socket, status, code, message) do
    count(status)
    body = :jiffy.encode(%{"error" => code, "message" => message})

    _ = :inet.setopts(socket, packet: :raw, active: false)

    _ =
      :inet_tcp.send(socket, [
        "HTTP/1.1 #{status} #{reason(status)}\r\n",
        "Connection: close\r\nCache-Control: no-store\r\n",
        "Content-Type: application/json\r\nContent-Length: #{byte_size(body)}\r\n\r\n",
        body
      ])

    _ = :inet_tcp.shutdown(socket, :write)
    linger(socket, System.monotonic_time(:millisecond) + @linger_ms)
    _ = :inet_tcp.close(socket)
    exit(:normal)
  end

  defp linger(socket, deadline) do
    left = deadline - System.monotonic_time(:millisecond)

    if left > 0 do
      case :inet_tcp.recv(socket, 0, left) do
        {:ok, _dropped} -> linger(socket, deadline)
        {:error, _closed_or_timeout} -> :ok
      end
    end
  end

  defp count(status) do
    case :persistent_term.get(Grove.Gateway, nil) do
      %{stats: stats} -> Stats.incr(stats, refused_key(status))
      nil -> :ok
    end
  end

  defp refused_key(400), do: :refused_400
  defp refused_key(413), do: :refused_413
  defp refused_key(501), do: :refused_501
  defp refused_key(505), do: :refused_505

  defp reason(400), do: "Bad Request"
  defp reason(413), do: "Content Too Large"
  defp reason(501), do: "Not Implemented"
  defp reason(505), do: "HTTP Version Not Supported"
end
