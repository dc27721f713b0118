defmodule Grove.Gateway.FrontDoorTest do
  # Yaws runs one server per node, so these tests share one gateway and run alone.
  use ExUnit.Case, async: false

  import ExUnit.CaptureLog

  alias Grove.Gateway

  @moduletag :gateway

  setup_all do
    Grove.TestInstance.start!("front_door",
      world: [width: 40, height: 40, zone_size: 20, tick: :manual],
      actors: [count: 0],
      gateway: [port: 0, max_body: 2048]
    )
  end

  # Sends raw bytes and reads until the server closes: the status and the
  # JSON body of its answer, or `:closed` without one, or `:reset`. The
  # deadline is for the answer to come at all, far below the 15 s a
  # connection waits for a client.
  defp raw(port, data) do
    {:ok, socket} = :gen_tcp.connect(~c"127.0.0.1", port, [:binary, active: false])
    :ok = :gen_tcp.send(socket, data)
    answer = read(socket, "")
    :gen_tcp.close(socket)
    answer
  end

  defp read(socket, acc) do
    case :gen_tcp.recv(socket, 0, 5000) do
      {:ok, data} -> read(socket, acc <> data)
      {:error, :closed} -> parse(acc)
      {:error, :econnreset} -> :reset
      {:error, :timeout} -> {:silent, acc}
    end
  end

  defp parse(""), do: :closed

  defp parse(response) do
    [head, body] = String.split(response, "\r\n\r\n", parts: 2)
    ["HTTP/1.1 " <> status_line | headers] = String.split(head, "\r\n")
    {status, _} = Integer.parse(status_line)
    headers = Enum.map(headers, &String.downcase/1)
    {status, headers, :jiffy.decode(body, [:return_maps])}
  end

  # Every test checks that the gateway logged no error while it ran.
  defp quietly(fun) do
    {result, log} = with_log([level: :error], fun)
    assert log == ""
    result
  end

  defp post(path, headers, body),
    do: "POST #{path} HTTP/1.1\r\nHost: grove\r\n#{headers}\r\n#{body}"

  describe "a malformed request gets a 4xx at once and the connection closes" do
    test "an HTTP version the server does not speak: 505", %{port: port} do
      before = Gateway.stats()

      quietly(fn ->
        assert {505, headers, %{"error" => "version_not_supported"}} =
                 raw(port, "GET / HTTP/9.9\r\nHost: grove\r\n\r\n")

        assert "connection: close" in headers

        assert {505, _, _} = raw(port, "GET /healthz\r\n\r\n")
      end)

      assert Gateway.stats().refused_505 == before.refused_505 + 2
    end

    test "a later HTTP/1.x is read as HTTP/1.1", %{port: port} do
      quietly(fn ->
        assert {200, _, %{"status" => "ok"}} =
                 raw(port, "GET /healthz HTTP/1.7\r\nHost: grove\r\nConnection: close\r\n\r\n")
      end)
    end

    test "a Content-Length that is not a number: 400", %{port: port} do
      before = Gateway.stats()

      quietly(fn ->
        assert {400, _, %{"error" => "bad_request"}} =
                 raw(
                   port,
                   post("/api/device_login", "Content-Length: abc\r\n", ~s({"device_id":"x"}))
                 )

        assert {400, _, %{"error" => "bad_request"}} =
                 raw(port, post("/api/device_login", "Content-Length: -5\r\n", ""))
      end)

      assert Gateway.stats().refused_400 == before.refused_400 + 2
    end

    test "a Content-Length whose digits a CR or other whitespace follows: 400, not a closed connection",
         %{port: port} do
      # As a fuzzer sent it: a CR alone after the digits, and a byte flipped in the Host.
      found =
        "POST /api/device_login HTTP/1.1\r\nHost: grov\xDFe\r\nContent-Type: application/json\r\n" <>
          "Content-Length: 3\r\r\n\r\n{\"d]vice_id\":\"fuzz-mutation-device\"}"

      quietly(fn ->
        assert {400, _, %{"error" => "bad_request"}} = raw(port, found)

        for after_digits <- ["\v", "\f", "\xA0", " \r"] do
          assert {400, _, %{"error" => "bad_request"}} =
                   raw(port, post("/api/login", "Content-Length: 2#{after_digits}\r\n", "{}")),
                 "after the digits: #{inspect(after_digits)}"
        end
      end)
    end

    test "two Content-Lengths that disagree: 400", %{port: port} do
      quietly(fn ->
        assert {400, _, %{"error" => "bad_request"}} =
                 raw(
                   port,
                   post("/api/login", "Content-Length: 2\r\nContent-Length: 3\r\n", "{}x")
                 )
      end)
    end

    test "a Content-Length over the limit: 413 before any of the body", %{port: port} do
      before = Gateway.stats()

      quietly(fn ->
        assert {413, _, %{"error" => "too_large"}} =
                 raw(
                   port,
                   post("/api/device_login", "Content-Length: 99999999999999999999\r\n", "{}")
                 )
      end)

      assert Gateway.stats().refused_413 == before.refused_413 + 1
    end

    test "a chunk over the limit: 413 before its data", %{port: port} do
      quietly(fn ->
        assert {413, _, %{"error" => "too_large"}} =
                 raw(
                   port,
                   post(
                     "/api/device_login",
                     "Transfer-Encoding: chunked\r\n",
                     String.duplicate("F", 20) <> "\r\n{}"
                   )
                 )
      end)
    end

    test "chunked framing that is not: 400", %{port: port} do
      chunked = "Transfer-Encoding: chunked\r\n"

      quietly(fn ->
        for body <- ["zz\r\n{}\r\n0\r\n\r\n", "\r\n", "2\r\n{}XX\r\n0\r\n\r\n", "-1\r\n"] do
          assert {400, _, %{"error" => "bad_request"}} =
                   raw(port, post("/api/device_login", chunked, body)),
                 "body #{inspect(body)}"
        end
      end)
    end

    test "chunk data longer than its size, with no line end after it: 400", %{port: port} do
      quietly(fn ->
        assert {400, _, %{"error" => "bad_request"}} =
                 raw(
                   port,
                   post("/api/device_login", "Transfer-Encoding: chunked\r\n", "2\r\n{}XX")
                 )
      end)
    end

    test "a transfer coding other than chunked: 400, or 501 before chunked", %{port: port} do
      quietly(fn ->
        assert {400, _, _} = raw(port, post("/api/login", "Transfer-Encoding: gzip\r\n", "x"))

        assert {400, _, _} =
                 raw(
                   port,
                   post(
                     "/api/login",
                     "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n",
                     ""
                   )
                 )

        assert {501, _, %{"error" => "not_implemented"}} =
                 raw(
                   port,
                   post("/api/login", "Transfer-Encoding: gzip, chunked\r\n", "0\r\n\r\n")
                 )
      end)
    end

    test "a Transfer-Encoding whose chunked a vertical tab or a form feed follows: 400, not Yaws's 501",
         %{port: port} do
      quietly(fn ->
        for after_coding <- ["\v", "\f", "\v\t", " \f", "\f, chunked"] do
          assert {400, _, %{"error" => "bad_request"}} =
                   raw(
                     port,
                     post(
                       "/api/login",
                       "Transfer-Encoding: chunked#{after_coding}\r\n",
                       "0\r\n\r\n"
                     )
                   ),
                 "after chunked: #{inspect(after_coding)}"
        end
      end)
    end

    test "a request line or header line the parser cannot read: 400", %{port: port} do
      quietly(fn ->
        assert {400, _, _} = raw(port, "GET / HTTQ/1.1\r\nHost: grove\r\n\r\n")
        assert {400, _, _} = raw(port, <<22, 3, 1, 2, 0, 1, 0, 1, 252, 3, 3, "\r\n\r\n">>)
        assert {400, _, _} = raw(port, "HTTP/1.1 200 OK\r\n\r\n")
        assert {400, _, _} = raw(port, "GET / HTTP/1.1\r\nHost: grove\r\nno colon here\r\n\r\n")
      end)
    end

    test "a well-formed chunked body still goes through", %{port: port} do
      body = ~s({"device_id":"x"})
      size = Integer.to_string(byte_size(body), 16)

      quietly(fn ->
        # No accounts on this server: the API answers, with its own 404.
        assert {404, _, %{"error" => "not_found"}} =
                 raw(
                   port,
                   post(
                     "/api/device_login",
                     "Transfer-Encoding: chunked\r\nConnection: close\r\n",
                     "#{size};ext=1\r\n#{body}\r\n0\r\n\r\n"
                   )
                 )
      end)
    end
  end

  describe "a well-formed request's framing is read as the client meant it" do
    test "a Content-Length that spaces or tabs end is its digits", %{port: port} do
      body = ~s({"players":1})

      quietly(fn ->
        for after_digits <- ["\t", " ", " \t "] do
          assert {202, _, %{"accepted" => true}} =
                   raw(
                     port,
                     post(
                       "/api/load/report",
                       "Content-Length: #{byte_size(body)}#{after_digits}\r\nConnection: close\r\n",
                       body
                     )
                   ),
                 "after the digits: #{inspect(after_digits)}"
        end
      end)
    end

    test "a Transfer-Encoding that spaces or tabs pad is chunked", %{port: port} do
      body = ~s({"players":1})
      size = Integer.to_string(byte_size(body), 16)

      quietly(fn ->
        for coding <- ["chunked\t", "chunked ", " \tChunked \t", "chunked, "] do
          assert {202, _, %{"accepted" => true}} =
                   raw(
                     port,
                     post(
                       "/api/load/report",
                       "Transfer-Encoding: #{coding}\r\nConnection: close\r\n",
                       "#{size}\r\n#{body}\r\n0\r\n\r\n"
                     )
                   ),
                 "Transfer-Encoding: #{inspect(coding)}"
        end
      end)
    end
  end

  describe "a request head over the limits gets 414 or 431 and a close, not a reset" do
    test "a request target of 100 KB: 414", %{port: port} do
      before = Gateway.stats()
      path = "/" <> String.duplicate("a", 100_000)

      quietly(fn ->
        assert {414, headers, %{"error" => "uri_too_long"}} =
                 raw(port, "GET #{path} HTTP/1.1\r\nHost: grove\r\n\r\n")

        assert "connection: close" in headers
      end)

      assert Gateway.stats().refused_414 == before.refused_414 + 1
    end

    test "a target just over the limit: 414; one within it is served", %{port: port} do
      limit = Gateway.config().max_uri

      quietly(fn ->
        assert {414, _, _} =
                 raw(port, "GET /#{String.duplicate("a", limit)} HTTP/1.1\r\nHost: grove\r\n\r\n")

        assert {404, _, %{"error" => "not_found"}} =
                 raw(
                   port,
                   "GET /#{String.duplicate("a", limit - 1)} HTTP/1.1\r\nHost: grove\r\nConnection: close\r\n\r\n"
                 )
      end)
    end

    test "a header of 65 KB, or a Host of 50 KB: 431", %{port: port} do
      before = Gateway.stats()

      quietly(fn ->
        assert {431, headers, %{"error" => "headers_too_large"}} =
                 raw(
                   port,
                   "GET / HTTP/1.1\r\nHost: grove\r\nX-Big: #{String.duplicate("a", 65_000)}\r\n\r\n"
                 )

        assert "connection: close" in headers

        assert {431, _, _} =
                 raw(port, "GET / HTTP/1.1\r\nHost: #{String.duplicate("h", 50_000)}\r\n\r\n")
      end)

      assert Gateway.stats().refused_431 == before.refused_431 + 2
    end

    test "a thousand header lines, small enough together: 431 all the same", %{port: port} do
      lines = fn count -> for n <- 1..count, do: "x#{n}: y\r\n" end

      quietly(fn ->
        assert {431, _, %{"error" => "headers_too_large"}} =
                 raw(port, ["GET /healthz HTTP/1.1\r\n", lines.(1000), "\r\n"])

        assert {200, _, _} =
                 raw(port, ["GET /healthz HTTP/1.1\r\nConnection: close\r\n", lines.(998), "\r\n"])
      end)
    end

    test "many header lines, each small, over the limit together: 431", %{port: port} do
      lines = for n <- 1..40, do: "X-Line-#{n}: #{String.duplicate("v", 1000)}\r\n"

      quietly(fn ->
        assert {431, _, _} = raw(port, ["GET / HTTP/1.1\r\nHost: grove\r\n", lines, "\r\n"])
      end)
    end
  end

  test "the refusals are in /metrics", %{port: port} do
    raw(port, "GET / HTTP/9.9\r\n\r\n")

    {:ok, {{_, 200, _}, _, body}} =
      :httpc.request(:get, {~c"http://127.0.0.1:#{port}/metrics", []}, [], body_format: :binary)

    assert body =~ ~r/grove_http_refused_total\{status="505"\} [1-9]/
  end

  test "connections are accepted at high priority and served at normal", %{port: port} do
    # A kept-alive connection, answered once: its process now waits for the next request.
    {:ok, client} = :gen_tcp.connect(~c"127.0.0.1", port, [:binary, active: false])
    :ok = :gen_tcp.send(client, "GET /healthz HTTP/1.1\r\nHost: grove\r\n\r\n")
    assert {:ok, "HTTP/1.1 200" <> _} = :gen_tcp.recv(client, 0, 5000)
    {:ok, here} = :inet.sockname(client)

    # The server's side of it, and the process that serves it.
    [serving] =
      for port <- Port.list(),
          :erlang.port_info(port, :name) == {:name, ~c"tcp_inet"},
          :inet.peername(port) == {:ok, here},
          do: elem(:erlang.port_info(port, :connected), 1)

    assert Process.info(serving, :priority) == {:priority, :normal}

    # Yaws's server, which spawned the next acceptor when ours accepted
    # (it has, once it answers a message sent after that).
    {:dictionary, dictionary} = Process.info(serving, :dictionary)
    server = Keyword.fetch!(dictionary, :gserv_pid)
    assert Process.info(server, :priority) == {:priority, :high}
    send(server, {self(), :status})
    assert_receive {^server, _state}, 5000

    # Its acceptors: the processes it spawned that have not accepted yet
    # (Yaws notes a trace filter in a process once it has accepted; one
    # that served a connection and waits to be told to stop has one).
    {:links, links} = Process.info(server, :links)

    acceptors =
      for pid <- links,
          is_pid(pid),
          pid != Process.whereis(:yaws_server),
          {:dictionary, dictionary} <- [Process.info(pid, :dictionary)],
          not Keyword.has_key?(dictionary, :trace_filter),
          {:priority, priority} <- [Process.info(pid, :priority)],
          do: priority

    assert acceptors != []
    assert Enum.all?(acceptors, &(&1 == :high))
    :gen_tcp.close(client)
  end
end
