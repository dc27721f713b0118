defmodule Grove.Load.ChaosBot do
  @moduledoc false
  # One player of the chaos lab (Grove.Load.ChaosRun): an account of its own
  # (a device login), a WebSocket that it opens again whenever it closes, a
  # move every `move_every` ms, and the checks of Grove.Load.Player on every
  # outcome and view. What it keeps for the end of the run:
  #
  #   * how each connection ended: a `bye` with its reason, a close frame
  #     with its code, or a bare reset (a killed session says nothing), and
  #     whether a move was in flight then (answered by the close);
  #   * where it came back after each reconnect, judged twice. What the
  #     server kept of where it stood (read over distributed Erlang just
  #     before it connects again) against the cells its outcomes
  #     acknowledged: the last one (`kept`), the one a move in flight at an
  #     abrupt close was going to (`unanswered_step`: the zone took the
  #     move, but its outcome went with the session), an earlier one
  #     (`earlier`: the steps since the last save were lost), or none of
  #     them (`elsewhere`). And where the join placed it against what was
  #     kept: there, next to it (someone else stood there), or astray,
  #     which a stall of the store at the time excuses (the server places
  #     the player at random when the store cannot say where it stood);
  #   * its entity, its last acknowledged cell and its token, for the checks
  #     after the run.

  use GenServer

  alias Grove.Load.{ChaosRun, Player, Stats}
  alias Grove.{Protocol, WsClient}

  # Acknowledged cells remembered, newest first, to tell `earlier` apart.
  @history 200
  # How long a join may go unanswered before it is tried again.
  @join_deadline_ms 15_000
  # The store's default deadline: how long its callers may still fail after a stall.
  @store_deadline_ms 2000

  defstruct [
    :run,
    :device_id,
    :token,
    :account_id,
    :client,
    :player,
    :entity,
    :acked,
    :closed_by,
    :connected_at,
    :stall_seen,
    :lost_step,
    :move_timer,
    :stored,
    checks_views: false,
    moving: true,
    history: [],
    notes: [],
    tally: %{},
    waiting: nil
  ]

  # Not linked: the lab kills its players at the end, and a player's crash
  # must not take the lab down before it reports.
  def start(run, n, checks_views),
    do: GenServer.start(__MODULE__, {run, n, checks_views})

  @doc "Stops moving; replies once no move of this bot is in flight (or its connection closed)."
  def freeze(bot, timeout), do: GenServer.call(bot, :freeze, timeout)

  @doc "What the bot knows at the end: entity, last acknowledged cell, token, tallies."
  def summary(bot), do: GenServer.call(bot, :summary, 30_000)

  @impl true
  def init({run, n, checks_views}) do
    # Each run's accounts are new: its device ids carry the run's nonce.
    bot = %__MODULE__{run: run, device_id: "chaos-#{run.nonce}-#{n}", checks_views: checks_views}
    {:ok, bot, {:continue, :connect}}
  end

  @impl true
  def handle_continue(:connect, bot), do: {:noreply, connect(bot)}

  @impl true
  def handle_call(:freeze, from, bot) do
    bot = %{bot | moving: false}

    if bot.client == nil or bot.player == nil or bot.player.pending == nil,
      do: {:reply, :ok, bot},
      else: {:noreply, %{bot | waiting: from}}
  end

  def handle_call(:summary, _from, bot) do
    summary = %{
      account_id: bot.account_id,
      token: bot.token,
      connected: bot.client != nil and bot.player != nil and bot.player.joined,
      entity: bot.entity,
      acked: bot.acked,
      unsure: bot.player != nil and bot.player.unsure,
      tally: bot.tally,
      notes: bot.notes
    }

    {:reply, summary, bot}
  end

  @impl true
  def handle_info(:connect, bot), do: {:noreply, connect(bot)}

  # No welcome and no refusal: the join is tried again on a new connection.
  def handle_info({:join_deadline, socket}, %{client: %{socket: socket}} = bot) do
    if bot.player.joined do
      {:noreply, bot}
    else
      bot = tally(bot, :join_unanswered)
      _ = :gen_tcp.close(socket)
      {:noreply, retry(bot)}
    end
  end

  def handle_info({:join_deadline, _socket}, bot), do: {:noreply, bot}

  def handle_info(:move, %{client: nil} = bot), do: {:noreply, bot}
  def handle_info(:move, %{moving: false} = bot), do: {:noreply, bot}

  def handle_info(:move, bot) do
    bot = schedule_move(bot)
    direction = Enum.random(Grove.World.Grid.directions())
    {player, frame} = Player.move(bot.player, direction, env(bot))
    bot = %{bot | player: player}

    if frame do
      Stats.incr(bot.run.stats, :moves_sent)
      kind = if bot.run.encoding == :json, do: :text, else: :binary

      case WsClient.send_frame(bot.client, {kind, frame}) do
        :ok -> {:noreply, bot}
        {:error, _} -> {:noreply, closed(bot, :reset)}
      end
    else
      {:noreply, bot}
    end
  end

  def handle_info({:tcp, socket, data}, %{client: %{socket: socket}} = bot) do
    Stats.incr(bot.run.stats, :bytes_in, byte_size(data))
    {frames, client} = WsClient.feed(bot.client, data)
    {:noreply, Enum.reduce(frames, %{bot | client: client}, &frame/2)}
  end

  def handle_info({:tcp_closed, socket}, %{client: %{socket: socket}} = bot),
    do: {:noreply, closed(bot, :reset)}

  def handle_info({:tcp_error, socket, _reason}, %{client: %{socket: socket}} = bot),
    do: {:noreply, closed(bot, :reset)}

  # From a socket closed earlier.
  def handle_info({tag, _socket, _}, bot) when tag in [:tcp, :tcp_error], do: {:noreply, bot}
  def handle_info({:tcp_closed, _socket}, bot), do: {:noreply, bot}

  ## Connecting

  defp connect(%{token: nil} = bot) do
    case login(bot) do
      {:ok, token, account_id} ->
        tally(%{bot | token: token, account_id: account_id}, :logins) |> connect()

      {:error, reason} ->
        bot |> tally({:login_failed, reason}) |> retry()
    end
  end

  defp connect(bot) do
    run = bot.run
    Stats.incr(run.stats, :started)
    stall_seen = :atomics.get(run.stalls, 1)
    bot = %{bot | stored: stored(bot)}

    case WsClient.connect(run.host, run.port, run.path, timeout: 5000) do
      {:ok, client} ->
        Stats.incr(run.stats, :connected)
        player = Player.new(run.encoding, bot.checks_views)

        join =
          Protocol.encode(
            %{type: :join, protocol: Protocol.version(), view_radius: 8, token: bot.token},
            run.encoding
          )

        kind = if run.encoding == :json, do: :text, else: :binary
        _ = WsClient.send_frame(client, {kind, IO.iodata_to_binary(join)})
        Process.send_after(self(), {:join_deadline, client.socket}, @join_deadline_ms)

        %{
          bot
          | client: client,
            player: player,
            connected_at: System.monotonic_time(:millisecond),
            stall_seen: stall_seen
        }

      {:error, _reason} ->
        Stats.incr(run.stats, :connect_failures)
        bot |> tally(:connect_failed) |> retry()
    end
  end

  defp login(bot) do
    url = ~c"http://#{bot.run.host}:#{bot.run.port}/api/device_login"
    body = :jiffy.encode(%{"device_id" => bot.device_id})

    case :httpc.request(:post, {url, [], ~c"application/json", body}, [timeout: 10_000],
           body_format: :binary
         ) do
      {:ok, {{_, status, _}, _, response}} when status in [200, 201] ->
        %{"token" => token, "account" => %{"id" => id}} = :jiffy.decode(response, [:return_maps])
        {:ok, token, id}

      {:ok, {{_, status, _}, _, _}} ->
        {:error, status}

      {:error, _} ->
        {:error, :unreachable}
    end
  end

  defp retry(bot) do
    Process.send_after(self(), :connect, 200 + :rand.uniform(800))
    %{bot | client: nil, player: nil}
  end

  # One schedule per bot: a reconnect starts it again rather than adding one.
  defp schedule_move(bot) do
    if bot.move_timer, do: Process.cancel_timer(bot.move_timer)
    every = bot.run.move_every

    timer =
      Process.send_after(self(), :move, every - div(every, 5) + :rand.uniform(div(every, 2) + 1))

    %{bot | move_timer: timer}
  end

  ## What the server sends

  defp frame({:close, code, _reason}, bot), do: closed(bot, {:close, code})
  defp frame(_frame, %{client: nil} = bot), do: bot

  # A join the server refuses (its store busy, say: "try again") is tried
  # again on a new connection, as a client would.
  defp frame({_kind, payload}, %{player: %{joined: false}} = bot) do
    case Protocol.decode(payload, bot.run.encoding) do
      {:ok, %{type: :error, code: code}} ->
        bot = tally(bot, {:join_refused, code})
        _ = :gen_tcp.close(bot.client.socket)
        retry(bot)

      _other ->
        joined_frame(payload, bot)
    end
  end

  defp frame({_kind, payload}, bot), do: joined_frame(payload, bot)

  defp joined_frame(payload, bot) do
    Stats.incr(bot.run.stats, :frames_in)
    was_joined = bot.player.joined
    player = Player.receive_frame(bot.player, payload, env(bot))
    _ = Player.check_view(player, env(bot))
    bot = %{bot | player: player}

    bot =
      if player.joined and not was_joined,
        do: welcomed(bot),
        else: bot

    bot = acknowledge(bot)

    cond do
      bot.waiting != nil and player.pending == nil ->
        GenServer.reply(bot.waiting, :ok)
        %{bot | waiting: nil}

      true ->
        bot
    end
  end

  defp welcomed(bot) do
    %{cell: cell, id: id} = bot.player
    bot = %{bot | entity: id}
    bot = if bot.acked, do: came_back(bot, cell), else: bot
    bot = if bot.moving, do: schedule_move(bot), else: bot

    %{
      bot
      | acked: cell,
        closed_by: nil,
        lost_step: nil,
        history: Enum.take([cell | bot.history], @history)
    }
  end

  # Where a player comes back, judged twice: what the server kept of where
  # it stood (read just before it connected again; nobody else plays the
  # account meanwhile, so it cannot change), against its outcomes; and
  # where the join placed it, against what was kept.
  defp came_back(bot, cell) do
    kept =
      case bot.stored do
        {:ok, stored} when stored == bot.acked -> :kept
        # The zone took the move, but its outcome went with the session.
        {:ok, stored} when stored == bot.lost_step -> :unanswered_step
        {:ok, stored} -> if stored in bot.history, do: :earlier, else: :elsewhere
        {:error, _} -> :unknown
      end

    # The store's calls fail for a while after a stall too: its backlog
    # drains at their deadlines.
    stalled =
      :atomics.get(bot.run.stalls, 1) != bot.stall_seen or :atomics.get(bot.run.stalling, 1) == 1 or
        bot.connected_at - :atomics.get(bot.run.stalling, 2) < @store_deadline_ms

    placed =
      case bot.stored do
        {:ok, ^cell} -> :there
        {:ok, stored} -> if near?(cell, stored), do: :next_to_it, else: :astray
        {:error, _} -> :astray
      end

    placed = if placed == :astray and stalled, do: :random_while_store_stalled, else: placed

    bot = bot |> tally({:kept, kept, bot.closed_by}) |> tally({:placed, placed})

    if kept == :elsewhere or placed == :astray,
      do: %{bot | notes: Enum.take([{cell, bot.stored, bot.acked, bot.closed_by} | bot.notes], 5)},
      else: bot
  end

  defp near?({x, y}, {ax, ay}), do: abs(x - ax) <= 2 and abs(y - ay) <= 2

  # Where the server will place this account's player: what it has kept.
  defp stored(%{acked: nil}), do: nil

  defp stored(bot) do
    ChaosRun.chaos(bot.run.node, :last_position, [Grove, bot.account_id], 10_000)
  catch
    _, _ -> {:error, :unreachable}
  end

  defp acknowledge(%{player: %{joined: true, unsure: false, pending: nil, cell: cell}} = bot)
       when cell != bot.acked,
       do: %{bot | acked: cell, history: Enum.take([cell | bot.history], @history)}

  defp acknowledge(bot), do: bot

  ## Closing

  defp closed(%{client: nil} = bot, _how), do: bot

  defp closed(bot, how) do
    _ = :gen_tcp.close(bot.client.socket)
    player = bot.player
    reason = if player.bye, do: {:bye, player.bye}, else: how

    bot =
      bot
      |> tally({:closed, reason})
      |> then(fn bot ->
        if player.pending, do: tally(bot, {:in_flight_at_close, reason}), else: bot
      end)

    if bot.waiting, do: GenServer.reply(bot.waiting, :ok)

    lost_step =
      case player.pending do
        {_seq, _sent_at, direction, {_, _} = from} -> Grove.World.Grid.step(from, direction)
        _ -> nil
      end

    bot = %{bot | waiting: nil, closed_by: kind_of_close(reason), lost_step: lost_step}
    retry(bot)
  end

  # A goodbye (a drain, a replacement) lets the session hand over its last
  # cell; a reset or a bare close frame may not have.
  defp kind_of_close({:bye, _}), do: :goodbye
  defp kind_of_close(_), do: :abrupt

  defp tally(bot, key), do: %{bot | tally: Map.update(bot.tally, key, 1, &(&1 + 1))}

  defp env(bot),
    do: %{
      stats: bot.run.stats,
      terrain: bot.run.terrain,
      now: System.monotonic_time(:microsecond)
    }
end
