defmodule Grove.Gateway.Session do
  @moduledoc false
  # One player's connection, independent of the socket: it turns client
  # messages into world calls and world messages into frames, and keeps what
  # the player has been sent of the areas (view tiles) around it. The
  # connection process (Grove.Gateway.Connection) owns a Session, feeds it
  # what arrives and writes out the frames it returns.
  #
  # Outcomes go out at once and are never dropped. Views are not messages to
  # this process: the zones in view publish their deltas once per tick, as
  # finished frames cut by view tile, in the world's feed, and `views/1`
  # reads what is new since the session last read it, for the tiles it
  # holds, whenever the connection is about to write (with an outcome, or
  # when its view interval comes round).
  #
  # The player's zone subscribes it to the zones its viewport overlaps; each
  # says so (`:subscribed`), and the session asks it for the tiles of it
  # the viewport overlaps, which come as snapshots (`:tiles`). As the
  # player moves, the session asks for the tiles that come into view and
  # closes those that are out of it by more than `view_margin` cells (so
  # that a player pacing along a tile's edge does not fetch it again and
  # again); a zone's `:closed` closes its tiles.
  #
  # From version 6 on, an area's ground goes once a connection: the session
  # remembers the tiles whose ground it sent (`grounds`, forgotten on a
  # welcome, a resync, and when it holds `grounds_kept` of them, after
  # which each goes once more), and sends their snapshots without it.

  require Logger

  alias Grove.{Accounts, Protocol, RateLimit}
  alias Grove.Gateway.{Frames, Stats}
  alias Grove.World
  alias Grove.World.{Feed, Grid}

  # Errors tolerated per window before a client is cut off.
  @error_window_ms 60_000
  # A guest's face (accounts have an avatar of their own, see docs/api.md).
  @guest_avatar "😀"

  # At most 31 fields: a struct of more than 32 keys is a hash map, whose
  # every read and update of a field hashes its key and copies a node of
  # the map's tree, where a flat map's finds it in place; a session is
  # read and updated at every message (paired fields are kept as one).
  defstruct [
    :world,
    :feed,
    :format,
    :encoding,
    :version,
    :config,
    :move_limit,
    # The other limits, each with when its next event is booked.
    :seed_limit,
    :act_limit,
    :say_limit,
    :id,
    :cell,
    :account_id,
    :welcome,
    :join_opts,
    :grid,
    # The cell the tiles were last fitted to, and the spans of tiles then.
    tiled: {nil, nil},
    moved_at: nil,
    moves_booked: nil,
    # The process of the zone the player's entity is in, kept from move to
    # move (`World.move_by/7`).
    zone: nil,
    # Per zone read from the feed, where its number was kept, the number
    # read to and the tiles held then (nil where nothing is remembered:
    # in a cluster, see `read/1`).
    reads: %{},
    # The errors counted in the window, and when the window began.
    errors: {0, 0},
    joined: false,
    minimap: true,
    grounds: nil,
    areas: %{},
    in_flight: %{},
    seeds_in_flight: %{},
    acts_in_flight: %{},
    says_in_flight: %{}
  ]

  @type action :: {:send, iodata()} | {:close, non_neg_integer(), String.t()}

  @type config :: %{
          max_frame: pos_integer(),
          move_rate: pos_integer(),
          move_burst: pos_integer(),
          seed_rate: pos_integer(),
          seed_burst: pos_integer(),
          act_rate: pos_integer(),
          act_burst: pos_integer(),
          say_rate: pos_integer(),
          say_burst: pos_integer(),
          say_max: pos_integer(),
          max_errors: pos_integer(),
          max_view_radius: pos_integer(),
          spawn: {non_neg_integer(), non_neg_integer(), pos_integer(), pos_integer()} | nil,
          tick_ms: pos_integer(),
          view_ms: pos_integer(),
          stats: Grove.Gateway.Stats.t() | nil,
          move_time: Grove.Metrics.Histogram.t() | nil,
          accounts: atom() | nil
        }

  @typedoc """
  Per zone subscribed to, per view tile of it held: the feed's number last
  sent for the tile, or `:awaiting` its snapshot.
  """
  @type areas :: %{
          World.Grid.zone_index() => %{World.Grid.tile_index() => non_neg_integer() | :awaiting}
        }

  @type t :: %__MODULE__{areas: areas()}

  # What the session speaks until a `join` names its version: the newest
  # whose JSON messages are objects, which a client of any version reads
  # (an error before the join, an old client told to update).
  @before_join 4

  @spec new(World.name(), Protocol.encoding(), config(), integer()) :: t()
  def new(world, encoding, config, now_ms) do
    described = World.fetch!(world)

    %__MODULE__{
      world: world,
      feed: described.feed,
      grid: described.grid,
      reads: if(described.cluster == nil, do: %{}),
      format: Frames.view_format(encoding, @before_join, described.grid),
      encoding: encoding,
      version: @before_join,
      config: config,
      move_limit: RateLimit.new(config.move_rate, config.move_burst),
      seed_limit:
        {RateLimit.new(Map.get(config, :seed_rate, 1), Map.get(config, :seed_burst, 3)), nil},
      act_limit:
        {RateLimit.new(Map.get(config, :act_rate, 10), Map.get(config, :act_burst, 5)), nil},
      say_limit:
        {RateLimit.new(Map.get(config, :say_rate, 1), Map.get(config, :say_burst, 3)), nil},
      errors: {0, now_ms}
    }
  end

  @doc "A client message over `max_frame`: the documented error, then close 1009."
  @spec too_large(t()) :: {t(), [action()]}
  def too_large(%__MODULE__{} = session) do
    count_error(session.config, :too_large)

    actions = [
      send_message(session, %{
        type: :error,
        code: :too_large,
        message: "frames are limited to #{session.config.max_frame} bytes"
      }),
      {:close, 1009, "too large"}
    ]

    {session, actions}
  end

  @doc """
  A message from the client, already taken out of its frame (the frame
  parser has held it to `max_frame`; see `too_large/1`).
  """
  @spec handle_frame(t(), :text | :binary, binary(), integer()) :: {t(), [action()]}
  def handle_frame(%__MODULE__{} = session, kind, data, now_ms) do
    cond do
      kind != Frames.kind(session.encoding) ->
        error(
          session,
          :bad_frame,
          "this connection speaks #{session.encoding}; send #{Frames.kind(session.encoding)} frames",
          now_ms
        )

      true ->
        case Protocol.decode(data, session.encoding) do
          {:ok, message} -> handle_message(session, message, now_ms)
          {:error, :unsupported_protocol, text} -> unsupported(session, text)
          {:error, code, text} -> error(session, code, text, now_ms)
        end
    end
  end

  # The version the client asks for, if this server speaks it and the
  # world fits it, is the session's from now on (`Protocol.negotiate/2`).
  defp handle_message(%__MODULE__{joined: false} = session, %{type: :join} = join, now_ms) do
    grid = World.grid(session.world)

    case Protocol.negotiate(join.protocol, {grid.width, grid.height}) do
      {:ok, version} ->
        session = %{
          session
          | version: version,
            format: Frames.view_format(session.encoding, version, grid)
        }

        with {:ok, account} <- identify(session, join.token),
             {:ok, label} <- label(join, account) do
          place(session, join, account, label, now_ms)
        else
          {:error, code, text} -> error(session, code, text, now_ms)
        end

      {:error, text} ->
        unsupported(session, text)
    end
  end

  # Who the player is to others: an account's name, or the name a guest
  # (or an account without one) chose at join, or one made up for it.

  defp handle_message(%__MODULE__{joined: true} = session, %{type: :join}, now_ms),
    do: error(session, :already_joined, "this connection has joined already", now_ms)

  defp handle_message(%__MODULE__{joined: false} = session, %{type: type}, now_ms)
       when type in [:move, :resync, :seed, :act, :say],
       do: error(session, :not_joined, "send join first", now_ms)

  defp handle_message(session, %{type: :move, seq: seq, dir: direction}, now_ms) do
    case RateLimit.allow(session.move_limit, session.moves_booked, now_ms) do
      {:ok, booked} ->
        # The zone asked, so that a move it dies holding can be settled;
        # the tiles ahead asked for only if the move goes.
        {zone, kept, session} =
          World.move_by(
            session.world,
            session.id,
            direction,
            seq,
            session,
            &ahead(&1, direction),
            session.zone
          )

        started = System.monotonic_time(:microsecond)
        flight = {started, zone, direction}

        {%{
           session
           | moves_booked: booked,
             moved_at: now_ms,
             zone: kept,
             in_flight: Map.put(session.in_flight, seq, flight)
         }, []}

      # Answered here, as the world answers a move: one outcome a move,
      # where the player stands.
      :limited ->
        if session.config.stats, do: Stats.incr(session.config.stats, :rate_limited)
        {x, y} = session.cell

        {%{session | moved_at: now_ms},
         [{:send, Frames.outcome(session.encoding, session.version, seq, :rate_limited, x, y)}]}
    end
  end

  # A pattern of bacteria in front of the player: refused here when it
  # comes too often, else the zone answers (`seeded`, one per seed).
  defp handle_message(session, %{type: :seed, seq: seq, pattern: pattern, dir: direction}, now_ms) do
    {limit, booked} = session.seed_limit

    case RateLimit.allow(limit, booked, now_ms) do
      {:ok, booked} ->
        :ok = World.seed(session.world, session.id, pattern, direction, {:seed, seq})
        pending = {System.monotonic_time(:microsecond), World.zone_of(session.world, session.id)}

        {%{
           session
           | seed_limit: {limit, booked},
             seeds_in_flight: Map.put(session.seeds_in_flight, seq, pending)
         }, []}

      :limited ->
        {session, [send_message(session, %{type: :seeded, seq: seq, result: :rate_limited})]}
    end
  end

  # An action of the world's game: checked here against the game's
  # actions (a refusal names what is wrong), refused when it comes too
  # often, else its zone answers (`acted`, exactly one an action).
  defp handle_message(session, %{type: :act, seq: seq} = act, now_ms) do
    {limit, booked} = session.act_limit

    case RateLimit.allow(limit, booked, now_ms) do
      {:ok, booked} ->
        session = %{session | act_limit: {limit, booked}}

        case Grove.World.Game.spec(session.world) do
          nil ->
            {session, [acted(session, seq, :disabled, "this world has no game")]}

          spec ->
            case Grove.Game.check(spec, act.action, act.args) do
              {:ok, name, args} ->
                :ok = World.act(session.world, session.id, name, act.dir, args, {:act, seq})

                pending =
                  {System.monotonic_time(:microsecond), World.zone_of(session.world, session.id)}

                {%{session | acts_in_flight: Map.put(session.acts_in_flight, seq, pending)}, []}

              {:error, code, text} ->
                count(session.config, :acts_refused)
                {session, [acted(session, seq, code, text)]}
            end
        end

      :limited ->
        {session,
         [
           acted(
             session,
             seq,
             :rate_limited,
             "at most #{session.config[:act_rate] || 10} actions a second"
           )
         ]}
    end
  end

  # A line said to those who see the player: refused here when it comes
  # too often or is not a line one may say (the answer names what is
  # wrong), else the zone tells the player's viewers and answers (`said`,
  # exactly one a line).
  defp handle_message(session, %{type: :say, seq: seq, text: text}, now_ms) do
    {limit, booked} = session.say_limit

    case RateLimit.allow(limit, booked, now_ms) do
      {:ok, booked} ->
        session = %{session | say_limit: {limit, booked}}

        case Grove.Text.check_speech(text, Map.get(session.config, :say_max, 200)) do
          {:ok, line} ->
            :ok = World.say(session.world, session.id, line, {:say, seq})

            pending =
              {System.monotonic_time(:microsecond), World.zone_of(session.world, session.id)}

            {%{session | says_in_flight: Map.put(session.says_in_flight, seq, pending)}, []}

          {:error, code, why} ->
            count(session.config, say_refusal(code))
            {session, [said(session, seq, code, why)]}
        end

      :limited ->
        count(session.config, :says_rate_limited)
        rate = Map.get(session.config, :say_rate, 1)
        {session, [said(session, seq, :rate_limited, "at most #{rate} lines a second")]}
    end
  end

  # The client forgets its areas; each comes back as a snapshot, with its
  # ground.
  defp handle_message(session, %{type: :resync}, _now_ms) do
    areas = Map.new(session.areas, fn {zone, tiles} -> {zone, request(session, zone, tiles)} end)
    {%{session | areas: areas, grounds: no_grounds(session)}, []}
  end

  defp handle_message(session, %{type: :ping, t: t}, _now_ms),
    do: {session, [send_message(session, %{type: :pong, t: t})]}

  defp handle_message(session, %{type: type}, now_ms),
    do: error(session, :bad_message, "#{type} is a server message", now_ms)

  # A client of another protocol version is told so, in words, and let go.
  defp unsupported(session, text) do
    count_error(session.config, :unsupported_protocol)

    {session,
     [
       send_message(session, %{type: :error, code: :unsupported_protocol, message: text}),
       send_message(session, %{type: :bye, reason: :unsupported_protocol, message: text}),
       {:close, 1002, "unsupported protocol version"}
     ]}
  end

  # Who is joining: the token's account, or a guest where guests may play.
  defp identify(%__MODULE__{config: %{accounts: nil}}, _token), do: {:ok, nil}

  defp identify(%__MODULE__{config: %{accounts: accounts}}, "") do
    if Accounts.guests?(accounts),
      do: {:ok, nil},
      else:
        {:error, :unauthorized,
         "this server needs an account: join with a token (see docs/api.md)"}
  end

  defp identify(%__MODULE__{config: %{accounts: accounts}}, token) do
    case Accounts.authenticate(accounts, token) do
      {:ok, account, _token_id} ->
        {:ok, account}

      {:error, :unavailable} ->
        {:error, :join_failed, "accounts are busy; try again"}

      {:error, reason} ->
        {:error, :unauthorized, "the token is #{describe_token(reason)}; log in again"}
    end
  end

  defp describe_token(:expired), do: "expired"
  defp describe_token(:revoked), do: "logged out"
  defp describe_token(_), do: "not valid"

  defp label(join, account) do
    avatar = (account && account.avatar) || @guest_avatar

    cond do
      account && account.name ->
        {:ok, {account.name, avatar}}

      join.name != "" ->
        case Grove.Text.name(join.name) do
          {:ok, name} -> {:ok, {name, avatar}}
          {:error, why} -> {:error, :invalid_name, "name: #{why}"}
        end

      true ->
        seed = if account, do: account.id, else: :rand.uniform(1_000_000)
        {:ok, {Grove.Text.default_name(seed), avatar}}
    end
  end

  defp place(session, join, account, {name, avatar} = label, now_ms) do
    radius = min(join.view_radius, session.config.max_view_radius)

    opts = [
      updates: :view,
      kind: :player,
      view_radius: radius,
      view_format: format(session),
      label: label,
      # What the game's join hook is told of the player.
      info: if(account, do: %{account: account.id, name: name}, else: %{name: name})
    ]

    accounts = session.config.accounts

    # Back where the player stood; next to it when someone else stands
    # there now; anywhere only when the neighbourhood is full too.
    result =
      case account && take_over(session, accounts, account.id) do
        {:error, :account_busy} = busy ->
          busy

        last ->
          case last && World.join(session.world, Keyword.put(opts, :at, last)) do
            {:ok, _id, _cell} = ok -> ok
            nil -> join_new(session.world, opts, Map.get(session.config, :spawn))
            _taken -> join_near(session.world, opts, last)
          end
      end

    case result do
      {:ok, id, {x, y} = cell} ->
        if account, do: Accounts.playing(accounts, account.id, id)
        grid = World.grid(session.world)

        welcome = %{
          type: :welcome,
          protocol: session.version,
          id: id,
          x: x,
          y: y,
          width: grid.width,
          height: grid.height,
          view_radius: radius,
          tick_ms: session.config.tick_ms,
          view_ms: session.config.view_ms,
          name: name,
          avatar: avatar
        }

        session = %{
          session
          | joined: true,
            minimap: join.minimap,
            grounds: no_grounds(session),
            id: id,
            cell: cell,
            account_id: account && account.id,
            welcome: welcome,
            join_opts: opts
        }

        {session, [send_message(session, welcome)]}

      {:error, :account_busy} ->
        error(
          session,
          :join_failed,
          "this account plays on another connection that does not step aside; try again",
          now_ms
        )

      {:error, reason} ->
        error(
          session,
          :join_failed,
          "the world could not place you (#{reason}); try again",
          now_ms
        )
    end
  end

  @doc "A message from the world."
  @spec handle_info(t(), term()) :: {t(), [action()]} | :unknown
  def handle_info(%__MODULE__{id: id} = session, {:grove_move, id, seq, outcome}) do
    {result, {x, y} = cell} =
      case outcome do
        {:ok, cell} -> {:ok, cell}
        {:rejected, reason} -> {reason, session.cell}
      end

    case Map.pop(session.in_flight, seq) do
      # Settled already (`settle_lost/2`): one outcome a move.
      {nil, _in_flight} ->
        {session, []}

      {{started, _zone, _direction}, in_flight} ->
        if session.config[:move_time],
          do:
            Grove.Metrics.Histogram.record(
              session.config.move_time,
              System.monotonic_time(:microsecond) - started
            )

        {%{session | cell: cell, in_flight: in_flight},
         [{:send, Frames.outcome(session.encoding, session.version, seq, result, x, y)}]}
    end
  end

  def handle_info(%__MODULE__{id: id} = session, {:grove_seed, id, {:seed, seq}, outcome}) do
    result =
      case outcome do
        :ok -> :ok
        {:rejected, reason} -> reason
      end

    case Map.pop(session.seeds_in_flight, seq) do
      # Settled already (`settle_lost/2`): one answer a seed.
      {nil, _seeds} ->
        {session, []}

      {_pending, seeds} ->
        {%{session | seeds_in_flight: seeds},
         [send_message(session, %{type: :seeded, seq: seq, result: result})]}
    end
  end

  def handle_info(%__MODULE__{id: id} = session, {:grove_act, id, {:act, seq}, outcome}) do
    case Map.pop(session.acts_in_flight, seq) do
      # Settled already (`settle_lost/2`): one answer an action.
      {nil, _acts} ->
        {session, []}

      {_pending, acts} ->
        session = %{session | acts_in_flight: acts}

        message =
          case outcome do
            {:ok, data} ->
              %{type: :acted, seq: seq, result: :ok, data: data, reason: ""}

            {:refused, reason} ->
              %{
                type: :acted,
                seq: seq,
                result: :refused,
                data: %{},
                reason: Atom.to_string(reason)
              }

            {:rejected, reason} ->
              %{type: :acted, seq: seq, result: reason, data: %{}, reason: ""}
          end

        {session, [send_message(session, message)]}
    end
  end

  def handle_info(%__MODULE__{id: id} = session, {:grove_say, id, {:say, seq}, outcome}) do
    case Map.pop(session.says_in_flight, seq) do
      # Settled already (`settle_lost/2`): one answer a line.
      {nil, _says} ->
        {session, []}

      {_pending, says} ->
        result =
          case outcome do
            :ok -> :ok
            {:rejected, reason} -> reason
          end

        {%{session | says_in_flight: says}, [said(session, seq, result, "")]}
    end
  end

  # The player's entity was in a zone lost with its node: it goes back on
  # the last cell the player was told of (next to it, or anywhere, when
  # that is taken), under the same id, and the player is welcomed again
  # with where it stands now (clients replace what they had on a welcome).
  def handle_info(%__MODULE__{id: id} = session, {:grove_lost, id}) do
    opts = Keyword.put(session.join_opts, :id, id)

    result =
      case World.join(session.world, Keyword.put(opts, :at, session.cell)) do
        {:ok, _id, _cell} = ok -> ok
        _taken -> join_near(session.world, opts, session.cell)
      end

    case result do
      {:ok, ^id, {x, y} = cell} ->
        if session.config.stats, do: Stats.incr(session.config.stats, :restored)
        # What was in flight went with the zone, or will be answered by
        # one that no longer knows the player's place: it is settled now.
        {session, settled} = settle_all(session, cell)
        welcome = %{session.welcome | x: x, y: y}
        session = %{session | cell: cell, welcome: welcome, grounds: no_grounds(session)}
        # The welcome first: it says where the player stands, from which
        # these answers are read.
        {session, [send_message(session, welcome) | settled]}

      {:error, reason} ->
        Logger.warning("gateway: a player lost with a node could not be placed again: #{reason}")
        rejoin(session, "the world could not place you again (#{reason})")
    end
  end

  # This node's side of the cluster lost its quorum: its world stops
  # until it is whole again. The client reconnects, here or elsewhere.
  def handle_info(%__MODULE__{id: id} = session, {:grove_paused, id}),
    do: rejoin(session, "this server lost its cluster; reconnect")

  # A zone watched (again, after a restart): the tiles of it in view, and
  # those held already, come as snapshots.
  def handle_info(%__MODULE__{} = session, {:grove_view, zone, :subscribed, _seq}) do
    held = Map.get(session.areas, zone, %{})

    wanted =
      if session.cell,
        do: for(tile <- in_view(session), Grid.tile_zone(session.grid, tile) == zone, do: tile),
        else: []

    tiles = Enum.reduce(wanted, held, &Map.put_new(&2, &1, :awaiting))
    areas = Map.put(session.areas, zone, request(session, zone, tiles))

    {%{
       session
       | areas: areas,
         tiled: refit(session.tiled, session.cell)
     }, []}
  end

  # Snapshots of tiles, each a finished run of frames in this session's
  # encoding; a tile given up since it was asked for is left out.
  def handle_info(%__MODULE__{} = session, {:grove_view, zone, :tiles, seq, data}) do
    {session, frames} = take_tiles(session, zone, seq, data)
    {session, if(frames == [], do: [], else: [{:send, joined(session, frames)}])}
  end

  def handle_info(%__MODULE__{} = session, {:grove_view, zone, :closed}) do
    {tiles, areas} = Map.pop(session.areas, zone, %{})
    session = %{session | areas: areas}

    case closing(session, Map.keys(tiles)) do
      [] -> {session, []}
      frames -> {session, [{:send, frames}]}
    end
  end

  def handle_info(_session, _message), do: :unknown

  # A zone's snapshots of tiles taken: the frames of those still held (not
  # yet joined), each tile read to `seq` from now on.
  defp take_tiles(session, zone, seq, data) do
    case session.areas do
      %{^zone => tiles} ->
        {tiles, frames, grounds} =
          Enum.reduce(data, {tiles, [], session.grounds}, fn {tile, frame},
                                                             {tiles, frames, grounds} ->
            if is_map_key(tiles, tile) do
              {frame, grounds} = ground_once(session, grounds, tile, frame)
              {Map.put(tiles, tile, seq), [frames | frame], grounds}
            else
              {tiles, frames, grounds}
            end
          end)

        {%{session | areas: Map.put(session.areas, zone, tiles), grounds: grounds}, frames}

      _closed ->
        {session, []}
    end
  end

  # Version 6 remembers the grounds it sent (see the top of this module).
  defp no_grounds(%__MODULE__{version: version}) when version >= 6, do: %{}
  defp no_grounds(_session), do: nil

  defp ground_once(_session, nil, _tile, frame), do: {frame, nil}

  defp ground_once(_session, grounds, tile, frame) when is_map_key(grounds, tile),
    do: {Frames.without_ground(frame), grounds}

  defp ground_once(session, grounds, tile, frame) do
    grounds =
      if map_size(grounds) >= Map.get(session.config, :grounds_kept, 4096),
        do: %{},
        else: grounds

    {frame, Map.put(grounds, tile, true)}
  end

  defp settle_all(session, {x, y}) do
    moves =
      for {seq, _pending} <- Enum.sort(session.in_flight),
          do: {:send, Frames.outcome(session.encoding, session.version, seq, :interrupted, x, y)}

    seeds =
      for {seq, _pending} <- Enum.sort(session.seeds_in_flight),
          do: send_message(session, %{type: :seeded, seq: seq, result: :interrupted})

    acts =
      for {seq, _pending} <- Enum.sort(session.acts_in_flight),
          do: acted(session, seq, :interrupted, "")

    says =
      for {seq, _pending} <- Enum.sort(session.says_in_flight),
          do: said(session, seq, :interrupted, "")

    {%{session | in_flight: %{}, seeds_in_flight: %{}, acts_in_flight: %{}, says_in_flight: %{}},
     moves ++ seeds ++ acts ++ says}
  end

  defp rejoin(session, text) do
    if session.config.stats, do: Stats.incr(session.config.stats, :rejoin_asked)

    {session,
     [
       send_message(session, %{type: :bye, reason: :rejoin, message: text}),
       {:close, 1012, "rejoin"}
     ]}
  end

  @doc """
  When the player last sent a move (the `now_ms` it was handled at), or
  nil before its first.
  """
  @spec moved_at(t()) :: integer() | nil
  def moved_at(%__MODULE__{moved_at: at}), do: at

  @doc """
  When the oldest move still waiting for its outcome was sent to its zone,
  in milliseconds of `:erlang.monotonic_time/1`, or nil when none waits.
  """
  @spec awaiting_since(t()) :: integer() | nil
  def awaiting_since(%__MODULE__{in_flight: in_flight}) when map_size(in_flight) == 0, do: nil

  def awaiting_since(%__MODULE__{in_flight: in_flight}) do
    started =
      :maps.fold(
        fn
          _seq, {started, _zone, _dir}, nil -> started
          _seq, {started, _zone, _dir}, low -> min(started, low)
        end,
        nil,
        in_flight
      )

    System.convert_time_unit(started, :microsecond, :millisecond)
  end

  @doc """
  Settles the moves, seeds, actions and lines in flight for longer than
  `after_ms` whose zone process has died since they were sent: a zone
  killed with a move in its mailbox comes back with its entities but not
  its mail, so no answer would ever come. For a move, the entity's cell,
  which the zone wrote before it died and rebuilt itself from, says what
  happened: one step in the move's direction is `ok`, anything else
  `interrupted`. A seed, an action or a line is `interrupted`.
  """
  @spec settle_lost(t(), pos_integer()) :: {t(), [action()]}
  def settle_lost(%__MODULE__{} = session, after_ms) do
    {session, moves} = settle_lost_moves(session, after_ms)
    {session, seeds} = settle_lost_seeds(session, after_ms)
    {session, acts} = settle_lost_acts(session, after_ms)
    {session, says} = settle_lost_says(session, after_ms)
    {session, moves ++ seeds ++ acts ++ says}
  end

  defp settle_lost_says(%__MODULE__{says_in_flight: says} = session, after_ms) do
    lost = lost(says, after_ms)

    {%{session | says_in_flight: Map.drop(says, Enum.map(lost, &elem(&1, 0)))},
     for({seq, _pending} <- lost, do: said(session, seq, :interrupted, ""))}
  end

  defp say_refusal(:empty), do: :says_empty
  defp say_refusal(:too_long), do: :says_too_long
  defp say_refusal(:bad_utf8), do: :says_bad_utf8
  defp say_refusal(:bad_character), do: :says_bad_character

  defp said(session, seq, result, reason),
    do: send_message(session, %{type: :said, seq: seq, result: result, reason: reason})

  defp settle_lost_acts(%__MODULE__{acts_in_flight: acts} = session, after_ms) do
    lost = lost(acts, after_ms)

    {%{session | acts_in_flight: Map.drop(acts, Enum.map(lost, &elem(&1, 0)))},
     for({seq, _pending} <- lost, do: acted(session, seq, :interrupted, ""))}
  end

  defp acted(session, seq, result, reason),
    do:
      send_message(session, %{type: :acted, seq: seq, result: result, data: %{}, reason: reason})

  defp settle_lost_seeds(%__MODULE__{seeds_in_flight: seeds} = session, after_ms) do
    lost = lost(seeds, after_ms)

    {%{session | seeds_in_flight: Map.drop(seeds, Enum.map(lost, &elem(&1, 0)))},
     for(
       {seq, _pending} <- lost,
       do: send_message(session, %{type: :seeded, seq: seq, result: :interrupted})
     )}
  end

  defp settle_lost_moves(%__MODULE__{in_flight: in_flight} = session, after_ms) do
    in_flight
    |> lost(after_ms)
    |> Enum.reduce({session, []}, fn {seq, {_started, _zone, direction}}, {session, actions} ->
      now = World.position(session.world, session.id) || session.cell
      stepped = session.cell != nil and now == Grid.step(session.cell, direction)
      result = if stepped, do: :ok, else: :interrupted
      if session.config.stats, do: Stats.incr(session.config.stats, :moves_settled)
      {x, y} = now

      {%{session | cell: now, in_flight: Map.delete(session.in_flight, seq)},
       actions ++ [{:send, Frames.outcome(session.encoding, session.version, seq, result, x, y)}]}
    end)
  end

  # What is waiting for longer than `after_ms` on a zone that has died
  # since, in order: each pending entry starts with when it was sent and
  # the zone's pid (nil when the zone could not be named).
  defp lost(pending, _after_ms) when map_size(pending) == 0, do: []

  defp lost(pending, after_ms) do
    cutoff = System.monotonic_time(:microsecond) - after_ms * 1000

    pending
    |> Enum.filter(fn {_seq, entry} ->
      zone = elem(entry, 1)
      elem(entry, 0) < cutoff and (zone == nil or not Process.alive?(zone))
    end)
    |> Enum.sort()
  end

  @doc """
  What the areas in view published since they were last read, as frames
  ready to write (oldest first per area), and the session that remembers
  having taken them. An area too far behind for the feed is asked for a
  snapshot instead, which coalesces everything it missed.

  `held` are `:tiles` messages (`{:grove_view, zone, :tiles, seq, data}`,
  oldest first) that the connection kept for this write rather than write
  each alone: taken as `handle_info/2` takes them, after the viewport's
  tiles are fitted (a tile given up since is left out), and their
  snapshots go ahead of what the feed has since, in the same frame.
  """
  @spec views(t(), [tuple()]) :: {t(), iodata()}
  def views(%__MODULE__{} = session, held \\ []) do
    {session, shut} = retile(session)
    {session, snapshots} = take_held(session, held, [])
    {session, frames} = read(session)

    frames =
      if frames == [] and snapshots == [], do: [], else: joined(session, [snapshots | frames])

    {session, if(shut == [], do: frames, else: [shut | frames])}
  end

  defp take_held(session, [], acc), do: {session, acc}

  defp take_held(session, [{:grove_view, zone, :tiles, seq, data} | held], acc) do
    case take_tiles(session, zone, seq, data) do
      {session, []} -> take_held(session, held, acc)
      {session, frames} -> take_held(session, held, [acc | frames])
    end
  end

  # From version 4 on, the areas' parts read together go out as one frame.
  defp joined(%__MODULE__{version: version, encoding: encoding}, frames) when version >= 4,
    do: Frames.join(frames, encoding, version)

  defp joined(_session, frames), do: frames

  defp read(%__MODULE__{areas: areas} = session) when map_size(areas) == 0, do: {session, []}

  # A zone whose number has not moved since it was read, and whose tiles
  # held are those it was read for, has nothing new: its tiles were read
  # to that number then, and a read now would find it again and change
  # nothing. It is told by one read of its number, where it is kept,
  # without the zone's row looked up or its tiles looked at. Where it is
  # kept lasts while the zone is watched: one that falls asleep is no
  # longer watched, and its `:closed` takes it out of the areas, and so
  # out of what is remembered, which is made anew from the areas at each
  # read. A zone watched again (maybe by another run of it, which keeps
  # its number elsewhere) has its tiles asked for anew, which the tiles
  # remembered are not: it is read afresh. In a cluster, where a zone
  # that moves between nodes may be written another way, nothing is
  # remembered.
  defp read(%__MODULE__{areas: areas, reads: reads} = session) do
    {areas, frames, reads} =
      :maps.fold(
        fn zone, tiles, acc ->
          case reads do
            %{^zone => {ref, seen, ^tiles} = read} ->
              if Feed.latest_at(ref) == seen,
                do: unchanged(acc, zone, read),
                else: read_zone(session, zone, tiles, ref, acc)

            _other ->
              read_zone(session, zone, tiles, Feed.seq_ref(session.feed, zone), acc)
          end
        end,
        {areas, [], if(reads, do: %{})},
        areas
      )

    {%{session | areas: areas, reads: reads}, frames}
  end

  defp unchanged({areas, frames, reads}, zone, read),
    do: {areas, frames, Map.put(reads, zone, read)}

  defp read_zone(session, zone, tiles, ref, {areas, frames, reads}) do
    case oldest(:maps.values(tiles), nil, false) do
      {nil, _awaiting} ->
        {areas, frames, reads}

      {since, awaiting} ->
        case Feed.since_at(session.feed, ref, zone, since, session.format) do
          {[], latest} ->
            {areas, frames, remember(reads, zone, ref, latest, tiles)}

          {rows, latest} ->
            taken = take(rows, since + 1, tiles, [])
            tiles = read_to(tiles, latest, awaiting)

            {Map.put(areas, zone, tiles), [frames | taken],
             remember(reads, zone, ref, latest, tiles)}

          :gone ->
            held = for {tile, seq} <- tiles, seq != :awaiting, into: %{}, do: {tile, seq}
            {Map.put(areas, zone, Map.merge(tiles, request(session, zone, held))), frames, reads}
        end
    end
  end

  # A zone with no number kept (one asleep, its `:closed` still on the
  # way) is not remembered: its number, once it wakes, is kept elsewhere.
  defp remember(nil, _zone, _ref, _latest, _tiles), do: nil
  defp remember(reads, _zone, nil, _latest, _tiles), do: reads
  defp remember(reads, zone, ref, latest, tiles), do: Map.put(reads, zone, {ref, latest, tiles})

  # The oldest number a tile held was read to (nil when all await
  # snapshots), and whether any awaits one.
  defp oldest([], low, awaiting), do: {low, awaiting}
  defp oldest([:awaiting | seqs], low, _awaiting), do: oldest(seqs, low, true)

  defp oldest([seq | seqs], low, awaiting) when low == nil or seq < low,
    do: oldest(seqs, seq, awaiting)

  defp oldest([_seq | seqs], low, awaiting), do: oldest(seqs, low, awaiting)

  # Every tile held is read to `latest`; one awaiting its snapshot still
  # awaits it.
  defp read_to(tiles, latest, false), do: :maps.from_keys(:maps.keys(tiles), latest)

  defp read_to(tiles, latest, true) do
    :maps.map(
      fn
        _tile, :awaiting -> :awaiting
        _tile, _seq -> latest
      end,
      tiles
    )
  end

  # The frames of the tiles held, from the rows of a zone's feed (`seq` the
  # first row's number), that each tile has not had yet.
  defp take([], _seq, _tiles, acc), do: acc

  defp take([row | rows], seq, tiles, acc),
    do: take(rows, seq + 1, tiles, take_row(row, seq, tiles, acc))

  defp take_row([], _seq, _tiles, acc), do: acc

  defp take_row([{tile, frame} | row], seq, tiles, acc) do
    case tiles do
      %{^tile => held} when is_integer(held) and held < seq ->
        take_row(row, seq, tiles, [acc | frame])

      _other ->
        take_row(row, seq, tiles, acc)
    end
  end

  # The viewport moved over other tiles since they were last fitted to it:
  # the tiles it now overlaps, in the zones subscribed to, are asked for;
  # those out of it by more than the margin are closed. Most steps leave
  # both spans of tiles (the viewport's, and the viewport's with the
  # margin) as they were, and so every tile held: that is told by two
  # tuples, the rest is done only when one of them changed, and only for
  # the one that changed (a tile comes into view only as the viewport's
  # span moves, and is out of the margin only as the margin's does).
  defp retile(%__MODULE__{cell: nil} = session), do: {session, []}
  defp retile(%__MODULE__{cell: cell, tiled: {cell, _spans}} = session), do: {session, []}

  defp retile(%__MODULE__{grid: grid, cell: cell} = session) do
    radius = radius(session)
    margin = Map.get(session.config, :view_margin, 2)
    spans = {Grid.tile_span(grid, cell, radius), Grid.tile_span(grid, cell, radius + margin)}

    if spans == elem(session.tiled, 1),
      do: {%{session | tiled: {cell, spans}}, []},
      else: retile(session, grid, cell, spans)
  end

  # The spans are the tiles' columns and rows, first and last (those of
  # `Grid.view_tiles/3` for the viewport, and with the margin): a tile is
  # kept when its column and row lie within the margin's, and those in
  # view are listed once, each with its zone. A zone whose tiles all stay
  # and none comes into view is left as it was.
  defp retile(session, grid, cell, {{c0, c1, r0, r1} = view, kept} = spans) do
    per_row = grid.tiles_x
    {view_was, kept_was} = fitted(session.tiled)

    in_view =
      if view == view_was,
        do: [],
        else: for(row <- r0..r1, col <- c0..c1, do: in_zone(grid, row * per_row + col))

    check_out = kept != kept_was

    {areas, shut} =
      :maps.fold(
        fn zone, tiles, {areas, shut} ->
          out = if check_out, do: out_of(:maps.keys(tiles), per_row, kept, []), else: []
          new = for {^zone, tile} <- in_view, not is_map_key(tiles, tile), do: {tile, :awaiting}

          case {out, new} do
            {[], []} ->
              {areas, shut}

            {out, new} ->
              tiles = Map.merge(Map.drop(tiles, out), request(session, zone, Map.new(new)))
              {Map.put(areas, zone, tiles), [shut | closing(session, out)]}
          end
        end,
        {session.areas, []},
        session.areas
      )

    {%{session | areas: areas, tiled: {cell, spans}}, shut}
  end

  defp in_zone(grid, tile), do: {Grid.tile_zone(grid, tile), tile}

  # The spans the tiles were last fitted to, or none.
  defp fitted({_cell, {_view, _kept} = spans}), do: spans
  defp fitted(_tiled), do: {nil, nil}

  # Tiles asked for in view of a cell the tiles were not fitted to (the
  # views not read since the player moved) may lie beyond the margin of
  # the spans fitted: the next fitting looks at every tile again.
  defp refit({cell, _spans} = tiled, cell), do: tiled
  defp refit(_tiled, _cell), do: {nil, nil}

  # The tiles a move would bring into view, in the zones subscribed to,
  # asked for before the move goes: the zone that holds them (most often
  # the move's own) takes both in one turn and its snapshots come ahead of
  # the move's outcome, so that they go out in the outcome's write. Asked
  # for after the outcome, as `retile/1` would, they took a turn of the
  # zone's and one of the connection's of their own, and came a write
  # later. A move its zone refuses leaves them held within the margin, as
  # a step back would; `retile/1` then finds them held or awaited, and
  # asks for none again. One refused before it goes (its zone busy) asks
  # for none: `World.move_by/7` calls this only for a move that goes.
  # Only from a cell the outcomes confirmed, with no move in flight: one
  # in flight that turns away would leave the tiles asked for unseen.
  defp ahead(
         %__MODULE__{cell: cell, tiled: {cell, {span, _kept}}, grid: grid, in_flight: flying} =
           session,
         dir
       )
       when map_size(flying) == 0 do
    {x, y} = to = Grid.step(cell, dir)
    radius = radius(session)

    if Grid.in_bounds?(grid, x, y) and Grid.tile_span(grid, to, radius) != span do
      areas = session.areas

      wanted =
        for tile <- Grid.view_tiles(grid, to, radius),
            zone = Grid.tile_zone(grid, tile),
            is_map_key(areas, zone) and not is_map_key(Map.fetch!(areas, zone), tile),
            reduce: %{} do
          wanted -> Map.update(wanted, zone, %{tile => :awaiting}, &Map.put(&1, tile, :awaiting))
        end

      areas =
        :maps.fold(
          fn zone, tiles, areas ->
            Map.update!(areas, zone, &Map.merge(&1, request(session, zone, tiles)))
          end,
          areas,
          wanted
        )

      %{session | areas: areas}
    else
      session
    end
  end

  defp ahead(session, _direction), do: session

  # The tiles whose column or row lies outside the span.
  defp out_of([], _per_row, _span, out), do: out

  defp out_of([tile | tiles], per_row, {c0, c1, r0, r1} = span, out) do
    col = rem(tile, per_row)
    row = div(tile, per_row)

    if col >= c0 and col <= c1 and row >= r0 and row <= r1,
      do: out_of(tiles, per_row, span, out),
      else: out_of(tiles, per_row, span, [tile | out])
  end

  defp in_view(session), do: Grid.view_tiles(session.grid, session.cell, radius(session))

  defp radius(%__MODULE__{welcome: %{view_radius: radius}}), do: radius

  # Asks a zone for snapshots of tiles, which await them from now on.
  defp request(_session, _zone, tiles) when map_size(tiles) == 0, do: tiles

  defp request(session, zone, tiles) do
    :ok = World.request_tiles(session.world, zone, format(session), Map.keys(tiles))
    Map.new(tiles, fn {tile, _seq} -> {tile, :awaiting} end)
  end

  # The `area_closed` frames of tiles given up.
  defp closing(%__MODULE__{encoding: encoding, version: version}, tiles) do
    for tile <- Enum.sort(tiles),
        do: Frames.message(%{type: :area_closed, area: tile}, encoding, version)
  end

  @doc "False when the player asked not to be sent the minimap (`join`'s `minimap`)."
  @spec minimap?(t()) :: boolean()
  def minimap?(%__MODULE__{minimap: minimap}), do: minimap

  @doc "The form the connection reads broadcasts in (`Frames.bulletin_encoding/2`)."
  @spec bulletin_encoding(t()) :: Frames.bulletin_encoding()
  def bulletin_encoding(%__MODULE__{encoding: encoding, version: version}),
    do: Frames.bulletin_encoding(encoding, version)

  @doc "The connection's encoding."
  @spec encoding(t()) :: Protocol.encoding()
  def encoding(%__MODULE__{encoding: encoding}), do: encoding

  @doc """
  Another connection of the same account takes this one's place: the
  player's entity leaves the world and its last cell goes to the accounts
  (and to the caller, who puts the player there). The session no longer
  speaks for the account.
  """
  @spec replaced(t()) :: {t(), {non_neg_integer(), non_neg_integer()} | nil}
  def replaced(%__MODULE__{joined: true, cell: cell} = session) do
    :ok = ended(session)
    {%{session | account_id: nil, joined: false}, cell}
  end

  def replaced(%__MODULE__{} = session), do: {%{session | account_id: nil}, nil}

  @doc """
  The connection is over: the player's entity leaves the world, and its
  last cell goes to the accounts, to be saved. Both before the
  connection's process is gone: a reload that follows at once (it may
  claim the account as soon as that process is no longer alive) finds
  the cell saved and free, where the zone would otherwise still hold the
  entity until the process's monitor fired.
  """
  @spec ended(t()) :: :ok
  def ended(%__MODULE__{joined: true, id: id} = session) do
    leave_world(session.world, id)
    saved(session)
  end

  def ended(session), do: saved(session)

  defp saved(%__MODULE__{account_id: account_id, config: %{accounts: accounts}, cell: cell})
       when account_id != nil,
       do: Accounts.left(accounts, account_id, cell)

  defp saved(_session), do: :ok

  # A world that stopped first has nothing left to take out.
  defp leave_world(world, id) do
    _ = World.leave(world, id)
    :ok
  rescue
    ArgumentError -> :ok
  end

  @doc "A message encoded as a frame for this session."
  @spec send_message(t(), Protocol.message()) :: action()
  def send_message(%__MODULE__{encoding: encoding, version: version}, message),
    do: {:send, Frames.message(message, encoding, version)}

  defp format(%__MODULE__{format: format}), do: format

  defp error(session, code, text, now_ms) do
    count_error(session.config, code)

    # A held-down key runs into the rate limit; that is no reason to cut anyone off.
    counted = if code == :rate_limited, do: 0, else: 1

    {errors, since} = session.errors

    {errors, since} =
      if now_ms - since > @error_window_ms,
        do: {counted, now_ms},
        else: {errors + counted, since}

    session = %{session | errors: {errors, since}}
    report = send_message(session, %{type: :error, code: code, message: text})

    if errors > session.config.max_errors do
      bye =
        send_message(session, %{
          type: :bye,
          reason: :too_many_errors,
          message: "too many bad messages"
        })

      {session, [report, bye, {:close, 1008, "too many errors"}]}
    else
      {session, [report]}
    end
  end

  # Cells this far from the one a player left, either way, are "next to it".
  @near 2

  # A new player: in the spawn area, if there is one and a cell free there.
  defp join_new(world, opts, nil), do: World.join(world, opts)

  defp join_new(world, opts, area) do
    case World.join(world, Keyword.put(opts, :at, {:within, area})) do
      {:ok, _id, _cell} = ok -> ok
      _full -> World.join(world, opts)
    end
  end

  defp join_near(world, opts, {x, y}) do
    area = {x - @near, y - @near, x + @near + 1, y + @near + 1}

    case World.join(world, Keyword.put(opts, :at, {:within, area})) do
      {:ok, _id, _cell} = ok -> ok
      _full -> World.join(world, opts)
    end
  end

  # One connection per account: a later one takes the place of an earlier
  # one, and the cell its player last stood on (the earlier connection is
  # told `bye` with `replaced`).
  defp take_over(session, accounts, account_id) do
    case Grove.Gateway.claim(account_id) do
      :busy -> {:error, :account_busy}
      :ok -> last_position(session, accounts, account_id)
      {:replaced, nil} -> last_position(session, accounts, account_id)
      {:replaced, cell} -> cell
    end
  end

  # A store that cannot answer places the player at random, as a new one:
  # better than no game, but the operator hears of it.
  defp last_position(session, accounts, account_id) do
    case Accounts.last_position(accounts, account_id) do
      {:ok, cell} ->
        cell

      {:error, :not_found} ->
        nil

      {:error, :unavailable} ->
        if session.config.stats, do: Stats.incr(session.config.stats, :positions_unavailable)

        Logger.warning(
          "gateway: the store could not say where account #{account_id} stood; placed at random"
        )

        nil
    end
  end

  defp count(%{stats: nil}, _key), do: :ok
  defp count(%{stats: stats}, key), do: Stats.incr(stats, key)

  defp count_error(%{stats: nil}, _code), do: :ok

  defp count_error(%{stats: stats} = config, code) do
    Grove.Metrics.execute([:grove, :session, :protocol_error], %{}, %{
      code: code,
      instance: config[:instance]
    })

    Stats.protocol_error(stats, code)
    if code in [:rate_limited, :too_large], do: Stats.incr(stats, code)
    :ok
  end
end
