defmodule Grove.Gateway.Socket do
  @moduledoc false
  # The `/ws` endpoint, a Yaws appmod. Yaws reads the HTTP upgrade request;
  # this checks it (a WebSocket upgrade, an encoding we speak, room for one
  # more player), answers the handshake itself and hands the socket to a
  # Grove.Gateway.Connection started under the gateway's sessions
  # supervisor. Then the Yaws process that served the request ends, as
  # Yaws's own WebSocket support does after the same hand-over, and the
  # connection owns the socket alone. Why not Yaws's WebSocket processes:
  # docs/decisions.md ("Connections own their sockets").

  import Grove.Gateway.Records

  require Logger

  alias Grove.Gateway.{Clock, Connection, HTTP, Seats, Stats, WebSocket}

  def out(arg) do
    config = Grove.Gateway.config()
    # Every request here counts in the `upgrade` stage of the waits.
    deadline = Clock.deadline(config, :upgrade_deadline, :upgrade)
    headers = arg(arg, :headers)
    socket = arg(arg, :clisock)

    with :ok <- check_upgrade(headers),
         {:ok, key} <- check_key(headers),
         :ok <- check_subprotocol(headers),
         {:ok, encoding} <- encoding(arg),
         :ok <- take_seat(config, deadline),
         {:ok, pid} <- start(config, encoding, socket, deadline) do
      accept(pid, socket, key)
    else
      {:refuse, 503, "server_busy", message} ->
        [{:header, {~c"Retry-After", ~c"1"}} | HTTP.error(503, "server_busy", message)]

      {:refuse, status, code, message} ->
        HTTP.error(status, code, message)
    end
  end

  defp check_upgrade(headers) do
    connection = header(headers, "connection")
    upgrade = header(headers, "upgrade")

    if "upgrade" in tokens(connection) and "websocket" in tokens(upgrade),
      do: :ok,
      else: {:refuse, 400, "upgrade_required", "this endpoint speaks WebSocket only"}
  end

  defp check_key(headers) do
    case {header(headers, "sec-websocket-version"), header(headers, "sec-websocket-key")} do
      {"13", key} when byte_size(key) > 0 -> {:ok, key}
      {"13", _} -> {:refuse, 400, "bad_handshake", "Sec-WebSocket-Key is missing"}
      _ -> {:refuse, 426, "bad_handshake", "only WebSocket version 13 is spoken here"}
    end
  end

  defp check_subprotocol(headers) do
    if header(headers, "sec-websocket-protocol") == "",
      do: :ok,
      else:
        {:refuse, 400, "subprotocol_unsupported",
         "choose the encoding with ?encoding=json or ?encoding=binary, not a subprotocol"}
  end

  defp encoding(arg) do
    case HTTP.query(arg, "encoding") do
      :undefined -> {:ok, :json}
      {:ok, "json"} -> {:ok, :json}
      {:ok, "binary"} -> {:ok, :binary}
      _ -> {:refuse, 400, "bad_encoding", "encoding must be json or binary"}
    end
  end

  # A stopping server takes nobody new: the client connects again, and a
  # load balancer sends it elsewhere. Otherwise the upgrade takes one of
  # the `:max_sessions` seats (Grove.Gateway.Seats), exactly: upgrades at
  # once never take more than there are, and the seat's keeper watches
  # this process from then on, until `start/4` hands the seat over. A
  # keeper that cannot answer before the deadline: late.
  defp take_seat(config, deadline) do
    cond do
      Grove.Gateway.draining?() ->
        Stats.incr(config.stats, :refused)
        {:refuse, 503, "server_stopping", "this server is stopping; connect again"}

      Clock.left(deadline) <= 0 ->
        late()

      true ->
        # A deadline passed since: the keeper is not waited for.
        wait = max(Clock.left(deadline), 0)

        case Seats.take(config.seat_keeper, config.max_sessions, wait) do
          :ok ->
            :ok

          :full ->
            Stats.incr(config.stats, :refused)

            {:refuse, 503, "server_full",
             "this server has its #{config.max_sessions} players; try again later"}

          :busy ->
            late()
        end
    end
  end

  # An upgrade that waited past the gateway's `:upgrade_deadline`, counted
  # from the start of its request (the connection's accept for the first
  # request of a connection, its request line on a kept-alive one), came
  # to a server too busy to start it in time: answered at once, a 503 the
  # client may retry after a second, rather than started for a client that
  # may have given up (counted as late at `upgrade`). Checked before the
  # connection is started and again once it has been: the start waits in
  # its supervisor's queue, with no limit of its own.
  #
  # The upgrade's seat is handed to the connection started for it, and
  # comes back when that connection is gone (however it goes); an upgrade
  # that started none gives it back, a start that exited (its supervisor
  # gone meanwhile) too, and one killed meanwhile by being gone.
  defp start(config, encoding, socket, deadline) do
    sessions = {:via, PartitionSupervisor, {config.sessions, self()}}

    if Clock.left(deadline) > 0 do
      case start_child(sessions, encoding, socket) do
        {:ok, pid} ->
          Seats.hand(config.seat_keeper, pid)

          if Clock.left(deadline) > 0 do
            {:ok, pid}
          else
            abandon(pid)
            late()
          end

        other ->
          Seats.give_back(config.seat_keeper)
          Logger.warning("gateway: no connection could start for an upgrade: #{inspect(other)}")
          busy()
      end
    else
      Seats.give_back(config.seat_keeper)
      late()
    end
  end

  defp start_child(sessions, encoding, socket) do
    DynamicSupervisor.start_child(sessions, {Connection, {encoding, socket}})
  catch
    :exit, reason -> {:exit, reason}
  end

  defp late do
    Clock.late(:upgrade)
    busy()
  end

  defp busy,
    do:
      {:refuse, 503, "server_busy",
       "this server is too busy to take a player in time; try again shortly"}

  defp accept(pid, socket, key) do
    with :ok <- :gen_tcp.send(socket, WebSocket.handshake(key)),
         :ok <- Connection.handover(pid, socket) do
      :ok
    else
      _closed -> abandon(pid)
    end

    leave_yaws()
  end

  # A connection that will not have the socket is told to stop before it
  # does (it has no entity before its join), and the upgrade goes on at
  # once: its seat comes back when it is gone.
  defp abandon(pid), do: Connection.abandon(pid)

  # The socket belongs to the connection now: Yaws must neither answer the
  # request nor read from or close the socket again. The Yaws process that
  # served the upgrade ends the way Yaws ends its own after handing a
  # WebSocket over: it tells its server (kept in its process dictionary by
  # Yaws) that it is one connection fewer, and exits with reason `normal`.
  # An exit signal to itself, unlike `exit/1`, cannot be caught by Yaws's
  # handler around `out/1` (which would answer with a 500); it needs exits
  # not to be trapped, which Yaws's processes do.
  defp leave_yaws do
    case Process.get(:gserv_pid) do
      nil -> :ok
      server -> send(server, {self(), :decrement})
    end

    Process.flag(:trap_exit, false)
    Process.exit(self(), :normal)
  end

  defp header(headers, name) do
    headers |> :yaws_api.get_header(name, ~c"") |> to_string() |> String.trim()
  end

  defp tokens(value),
    do: value |> String.downcase() |> String.split(",") |> Enum.map(&String.trim/1)
end
