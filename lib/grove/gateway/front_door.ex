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
  #   * `http`, the request line: the request target is at most `:max_uri`
  #     bytes (414); the version must be HTTP/1.x (a later 1.x is read as
  #     1.1, RFC 9112 section 2.3), else 505; a line the parser cannot read
  #     is a 400. The header lines are read then too, and handed to Yaws's
  #     `httph` reads one by one: the head's header lines are at most
  #     `:max_headers` bytes together, and fewer than the 1000 lines Yaws
  #     reads (431); a Content-Length is digits (then spaces or tabs at
  #     most, and Yaws gets the digits alone), at most `:max_body`, and
  #     one value (400, 413); a Transfer-Encoding is tokens (400), ends
  #     with `chunked` (400, RFC 9112 section 6.3), and is nothing else
  #     (501), and Yaws gets `chunked` alone; a line the parser
  #     cannot read is a 400;
  #   * `httph` otherwise, the trailers after a chunked body: the same;
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
  # Yaws's parser limits every line to 16 KB (the socket's `packet_size`)
  # and the socket closes itself on a longer one, with no answer possible:
  # the client saw a reset, the log an error. So the heads are read here a
  # line at a time in `line` mode, whose socket buffer cuts a line at the
  # limit instead (a line longer than ours is found as soon as that much of
  # it has arrived), and parsed as Yaws's read would have
  # (`:erlang.decode_packet/3`, the same parser). The whole head is read
  # at once, so that the socket's options change a few times a request
  # rather than twice a line.
  #
  # It also notes when each request began and when its head was read, for
  # the request's deadline and the waits in /metrics (`Grove.Gateway.Clock`).
  #
  # Nothing else changes: reads in other modes, writes, and the WebSocket
  # connections that take sockets over go straight to `:inet_tcp`.

  alias Grove.Gateway.{Clock, Stats}

  # How long a refused client's further bytes are read and dropped.
  @linger_ms 2000
  # A request line holds a method and a version besides its target.
  @request_line_room 1024
  # A chunk's size line: the size in hex, and maybe extensions.
  @chunk_line_limit 1024

  # Yaws reads at most this many lines of a head, the empty one included.
  @max_lines 1000

  # What is known of the request being read, in its process's dictionary:
  # bytes and lines of the head, its Content-Length and transfer codings,
  # and which line of the chunked framing comes next.
  @fresh %{headers: 0, lines: 0, length: nil, codings: [], chunk: :size}
  # The rest of a head read ahead, in its process's dictionary.
  @ahead {__MODULE__, :ahead}

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
  # Yaws's server process listens here, and from then on spawns each next
  # acceptor when the last one accepted: it runs at high priority (the
  # gateway's `:accept_priority`), as its acceptors do until they have
  # accepted (see `serve/1`).
  def listen(port, opts) do
    Process.flag(:priority, Grove.Gateway.config().accept_priority)
    :inet_tcp.listen(port, opts) |> ours()
  end

  def accept(listener), do: listener |> :inet_tcp.accept() |> serve() |> ours() |> accepted()

  def accept(listener, timeout),
    do: listener |> :inet_tcp.accept(timeout) |> serve() |> ours() |> accepted()

  def fdopen(fd, opts), do: :inet_tcp.fdopen(fd, opts) |> ours()

  defp ours({:ok, socket}) do
    :inet_db.register_socket(socket, __MODULE__)
    # Yaws's processes serve one connection after another: nothing read
    # ahead of the last one's is left for this one.
    Process.delete(@ahead)
    {:ok, socket}
  end

  defp ours(error), do: error

  # Accepting is a chain: an acceptor accepts, tells Yaws's server, which
  # spawns the next acceptor, which waits in accept. At normal priority each
  # link waited its turn behind every runnable process, so under load (a
  # login storm, the world's bacteria all due at once) connections were
  # accepted slower than they came and waited in the kernel's queue, unseen
  # by the request's clock, until the client gave up. Accepting is a few
  # microseconds at high priority; the connection is then served at normal
  # priority, its wait counted and bounded by its deadline.
  defp serve(accepted) do
    Process.flag(:priority, :normal)
    accepted
  end

  # The first request's clock starts here: its client has been waiting since.
  defp accepted({:ok, _socket} = accepted) do
    Clock.accepted()
    accepted
  end

  defp accepted(error), do: error

  def recv(socket, length), do: recv(socket, length, :infinity)

  def recv(socket, length, timeout) do
    case Process.get(@ahead) do
      [next | rest] ->
        # A head read ahead, handed to Yaws a line at a time as it asks.
        Process.put(@ahead, rest)
        next

      _ ->
        case :inet.getopts(socket, [:packet, :buffer]) do
          {:ok, [packet: :http, buffer: buffer]} -> head(socket, timeout, buffer)
          {:ok, [packet: :httph, buffer: buffer]} -> trailer_line(socket, timeout, buffer)
          {:ok, [packet: :line, buffer: buffer]} -> chunk_line(socket, timeout, buffer)
          _ -> :inet_tcp.recv(socket, length, timeout)
        end
    end
  end

  # One line, of at most `limit` bytes with its line end, or `:too_long`,
  # from a socket in line mode. The socket's parser would close the socket
  # at once on a line over its `packet_size`, with no way to answer; in
  # line mode, a line longer than the socket's buffer comes cut to the
  # buffer's size instead, so no more than that is held.
  defp read_line(socket, timeout, limit) do
    case :inet_tcp.recv(socket, 0, timeout) do
      # A line the socket had buffered already comes whole, however long.
      {:ok, line} ->
        if byte_size(line) > limit or binary_part(line, byte_size(line) - 1, 1) != "\n",
          do: :too_long,
          else: {:ok, line}

      error ->
        error
    end
  end

  # The same, for one line: the socket's mode and buffer are put back after.
  defp one_line(socket, timeout, limit, {packet, buffer}) do
    _ = :inet.setopts(socket, packet: :line, packet_size: 0, buffer: limit)
    result = read_line(socket, timeout, limit)
    _ = :inet.setopts(socket, packet: packet, buffer: buffer)
    result
  end

  ## The head

  # Yaws asks for the request line: the whole head is read now, each line
  # checked as it comes, and what each read gave (an error included) is
  # kept for Yaws's next reads. (A socket whose client has gone may refuse
  # new options; its next read says so.)
  defp head(socket, timeout, buffer) do
    config = Grove.Gateway.config()
    limit = config.max_uri + @request_line_room
    # Room for the longest line either limit allows, and its line end; no
    # `packet_size`, under which the socket would close on a longer line.
    room = max(limit, config.max_headers + 2)
    _ = :inet.setopts(socket, packet: :line, packet_size: 0, buffer: room)

    result =
      case read_line(socket, timeout, limit) do
        {:ok, line} ->
          Clock.request_line()
          request(socket, :erlang.decode_packet(:http, line, []), config.max_uri)

        :too_long ->
          uri_too_long(socket, config.max_uri)

        error ->
          error
      end

    # A new request: nothing of the last one's head counts for it.
    state =
      case result do
        {:ok, {:http_request, _, _, _}} ->
          {read, state} = headers(socket, timeout, config, @fresh, [])
          Clock.head_read()
          Process.put(@ahead, read)
          state

        _blank_or_error ->
          @fresh
      end

    Process.put(__MODULE__, state)
    # Yaws sets the packet mode before each read; the buffer is ours to put back.
    _ = :inet.setopts(socket, buffer: buffer)
    result
  end

  defp request(socket, {:ok, {:http_request, method, uri, version}, _rest}, max_uri) do
    cond do
      uri_size(uri) > max_uri ->
        uri_too_long(socket, max_uri)

      version == {1, 0} ->
        {:ok, {:http_request, method, uri, version}}

      match?({1, _later}, version) ->
        {:ok, {:http_request, method, uri, {1, 1}}}

      true ->
        refuse(socket, 505, "version_not_supported", "this server speaks HTTP/1.0 and 1.1")
    end
  end

  # Blank lines before a request are allowed (RFC 9112 section 2.2); Yaws skips them.
  defp request(_socket, {:ok, {:http_error, line}, _rest}, _max_uri)
       when line in [~c"\r\n", ~c"\n"],
       do: {:ok, {:http_error, line}}

  defp request(socket, {:ok, {:http_response, _, _, _}, _rest}, _max_uri),
    do: refuse(socket, 400, "bad_request", "a response is not a request")

  defp request(socket, _malformed, _max_uri),
    do: refuse(socket, 400, "bad_request", "the request line is malformed")

  defp uri_too_long(socket, max_uri),
    do: refuse(socket, 414, "uri_too_long", "request targets are limited to #{max_uri} bytes")

  defp uri_size({:abs_path, path}), do: length(path)
  defp uri_size({:absoluteURI, _scheme, host, _port, path}), do: length(host) + length(path)
  defp uri_size({:scheme, scheme, rest}), do: length(scheme) + length(rest)
  defp uri_size(target) when is_list(target), do: length(target)
  defp uri_size(_asterisk), do: 1

  # The header lines up to the empty line that ends the head, or to the
  # read that failed.
  defp headers(socket, timeout, config, state, read) do
    case header_line(socket, timeout, config, state, &read_line/3) do
      {{:ok, :http_eoh} = eoh, state} -> {Enum.reverse([eoh | read]), state}
      {{:ok, _header} = header, state} -> headers(socket, timeout, config, state, [header | read])
      {error, state} -> {Enum.reverse([error | read]), state}
    end
  end

  # Trailers after a chunked body, which Yaws reads as header lines.
  defp trailer_line(socket, timeout, buffer) do
    read = &one_line(&1, &2, &3, {:httph, buffer})
    state = Process.get(__MODULE__, @fresh)
    {result, state} = header_line(socket, timeout, Grove.Gateway.config(), state, read)
    Process.put(__MODULE__, state)
    result
  end

  defp header_line(socket, timeout, config, state, read) do
    # What is left of the limit, and always room for the empty line that ends the head.
    room = max(config.max_headers - state.headers, 0) + 2

    case read.(socket, timeout, room) do
      {:ok, line} ->
        state = %{state | headers: state.headers + byte_size(line), lines: state.lines + 1}

        # Yaws reads 1000 lines at most, the empty one among them (431 past that).
        if state.lines >= @max_lines and line not in ["\r\n", "\n"],
          do: headers_too_large(socket, config.max_headers)

        # The empty line after it says that no continuation line follows.
        header(socket, :erlang.decode_packet(:httph, line <> "\r\n", []), state, config)

      :too_long ->
        headers_too_large(socket, config.max_headers)

      error ->
        {error, state}
    end
  end

  defp header(socket, {:ok, {:http_header, _, name, _, value} = header, _rest}, state, config)
       when name in [:"Content-Length", :"Transfer-Encoding"] do
    if name == :"Content-Length",
      do: check_length(socket, header, value, state, config.max_body),
      else: check_codings(socket, header, value, state)
  end

  defp header(_socket, {:ok, {:http_header, _, _, _, _} = header, _rest}, state, _config),
    do: {{:ok, header}, state}

  defp header(_socket, {:ok, :http_eoh, _rest}, state, _config), do: {{:ok, :http_eoh}, state}

  # A line folded onto the one before it is malformed too (RFC 9112 section 5.2).
  defp header(socket, _malformed, _state, _config),
    do: refuse(socket, 400, "bad_request", "a header line is malformed")

  defp headers_too_large(socket, max_headers),
    do:
      refuse(
        socket,
        431,
        "headers_too_large",
        "request headers are limited to #{max_headers} bytes"
      )

  # Yaws is handed the length as it was read here, digits alone: it reads
  # the value itself with only spaces trimmed, and a tab after the digits
  # (whitespace the field may end with) crashed its process, the request
  # unanswered.
  defp check_length(socket, header, value, state, limit) do
    case digits(value) do
      nil ->
        refuse(socket, 400, "bad_request", "Content-Length is not a number")

      size when size > limit ->
        refuse(socket, 413, "too_large", "request bodies are limited to #{limit} bytes")

      # Yaws gives up on the head there, with its own 400 (RFC 9112 section 6.3).
      size when state.length not in [nil, size] ->
        refuse(socket, 400, "bad_request", "two Content-Lengths disagree")

      size ->
        {{:ok, put_elem(header, 4, Integer.to_charlist(size))}, %{state | length: size}}
    end
  end

  # Digits, and the spaces and tabs a field's value may end with (RFC 9110
  # section 5.5; the parser has dropped those before it): a CR alone, a
  # vertical tab or any other byte there makes it no number (RFC 9112
  # section 2.2).
  defp digits(value) do
    case Regex.run(~r/\A([0-9]+)[ \t]*\z/, to_string(value)) do
      [_, digits] -> String.to_integer(digits)
      nil -> nil
    end
  end

  # Yaws joins repeated Transfer-Encoding headers into one list, so the
  # codings of the whole head are checked together. Each is a token, maybe
  # with parameters, and only spaces and tabs around it belong to the list
  # (RFC 9110 sections 5.6.1 and 10.1.4): any other byte there makes it
  # malformed. A vertical tab or a form feed after `chunked` passed when
  # every kind of whitespace was trimmed here, and Yaws, which trims
  # spaces alone, answered with its own 501 and an error in the log; it
  # gets the one coding it reads now, as it was checked.
  defp check_codings(socket, header, value, state) do
    codings =
      state.codings ++
        (value
         |> to_string()
         |> String.downcase()
         |> String.split(",")
         |> Enum.map(&trim_list_space/1)
         |> Enum.reject(&(&1 == "")))

    case codings do
      ["chunked"] ->
        {{:ok, put_elem(header, 4, ~c"chunked")}, %{state | codings: codings}}

      [] ->
        refuse(socket, 400, "bad_request", "Transfer-Encoding is empty")

      _ ->
        check_last_coding(socket, codings)
    end
  end

  defp check_last_coding(socket, codings) do
    case Enum.reject(codings, &coding?/1) do
      [] ->
        if List.last(codings) == "chunked",
          do: refuse(socket, 501, "not_implemented", "only the chunked transfer coding is read"),
          else:
            refuse(socket, 400, "bad_request", "a body's last transfer coding must be chunked")

      _malformed ->
        refuse(socket, 400, "bad_request", "a transfer coding is malformed")
    end
  end

  # Only spaces and tabs: String.trim/1 takes a vertical tab or a form feed too.
  defp trim_list_space(text), do: Regex.replace(~r/\A[ \t]+|[ \t]+\z/, text, "")

  # A token, then maybe parameters, in which no control byte but a tab.
  defp coding?(coding),
    do: coding =~ ~r/\A[!#$%&'*+.^_`|~0-9a-z-]+([ \t]*;[^\x00-\x08\x0a-\x1f\x7f]*)?\z/

  ## The chunked body's framing

  # Yaws reads a chunk's size line, its data (in raw mode), then the CRLF
  # that ends the data, all in line mode but the data.
  defp chunk_line(socket, timeout, buffer) do
    state = Process.get(__MODULE__, @fresh)

    case state.chunk do
      :size -> chunk_size_line(socket, timeout, buffer, state)
      :crlf -> chunk_end(socket, timeout, state)
    end
  end

  defp chunk_size_line(socket, timeout, buffer, state) do
    case one_line(socket, timeout, @chunk_line_limit, {:line, buffer}) do
      {:ok, line} ->
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

      :too_long ->
        refuse(socket, 400, "bad_request", "a chunk size line is too long")

      error ->
        error
    end
  end

  # Exactly the next two bytes, not a line: data longer than its chunk's
  # size may be followed by no line end at all.
  defp chunk_end(socket, timeout, state) do
    _ = :inet.setopts(socket, packet: :raw)
    result = :inet_tcp.recv(socket, 2, timeout)
    _ = :inet.setopts(socket, packet: :line)

    case result do
      {:ok, "\r\n"} ->
        Process.put(__MODULE__, %{state | chunk: :size})
        {:ok, "\r\n"}

      {:ok, _other} ->
        refuse(socket, 400, "bad_request", "a chunk is longer than its size")

      error ->
        error
    end
  end

  defp chunk_size(line) do
    case Regex.run(~r/\A[ \t]*([0-9A-Fa-f]+)[ \t]*(;[^\r\n]*)?\r?\n\z/, line) do
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
    case Grove.Gateway.lookup() do
      %{stats: stats} -> Stats.incr(stats, refused_key(status))
      nil -> :ok
    end
  end

  defp refused_key(400), do: :refused_400
  defp refused_key(413), do: :refused_413
  defp refused_key(414), do: :refused_414
  defp refused_key(431), do: :refused_431
  defp refused_key(501), do: :refused_501
  defp refused_key(505), do: :refused_505

  defp reason(400), do: "Bad Request"
  defp reason(413), do: "Content Too Large"
  defp reason(414), do: "URI Too Long"
  defp reason(431), do: "Request Header Fields Too Large"
  defp reason(501), do: "Not Implemented"
  defp reason(505), do: "HTTP Version Not Supported"
end
