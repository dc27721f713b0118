defmodule Grove.Load.Swarm do
  @moduledoc false
  # Many simulated players (Grove.Load.Player) in one process, each on a
  # real WebSocket of its own: the load lab's bots. A process per player
  # cost the load generator as much CPU as the server it measured; here one
  # process owns hundreds of sockets in active-N mode, reads the server's
  # frames with a parser for unmasked server frames only, and moves its
  # players from a timing wheel, so what it spends goes to system calls and
  # to the checks.
  #
  # Each player moves every `move_every` ms (with 10 % jitter either way,
  # its first move at a random point of the first interval), in a random
  # direction, with one move in flight at most; in a crowd
  # (Grove.Load.Crowd), toward the crowd's point or about it, and at the
  # crowd's pace until it gets there or stops at its edge; walking straight
  # (Grove.Load.Walk), along a heading of its own drawn when it joins,
  # turning where a step is refused and bouncing off the world's edges. With
  # `act_every` N, one step in N (drawn at random) is instead an action of
  # the game (`action`, "pick" by default) toward that step's cell, with
  # one action in flight at most. With `say_every` MS, each player also
  # says a line every MS milliseconds (its first at a random point of the
  # first interval), with its next move, one line in flight at most.
  # Connecting (TCP and the
  # WebSocket handshake) happens in short-lived helper processes, so a ramp
  # does not wait behind the sockets already playing. An upgrade refused
  # with a `Retry-After` (a server too busy to start a player in time
  # answers `503 server_busy`) is tried again after it, up to `retries`
  # times (see `connect/5`); a player waiting to is pending, neither
  # connected nor failed.

  use GenServer

  import Bitwise

  alias Grove.Load.{Crowd, Player, Stats, Walk}
  alias Grove.WsClient
  alias Grove.World.Grid

  @slot_ms 10
  # The longest Retry-After waited for, seconds: a server that asks for
  # more does not park a run's players for the rest of it.
  @max_retry_after 30
  # Socket messages before a socket must be re-armed.
  @active 100
  @directions List.to_tuple(Grid.directions())

  defstruct [
    :host,
    :port,
    :path,
    :encoding,
    :move_every,
    :stats,
    :terrain,
    :crowd,
    :walk,
    :rand,
    :timer,
    act_every: 0,
    action: "pick",
    say_every: 0,
    retries: 3,
    back_off: nil,
    says: %{},
    bots: %{},
    # In a crowd, where each player stood at its last move.
    last_cells: %{},
    # Walking straight, each player's walk (Grove.Load.Walk).
    walks: %{},
    wheel: %{},
    slot: 0,
    closing: false
  ]

  @doc """
  Starts a swarm. Options: `:host`, `:port`, `:path` (with the encoding's
  query), `:encoding`, `:move_every` (ms), `:stats` (Grove.Load.Stats),
  `:terrain` (`%{width: w, cells: binary}`, for the checks), `:crowd`
  (a `Grove.Load.Crowd`, or nil for players who walk at random), `:walk`
  (`:straight` for players who walk straight, or nil),
  `:act_every` (one step in that many an action, 0 for none), `:action`,
  `:say_every` (ms between a player's lines, 0 for none), `:retries`
  (how many times an upgrade refused with a `Retry-After` is tried again,
  default 3; 0 counts every refusal as a failure) and `:back_off` (a
  function of the Retry-After's seconds that waits before a try again; by
  default `backoff_ms/1` milliseconds).
  """
  @spec start_link(keyword()) :: GenServer.on_start()
  def start_link(opts), do: GenServer.start_link(__MODULE__, opts)

  @doc "Connects `count` more players; the first `checking` of them check views too."
  @spec add(pid(), pos_integer(), non_neg_integer()) :: :ok
  def add(swarm, count, checking \\ 0), do: GenServer.cast(swarm, {:add, count, checking})

  @doc "Closes every socket and stops."
  @spec stop(pid()) :: :ok
  def stop(swarm), do: GenServer.stop(swarm, :normal, :infinity)

  # Callbacks

  @impl true
  def init(opts) do
    swarm = %__MODULE__{
      host: Keyword.fetch!(opts, :host),
      port: Keyword.fetch!(opts, :port),
      path: Keyword.fetch!(opts, :path),
      encoding: Keyword.fetch!(opts, :encoding),
      move_every: Keyword.fetch!(opts, :move_every),
      act_every: Keyword.get(opts, :act_every, 0),
      action: Keyword.get(opts, :action, "pick"),
      say_every: Keyword.get(opts, :say_every, 0),
      retries: Keyword.get(opts, :retries, 3),
      back_off: Keyword.get(opts, :back_off, &Process.sleep(backoff_ms(&1))),
      stats: Keyword.fetch!(opts, :stats),
      terrain: Keyword.fetch!(opts, :terrain),
      crowd: Keyword.get(opts, :crowd),
      walk: Keyword.get(opts, :walk),
      rand: :rand.seed_s(:exsss),
      slot: current_slot()
    }

    {:ok, beat(swarm)}
  end

  @impl true
  def handle_cast({:add, count, checking}, swarm) do
    me = self()

    for n <- 1..count do
      spawn(fn -> connect(me, swarm, n <= checking) end)
    end

    {:noreply, swarm}
  end

  @impl true
  def handle_info({:connected, socket, rest, checks}, swarm) do
    :ok = :inet.setopts(socket, active: @active)
    player = Player.new(swarm.encoding, checks, swarm.say_every > 0)
    send_payload(swarm, socket, Player.join(player))
    {offset, rand} = :rand.uniform_s(max(div(swarm.move_every, @slot_ms), 1), swarm.rand)
    {swarm, rand} = start_walk(swarm, socket, rand)
    swarm = %{swarm | rand: rand, bots: Map.put(swarm.bots, socket, {player, <<>>})}
    swarm = schedule(swarm, socket, swarm.slot + offset)

    if rest == <<>>,
      do: {:noreply, swarm},
      else: handle_info({:tcp, socket, rest}, swarm)
  end

  def handle_info({:tcp, socket, data}, swarm) do
    Stats.incr(swarm.stats, :bytes_in, byte_size(data))

    case swarm.bots do
      %{^socket => {player, buffer}} ->
        env = env(swarm)

        case frames(player, buffer <> data, socket, swarm, env) do
          {:ok, player, buffer} ->
            {:noreply, %{swarm | bots: Map.put(swarm.bots, socket, {player, buffer})}}

          {:closed, reason} ->
            {:noreply, drop(swarm, socket, reason)}
        end

      _ ->
        {:noreply, swarm}
    end
  end

  def handle_info({:tcp_passive, socket}, swarm) do
    _ = :inet.setopts(socket, active: @active)
    {:noreply, swarm}
  end

  def handle_info({:tcp_closed, socket}, swarm) do
    case swarm.bots do
      %{^socket => {player, _}} -> {:noreply, drop(swarm, socket, player.bye || :closed)}
      _ -> {:noreply, swarm}
    end
  end

  def handle_info({:tcp_error, socket, _reason}, swarm),
    do: {:noreply, drop(swarm, socket, :error)}

  def handle_info({:inet_reply, _socket, _status}, swarm), do: {:noreply, swarm}

  def handle_info(:beat, swarm) do
    now_slot = current_slot()
    swarm = Enum.reduce((swarm.slot + 1)..now_slot//1, swarm, &move_slot(&2, &1))
    {:noreply, beat(%{swarm | slot: max(now_slot, swarm.slot)})}
  end

  @impl true
  def terminate(_reason, swarm) do
    for {socket, _} <- swarm.bots, do: :gen_tcp.close(socket)
    :ok
  end

  ## Connecting (in a helper process)

  defp connect(swarm_pid, swarm, checks) do
    Stats.incr(swarm.stats, :started)
    connect(swarm_pid, swarm, checks, System.monotonic_time(:microsecond), swarm.retries)
  end

  # A refusal that says when to come back (`Retry-After`) is tried again,
  # as a well-behaved client does: after the seconds it was given (see
  # `backoff_ms/1`). Each is counted as a retry (`:connect_retries`), the
  # player as pending while it waits (`:connect_pending`, so that a run
  # that ends meanwhile counts it neither connected nor failed), and as
  # failed (`:connect_failures`) only once its retries run out; its
  # connect time runs from its first try, so a player that came in late
  # counts as late.
  defp connect(swarm_pid, swarm, checks, started, retries) do
    case WsClient.connect(swarm.host, swarm.port, swarm.path, timeout: 10_000, active: false) do
      {:ok, client} ->
        Grove.Metrics.Histogram.record(
          swarm.stats.connect,
          System.monotonic_time(:microsecond) - started
        )

        Stats.incr(swarm.stats, :connected)

        case :gen_tcp.controlling_process(client.socket, swarm_pid) do
          :ok -> send(swarm_pid, {:connected, client.socket, client.buffer, checks})
          {:error, _} -> :gen_tcp.close(client.socket)
        end

      {:error, {:http_status, _status, retry_after}} when retries > 0 ->
        Stats.incr(swarm.stats, :connect_retries)
        Stats.incr(swarm.stats, :connect_pending)
        swarm.back_off.(retry_after)
        Stats.incr(swarm.stats, :connect_pending, -1)
        connect(swarm_pid, swarm, checks, started, retries - 1)

      {:error, _reason} ->
        Stats.incr(swarm.stats, :connect_failures)
    end
  end

  @doc false
  # How long a refused player waits, ms: the Retry-After's seconds (one at
  # least, `@max_retry_after`, 30, at most) plus a random jitter of up to as
  # much again, so that a storm's refused players spread out instead of
  # coming back at once.
  @spec backoff_ms(non_neg_integer()) :: pos_integer()
  def backoff_ms(seconds) do
    ms = seconds |> max(1) |> min(@max_retry_after) |> Kernel.*(1000)
    ms + :rand.uniform(ms)
  end

  ## Moving

  defp move_slot(swarm, slot) do
    {due, wheel} = Map.pop(swarm.wheel, slot, [])
    swarm = %{swarm | wheel: wheel}
    env = env(swarm)

    Enum.reduce(due, swarm, fn socket, swarm ->
      case swarm.bots do
        %{^socket => {player, buffer}} ->
          {roll, rand} = :rand.uniform_s(1 <<< 16, swarm.rand)
          {direction, walk} = direction(swarm, socket, player, roll)
          {acts?, rand} = acts?(swarm.act_every, rand)

          {player, payload} =
            if acts?,
              do: Player.act(player, swarm.action, direction, env),
              else: Player.move(player, direction, env)

          cond do
            payload && acts? ->
              Stats.incr(swarm.stats, :acts_sent)
              send_payload(swarm, socket, payload)

            payload ->
              Stats.incr(swarm.stats, :moves_sent)
              send_payload(swarm, socket, payload)

            acts? ->
              :ok

            player.joined ->
              Stats.incr(swarm.stats, :moves_skipped)

            true ->
              :ok
          end

          from = Map.get(swarm.last_cells, socket)
          {player, swarm} = maybe_say(%{swarm | rand: rand}, socket, player, env)
          swarm = %{swarm | bots: Map.put(swarm.bots, socket, {player, buffer})}
          swarm = if swarm.crowd, do: put_last_cell(swarm, socket, player), else: swarm
          # A walk goes on from a step sent, not from one held back.
          swarm =
            if walk && payload && not acts?,
              do: %{swarm | walks: Map.put(swarm.walks, socket, walk)},
              else: swarm

          next(swarm, socket, slot, every(swarm, player, from))

        _ ->
          swarm
      end
    end)
  end

  defp direction(%__MODULE__{crowd: crowd}, _socket, player, roll) when crowd != nil,
    do: {Crowd.direction(crowd, player.cell, roll), nil}

  defp direction(
         %__MODULE__{walk: :straight} = swarm,
         socket,
         %Player{cell: cell, size: size},
         roll
       )
       when cell != nil and size != nil do
    case swarm.walks do
      %{^socket => walk} -> Walk.next(walk, cell, size)
      _ -> {elem(@directions, rem(roll, 8)), nil}
    end
  end

  defp direction(_swarm, _socket, _player, roll), do: {elem(@directions, rem(roll, 8)), nil}

  # Walking straight: a heading of its own, drawn as the player joins.
  defp start_walk(%__MODULE__{walk: :straight} = swarm, socket, rand) do
    {n, rand} = :rand.uniform_s(8, rand)
    {%{swarm | walks: Map.put(swarm.walks, socket, Walk.new(n - 1))}, rand}
  end

  defp start_walk(swarm, _socket, rand), do: {swarm, rand}

  defp put_last_cell(swarm, socket, player),
    do: %{swarm | last_cells: Map.put(swarm.last_cells, socket, player.cell)}

  defp every(%__MODULE__{crowd: nil} = swarm, _player, _from), do: swarm.move_every

  defp every(swarm, player, from),
    do: Crowd.wait(swarm.crowd, player.cell, swarm.move_every, from == player.cell)

  # A line when one is due: the first at a random point of the first
  # interval after the player joined, then one every `say_every` ms.
  defp maybe_say(%{say_every: 0} = swarm, _socket, player, _env), do: {player, swarm}
  defp maybe_say(swarm, _socket, %Player{joined: false} = player, _env), do: {player, swarm}

  defp maybe_say(swarm, socket, player, env) do
    every_us = swarm.say_every * 1000

    case swarm.says do
      %{^socket => due} when env.now >= due ->
        {player, payload} = Player.say(player, env)

        if payload do
          Stats.incr(swarm.stats, :says_sent)
          send_payload(swarm, socket, payload)
        end

        {player, %{swarm | says: Map.put(swarm.says, socket, due + every_us)}}

      %{^socket => _later} ->
        {player, swarm}

      _first ->
        {offset, rand} = :rand.uniform_s(every_us, swarm.rand)
        {player, %{swarm | rand: rand, says: Map.put(swarm.says, socket, env.now + offset)}}
    end
  end

  defp acts?(0, rand), do: {false, rand}

  defp acts?(every, rand) do
    {n, rand} = :rand.uniform_s(every, rand)
    {n == 1, rand}
  end

  # The next move is due one interval later, give or take a tenth.
  defp next(swarm, socket, slot, every) do
    interval = max(div(every, @slot_ms), 1)
    spread = max(div(interval, 5), 1)
    {jitter, rand} = :rand.uniform_s(spread, swarm.rand)
    schedule(%{swarm | rand: rand}, socket, slot + interval - div(spread, 2) + jitter)
  end

  defp schedule(swarm, socket, slot),
    do: %{swarm | wheel: Map.update(swarm.wheel, slot, [socket], &[socket | &1])}

  defp beat(swarm), do: %{swarm | timer: Process.send_after(self(), :beat, @slot_ms)}

  defp current_slot, do: div(System.monotonic_time(:millisecond), @slot_ms)

  ## Reading the server's frames (never masked, never fragmented)

  defp frames(player, buffer, socket, swarm, env) do
    case next_frame(buffer) do
      {:more, buffer} ->
        {:ok, player, buffer}

      {opcode, payload, rest} when opcode in [1, 2] ->
        Stats.incr(swarm.stats, :frames_in)
        player = Player.receive_frame(player, payload, env)
        frames(player, rest, socket, swarm, env)

      {8, payload, _rest} ->
        {:closed, player.bye || close_reason(payload)}

      {9, payload, rest} ->
        send_frame(swarm, socket, {:pong, payload})
        frames(player, rest, socket, swarm, env)

      {_control, _payload, rest} ->
        frames(player, rest, socket, swarm, env)
    end
  end

  defp next_frame(<<_::4, op::4, 0::1, 127::7, len::64, rest::binary>> = buffer),
    do: take(op, len, rest, buffer)

  defp next_frame(<<_::4, op::4, 0::1, 126::7, len::16, rest::binary>> = buffer),
    do: take(op, len, rest, buffer)

  defp next_frame(<<_::4, op::4, 0::1, len::7, rest::binary>> = buffer) when len < 126,
    do: take(op, len, rest, buffer)

  defp next_frame(buffer), do: {:more, buffer}

  defp take(op, len, rest, _buffer) when byte_size(rest) >= len do
    <<payload::binary-size(len), rest::binary>> = rest
    {op, payload, rest}
  end

  defp take(_op, _len, _rest, buffer), do: {:more, buffer}

  defp close_reason(<<1001::16, _::binary>>), do: :shutdown
  defp close_reason(<<1008::16, _::binary>>), do: :slow_consumer
  defp close_reason(<<1009::16, _::binary>>), do: :too_large
  defp close_reason(_), do: :closed

  ## Writing

  defp send_payload(swarm, socket, payload) do
    kind = if swarm.encoding == :json, do: :text, else: :binary
    Stats.incr(swarm.stats, :bytes_out, byte_size(payload))
    send_frame(swarm, socket, {kind, payload})
  end

  defp send_frame(_swarm, socket, frame) do
    :erlang.port_command(socket, :cow_ws.masked_frame(frame, %{}))
  rescue
    # Closed under us; its message follows.
    ArgumentError -> false
  end

  defp drop(swarm, socket, reason) do
    case Map.pop(swarm.bots, socket) do
      {nil, _} ->
        swarm

      {_bot, bots} ->
        unless swarm.closing, do: Stats.disconnect(swarm.stats, reason)
        :gen_tcp.close(socket)

        %{
          swarm
          | bots: bots,
            last_cells: Map.delete(swarm.last_cells, socket),
            walks: Map.delete(swarm.walks, socket),
            says: Map.delete(swarm.says, socket)
        }
    end
  end

  defp env(swarm),
    do: %{stats: swarm.stats, terrain: swarm.terrain, now: System.monotonic_time(:microsecond)}
end
