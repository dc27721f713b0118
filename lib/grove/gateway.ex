defmodule Grove.Gateway do
  @moduledoc """
  The HTTP and WebSocket gateway: Yaws, embedded in Grove's supervision tree.

  It serves the browser client and its assets from `priv/static`, the
  terrain at `/terrain`, the legend of entity kinds at `/kinds`, and the
  game at `/ws` (see `docs/protocol.md`). Yaws reads a WebSocket's
  upgrade request; the socket then belongs to a
  connection process of Grove's own (`Grove.Gateway.Connection`, under the
  gateway's sessions supervisor), the player's session. It writes at most
  once per event: an outcome at once, with the views published since; the
  views of a player who does not move every `:view_ms`. Views are frames
  the zones encode once per tick for everyone who watches them; broadcasts
  are posted once, on a bulletin the connections read as they write.

  Yaws registers its processes under fixed names, so one gateway runs per
  node.

  Yaws reads every request's head itself, and trusted it: a malformed one
  could crash the connection's process without an answer, or hold it until
  the read timed out. The listening socket's TCP module,
  `Grove.Gateway.FrontDoor`, sees each request line, header line and chunk
  size as Yaws reads it, and answers a bad one at once with a JSON error
  (`{"error": CODE, "message": TEXT}`) and a close: 400 for what cannot be
  parsed (a request line, a header line, a Content-Length, a transfer
  coding that does not end with `chunked`, a chunk's framing), 413 for a
  Content-Length or chunk size over `:max_body`, 501 for a coding before
  `chunked`, 505 for an HTTP version other than 1.x (a later 1.x is read as
  1.1), 414 and 431 for a request target or headers over `:max_uri` or
  `:max_headers` (Yaws's own limit of 16 KB a line dropped the connection
  with a reset).

  ## Options

    * `:instance` - the Grove instance whose world it serves (required)
    * `:world`, `:actors` - the names of that instance's world and actors,
      and `:summary`, `{module, function}` that gives the cluster at a
      glance for the dashboard (`Grove.summary/1`): derived by
      `Grove.Config`, so that the gateway asks nothing of the instance
      above it
    * `:port` - TCP port, `0` for any free one (default `4000`)
    * `:listen` - `:loopback` or `:all` interfaces, or an IP tuple
      (default `:loopback`)
    * `:docroot` - static files (default the application's `priv/static`)
    * `:max_frame` - largest client frame in bytes (default `4096`)
    * `:move_rate`, `:move_burst` - moves a connection may send per second,
      and at once (defaults `20`, `10`)
    * `:seed_rate`, `:seed_burst` - patterns of bacteria a connection may
      seed per second, and at once; more are refused `rate_limited`
      (defaults `1`, `3`)
    * `:act_rate`, `:act_burst` - a game's actions a connection may ask
      for per second, and at once; more are answered `rate_limited`
      (defaults `10`, `5`)
    * `:say_rate`, `:say_burst` - lines a connection may say per second,
      and at once; more are answered `rate_limited` (defaults `1`, `3`)
    * `:say_max` - the longest line a player may say, in characters
      (default `200`)
    * `:max_errors` - bad messages per minute before a client is cut off
      (default `50`)
    * `:max_view_radius` - the largest viewport a client may ask for
      (default `16`)
    * `:spawn` - where a new player starts (one with no cell of its own
      to go back to): `nil` for a free cell anywhere, or a rectangle
      `{x0, y0, x1, y1}` of cells (upper bounds exclusive), anywhere when
      that is full (default `nil`)
    * `:view_ms`, `:view_ms_max` - how often a player who does not move is
      sent views, in milliseconds: every `:view_ms` while the server has
      room, stretching to `:view_ms_max` as its schedulers get busy (see
      `:pace_low`); a player's own move outcome carries the views due at
      once, whatever the pace (defaults `250`, `1000`; equal values fix it)
    * `:view_wait_ms` - how long past its view interval a player who moved
      less than `:view_ms_max` ago waits for its next move's outcome to
      carry its views (the snapshots of tiles that came into view, and
      the closings of those it left, with them), before they go out
      alone (a move in flight is always
      waited for, up to `:lost_move_ms`); `0` sends them at the interval
      (default `250`)
    * `:connection_heap` - the words of heap each connection process starts
      with and keeps at least (`min_heap_size`): the garbage a connection
      makes between two collections (default `4181`)
    * `:session_supervisors` - the supervisors the connections are started
      under, side by side (a `PartitionSupervisor`'s partitions, picked by
      the upgrading process): each start waits for the new connection's
      `init/1`, so one supervisor starts one connection at a time, and a
      join storm's upgrades queued behind it until their clients gave up;
      this many start that many at once (default `64`)
    * `:pace_low`, `:pace_high` - the scheduler utilization (0 to 1) below
      which views go out every `:view_ms`, and above which every
      `:view_ms_max` (defaults `0.5`, `0.8`)
    * `:view_backlog` - bytes waiting in a socket's queue above which views
      are held back and coalesce (default `32_768`)
    * `:slow_seconds`, `:slow_backlog` - a connection whose queue stays over
      `:view_backlog` for `:slow_seconds`, or grows over `:slow_backlog`
      bytes at all, is closed as a slow consumer (defaults `5`, `131_072`);
      a client that does not take a goodbye (its `bye` and close frame,
      queued behind what it had not read) is reset once it has taken none
      of it for `:slow_seconds`
    * `:lost_move_ms` - milliseconds after which a player's move whose zone
      process died holding it is settled by the gateway, from where the
      entity stands (`ok` or `interrupted`; default `2000`)
    * `:close_timeout` - milliseconds a connection that said goodbye waits
      for the client's close frame, once its last frames (the `bye` among
      them) have left its queue, before it drops the socket (default `2000`)
    * `:stats_interval`, `:density_interval` - milliseconds between `stats`
      and `density` messages to every client (defaults `2000`, `10_000`);
      each rides on a connection's next write
    * `:density_side` - the minimap's largest side in blocks; the world's
      density grid is merged down to it (default `64`)
    * `:minimap_zones` - a world more zones wide or high than this is too
      large to picture whole: its minimap is sent as `places`, the world's
      busiest zones, and drawn around each player (default `64`)
    * `:minimap_places` - how many of the busiest zones `places` lists, at
      most 65,535 (default `256`)
    * `:unready_ms` - milliseconds a graceful stop answers `/readyz` with
      `503` (and refuses new players) before it tells the players goodbye,
      so that load balancers stop sending players first; at least their
      health checks' interval (default `2000`)
    * `:drain_timeout` - milliseconds shutdown waits for sessions to say
      goodbye (default `5000`)
    * `:keepalive` - milliseconds of silence from a client after which it
      is pinged; twice that and it is cut off (default `30_000`)
    * `:max_sessions` - WebSocket players at once; an upgrade past it gets
      `503 server_full` (default `100_000`). Exact: each upgrade takes a
      seat before its connection starts, given back when the connection
      (or the upgrade, before it started one) is gone however it ended,
      so however many upgrades come at once, no more players than this
      are connected or connecting (the seats taken:
      `grove_sessions_seats`)
    * `:max_connections` - HTTP connections Yaws accepts at once, WebSockets
      not counted (default `:nolimit`)
    * `:sndbuf` - the kernel's send buffer per socket in bytes, `nil` for the
      system's (default `nil`; small values make slow clients show sooner)
    * `:max_body` - largest HTTP request body in bytes; larger ones get 413
      (default `65_536`)
    * `:http_timeout` - milliseconds an HTTP connection waits for its
      client's next bytes: the rest of a request's head or body, or the
      next request on a kept-alive connection (default `15_000`)
    * `:request_deadline` - milliseconds within which an API request is
      answered, counted from the moment its connection was accepted (or
      its request line arrived, on a kept-alive connection): one that
      cannot be served in time (its wait for a password permit, for the
      store's queue or for the database would pass it) gets `503` with
      `Retry-After` by then (default `1000`)
    * `:upgrade_deadline` - milliseconds within which a WebSocket upgrade
      must have its connection started, counted from the start of its
      request (the moment its connection was accepted, or its request line
      arrived, on a kept-alive connection): one that waited longer, for its
      handler or for a supervisor to start its connection (a server too
      busy to start players in time), gets `503 server_busy` with `Retry-After: 1` at once, rather
      than a start its client may have given up on; counted in
      `grove_http_late_total{stage="upgrade"}` (default `8000`; `0`
      refuses every upgrade, for tests)
    * `:accept_priority` - the priority at which connections are accepted:
      `:high` (the default; they are served at `:normal` once accepted, see
      `docs/decisions.md`) or `:normal`, as Yaws does on its own (for
      comparing the two)
    * `:max_uri` - longest HTTP request target (path and query) in bytes;
      longer ones get 414 (default `8192`)
    * `:max_headers` - most bytes of HTTP request header lines, all told;
      more get 431 (default `32_768`)
    * `:accounts` - the `Grove.Accounts` service behind `/api` and behind
      join tokens, or `nil` for a server without accounts where everyone
      plays as a guest (default `nil`)
    * `:admin_token` - when set, `/metrics`, `/dashboard` and the load
      reports need it, as `Authorization: Bearer TOKEN`, the session cookie
      the dashboard's login form gives, or `?token=TOKEN` for scrapers that
      send nothing else (default `nil`: open, which is why the gateway
      listens on loopback unless told otherwise)

  ## Telemetry

  Counters in `Grove.Gateway.Stats`: sessions, upgrades refused, frames
  and bytes in, socket writes and bytes out per encoding, writes that held
  views back, slow consumers, protocol errors, rate-limited moves, oversized
  frames, sessions drained, HTTP requests refused as they were read (by
  status), HTTP clients that closed or fell silent in the middle of a
  request (`client_errors`: Yaws reports each as an error; the gateway
  counts them and logs them at debug level instead, see
  `Grove.Gateway.ClientErrors`).
  """

  use Supervisor

  alias Grove.Gateway.{Broadcaster, Clock, Drainer, Errors, HTTP, Pacer, Scratch, Socket, Stats}

  require Logger

  # The embedded Yaws server's id.
  @yaws_id ~c"grove"

  @defaults [
    instance: nil,
    world: nil,
    actors: nil,
    summary: nil,
    port: 4000,
    listen: :loopback,
    docroot: nil,
    max_frame: 4096,
    move_rate: 20,
    move_burst: 10,
    seed_rate: 1,
    seed_burst: 3,
    act_rate: 10,
    act_burst: 5,
    say_rate: 1,
    say_burst: 3,
    say_max: 200,
    max_errors: 50,
    max_view_radius: 16,
    spawn: nil,
    view_ms: 250,
    view_ms_max: 1000,
    view_wait_ms: 250,
    connection_heap: 4181,
    pace_low: 0.5,
    pace_high: 0.8,
    view_backlog: 32_768,
    slow_backlog: 131_072,
    slow_seconds: 5,
    close_timeout: 2000,
    lost_move_ms: 2000,
    stats_interval: 2000,
    density_interval: 10_000,
    density_side: 64,
    minimap_zones: 64,
    minimap_places: 256,
    unready_ms: 2000,
    drain_timeout: 5000,
    keepalive: 30_000,
    max_sessions: 100_000,
    session_supervisors: 64,
    max_connections: :nolimit,
    sndbuf: nil,
    max_body: 65_536,
    max_uri: 8192,
    max_headers: 32_768,
    http_timeout: 15_000,
    request_deadline: 1000,
    upgrade_deadline: 8000,
    accept_priority: :high,
    admin_token: nil,
    accounts: nil
  ]

  @doc "Starts the gateway; see the module doc for options."
  @spec start_link(keyword()) :: Supervisor.on_start()
  def start_link(opts) do
    opts = validate!(opts)

    case check_port(opts) do
      :ok ->
        Supervisor.start_link(__MODULE__, opts, name: __MODULE__)

      {:error, reason, line} ->
        Logger.error("gateway: " <> line)
        {:error, reason}
    end
  end

  @doc """
  Whether the gateway these options describe can listen on its port: `:ok`,
  or the reason and one line for the operator that says what to do.
  (Grove's application looks before it starts anything.)
  """
  @spec check_port(keyword()) :: :ok | {:error, term(), String.t()}
  def check_port(opts) do
    opts = Keyword.merge(@defaults, opts)
    port_free(listen_ip(opts[:listen]), opts[:port])
  end

  # Yaws reports a port in use with a crash trace of sixty lines; one line
  # that says what to do serves the operator better. (The port could still
  # be taken between this look and Yaws's listen; then the trace it is.)
  defp port_free(_ip, 0), do: :ok

  defp port_free(ip, port) do
    case :gen_tcp.listen(port, ip: ip, reuseaddr: true) do
      {:ok, socket} ->
        :gen_tcp.close(socket)

      {:error, :eaddrinuse} ->
        {:error, {:port_in_use, port},
         "port #{port} on #{:inet.ntoa(ip)} is in use by another program; " <>
           "choose another with GROVE_PORT=... (or the gateway's :port option)"}

      {:error, reason} ->
        {:error, {:listen, port, reason},
         "cannot listen on port #{port}: #{:inet.format_error(reason)}"}
    end
  end

  @doc false
  def child_spec(opts) do
    %{
      id: __MODULE__,
      start: {__MODULE__, :start_link, [opts]},
      type: :supervisor,
      shutdown: :infinity
    }
  end

  @doc "The port the gateway listens on (useful with `port: 0`)."
  @spec port() :: :inet.port_number()
  def port do
    {:ok, _gconf, [[sconf | _] | _]} = :yaws_api.getconf()
    :yaws_api.get_listen_port(sconf)
  end

  @doc "The gateway's URL, for people."
  @spec url() :: String.t()
  def url do
    host =
      case config().listen do
        {0, 0, 0, 0} -> "localhost"
        ip -> ip |> :inet.ntoa() |> to_string()
      end

    "http://#{host}:#{port()}/"
  end

  @doc false
  # The broadcaster's pid (for tests and the chaos lab), or nil between restarts.
  @spec broadcaster() :: pid() | nil
  def broadcaster do
    with {_, sup, _, _} when is_pid(sup) <-
           List.keyfind(Supervisor.which_children(__MODULE__), :broadcast, 0),
         {_, pid, _, _} when is_pid(pid) <-
           List.keyfind(Supervisor.which_children(sup), Broadcaster, 0),
         do: pid,
         else: (_ -> nil)
  end

  @doc "The running gateway's settings, read by its appmods and sessions."
  @spec config() :: map()
  def config, do: :persistent_term.get(__MODULE__)

  @doc false
  # The same, or nil when no gateway runs on this node. This module is the
  # one owner of its `:persistent_term` keys; others ask it.
  @spec lookup() :: map() | nil
  def lookup, do: :persistent_term.get(__MODULE__, nil)

  @doc false
  def terrain, do: :persistent_term.get({__MODULE__, :terrain})

  @doc """
  Claims an account for the calling connection. Another connection that
  plays it is replaced: it leaves the world, says `bye` with `replaced`,
  and hands back the cell its player stood on (`nil` if it had not joined
  or did not answer). `:busy` when the account could not be taken in
  `tries` attempts (the other connection does not answer and keeps it).
  """
  @spec claim(pos_integer(), non_neg_integer()) ::
          :ok | {:replaced, {non_neg_integer(), non_neg_integer()} | nil} | :busy
  def claim(account_id, tries \\ 3)

  # The other connection does not step aside (it does not answer in time,
  # or others keep taking the account): the join is refused for now.
  def claim(_account_id, 0), do: :busy

  def claim(account_id, tries) do
    players = config().players

    case Registry.register(players, account_id, nil) do
      {:ok, _} ->
        :ok

      # A join of ours that failed (the world was busy) and is tried again.
      {:error, {:already_registered, other}} when other == self() ->
        :ok

      {:error, {:already_registered, other}} ->
        cell =
          try do
            GenServer.call(other, :grove_replace, 5000)
          catch
            :exit, _ -> nil
          end

        # The other unregistered before it answered, or is gone; a third
        # connection of the same account may be quicker still.
        case Registry.register(players, account_id, nil) do
          {:ok, _} -> {:replaced, cell}
          {:error, {:already_registered, _}} -> claim(account_id, tries - 1)
        end
    end
  end

  @doc """
  Posts an operator's announcement to every player: those of this
  gateway, and in a cluster those of every member's gateway (asked once
  each, not waited for). `text` is checked like a said line
  (`Grove.Text.check_speech/2`, at most 500 characters).
  """
  @spec announce(String.t()) :: :ok | {:error, atom(), String.t()}
  def announce(text) do
    case Grove.Text.check_speech(text, 500) do
      {:ok, line} ->
        config = config()

        if config.world && Grove.World.fetch!(config.world).cluster do
          for node <- Grove.Cluster.members(config.instance),
              node != node(),
              do: :erpc.cast(node, __MODULE__, :announce_here, [line])
        end

        announce_here(line)

      {:error, code, why} ->
        {:error, code, why}
    end
  end

  @doc false
  # One gateway's part of `announce/1`.
  @spec announce_here(String.t()) :: :ok
  def announce_here(line) do
    case lookup() do
      nil ->
        :ok

      config ->
        Stats.incr(config.stats, :announcements)
        Broadcaster.announce(config.bulletin, line)
    end
  end

  @doc "True once the gateway has begun to drain (it is stopping)."
  @spec draining?() :: boolean()
  def draining?, do: :atomics.get(config().draining, 1) == 1

  @doc "The gateway's counters."
  @spec stats() :: %{atom() => integer()}
  def stats, do: Stats.read(config().stats)

  @doc """
  The histogram of players' moves as the server sees them, in microseconds:
  from the move read off the socket to its outcome handed to the socket.
  """
  @spec move_time() :: Grove.Metrics.Histogram.t()
  def move_time, do: config().move_time

  @doc "The session processes connected now."
  @spec sessions() :: [pid()]
  def sessions do
    for {_partition, supervisor, _, _} <- PartitionSupervisor.which_children(config().sessions),
        {_, pid, _, _} <- DynamicSupervisor.which_children(supervisor),
        is_pid(pid),
        do: pid
  end

  @impl true
  def init(opts) do
    # What Yaws writes (the modules it compiles at start, under $YAWSHOME)
    # goes in a folder of this gateway's own (Grove.Gateway.Scratch).
    scratch = Scratch.make!(@yaws_id)
    docroot = opts[:docroot] || Application.app_dir(:grove, "priv/static")
    File.mkdir_p!(docroot)
    sessions = :"#{opts[:instance]}.Gateway.Sessions"
    players = :"#{opts[:instance]}.Gateway.Players"
    seat_keeper = :"#{opts[:instance]}.Gateway.Seats"

    world = opts[:world]
    terrain = Grove.World.terrain(world)

    # The ground never changes: compress it once for every client to fetch.
    # A world too large to be made whole sends each area's ground with it.
    :persistent_term.put(
      {__MODULE__, :terrain},
      terrain.cells &&
        %{
          width: terrain.width,
          height: terrain.height,
          raw: terrain.cells,
          gzip: :zlib.gzip(terrain.cells)
        }
    )

    config =
      opts
      |> Map.new()
      |> Map.merge(%{
        world: world,
        listen: listen_ip(opts[:listen]),
        docroot: docroot,
        stats: Stats.new(),
        # The `max_sessions` seats taken (Grove.Gateway.Seats).
        seats: Grove.Gateway.Seats.new(),
        # Takes the seats, gives each back when its holder is gone, and
        # counts the sessions.
        seat_keeper: seat_keeper,
        # HTTP requests' beginnings, deadlines and waits.
        clock: Clock.new(),
        # Players' moves on the server: from the frame read to the outcome written.
        move_time: Grove.Metrics.Histogram.new(),
        sessions: sessions,
        players: players,
        tick_ms: tick_ms(world),
        # Made here, so that they outlive the processes that write them.
        bulletin: Broadcaster.bulletin(),
        # Set when a drain begins: /readyz answers 503 from then on.
        draining: :atomics.new(1, []),
        # The latest report of a load run (POST /api/load/report), for the dashboard.
        load_report: :ets.new(:grove_load_report, [:set, :public]),
        view_pace: Pacer.new(opts[:view_ms])
      })

    :persistent_term.put(__MODULE__, config)

    server = [
      port: opts[:port],
      listen: config.listen,
      servername: ~c"grove",
      appmods: [
        {~c"/ws", Socket},
        {~c"/terrain", HTTP},
        {~c"/kinds", HTTP},
        # Yaws's own MIME table knows no web fonts (and adding one costs
        # seconds of compiling at every start): fonts are served here.
        {~c"/assets/fonts", HTTP},
        {~c"/game", HTTP},
        {~c"/metrics", HTTP},
        {~c"/dashboard", HTTP},
        {~c"/api", HTTP},
        {~c"/healthz", Grove.Gateway.Health},
        {~c"/readyz", Grove.Gateway.Health}
      ],
      # A body bigger than this arrives in pieces, which Grove.Gateway.HTTP
      # gathers up to this same limit (and refuses past it).
      partial_post_size: opts[:max_body],
      index_files: [~c"index.html"],
      # Sees every request first: drops malformed Range headers.
      arg_rewrite_mod: Grove.Gateway.Rewrite,
      errormod_404: Errors,
      errormod_crash: Errors,
      flags: [access_log: false, auth_log: false, dir_listings: false, deflate: true],
      # Sockets inherit these: a bounded wait on a blocked send, and a queue
      # deep enough that views can be held back before a send would block.
      soptions: [
        listen_opts:
          [
            backlog: 1024,
            # Sees the request heads Yaws reads, and answers malformed ones.
            tcp_module: Grove.Gateway.FrontDoor,
            # Outcomes are small frames that must go out at once, not wait
            # for Nagle's algorithm and a delayed ACK (measured: ~40 ms late
            # in about one move in 300 from a browser).
            nodelay: true,
            send_timeout: 10_000,
            send_timeout_close: true,
            high_watermark: 2 * opts[:slow_backlog],
            low_watermark: opts[:slow_backlog]
          ] ++ if(opts[:sndbuf], do: [sndbuf: opts[:sndbuf]], else: [])
      ]
    ]

    global = [
      logdir: to_charlist(scratch),
      flags: [copy_errlog: false, fail_on_bind_err: true],
      # Yaws's one read timeout: for a request's head and body, and between requests.
      keepalive_timeout: opts[:http_timeout],
      keepalive_maxuses: :nolimit,
      max_connections: opts[:max_connections],
      # Accepting runs at high priority, serving at normal (see
      # Grove.Gateway.FrontDoor and docs/decisions.md): every acceptor is a
      # new process spawned at high priority, since a pooled one would wait
      # at normal priority for its turn before it accepted again.
      acceptor_pool_size: if(opts[:accept_priority] == :high, do: 0, else: 8),
      process_options: [priority: opts[:accept_priority]],
      cache_refresh_secs: 0
    ]

    {:ok, sconfs, gconf, yaws_children} =
      :yaws_api.embedded_start_conf(to_charlist(docroot), server, global, @yaws_id)

    children =
      [
        # First, so it stops last: Yaws writes into it when it starts.
        {Scratch, scratch},
        # Before the connections and Yaws, which hold seats: restarted, it
        # frees every seat, and they restart after it.
        {Grove.Gateway.Seats, {config.seats, config.stats, seat_keeper}},
        # Stopped after the drainer, which has said goodbye by then.
        {PartitionSupervisor,
         child_spec: DynamicSupervisor, name: sessions, partitions: opts[:session_supervisors]},
        # Which connection plays which account: one each.
        {Registry, keys: :unique, name: players},
        # Before Yaws and stopped after it: Yaws's reports of clients that
        # close or fall silent mid-request are counted, not logged as errors.
        {Grove.Gateway.ClientErrors, config.stats}
      ] ++
        yaws_children ++
        [
          # Hands the configuration to the Yaws server once its processes are up.
          {Grove.Gateway.Setup, {gconf, sconfs, config}},
          # After Yaws, so it stops before it: it tells every session goodbye first.
          {Drainer, config},
          # What they know outlives them (the bulletin, the pace), so they
          # restart alone, as often as they crash: their crashes must not
          # count against Yaws's restarts here, whose limit drains everyone.
          %{
            id: :broadcast,
            type: :supervisor,
            start:
              {Supervisor, :start_link,
               [
                 [{Broadcaster, config}, {Pacer, config}],
                 [strategy: :one_for_one, max_restarts: 100, max_seconds: 5]
               ]}
          }
        ]

    # An embedded Yaws server that restarts comes back without its
    # configuration, so whatever follows it restarts too (Setup hands the
    # configuration over again); a broadcaster that crashes restarts alone,
    # without draining a single session.
    Supervisor.init(children, strategy: :rest_for_one, max_restarts: 3, max_seconds: 10)
  end

  defp validate!(opts) do
    opts = Keyword.validate!(opts, @defaults)

    if opts[:instance] == nil, do: raise(ArgumentError, "the gateway needs an :instance")

    unless is_integer(opts[:port]) and opts[:port] >= 0 and opts[:port] < 65_536,
      do: raise(ArgumentError, ":port must be in 0..65535, got: #{inspect(opts[:port])}")

    for key <- [
          :max_frame,
          :move_rate,
          :move_burst,
          :seed_rate,
          :seed_burst,
          :act_rate,
          :act_burst,
          :say_rate,
          :say_burst,
          :say_max,
          :max_errors,
          :max_view_radius,
          :view_backlog,
          :slow_backlog,
          :slow_seconds,
          :close_timeout,
          :lost_move_ms,
          :stats_interval,
          :density_interval,
          :drain_timeout,
          :max_body,
          :max_uri,
          :max_headers,
          :http_timeout,
          :request_deadline,
          :density_side,
          :minimap_zones,
          :minimap_places,
          :view_ms,
          :view_ms_max,
          :connection_heap,
          :keepalive,
          :max_sessions,
          :session_supervisors
        ],
        not (is_integer(opts[key]) and opts[key] > 0) do
      raise ArgumentError,
            "#{inspect(key)} must be a positive integer, got: #{inspect(opts[key])}"
    end

    # `places` lists them with a u16 count.
    unless opts[:minimap_places] <= 65_535,
      do:
        raise(
          ArgumentError,
          ":minimap_places must be at most 65535, got: #{inspect(opts[:minimap_places])}"
        )

    unless is_integer(opts[:upgrade_deadline]) and opts[:upgrade_deadline] >= 0,
      do:
        raise(
          ArgumentError,
          ":upgrade_deadline must be a non-negative integer, got: #{inspect(opts[:upgrade_deadline])}"
        )

    unless is_integer(opts[:view_wait_ms]) and opts[:view_wait_ms] >= 0,
      do:
        raise(
          ArgumentError,
          ":view_wait_ms must be a non-negative integer, got: #{inspect(opts[:view_wait_ms])}"
        )

    unless is_integer(opts[:unready_ms]) and opts[:unready_ms] >= 0,
      do:
        raise(
          ArgumentError,
          ":unready_ms must be a non-negative integer, got: #{inspect(opts[:unready_ms])}"
        )

    listen_ip(opts[:listen])

    case opts[:spawn] do
      nil ->
        :ok

      {x0, y0, x1, y1}
      when is_integer(x0) and is_integer(y0) and x0 >= 0 and y0 >= 0 and
             is_integer(x1) and is_integer(y1) and x1 > x0 and y1 > y0 ->
        :ok

      other ->
        raise ArgumentError,
              ":spawn must be nil or a rectangle {x0, y0, x1, y1} with x0 < x1 and y0 < y1, " <>
                "got: #{inspect(other)}"
    end

    unless opts[:accept_priority] in [:high, :normal],
      do:
        raise(
          ArgumentError,
          ":accept_priority must be :high or :normal, got: #{inspect(opts[:accept_priority])}"
        )

    if opts[:view_ms_max] < opts[:view_ms],
      do: raise(ArgumentError, ":view_ms_max must be at least :view_ms")

    unless is_number(opts[:pace_low]) and is_number(opts[:pace_high]) and
             opts[:pace_low] >= 0 and opts[:pace_low] < opts[:pace_high] and
             opts[:pace_high] <= 1,
           do: raise(ArgumentError, ":pace_low and :pace_high must satisfy 0 <= low < high <= 1")

    token = opts[:admin_token]
    token = if is_struct(token, Grove.Secret), do: Grove.Secret.reveal(token), else: token

    unless token == nil or (is_binary(token) and byte_size(token) >= 8),
      do: raise(ArgumentError, ":admin_token must be nil or a string of at least 8 bytes")

    # Held as a Grove.Secret from here on, so that no state or report prints it.
    Keyword.put(opts, :admin_token, Grove.Secret.new(token))
  end

  defp tick_ms(world) do
    case Grove.World.fetch!(world).tick do
      :manual -> 100
      tick -> tick
    end
  end

  defp listen_ip(:loopback), do: {127, 0, 0, 1}
  defp listen_ip(:all), do: {0, 0, 0, 0}
  defp listen_ip({_, _, _, _} = ip), do: ip

  defp listen_ip(other),
    do:
      raise(
        ArgumentError,
        ":listen must be :loopback, :all or an IPv4 tuple, got: #{inspect(other)}"
      )
end
