defmodule Grove.Gateway.Metrics do
  @moduledoc """
  The gateway's metrics (a `Grove.Metrics.Source`, without an argument:
  one gateway runs per node): sessions, frames and bytes, what it refused
  and why, players' moves on the server, where HTTP requests wait, bad
  client messages by error code; and for the dashboard, their rates and the
  latest report of a load run. None while the gateway is not running.
  """

  @behaviour Grove.Metrics.Source

  import Grove.Metrics.Histogram, only: [to_ms: 1]
  import Grove.Metrics.Source, only: [per_second: 3]

  alias Grove.Gateway
  alias Grove.Gateway.{Clock, Seats, Stats}
  alias Grove.Metrics.{Histogram, Source}

  # Load reports older than this are no longer "a load run going on".
  @load_report_ttl_ms 15_000

  @fields [
    :player_p99_ms,
    :sessions,
    :writes_out_per_s,
    :bytes_out_json_per_s,
    :bytes_out_binary_per_s,
    :bytes_in_per_s,
    :views_held_per_s,
    :slow_consumers,
    :protocol_errors_per_s,
    :load_run
  ]

  @impl true
  def metrics(_argument) do
    case Gateway.lookup() do
      nil -> []
      config -> metrics(config, Stats.read(config.stats), Clock.read(config.clock))
    end
  end

  defp metrics(config, stats, clock) do
    [
      {"grove_player_move_seconds", :histogram,
       "Players' moves on the server: from the frame read off the socket to the outcome written.",
       [{[], Histogram.export(config.move_time, 1_000_000)}]},
      {"grove_sessions", :gauge, "Connected WebSocket sessions.", [{[], stats.sessions}]},
      {"grove_sessions_seats", :gauge,
       "Seats of max_sessions taken: the sessions, and upgrades and connections not yet handed their socket.",
       [{[], Seats.taken(config.seats)}]},
      {"grove_sessions_refused_total", :counter,
       "WebSocket upgrades refused because the gateway was full.", [{[], stats.refused}]},
      {"grove_socket_writes_total", :counter,
       "Writes to clients' sockets (each carries every frame then due), by encoding.",
       [{[encoding: "json"], stats.writes_json}, {[encoding: "binary"], stats.writes_binary}]},
      {"grove_bytes_out_total", :counter, "Bytes sent to clients, by encoding.",
       [
         {[encoding: "json"], stats.bytes_out_json},
         {[encoding: "binary"], stats.bytes_out_binary}
       ]},
      {"grove_frames_in_total", :counter, "Frames received from clients.",
       [{[], stats.frames_in}]},
      {"grove_views_held_total", :counter,
       "Writes that left views and broadcasts behind because the socket was behind.",
       [{[], stats.views_held}]},
      {"grove_slow_consumers_total", :counter, "Connections closed for not keeping up.",
       [{[], stats.slow_consumers}]},
      {"grove_goodbyes_reset_total", :counter,
       "Connections reset because the client did not take its goodbye in time.",
       [{[], stats.goodbyes_reset}]},
      {"grove_positions_unavailable_total", :counter,
       "Players placed at random because the store could not say where they stood.",
       [{[], stats.positions_unavailable}]},
      {"grove_moves_settled_total", :counter,
       "Players' moves answered by the gateway because their zone died holding them.",
       [{[], stats.moves_settled}]},
      {"grove_players_restored_total", :counter,
       "Players placed again after their area was lost with its node.", [{[], stats.restored}]},
      {"grove_players_rejoin_asked_total", :counter,
       "Players told to reconnect: their node lost its cluster's quorum, or had no cell for them.",
       [{[], stats.rejoin_asked}]},
      {"grove_http_refused_total", :counter,
       "HTTP requests refused as they were read, by status: malformed (400, 501, 505), " <>
         "a body, request target or headers over the limit (413, 414, 431).",
       for(
         status <- [400, 413, 414, 431, 501, 505],
         do: {[status: status], stats[:"refused_#{status}"]}
       )},
      {"grove_http_client_errors_total", :counter,
       "HTTP clients that closed their connection or fell silent in the middle of a request.",
       [{[], stats.client_errors}]},
      {"grove_http_cut_by_stop_total", :counter,
       "HTTP requests in flight when a stop ended the server, cut without an answer.",
       [{[], stats.cut_by_stop}]},
      {"grove_chat_refused_total", :counter,
       "Lines not said, by reason: refused by the gateway (empty, too_long, bad_utf8, " <>
         "bad_character, rate_limited) or by the world (busy, not the speaker's, no such entity).",
       [
         {[reason: :empty], stats.says_empty},
         {[reason: :too_long], stats.says_too_long},
         {[reason: :bad_utf8], stats.says_bad_utf8},
         {[reason: :bad_character], stats.says_bad_character},
         {[reason: :rate_limited], stats.says_rate_limited}
       ]},
      {"grove_announcements_total", :counter, "Announcements the operator posted to everyone.",
       [{[], stats.announcements}]},
      {"grove_player_acts_refused_total", :counter,
       "Players' actions the gateway answered itself: an unknown action or bad arguments, " <>
         "and more than the connection's rate.",
       [
         {[reason: :bad_action], stats.acts_refused},
         {[reason: :rate_limited], stats.acts_rate_limited}
       ]},
      Source.request_waits(
        for(
          {stage, source} <- clock.waits,
          do: {[stage: stage], Histogram.export(source, 1_000_000)}
        )
      ),
      {"grove_http_late_total", :counter,
       "HTTP requests answered 503 because their deadline could not be kept, by where: " <>
         "arrival (passed before the handler), password (no permit in time), store (no answer in time), " <>
         "upgrade (a WebSocket upgrade past the upgrade deadline).",
       for({stage, n} <- clock.late, do: {[stage: stage], n})},
      {"grove_protocol_errors_total", :counter, "Bad client messages, by error code.",
       for({code, n} <- Stats.protocol_errors(stats), do: {[code: code], n})}
    ]
  end

  @impl true
  def reading(_argument) do
    case Gateway.lookup() do
      nil -> nil
      config -> %{stats: Stats.read(config.stats), move: Histogram.snapshot(config.move_time)}
    end
  end

  @impl true
  def sample(_argument, before, now, seconds) when before != nil and now != nil do
    rate = fn key -> per_second(now.stats[key], before.stats[key], seconds) end
    move = Histogram.diff(now.move, before.move)

    fields = %{
      player_p99_ms: to_ms(Histogram.percentile(move, 99)),
      sessions: now.stats.sessions,
      writes_out_per_s: rate.(:writes_json) + rate.(:writes_binary),
      bytes_out_json_per_s: rate.(:bytes_out_json),
      bytes_out_binary_per_s: rate.(:bytes_out_binary),
      bytes_in_per_s: rate.(:bytes_in),
      views_held_per_s: rate.(:views_held),
      slow_consumers: now.stats.slow_consumers,
      protocol_errors_per_s: rate.(:protocol_errors),
      load_run: load_run()
    }

    {fields, %{}}
  end

  # Not running at one of the two readings (starting, or restarted between
  # them): nothing to say about the interval.
  def sample(_argument, _before, _now, _seconds), do: {Map.new(@fields, &{&1, nil}), %{}}

  defp load_run do
    with %{load_report: table} <- Gateway.lookup(),
         [{:latest, at, report}] <- :ets.lookup(table, :latest),
         true <- System.monotonic_time(:millisecond) - at < @load_report_ttl_ms,
         do: report,
         else: (_ -> nil)
  end
end
