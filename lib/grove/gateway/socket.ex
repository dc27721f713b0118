defmodule Grove.Gateway.Socket do
  @moduledoc false
  # The `/ws` endpoint. `out/1` is the Yaws appmod that accepts the upgrade;
  # the other functions are Yaws's WebSocket callbacks, which run in the one
  # process Yaws starts per connection and which owns the socket. That
  # process is the player's session: it holds a Grove.Gateway.Session, zones
  # send it their messages, and it writes frames itself.
  #
  # Outbound flow control: before writing a view or a broadcast the session
  # looks at the bytes waiting in the socket's queue. Past `view_backlog`
  # views are held back (they coalesce in the View) and broadcasts are
  # dropped; outcomes always go out. A queue that stays past `view_backlog`
  # for `slow_seconds`, or grows past `slow_backlog` at all, means the client
  # cannot keep up: it gets `bye` and the connection closes.

  import Grove.Gateway.Records

  alias Grove.Gateway.{HTTP, Session, Stats}
  alias Grove.Metrics

  require Logger

  ## The appmod

  def out(arg) do
    config = Grove.Gateway.config()
    headers = arg(arg, :headers)

    cond do
      :yaws_api.get_header(headers, "sec-websocket-protocol") != :undefined ->
        HTTP.error(
          400,
          "subprotocol_unsupported",
          "choose the encoding with ?encoding=json or ?encoding=binary, not a subprotocol"
        )

      true ->
        case encoding(arg) do
          {:ok, encoding} ->
            opts = [
              {:callback, {:basic, %{config: config, encoding: encoding}}},
              # Larger frames are refused by Yaws itself with 1009; ours is the
              # same limit, checked again with a clear error for messages
              # reassembled from fragments.
              {:max_frame_size, config.max_frame},
              {:max_message_size, config.max_frame},
              {:close_timeout, 2000},
              {:keepalive, true},
              {:keepalive_timeout, 30_000},
              {:keepalive_grace_period, 10_000},
              {:drop_on_timeout, true}
            ]

            {:websocket, __MODULE__, opts}

          :error ->
            HTTP.error(400, "bad_encoding", "encoding must be json or binary")
        end
    end
  end

  defp encoding(arg) do
    case :yaws_api.queryvar(arg, ~c"encoding") do
      :undefined -> {:ok, :json}
      {:ok, ~c"json"} -> {:ok, :json}
      {:ok, ~c"binary"} -> {:ok, :binary}
      _ -> :error
    end
  end

  ## The session process

  # Runs before the 101 is sent.
  def init([_arg, %{config: config, encoding: encoding}]) do
    now = now_ms()

    session_config = %{
      max_frame: config.max_frame,
      move_rate: config.move_rate,
      move_burst: config.move_burst,
      max_errors: config.max_errors,
      max_view_radius: config.max_view_radius,
      tick_ms: tick_ms(config),
      stats: config.stats,
      accounts: config.accounts
    }

    state = %{
      config: config,
      session: Session.new(config.world, encoding, session_config, now),
      socket: nil,
      slow_since: nil,
      flush_timer: nil
    }

    {:ok, state}
  end

  def handle_open(ws_state, state) do
    :ok = :pg.join(state.config.scope, :sessions, self())
    Stats.incr(state.config.stats, :sessions)
    Stats.incr(state.config.stats, :connections)
    Metrics.execute([:grove, :session, :start], %{}, %{encoding: Session.encoding(state.session)})
    {:ok, %{state | socket: ws_state(ws_state, :sock)}}
  end

  def handle_message({:close, code, _reason}, state), do: {:close, code, state}

  def handle_message({kind, data}, state) when kind in [:text, :binary] do
    stats = state.config.stats
    Stats.incr(stats, :frames_in)
    Stats.incr(stats, :bytes_in, byte_size(data))
    {session, actions} = Session.handle_frame(state.session, kind, data, now_ms())
    act(watch_view(%{state | session: session}), actions)
  end

  def handle_info(:grove_flush, state) do
    state = %{state | flush_timer: nil}

    case backlog(state) do
      :ok ->
        {session, actions} = Session.flush_view(state.session)
        act(%{state | session: session, slow_since: nil}, actions)

      :behind ->
        behind(state)

      :slow ->
        disconnect_slow(state)
    end
  end

  # Broadcasts arrive encoded once for everybody; they are the first thing
  # to give up when the socket is behind.
  def handle_info({:grove_broadcast, frames}, state) do
    case backlog(state) do
      :ok ->
        act(%{state | slow_since: nil}, [
          {:send, Map.fetch!(frames, Session.encoding(state.session))}
        ])

      :behind ->
        Stats.incr(state.config.stats, :broadcasts_dropped)
        still_behind(state, fn state -> {:noreply, state} end)

      :slow ->
        disconnect_slow(state)
    end
  end

  def handle_info(:grove_drain, state) do
    Stats.incr(state.config.stats, :drained)

    goodbye(state, :shutdown, "the server is shutting down", 1001, "going away")
  end

  def handle_info(message, state) do
    case Session.handle_info(state.session, message) do
      {session, actions} ->
        act(watch_view(%{state | session: session}), actions)

      :unknown ->
        Logger.warning(
          "gateway session ignored an unexpected message: #{inspect(message, limit: 5)}"
        )

        {:noreply, state}
    end
  end

  def terminate(reason, state) do
    Session.ended(state.session)

    if state.socket do
      Stats.incr(state.config.stats, :sessions, -1)

      Metrics.execute([:grove, :session, :stop], %{}, %{
        encoding: Session.encoding(state.session),
        reason: reason
      })
    end

    :ok
  end

  ## Writing

  defp act(state, actions) do
    {frames, close} =
      Enum.reduce(actions, {[], nil}, fn
        {:send, frame}, {frames, close} -> {[frame | frames], close}
        {:close, code, reason}, {frames, nil} -> {frames, {code, reason}}
        {:close, _, _}, acc -> acc
      end)

    frames = Enum.reverse(frames)
    count_out(state, frames)

    case {frames, close} do
      {[], nil} -> {:noreply, state}
      {frames, nil} -> {:reply, frames, state}
      {[], close} -> {:close, close, state}
      {frames, close} -> {:close, close, frames, state}
    end
  end

  defp count_out(_state, []), do: :ok

  defp count_out(state, frames) do
    {frames_key, bytes_key} =
      case Session.encoding(state.session) do
        :json -> {:frames_out_json, :bytes_out_json}
        :binary -> {:frames_out_binary, :bytes_out_binary}
      end

    bytes = Enum.reduce(frames, 0, fn {_kind, data}, acc -> acc + IO.iodata_length(data) end)
    Stats.incr(state.config.stats, frames_key, length(frames))
    Stats.incr(state.config.stats, bytes_key, bytes)
  end

  ## Flow control

  defp backlog(%{socket: nil}), do: :ok

  defp backlog(state) do
    case :erlang.port_info(state.socket, :queue_size) do
      {:queue_size, queued} when queued <= state.config.view_backlog -> :ok
      {:queue_size, queued} when queued <= state.config.slow_backlog -> :behind
      {:queue_size, _queued} -> :slow
      nil -> :ok
    end
  end

  defp behind(state) do
    still_behind(state, fn state ->
      Stats.incr(state.config.stats, :views_coalesced)
      # Try again a tick later; the view keeps coalescing meanwhile.
      {:noreply, schedule_flush(state, tick_ms(state.config))}
    end)
  end

  # Behind since when; past `slow_seconds` of it, the client is cut off.
  defp still_behind(state, otherwise) do
    now = now_ms()
    since = state.slow_since || now

    if now - since >= state.config.slow_seconds * 1000,
      do: disconnect_slow(state),
      else: otherwise.(%{state | slow_since: since})
  end

  defp disconnect_slow(state) do
    Stats.incr(state.config.stats, :slow_consumers)

    Metrics.execute([:grove, :session, :slow_consumer], %{}, %{
      encoding: Session.encoding(state.session)
    })

    goodbye(state, :slow_consumer, "the connection cannot keep up", 1008, "slow consumer")
  end

  # Tells the client why in a `bye`, then closes with the WebSocket code.
  defp goodbye(state, reason, message, code, close_reason) do
    bye = Session.send_message(state.session, %{type: :bye, reason: reason, message: message})
    act(state, [bye, {:close, code, close_reason}])
  end

  # A session wakes up to flush only when its view changed: an idle player
  # costs no timer at all. The short delay lets the deltas that neighbouring
  # zones publish for the same tick arrive and go out as one frame.
  defp watch_view(%{flush_timer: nil} = state) do
    if Session.view_pending?(state.session),
      do: schedule_flush(state, flush_delay(state.config)),
      else: state
  end

  defp watch_view(state), do: state

  defp schedule_flush(state, delay),
    do: %{state | flush_timer: Process.send_after(self(), :grove_flush, delay)}

  defp flush_delay(config), do: min(div(tick_ms(config), 4), 25)

  defp tick_ms(config) do
    case Grove.World.fetch!(config.world).tick do
      :manual -> 100
      tick -> tick
    end
  end

  defp now_ms, do: System.monotonic_time(:millisecond)
end
