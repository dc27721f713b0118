defmodule Grove.Load.Player do
  @moduledoc false
  # One simulated player's side of the protocol, as a pure structure: what
  # it sends and how it checks what it is told, in the spirit of OpenPoker's
  # harness that checked every hand. A swarm (Grove.Load.Swarm) runs many of
  # them over real sockets.
  #
  # Every player checks every outcome:
  #
  #   * each outcome answers a move it sent, once (`unexpected_outcome`);
  #   * its position follows from its acknowledged moves: `ok` is exactly one
  #     step from where it was in the direction it asked, a rejection leaves
  #     it where it was (`position`).
  #
  # A second `welcome` for the same id is a restore, not a new player: its
  # entity was lost with a node of a cluster and placed again, maybe on a
  # cell next to where it stood (`restored`). The player stands where that
  # welcome says; a move in flight then cannot be checked (it may have been
  # answered before or after the loss), and the next ones are checked from
  # the new cell. A welcome under another id is a failure (`identity`): the
  # player would be two entities.
  #
  # A player that checks views (all of them, or a sample) also assembles the
  # areas it receives (Grove.World.View) and, each time it is about to
  # move, checks what it has assembled:
  #
  #   * no two entities stand on one cell (`stacked_view`), none on a tree,
  #     rock or water (`entity_on_blocked_cell`);
  #   * a second or so after its last outcome, its own entity is shown
  #     where its outcomes put it (`stale_own_entity`).
  #
  # Once a move, not after every read: a check walks every entity of the
  # areas in view, a thousand in a crowd, and a crowd's areas change ten
  # times a second; checked at every read, the checks of a hundred players
  # took more than half of the load's core, and the load's backlog, not the
  # server, set the round trip it measured. A view that stays wrong is
  # caught all the same, at the player's next move.
  #
  # A player may also act (a game's action, `act/4`): one action in flight
  # at most, beside its move; each `acted` must answer an action it sent
  # (`unexpected_outcome`), and its round trip is measured apart.
  #
  # A player may also chat (`say/2`): one line in flight at most; each
  # `said` must answer a line it sent (`unexpected_outcome`), its round
  # trip measured apart, and a line answered other than `ok` counted as
  # refused. The chat lines in the areas it receives are counted as heard
  # (every player's, whoever said them), when it chats itself.
  #
  # To stay cheap, a player decodes only what its checks need: the outcome
  # (a fixed binary layout, or one small JSON object) and, when it checks
  # views, the areas. Everything else is counted by its type alone.

  alias Grove.Load.Stats
  alias Grove.Protocol
  alias Grove.Protocol.Codec
  alias Grove.World.{Grid, View}

  @timeout_us 5_000_000
  # How long after its last outcome a player's own entity must be shown
  # where that outcome put it: a tick for the zone to publish the move and
  # the longest view interval for the connection to write it (both from
  # `welcome`), and this much room besides.
  @settle_margin_us 500_000

  # Binary tags of the server's messages (docs/protocol.md).
  @welcome 64
  @outcome 65
  @error 67
  @bye 71
  @area 72
  @area_closed 73
  @areas 82
  @ground 80
  @acted 76
  @said 78

  @results List.to_tuple([:ok | Grove.World.rejections()])

  defstruct [
    :encoding,
    :id,
    :cell,
    # The world's {width, height}, from the welcome.
    :size,
    :view,
    :bye,
    # The corner and width of each area whose ground came: version 5
    # places an area's entities from them; from version 6 on a ground
    # comes once a connection, and is kept until a welcome.
    grounds: %{},
    seq: 0,
    settled_at: 0,
    settle_us: 0,
    pending: nil,
    expired: [],
    act_seq: 0,
    acting: nil,
    say_seq: 0,
    saying: nil,
    chats: false,
    checks_views: false,
    joined: false,
    unsure: false
  ]

  @type t :: %__MODULE__{}

  @typedoc "What a player needs to check: the counters, the terrain and the time."
  @type env :: %{
          stats: Stats.t(),
          terrain: %{width: pos_integer(), cells: binary()} | nil,
          now: integer()
        }

  @spec new(Protocol.encoding(), boolean(), boolean()) :: t()
  def new(encoding, checks_views, chats \\ false),
    do: %__MODULE__{encoding: encoding, checks_views: checks_views, chats: chats}

  @doc "The `join` to send once connected."
  @spec join(t()) :: binary()
  def join(%__MODULE__{encoding: encoding}),
    do: encode(%{type: :join, protocol: Protocol.version(), view_radius: 8}, encoding)

  @doc """
  The next move in `direction` as a payload to send, or `nil` while one is
  still in flight (the position check needs to know where the player
  stands when it sends). A move in flight for too long is counted as a
  timeout and forgotten.
  """
  @spec move(t(), Grid.direction(), env()) :: {t(), binary() | nil}
  def move(%__MODULE__{joined: false} = player, _direction, _env), do: {player, nil}

  def move(%__MODULE__{} = player, direction, env) do
    player = expire(player, env)

    if player.pending == nil do
      check_view(player, env)
      check_own_entity(player, env)
      seq = player.seq + 1
      frame = encode(%{type: :move, seq: seq, dir: direction}, player.encoding)
      # Sent while unsure where it stands, a move's outcome cannot be checked.
      from = if player.unsure, do: nil, else: player.cell
      {%{player | seq: seq, pending: {seq, env.now, direction, from}}, frame}
    else
      {player, nil}
    end
  end

  @doc """
  An action of the game toward `dir` as a payload to send, or `nil` while
  one is still in flight (or before the welcome). An action in flight for
  too long is counted as a timeout and forgotten.
  """
  @spec act(t(), String.t(), atom(), env()) :: {t(), binary() | nil}
  def act(%__MODULE__{joined: false} = player, _action, _dir, _env), do: {player, nil}

  def act(%__MODULE__{acting: {_seq, sent_at}} = player, action, dir, env)
      when env.now - sent_at > @timeout_us do
    Stats.incr(env.stats, :timeouts)
    act(%{player | acting: nil}, action, dir, env)
  end

  def act(%__MODULE__{acting: nil} = player, action, dir, env) do
    seq = player.act_seq + 1
    frame = encode(%{type: :act, seq: seq, action: action, dir: dir}, player.encoding)
    {%{player | act_seq: seq, acting: {seq, env.now}}, frame}
  end

  def act(player, _action, _dir, _env), do: {player, nil}

  @doc """
  A line to say as a payload to send, or `nil` while one is still in
  flight (or before the welcome). A line in flight for too long is counted
  as a timeout and forgotten.
  """
  @spec say(t(), env()) :: {t(), binary() | nil}
  def say(%__MODULE__{joined: false} = player, _env), do: {player, nil}

  def say(%__MODULE__{saying: {_seq, sent_at}} = player, env)
      when env.now - sent_at > @timeout_us do
    Stats.incr(env.stats, :timeouts)
    say(%{player | saying: nil}, env)
  end

  def say(%__MODULE__{saying: nil} = player, env) do
    seq = player.say_seq + 1
    text = "line #{seq} from #{player.id}: how is the orchard today?"
    frame = encode(%{type: :say, seq: seq, text: text}, player.encoding)
    {%{player | say_seq: seq, saying: {seq, env.now}}, frame}
  end

  def say(player, _env), do: {player, nil}

  defp expire(%__MODULE__{pending: {seq, sent_at, _, _}} = player, env)
       when env.now - sent_at > @timeout_us do
    Stats.incr(env.stats, :timeouts)
    # A late answer to it is not a second failure, but the player no longer
    # knows where it stands until one comes.
    %{player | pending: nil, expired: Enum.take([seq | player.expired], 8), unsure: true}
  end

  defp expire(player, _env), do: player

  @doc "A data frame from the server; returns the player, or `{:closed, reason}` after a `bye`."
  @spec receive_frame(t(), binary(), env()) :: t()
  def receive_frame(%__MODULE__{encoding: :binary} = player, payload, env),
    do: binary_frame(player, payload, env)

  def receive_frame(%__MODULE__{encoding: :json} = player, payload, env),
    do: json_frame(player, payload, env)

  defp binary_frame(player, <<@outcome, seq::32, result, cell::binary>> = payload, env) do
    with {:ok, x, rest} <- Codec.decode(:uvar, cell),
         {:ok, y, <<>>} <- Codec.decode(:uvar, rest) do
      outcome(player, seq, elem(@results, result), {x, y}, env)
    else
      _ -> decoded(player, payload, env)
    end
  end

  defp binary_frame(player, <<@acted, seq::32, _::binary>>, env), do: acted(player, seq, env)

  defp binary_frame(player, <<@said, seq::32, result, _::binary>>, env),
    do: said(player, seq, result == 0, env)

  defp binary_frame(player, <<@area, _::binary>> = payload, env) do
    Stats.incr(env.stats, :view_frames)
    if player.chats, do: count_chat(payload, <<4::16, "chat">>, env)
    if player.checks_views, do: decoded(player, payload, env), else: player
  end

  defp binary_frame(player, <<@areas, _::binary>> = payload, env) do
    Stats.incr(env.stats, :view_frames)
    if player.checks_views, do: decoded(player, payload, env), else: player
  end

  defp binary_frame(player, <<@ground, _::binary>> = payload, env),
    do: if(player.checks_views, do: decoded(player, payload, env), else: player)

  defp binary_frame(player, <<@area_closed, _::binary>> = payload, env),
    do: if(player.checks_views, do: decoded(player, payload, env), else: player)

  defp binary_frame(player, <<tag, _::binary>> = payload, env)
       when tag in [@welcome, @error, @bye],
       do: decoded(player, payload, env)

  defp binary_frame(player, _other, _env), do: player

  # From version 5 on a message is an array, its tag first: a prefix
  # tells the type without a parse.
  defp json_frame(player, "[" <> _ = payload, env), do: json_array(player, payload, env)

  # Before it, the server writes `type` first, so a prefix tells the type without a parse.
  defp json_frame(player, ~s({"type":"area") <> _ = payload, env) do
    Stats.incr(env.stats, :view_frames)
    if player.chats, do: count_chat(payload, ~s("chat",{), env)
    if player.checks_views, do: decoded(player, payload, env), else: player
  end

  defp json_frame(player, ~s({"type":"areas") <> _ = payload, env) do
    Stats.incr(env.stats, :view_frames)
    if player.checks_views, do: decoded(player, payload, env), else: player
  end

  defp json_frame(player, ~s({"type":"area_closed") <> _ = payload, env),
    do: if(player.checks_views, do: decoded(player, payload, env), else: player)

  defp json_frame(player, ~s({"type":"acted","seq":) <> rest, env) do
    {seq, _} = Integer.parse(rest)
    acted(player, seq, env)
  end

  defp json_frame(player, ~s({"type":"said","seq":) <> rest, env) do
    {seq, rest} = Integer.parse(rest)
    said(player, seq, String.starts_with?(rest, ~s(,"result":"ok")), env)
  end

  defp json_frame(player, ~s({"type":"stats") <> _, _env), do: player

  defp json_frame(player, ~s({"type":"density") <> _, _env), do: player
  defp json_frame(player, ~s({"type":"pong") <> _, _env), do: player
  defp json_frame(player, payload, env), do: decoded(player, payload, env)

  defp json_array(player, "[72," <> _ = payload, env) do
    Stats.incr(env.stats, :view_frames)
    if player.chats, do: count_chat(payload, ~s("chat",{), env)
    if player.checks_views, do: decoded(player, payload, env), else: player
  end

  defp json_array(player, "[82," <> _ = payload, env) do
    Stats.incr(env.stats, :view_frames)
    if player.checks_views, do: decoded(player, payload, env), else: player
  end

  defp json_array(player, <<"[", tag::binary-size(2), ",">> <> _ = payload, env)
       when tag in ["73", "80"],
       do: if(player.checks_views, do: decoded(player, payload, env), else: player)

  defp json_array(player, "[76," <> rest, env) do
    {seq, _} = Integer.parse(rest)
    acted(player, seq, env)
  end

  # The player speaks the newest version, whose result is its code (`ok` 0).
  defp json_array(player, "[78," <> rest, env) do
    {seq, rest} = Integer.parse(rest)
    said(player, seq, String.starts_with?(rest, [",0]", ",0,"]), env)
  end

  defp json_array(player, <<"[", tag::binary-size(2), ",">> <> _, _env)
       when tag in ["68", "69", "70", "74", "77", "81"],
       do: player

  defp json_array(player, payload, env), do: decoded(player, payload, env)

  defp decoded(player, payload, env) do
    case Protocol.decode(payload, player.encoding) do
      {:ok, message} ->
        message(player, message, env)

      {:error, _code, text} ->
        Stats.error(env.stats, :undecodable, text)
        player
    end
  end

  defp message(%__MODULE__{joined: true, id: id} = player, %{type: :welcome, id: id} = w, env) do
    Stats.incr(env.stats, :restored)
    view = if player.checks_views, do: View.new({w.x, w.y}, 8, id)

    pending =
      with {seq, sent_at, direction, _from} <- player.pending, do: {seq, sent_at, direction, nil}

    %{player | cell: {w.x, w.y}, view: view, pending: pending, settled_at: env.now, grounds: %{}}
  end

  defp message(%__MODULE__{joined: true} = player, %{type: :welcome}, env) do
    Stats.failure(env.stats, :identity)
    player
  end

  defp message(player, %{type: :welcome, id: id, x: x, y: y} = welcome, env) do
    Stats.incr(env.stats, :joined)
    view = if player.checks_views, do: View.new({x, y}, 8, id)
    settle_us = (welcome.tick_ms + welcome.view_ms) * 1000 + @settle_margin_us
    size = {welcome.width, welcome.height}
    %{player | id: id, cell: {x, y}, size: size, joined: true, view: view, settle_us: settle_us}
  end

  defp message(player, %{type: :outcome, seq: seq, result: result, x: x, y: y}, env),
    do: outcome(player, seq, result, {x, y}, env)

  defp message(%__MODULE__{view: nil} = player, %{type: type}, _env)
       when type in [:area, :areas, :area_closed],
       do: player

  defp message(player, %{type: :ground, area: area, x: x, y: y, width: width}, _env),
    do: %{player | grounds: Map.put(player.grounds, area, {x, y, width})}

  # The areas at once (the player speaks the newest version): each part
  # as an `area` of its own, its entities placed from its area's corner
  # (a delta of an area whose ground has not come is of one not held),
  # each that stayed in its area (without its kind) of the kind the area
  # showed.
  defp message(player, %{type: :areas, areas: parts}, env) do
    Enum.reduce(parts, player, fn {area, full, entities, gone}, player ->
      case Map.fetch(player.grounds, area) do
        {:ok, {x0, y0, width}} ->
          mirror = Map.get(player.view.mirrors, area, %{})

          entities =
            for {id, at, kind} <- entities do
              kind =
                case {kind, mirror} do
                  {nil, %{^id => {_x, _y, kind}}} -> kind
                  {nil, _unknown} -> 0
                  {kind, _} -> kind
                end

              {id, x0 + rem(at, width), y0 + div(at, width), kind}
            end

          area = %{type: :area, area: area, full: full, entities: entities, gone: gone}
          message(player, area, env)

        :error ->
          player
      end
    end)
  end

  defp message(%__MODULE__{view: view} = player, %{type: :area} = area, _env) do
    view =
      if area.full,
        do: View.put_area(view, area.area, area.entities),
        else: View.update_area(view, area.area, area.entities, area.gone)

    %{player | view: view}
  end

  defp message(%__MODULE__{view: view} = player, %{type: :area_closed, area: zone}, _env),
    do: %{player | view: View.drop_area(view, zone)}

  defp message(player, %{type: :error, code: code, message: text}, env) do
    Stats.error(env.stats, code, text)
    player
  end

  defp message(player, %{type: :bye, reason: reason}, _env), do: %{player | bye: reason}
  defp message(player, _other, _env), do: player

  defp acted(%__MODULE__{acting: {seq, sent_at}} = player, seq, env) do
    Grove.Metrics.Histogram.record(env.stats.act_latency, env.now - sent_at)
    Stats.incr(env.stats, :acted)
    %{player | acting: nil}
  end

  # A late answer to an action forgotten, or one never sent.
  defp acted(%__MODULE__{act_seq: last} = player, seq, _env) when seq <= last, do: player

  defp acted(player, _seq, env) do
    Stats.failure(env.stats, :unexpected_outcome)
    player
  end

  defp said(%__MODULE__{saying: {seq, sent_at}} = player, seq, ok?, env) do
    Grove.Metrics.Histogram.record(env.stats.say_latency, env.now - sent_at)
    Stats.incr(env.stats, :said)
    unless ok?, do: Stats.incr(env.stats, :says_refused)
    %{player | saying: nil}
  end

  # A late answer to a line forgotten.
  defp said(%__MODULE__{say_seq: last} = player, seq, _ok?, _env) when seq <= last, do: player

  defp said(player, _seq, _ok?, env) do
    Stats.failure(env.stats, :unexpected_outcome)
    player
  end

  # The chat events an area frame carries, found by their name's bytes (a
  # chat line's text that holds them counts twice: a load run's lines do not).
  defp count_chat(payload, pattern, env) do
    case :binary.matches(payload, pattern) do
      [] -> :ok
      found -> Stats.incr(env.stats, :chat_heard, length(found))
    end
  end

  defp outcome(player, seq, result, cell, env) do
    case player.pending do
      {^seq, sent_at, direction, from} ->
        Grove.Metrics.Histogram.record(env.stats.latency, env.now - sent_at)
        Stats.incr(env.stats, :outcomes)

        if result == :ok,
          do: Stats.incr(env.stats, :outcomes_ok),
          else: Stats.refused(env.stats, result)

        expected = if result == :ok and from != nil, do: Grid.step(from, direction), else: from

        if from != nil and cell != expected, do: Stats.failure(env.stats, :position)

        view = if player.view, do: View.recenter(player.view, cell), else: nil
        %{player | pending: nil, cell: cell, view: view, unsure: false, settled_at: env.now}

      _other ->
        if seq in player.expired do
          # A late answer: it says where the player stands now.
          %{player | cell: cell, unsure: false}
        else
          Stats.failure(env.stats, :unexpected_outcome)
          player
        end
    end
  end

  @doc "Checks the assembled areas, for a player that checks views; before each move."
  @spec check_view(t(), env()) :: :ok
  def check_view(%__MODULE__{view: nil}, _env), do: :ok

  def check_view(%__MODULE__{view: view} = player, env) do
    Stats.incr(env.stats, :views_checked)
    cells = for {id, {x, y, _kind}} <- View.known(view), id != player.id, do: {x, y}

    if length(cells) != length(Enum.uniq(cells)), do: Stats.failure(env.stats, :stacked_view)

    if Enum.any?(cells, fn {x, y} -> blocked?(env.terrain, x, y) end),
      do: Stats.failure(env.stats, :entity_on_blocked_cell)

    :ok
  end

  # Called as the player is about to move again, a second or so after its
  # last outcome: time enough for its zone to have published the move.
  defp check_own_entity(%__MODULE__{view: nil}, _env), do: :ok
  defp check_own_entity(%__MODULE__{unsure: true}, _env), do: :ok
  defp check_own_entity(%__MODULE__{seq: 0}, _env), do: :ok

  defp check_own_entity(%__MODULE__{settled_at: at, settle_us: settle}, env)
       when env.now - at < settle,
       do: :ok

  defp check_own_entity(%__MODULE__{view: view, id: id, cell: {x, y}}, env) do
    case View.known(view) do
      %{^id => {^x, ^y, _kind}} -> :ok
      _ -> Stats.failure(env.stats, :stale_own_entity)
    end
  end

  # A world too large to send whole has no terrain here: nothing is
  # checked against it.
  defp blocked?(nil, _x, _y), do: false

  defp blocked?(%{width: w, cells: cells}, x, y),
    do: x < w and y * w + x < byte_size(cells) and :binary.at(cells, y * w + x) in [1, 2, 3]

  defp encode(message, encoding), do: IO.iodata_to_binary(Protocol.encode(message, encoding))
end
