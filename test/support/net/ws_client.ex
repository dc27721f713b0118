defmodule Grove.WsClient do
  @moduledoc """
  A small WebSocket client on `:gen_tcp` and cowlib's `cow_ws` framing, for
  tests and for the load lab's bots: no process of its own, so a bot owns its
  socket and reads it in active-once mode. It lives in `test/support/net`, and
  the lab (`lab/mix.exs`) compiles it from there too: it is in no release.

      {:ok, client} = WsClient.connect("127.0.0.1", 4000, "/ws?encoding=binary")
      :ok = WsClient.send_frame(client, {:binary, frame})
      # in the owner's receive loop:
      {:tcp, _socket, data} -> {frames, client} = WsClient.feed(client, data)

  `feed/2` answers server pings itself and returns the data frames
  (`{:text, binary}`, `{:binary, binary}`) and `{:close, code, reason}`.
  """

  defstruct [:socket, buffer: <<>>, fragment: :undefined, parts: []]

  @type frame :: {:text, binary()} | {:binary, binary()} | {:close, non_neg_integer(), binary()}
  @type t :: %__MODULE__{socket: :gen_tcp.socket(), buffer: binary()}

  @doc """
  Connects and performs the opening handshake. Leaves the socket in
  active-once mode, owned by the caller. Options: `:timeout` (ms, default
  5000), `:headers` (extra request headers as `{name, value}`), `:recbuf`
  (the kernel's receive buffer, to play a slow client), `:active` (`false`
  leaves the socket passive, to be handed to another process; default
  `:once`).

  An answer other than `101` is `{:error, {:http_status, status}}`, or
  `{:error, {:http_status, status, retry_after}}` when it carries a
  `Retry-After` in seconds: a server too busy to take a player then (a
  `503 server_busy`) says when to try again.
  """
  @spec connect(String.t() | :inet.ip_address(), :inet.port_number(), String.t(), keyword()) ::
          {:ok, t()} | {:error, term()}
  def connect(host, port, path, opts \\ []) do
    timeout = Keyword.get(opts, :timeout, 5000)
    host = if is_binary(host), do: String.to_charlist(host), else: host
    key = :cow_ws.key()

    request = [
      "GET #{path} HTTP/1.1\r\n",
      "Host: #{host_header(host)}:#{port}\r\n",
      "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n",
      "Sec-WebSocket-Key: #{key}\r\n",
      for({name, value} <- Keyword.get(opts, :headers, []), do: "#{name}: #{value}\r\n"),
      "\r\n"
    ]

    with {:ok, socket} <-
           :gen_tcp.connect(host, port, tcp_options(opts), timeout),
         :ok <- :gen_tcp.send(socket, request),
         {:ok, status, headers, rest} <- read_head(socket, <<>>, timeout),
         :ok <- check_upgrade(status, headers, key),
         :ok <- :inet.setopts(socket, active: Keyword.get(opts, :active, :once)) do
      {:ok, %__MODULE__{socket: socket, buffer: rest}}
    end
  end

  defp tcp_options(opts) do
    base = [:binary, active: false, packet: :raw, nodelay: true]
    if opts[:recbuf], do: [{:recbuf, opts[:recbuf]} | base], else: base
  end

  defp host_header(host) when is_list(host), do: host
  defp host_header(ip) when is_tuple(ip), do: :inet.ntoa(ip)

  defp read_head(socket, acc, timeout) do
    case :binary.split(acc, "\r\n\r\n") do
      [head, rest] ->
        [status_line | lines] = String.split(head, "\r\n")

        headers =
          for line <- lines,
              [name, value] <- [String.split(line, ":", parts: 2)],
              do: {String.downcase(String.trim(name)), String.trim(value)}

        case String.split(status_line, " ", parts: 3) do
          ["HTTP/1.1", code | _] -> {:ok, String.to_integer(code), headers, rest}
          _ -> {:error, {:bad_response, status_line}}
        end

      [_] ->
        case :gen_tcp.recv(socket, 0, timeout) do
          {:ok, data} -> read_head(socket, acc <> data, timeout)
          error -> error
        end
    end
  end

  defp check_upgrade(101, headers, key) do
    expected = :cow_ws.encode_key(key)

    case List.keyfind(headers, "sec-websocket-accept", 0) do
      {_, ^expected} -> :ok
      _ -> {:error, :bad_accept}
    end
  end

  defp check_upgrade(status, headers, _key) do
    with {_, value} <- List.keyfind(headers, "retry-after", 0),
         {seconds, ""} when seconds >= 0 <- Integer.parse(value) do
      {:error, {:http_status, status, seconds}}
    else
      _ -> {:error, {:http_status, status}}
    end
  end

  @doc "Sends one frame (masked, as clients must)."
  @spec send_frame(t(), frame() | :ping | :close) :: :ok | {:error, term()}
  def send_frame(%__MODULE__{socket: socket}, frame),
    do: :gen_tcp.send(socket, :cow_ws.masked_frame(frame, %{}))

  @doc """
  Takes bytes that arrived on the socket and returns the complete frames in
  them. Re-arms active-once. Pings are answered here.
  """
  @spec feed(t(), binary()) :: {[frame()], t()}
  def feed(%__MODULE__{} = client, data) do
    :ok = :inet.setopts(client.socket, active: :once)
    all_frames(%{client | buffer: client.buffer <> data}, [])
  end

  defp all_frames(client, acc) do
    case next_frame(client) do
      {:ok, frame, client} -> all_frames(client, [frame | acc])
      {:more, client} -> {Enum.reverse(acc), client}
    end
  end

  @doc "Blocks until one data or close frame arrives (for tests and scripts)."
  @spec recv(t(), timeout()) :: {:ok, frame(), t()} | {:error, term()}
  def recv(%__MODULE__{} = client, timeout \\ 5000) do
    case next_frame(client) do
      {:ok, frame, client} ->
        {:ok, frame, client}

      {:more, client} ->
        socket = client.socket

        receive do
          {:tcp, ^socket, data} ->
            :ok = :inet.setopts(socket, active: :once)
            recv(%{client | buffer: client.buffer <> data}, timeout)

          {:tcp_closed, ^socket} ->
            {:error, :closed}
        after
          timeout -> {:error, :timeout}
        end
    end
  end

  @doc "Closes the connection."
  @spec close(t()) :: :ok
  def close(%__MODULE__{socket: socket} = client) do
    _ = send_frame(client, {:close, 1000, <<>>})
    :gen_tcp.close(socket)
  end

  # The next complete data or close frame in the buffer; control frames on
  # the way are handled and skipped.
  defp next_frame(client) do
    case :cow_ws.parse_header(client.buffer, %{}, client.fragment) do
      :more ->
        {:more, client}

      :error ->
        {:ok, {:close, 1002, "protocol error"}, %{client | buffer: <<>>}}

      {type, fragment, _rsv, length, mask, rest} when byte_size(rest) >= length ->
        <<payload::binary-size(length), rest::binary>> = rest
        payload = if mask == :undefined, do: payload, else: unmask(payload, mask)
        frame(%{client | buffer: rest, fragment: fragment}, type, payload)

      {_type, _fragment, _rsv, _length, _mask, _rest} ->
        {:more, client}
    end
  end

  defp frame(client, :ping, payload) do
    _ = send_frame(client, {:pong, payload})
    next_frame(client)
  end

  defp frame(client, :pong, _payload), do: next_frame(client)

  defp frame(client, :close, payload) do
    case payload do
      <<code::16, reason::binary>> -> {:ok, {:close, code, reason}, client}
      _ -> {:ok, {:close, 1005, <<>>}, client}
    end
  end

  defp frame(client, type, payload) do
    case client.fragment do
      :undefined ->
        {:ok, {type, payload}, client}

      {:fin, kind, _} ->
        data = IO.iodata_to_binary(Enum.reverse([payload | client.parts]))
        {:ok, {kind, data}, %{client | fragment: :undefined, parts: []}}

      {:nofin, _kind, _} ->
        next_frame(%{client | parts: [payload | client.parts]})
    end
  end

  # Servers do not mask; kept for completeness against odd peers.
  defp unmask(payload, mask) do
    key = <<mask::32>>
    size = byte_size(payload)
    keystream = :binary.copy(key, div(size, 4) + 1) |> binary_part(0, size)
    :crypto.exor(payload, keystream)
  end
end
