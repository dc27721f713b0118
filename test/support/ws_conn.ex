defmodule Grove.WsConn do
  @moduledoc """
  A test's player on the WebSocket: a `Grove.WsClient` and the encoding it
  speaks, with the protocol's messages going out and coming in.

      conn = WsConn.connect(port, :binary)
      WsConn.push(conn, %{type: :join, protocol: Protocol.version(), view_radius: 8})
      {welcome, conn} = WsConn.expect(conn, :welcome)

  `expect/3` reads until a message it is asked for comes and passes over
  the others (views, stats, the minimap), so a test names only what it
  waits for.

  Messages are decoded in the version the connection's `join` named (the
  newest before it), and, as a client does, the entities of version 5's
  `areas` are placed on their cells from their area's `ground` (and in
  version 6 given the kind they were shown with): a test reads `{id, x,
  y, kind}` in every version (`decode/2`).
  """

  import ExUnit.Assertions, only: [flunk: 1]

  alias Grove.{Protocol, WsClient}

  @type t :: {WsClient.t(), Protocol.encoding()}

  @doc "Connects to the gateway on `port`, speaking `encoding`; `opts` as `Grove.WsClient.connect/4`'s."
  @spec connect(:inet.port_number(), Protocol.encoding(), keyword()) :: t()
  def connect(port, encoding \\ :json, opts \\ []) do
    {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws?encoding=#{encoding}", opts)
    {client, encoding}
  end

  @doc "Sends a message, encoded as the connection speaks."
  @spec push(t(), Protocol.message()) :: :ok
  def push({client, encoding}, message) do
    # The first join names the version; a second one is refused.
    key = {__MODULE__, :version, client.socket}

    if message.type == :join and is_integer(message[:protocol]) and Process.get(key) == nil,
      do: Process.put(key, message.protocol)

    push_raw({client, encoding}, IO.iodata_to_binary(Protocol.encode(message, encoding)))
  end

  @doc """
  A frame's payload read as the connection reads it: in the version its
  `join` named, version 5's `areas` placed on their cells (a part whose
  area's ground has not come yet is left out, as a client may ignore a
  delta of an area it holds no snapshot of).
  """
  @spec decode(t(), binary()) :: {:ok, map()} | {:error, atom(), String.t()}
  def decode({client, encoding}, data) do
    version = Process.get({__MODULE__, :version, client.socket}, Protocol.version())

    with {:ok, message} <- Protocol.decode(data, encoding, version),
         do: {:ok, placed(client, version, message)}
  end

  defp placed(client, _version, %{type: :ground} = ground) do
    Process.put(
      {__MODULE__, :ground, client.socket, ground.area},
      {ground.x, ground.y, ground.width}
    )

    ground
  end

  defp placed(client, version, %{type: :areas, areas: parts} = areas) when version >= 5 do
    parts =
      for {area, full, entities, gone} <- parts,
          corner = Process.get({__MODULE__, :ground, client.socket, area}),
          corner != nil or full do
        {x0, y0, width} = corner || raise("a snapshot of area #{area} before its ground")

        {area, full,
         for(
           {id, at, kind} <- entities,
           do: {id, x0 + rem(at, width), y0 + div(at, width), kind(client, id, kind)}
         ), gone}
      end

    %{areas | areas: parts}
  end

  defp placed(_client, _version, message), do: message

  # From version 6 on, a delta's entity that stayed in its area comes
  # without its kind: the one it was shown with.
  defp kind(client, id, nil),
    do:
      Process.get({__MODULE__, :kind, client.socket, id}) ||
        raise("entity #{id} moved without its kind, never shown with one")

  defp kind(client, id, kind) do
    Process.put({__MODULE__, :kind, client.socket, id}, kind)
    kind
  end

  @doc """
  Sends bytes as they are: a frame given whole (`{:text, bytes}`,
  `{:binary, bytes}`, `{:close, code, reason}`), or bytes in a frame of
  the connection's kind.
  """
  @spec push_raw(t(), binary() | WsClient.frame()) :: :ok
  def push_raw({client, encoding}, bytes) when is_binary(bytes),
    do: push_raw({client, encoding}, {kind(encoding), bytes})

  def push_raw({client, _encoding}, frame), do: :ok = WsClient.send_frame(client, frame)

  @doc """
  The next message the test waits for, and the connection to read on:
  `{message, conn}`; or `{{:close, code, reason}, conn}` when the server
  closes first. `wanted` is a message type, a list of them, or a function
  of the message. Options:

    * `:where` - a function the message must also satisfy;
    * `:timeout` - how long to wait for each frame, in ms (default 5000);
    * `:seen` - a list: the messages passed over are put in front of it
      (newest first) and returned third, `{message, conn, seen}`.

  It fails the test when nothing it waits for comes in time.
  """
  @spec expect(t(), atom() | [atom()] | (map() -> boolean()), keyword()) ::
          {map() | {:close, non_neg_integer(), binary()}, t()} | {map(), t(), [map()]}
  def expect(conn, wanted, opts \\ []) do
    wanted? = wanted(wanted)
    where = Keyword.get(opts, :where, fn _ -> true end)
    wait = %{wanted?: &(wanted?.(&1) and where.(&1)), timeout: Keyword.get(opts, :timeout, 5000)}
    read(conn, Map.put(wait, :label, inspect(wanted)), opts[:seen])
  end

  defp read({client, encoding} = conn, wait, seen) do
    case WsClient.recv(client, wait.timeout) do
      {:ok, {:close, code, reason}, client} ->
        {{:close, code, reason}, {client, encoding}}

      {:ok, {_kind, data}, client} ->
        conn = {client, encoding}
        {:ok, message} = decode(conn, data)

        case {wait.wanted?.(message), seen} do
          {true, nil} -> {message, conn}
          {true, seen} -> {message, conn, seen}
          {false, nil} -> read(conn, wait, nil)
          {false, seen} -> read(conn, wait, [message | seen])
        end

      {:error, reason} ->
        flunk("no #{wait.label} arrived on #{inspect(conn)}: #{inspect(reason)}")
    end
  end

  defp wanted(wanted) when is_function(wanted, 1), do: wanted

  defp wanted(types) do
    types = List.wrap(types)
    &(&1.type in types)
  end

  defp kind(:json), do: :text
  defp kind(:binary), do: :binary
end
