defmodule Grove.Gateway.Connection do
  @moduledoc false
  # One player's WebSocket: the process that owns the socket once Yaws has
  # read the upgrade request (Grove.Gateway.Socket hands it over), reads
  # the client's frames, and writes everything the player gets. It holds a
  # Grove.Gateway.Session, which knows the protocol and the world.
  #
  # What costs a player CPU is system calls and wake-ups, so this process
  # writes at most once per event, and everything due goes in that write:
  #
  #   * an outcome (or any other answer) is written at once, and carries
  #     whatever the areas in view published since the last write;
  #   * otherwise the views go out once per view interval at most (from
  #     `view_ms` when the server has room to `view_ms_max` under load, see
  #     Grove.Gateway.Pacer), when something is new, with the latest
  #     `stats` and minimap if they changed: the broadcaster publishes those
  #     once and wakes nobody.
  #
  # So an idle player costs one wake-up and at most one write per view
  # interval, and a moving player's views ride on its outcomes: while a
  # move waits for its outcome, and for `view_wait_ms` past the interval
  # after a move, the views wait for the outcome rather than wake the
  # process on their own (Grove.Gateway.Pacer.views_due/5). The snapshots
  # of tiles that come into view as it moves (a zone's `:tiles`), and the
  # closings of a zone it left, wait the same way, kept (`held`,
  # `closings`) for the next write, where they go ahead of the deltas read
  # with it: each was a write of its own, one in six of a walker's. Nothing
  # here decodes or merges a view: the zones' frames are written as they
  # were published, the same bytes for every player.
  #
  # Outbound flow control: before writing views the process looks at the
  # bytes waiting in the socket's queue. Past `view_backlog`, views and
  # broadcasts are held back (the feed keeps them; an area too far behind
  # becomes a fresh snapshot) while outcomes still go out. A queue that
  # stays past `view_backlog` for `slow_seconds`, or grows past
  # `slow_backlog` at all, means the client cannot keep up: it gets `bye`
  # and the connection closes.
  #
  # Closing: a goodbye (`bye`, then a close frame) waits behind whatever
  # is queued for the client, so the connection lives on until it has
  # left the queue, reading and dropping what the client still sends (a
  # socket closed with unread bytes is reset, and a reset destroys what
  # the client had not read yet, the goodbye with it). A client that takes
  # nothing of it for `slow_seconds` is reset, and counted
  # (`goodbyes_reset`); one that reads, however slowly, is not: each byte
  # it takes gives it another `slow_seconds`, and what is queued only
  # shrinks. Once it is out, the client has `close_timeout` to answer with
  # its close frame.

  use GenServer, restart: :temporary

  alias Grove.Gateway.{Broadcaster, Pacer, Seats, Session, Stats, WebSocket}
  alias Grove.Metrics

  require Logger

  # Socket messages delivered before the socket must be re-armed: enough to
  # make re-arming rare, few enough to bound what a flood can queue here.
  @active 32
  # How long the socket may be waited for.
  @start_timeout 5000
  # How often a goodbye still queued for the client is looked at, ms.
  @queue_check 100

  defstruct [
    :socket,
    :session,
    :parser,
    :view_at,
    :heard_at,
    :slow_since,
    :closing_at,
    :goodbye_by,
    :goodbye_left,
    started: false,
    pinged: false,
    # `:tiles` messages kept for the next write, newest first, and the
    # `area_closed` frames of zones closed meanwhile.
    held: [],
    closings: [],
    bulletin: {0, 0, nil}
  ]

  @type t :: %__MODULE__{}

  @doc "Starts a connection for a socket that its caller will hand over with `handover/2`."
  @spec start_link({Grove.Protocol.encoding(), :gen_tcp.socket()}) :: GenServer.on_start()
  def start_link({encoding, socket}) do
    # A connection lives on a few hundred words of state, but what passes
    # through it (frames read from the feed, parsed messages) grows its heap;
    # with the default generational GC that heap, and an old heap beside it,
    # stay grown. Sweeping fully every time keeps each connection's memory
    # near its live data; a heap of `connection_heap` words at least holds
    # the garbage of a few messages, so that it is swept every few seconds
    # of a moving player rather than twice a second.
    heap = Grove.Gateway.config().connection_heap

    GenServer.start_link(__MODULE__, {encoding, socket},
      spawn_opt: [fullsweep_after: 0, min_heap_size: heap]
    )
  end

  @doc """
  Gives the socket (owned by the caller, with the handshake answered) to the
  connection, which then starts reading it.
  """
  @spec handover(pid(), :gen_tcp.socket()) :: :ok | {:error, term()}
  def handover(pid, socket) do
    case :gen_tcp.controlling_process(socket, pid) do
      :ok -> send(pid, :grove_go) && :ok
      error -> error
    end
  end

  @doc """
  Tells a connection that will not be handed its socket to stop; it
  stops with `:shutdown` (which its supervisor forgets without a report).
  Not waited for.
  """
  @spec abandon(pid()) :: :ok
  def abandon(pid) do
    send(pid, :grove_abandon)
    :ok
  end

  # Callbacks

  # What a crash report prints: the bytes a client sent (a join carries its
  # token) are left out, both the last message and what the parser holds.
  @doc false
  def format_status(status) do
    status
    |> Map.update(:message, nil, fn
      {:tcp, socket, data} when is_binary(data) -> {:tcp, socket, redacted(data)}
      other -> other
    end)
    |> Map.update(:state, nil, fn
      %__MODULE__{parser: %WebSocket{} = parser} = conn ->
        %{conn | parser: %{parser | buffer: redacted(parser.buffer), parts: []}}

      other ->
        other
    end)
  end

  defp redacted(data), do: "(#{byte_size(data)} bytes from the client)"

  @impl true
  def init({encoding, socket}) do
    config = Grove.Gateway.config()
    now = now_ms()

    conn = %__MODULE__{
      socket: socket,
      session: Session.new(config.world, encoding, session_config(config), now),
      parser: WebSocket.parser(),
      view_at: now + Pacer.interval(config.view_pace),
      heard_at: now
    }

    {:ok, conn, @start_timeout}
  end

  @impl true
  def handle_call(:grove_replace, from, conn) do
    {session, cell} = Session.replaced(conn.session)
    Registry.unregister(Grove.Gateway.config().players, conn.session.account_id)
    GenServer.reply(from, cell)

    goodbye(
      %{conn | session: session},
      :replaced,
      "this account is playing from another connection",
      1000,
      "replaced"
    )
  end

  @impl true
  def handle_info(:grove_go, conn) do
    config = Grove.Gateway.config()
    :ok = :inet.setopts(conn.socket, active: @active, packet: :raw, mode: :binary)
    # Counted in `sessions` by the seats' keeper until it sees this process gone.
    Seats.playing(config.seat_keeper)
    Stats.incr(config.stats, :connections)
    Metrics.execute([:grove, :session, :start], %{}, %{encoding: Session.encoding(conn.session)})
    idle(%{conn | started: true})
  end

  def handle_info({:tcp, _socket, data}, conn) do
    config = Grove.Gateway.config()
    Stats.incr(config.stats, :bytes_in, byte_size(data))
    now = now_ms()
    conn = %{conn | heard_at: now, pinged: false}

    case WebSocket.parse(conn.parser, data, config.max_frame) do
      {:ok, frames, parser} ->
        frames(%{conn | parser: parser}, frames, now, [])

      # The frames before the fault are answered first.
      {:error, frames, fault} ->
        frames(conn, frames ++ [{:fault, fault}], now, [])
    end
  end

  def handle_info({:tcp_passive, socket}, conn) do
    :ok = :inet.setopts(socket, active: @active)
    idle(conn)
  end

  def handle_info({:tcp_closed, _socket}, conn), do: {:stop, :normal, conn}
  def handle_info({:tcp_error, _socket, _reason}, conn), do: {:stop, :normal, conn}
  def handle_info({:inet_reply, _socket, :ok}, conn), do: idle(conn)
  def handle_info({:inet_reply, _socket, _error}, conn), do: {:stop, :normal, conn}

  def handle_info(:timeout, %__MODULE__{started: false} = conn), do: {:stop, :normal, conn}

  # Abandoned by its upgrade before it had the socket (`abandon/1`).
  def handle_info(:grove_abandon, conn), do: {:stop, :shutdown, conn}

  def handle_info(:timeout, %__MODULE__{closing_at: at} = conn) when at != nil,
    do: closing(conn)

  def handle_info(:timeout, conn) do
    now = now_ms()
    config = Grove.Gateway.config()

    cond do
      now - conn.heard_at >= 2 * config.keepalive ->
        {:stop, :normal, conn}

      now - conn.heard_at >= config.keepalive and not conn.pinged ->
        write(%{conn | pinged: true}, WebSocket.frame(:ping, ""), now)

      now >= conn.view_at ->
        {session, actions} = Session.settle_lost(conn.session, config.lost_move_ms)
        frames = for {:send, frame} <- actions, do: frame
        conn = %{conn | session: session, view_at: now + Pacer.interval(config.view_pace)}
        write(conn, frames, now)

      true ->
        idle(conn)
    end
  end

  def handle_info(:grove_drain, conn) do
    Stats.incr(Grove.Gateway.config().stats, :drained)
    goodbye(conn, :shutdown, "the server is shutting down", 1001, "going away")
  end

  # A moving player's snapshots go with its next outcome (see the top).
  def handle_info({:grove_view, _zone, :tiles, _seq, _data} = message, conn) do
    if hold?(conn, Grove.Gateway.config(), now_ms()),
      do: idle(%{conn | held: [message | conn.held]}),
      else: session_info(message, conn)
  end

  # A zone watched again: what it sent before is stale.
  def handle_info(
        {:grove_view, zone, :subscribed, _seq} = message,
        %__MODULE__{held: [_ | _]} = conn
      ),
      do: session_info(message, %{conn | held: drop_held(conn.held, zone)})

  # A zone closed: what it sent is stale, and its tiles' closings wait
  # with the snapshots.
  def handle_info({:grove_view, zone, :closed} = message, conn) do
    conn = %{conn | held: drop_held(conn.held, zone)}

    if hold?(conn, Grove.Gateway.config(), now_ms()) do
      {session, actions} = Session.handle_info(conn.session, message)
      closings = for {:send, frame} <- actions, reduce: conn.closings, do: (c -> [c | frame])
      idle(%{conn | session: session, closings: closings})
    else
      session_info(message, conn)
    end
  end

  def handle_info(message, conn), do: session_info(message, conn)

  defp session_info(message, conn) do
    case Session.handle_info(conn.session, message) do
      {session, actions} ->
        act(%{conn | session: session}, actions, now_ms())

      :unknown ->
        Logger.warning(
          "gateway session ignored an unexpected message: #{inspect(message, limit: 5)}"
        )

        idle(conn)
    end
  end

  # The seat it holds (Grove.Gateway.Seats) is given back, and the
  # `sessions` gauge lowered, by the seats' keeper, which sees it gone
  # however it ends, this callback or not.
  @impl true
  def terminate(reason, conn) do
    Session.ended(conn.session)

    if conn.started do
      Metrics.execute([:grove, :session, :stop], %{}, %{
        encoding: Session.encoding(conn.session),
        reason: reason
      })
    end

    :ok
  end

  ## Reading

  defp frames(conn, [], now, actions), do: act(conn, Enum.reverse(actions), now)

  # While closing, what the client still sends is read and dropped.
  defp frames(%__MODULE__{closing_at: at} = conn, _frames, _now, _actions) when at != nil,
    do: closing(conn)

  defp frames(conn, [{:close, code, _reason} | _], now, actions) do
    # The client's close, answered with its code (a close without one, with 1000).
    act(conn, Enum.reverse([{:close, code, ""} | actions]), now)
  end

  defp frames(conn, [{:ping, payload} | rest], now, actions),
    do: frames(conn, rest, now, [{:send, WebSocket.frame(:pong, payload)} | actions])

  defp frames(conn, [{:pong, _payload} | rest], now, actions),
    do: frames(conn, rest, now, actions)

  # A message over the size limit gets the protocol's error before the close.
  defp frames(conn, [{:fault, {1009, _reason}} | _], now, actions) do
    {session, new} = Session.too_large(conn.session)
    frames(%{conn | session: session}, [], now, Enum.reverse(new, actions))
  end

  defp frames(conn, [{:fault, {code, reason}} | _], now, actions),
    do: frames(conn, [], now, [{:close, code, reason} | actions])

  defp frames(conn, [{kind, data} | rest], now, actions) do
    config = Grove.Gateway.config()
    Stats.incr(config.stats, :frames_in)
    {session, new} = Session.handle_frame(conn.session, kind, data, now)

    # Just joined: the stats posted so far do not count this player.
    bulletin =
      if session.joined and not conn.session.joined,
        do: Broadcaster.joined(config.bulletin, conn.bulletin),
        else: conn.bulletin

    frames(%{conn | session: session, bulletin: bulletin}, rest, now, Enum.reverse(new, actions))
  end

  ## Writing

  # Carries out a session's actions: every frame due goes out in one write
  # (with what the areas published meanwhile); a close goes last. Nothing
  # goes after a close frame.
  defp act(%__MODULE__{closing_at: at} = conn, _actions, _now) when at != nil, do: idle(conn)

  defp act(conn, actions, now) do
    {frames, close} =
      Enum.reduce(actions, {[], nil}, fn
        {:send, frame}, {frames, close} -> {[frames | frame], close}
        {:close, code, reason}, {frames, nil} -> {frames, {code, reason}}
        {:close, _, _}, acc -> acc
      end)

    case {frames, close} do
      # Nothing to answer (a move, whose outcome comes later): no write.
      {[], nil} -> idle(conn)
      {frames, nil} -> write(conn, frames, now)
      {frames, {code, reason}} -> close(conn, frames, code, reason, now)
    end
  end

  # `frames` must go out; views and broadcasts join them when the socket
  # can take them (and the player has joined).
  defp write(%__MODULE__{session: %Session{joined: false}} = conn, frames, now),
    do: conn |> send_data(frames, now) |> idle()

  defp write(conn, frames, now) do
    config = Grove.Gateway.config()

    case backlog(conn, config) do
      :ok ->
        {session, views} = Session.views(conn.session, Enum.reverse(conn.held))
        closings = conn.closings

        {bulletin, news} =
          Broadcaster.news(
            config.bulletin,
            conn.bulletin,
            Session.bulletin_encoding(conn.session),
            Session.minimap?(conn.session)
          )

        # The feed is read to now: what it gets next is due an interval on.
        conn = %{
          conn
          | session: session,
            held: [],
            closings: [],
            bulletin: bulletin,
            slow_since: nil,
            view_at: now + Pacer.interval(config.view_pace)
        }

        conn |> send_data([closings, frames, views | news], now) |> idle()

      :behind ->
        Stats.incr(config.stats, :views_held)
        conn = send_data(conn, frames, now)
        since = conn.slow_since || now

        if now - since >= config.slow_seconds * 1000,
          do: disconnect_slow(conn, now),
          else: idle(%{conn | slow_since: since})

      :slow ->
        disconnect_slow(conn, now)
    end
  end

  defp send_data(conn, data, _now) do
    case IO.iodata_length(data) do
      0 ->
        conn

      bytes ->
        stats = Grove.Gateway.config().stats
        {writes, bytes_key} = out_keys(conn.session.encoding)
        Stats.incr(stats, writes)
        Stats.incr(stats, bytes_key, bytes)

        try do
          :erlang.port_command(conn.socket, data)
        rescue
          # The socket closed under us; its message follows.
          ArgumentError -> :ok
        end

        taken(conn.socket)
        conn
    end
  end

  # The socket answers every write it took with an `inet_reply`, in the
  # writer's mailbox before `port_command/2` returns unless the port was
  # busy: taken here, a write costs one turn of the process's loop, not
  # two. An error, or an answer that comes later, is left to
  # `handle_info/2`.
  defp taken(socket) do
    receive do
      {:inet_reply, ^socket, :ok} -> :ok
    after
      0 -> :ok
    end
  end

  defp out_keys(:json), do: {:writes_json, :bytes_out_json}
  defp out_keys(:binary), do: {:writes_binary, :bytes_out_binary}

  # The closing handshake: our last frames and a close frame, then no more
  # writes (the socket shuts its sending side once they are out); the
  # client answers with its close (or the socket closes), or we stop
  # anyway: `close_timeout` after they left the queue, or, when the client
  # stops taking them, `slow_seconds` after it last took any.
  defp close(conn, frames, code, reason, now) do
    conn = send_data(conn, [frames, WebSocket.close_frame(code, reason)], now)
    _ = :gen_tcp.shutdown(conn.socket, :write)

    conn =
      case queued(conn.socket) do
        0 ->
          %{conn | closing_at: now + close_ms()}

        left ->
          %{conn | closing_at: now, goodbye_left: left, goodbye_by: now + slow_ms()}
      end

    idle(conn)
  end

  # Bytes waiting in the socket's queue (none once it is closed).
  defp queued(socket) do
    case :erlang.port_info(socket, :queue_size) do
      {:queue_size, queued} -> queued
      :undefined -> 0
    end
  end

  # A connection that said goodbye, looked at when its time is due and
  # whenever the client sends (so a client that sends and never reads
  # cannot keep it open).
  defp closing(%__MODULE__{closing_at: at} = conn) do
    now = now_ms()
    left = if conn.goodbye_by, do: queued(conn.socket)

    cond do
      conn.goodbye_by == nil ->
        if now >= at, do: {:stop, :normal, drained(conn)}, else: idle(conn)

      left == 0 ->
        idle(%{conn | goodbye_by: nil, goodbye_left: nil, closing_at: now + close_ms()})

      # The client took some since the last look: it is reading.
      left < conn.goodbye_left ->
        idle(%{conn | goodbye_left: left, goodbye_by: now + slow_ms()})

      now >= conn.goodbye_by ->
        reset(conn)

      true ->
        idle(conn)
    end
  end

  # The goodbye is out of the queue, maybe not yet out of the kernel (a
  # client that reads slowly takes it a window at a time): a socket closed
  # with bytes the client sent still unread there is reset, not closed, and
  # what the kernel held of the goodbye is dropped. What came is read and
  # dropped first, a bounded number of reads (a client may send as fast as
  # we read).
  defp drained(conn) do
    _ = :inet.setopts(conn.socket, active: false)
    drain(conn.socket, 64)
    conn
  end

  defp drain(_socket, 0), do: :ok

  defp drain(socket, reads) do
    case :gen_tcp.recv(socket, 0, 0) do
      {:ok, _data} -> drain(socket, reads - 1)
      _none_or_closed -> :ok
    end
  end

  # The client took nothing of the goodbye for `slow_seconds`: a reset,
  # not a close that would wait behind what it does not read.
  defp reset(conn) do
    Stats.incr(Grove.Gateway.config().stats, :goodbyes_reset)
    _ = :inet.setopts(conn.socket, linger: {true, 0})
    _ = :gen_tcp.close(conn.socket)
    {:stop, :normal, conn}
  end

  defp close_ms, do: Grove.Gateway.config().close_timeout
  defp slow_ms, do: Grove.Gateway.config().slow_seconds * 1000

  defp backlog(conn, config) do
    case :erlang.port_info(conn.socket, :queue_size) do
      {:queue_size, queued} when queued <= config.view_backlog -> :ok
      {:queue_size, queued} when queued <= config.slow_backlog -> :behind
      {:queue_size, _queued} -> :slow
      # Closed under us; its message follows.
      :undefined -> :ok
    end
  end

  defp disconnect_slow(conn, now) do
    config = Grove.Gateway.config()
    Stats.incr(config.stats, :slow_consumers)

    Metrics.execute([:grove, :session, :slow_consumer], %{}, %{
      encoding: Session.encoding(conn.session)
    })

    goodbye(conn, :slow_consumer, "the connection cannot keep up", 1008, "slow consumer", now)
  end

  # Tells the client why in a `bye`, then closes with the WebSocket code;
  # once only.
  defp goodbye(conn, reason, message, code, close_reason, now \\ now_ms())

  defp goodbye(%__MODULE__{closing_at: at} = conn, _reason, _message, _code, _close_reason, _now)
       when at != nil,
       do: idle(conn)

  defp goodbye(conn, reason, message, code, close_reason, now) do
    {:send, bye} =
      Session.send_message(conn.session, %{type: :bye, reason: reason, message: message})

    close(conn, bye, code, close_reason, now)
  end

  ## Time

  # The process waits for its next message or its next due moment: the
  # view interval, the keepalive, or the end of a closing handshake.
  defp idle(%__MODULE__{started: false} = conn), do: {:noreply, conn, @start_timeout}

  # While the goodbye is queued, the queue is looked at now and then.
  defp idle(%__MODULE__{closing_at: at, goodbye_by: nil} = conn) when at != nil,
    do: {:noreply, conn, max(at - now_ms(), 0)}

  defp idle(%__MODULE__{closing_at: at} = conn) when at != nil,
    do: {:noreply, conn, max(min(@queue_check, conn.goodbye_by - now_ms()), 0)}

  defp idle(conn) do
    config = Grove.Gateway.config()
    now = now_ms()
    keepalive = config.keepalive
    due = if conn.pinged, do: conn.heard_at + 2 * keepalive, else: conn.heard_at + keepalive
    {:noreply, conn, max(min(views_due(conn, config, now), due) - now, 0)}
  end

  # Whether a snapshot or a closing waits for the next write: while the
  # views wait for an outcome (Pacer.views_wait?/4), and while anything
  # else is held, so that they go out in the order they came: a snapshot
  # written at once while a closing of its tiles is held (the socket
  # behind, where outcomes go out and held views wait) would be undone
  # by that closing, and a newer snapshot of a tile by an older one.
  defp hold?(%__MODULE__{held: [_ | _]}, _config, _now), do: true
  defp hold?(%__MODULE__{closings: [_ | _]}, _config, _now), do: true

  defp hold?(conn, config, now) do
    Pacer.views_wait?(
      Session.awaiting_since(conn.session),
      Session.moved_at(conn.session),
      now,
      config
    )
  end

  defp drop_held(held, zone), do: Enum.reject(held, &(elem(&1, 1) == zone))

  defp views_due(conn, config, now) do
    Pacer.views_due(
      conn.view_at,
      Session.awaiting_since(conn.session),
      Session.moved_at(conn.session),
      now,
      config
    )
  end

  defp session_config(config) do
    %{
      max_frame: config.max_frame,
      move_rate: config.move_rate,
      move_burst: config.move_burst,
      seed_rate: config.seed_rate,
      seed_burst: config.seed_burst,
      act_rate: config.act_rate,
      act_burst: config.act_burst,
      say_rate: config.say_rate,
      say_burst: config.say_burst,
      say_max: config.say_max,
      max_errors: config.max_errors,
      max_view_radius: config.max_view_radius,
      spawn: config.spawn,
      tick_ms: config.tick_ms,
      # What a client may count on: the longest it waits for views.
      view_ms: config.view_ms_max,
      stats: config.stats,
      move_time: config.move_time,
      accounts: config.accounts,
      instance: config.instance
    }
  end

  defp now_ms, do: :erlang.monotonic_time(:millisecond)
end
