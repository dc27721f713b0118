defmodule Grove.Gateway.ClientErrors do
  @moduledoc false
  # Yaws reports as errors what ordinary clients do every day: a client
  # that closes its connection, or falls silent, in the middle of a
  # request's head ("Unhandled reply from yaws:do_recv(): {error,closed}")
  # or body ("get_client_data: {error,timeout}"). Nothing is wrong with the
  # server then, and an operator must be able to trust that an error in the
  # log means something is.
  #
  # While the gateway runs, a primary `:logger` filter recognises exactly
  # these reports (Yaws's format string, and an `{:error, reason}` of a
  # connection gone or silent as its argument), counts each in the
  # gateway's `client_errors`, and passes it on at debug level (so it is
  # dropped unless debug logging is on). So does a request that a stop
  # cut in the middle (`cut_by_stop`). Any other report, from Yaws or not,
  # passes untouched. This process adds the filter when the gateway
  # starts, before Yaws, and removes it when the gateway stops, after Yaws.

  use GenServer

  alias Grove.Gateway.Stats

  @filter :grove_gateway_client_errors

  # Yaws's own words, as it passes them to error_logger:format/2.
  @reports [~c"Unhandled reply from yaws:do_recv(): ~p~n", ~c"get_client_data: ~p~n"]
  # How Yaws reports a connection's process that crashed.
  @died ~c"Yaws process died: ~p~n"
  # A connection the client closed or reset, or that stayed silent.
  @gone [:closed, :timeout, :econnreset, :etimedout, :enotconn, :epipe]

  def start_link(stats), do: GenServer.start_link(__MODULE__, stats)

  @impl true
  def init(stats) do
    # So that terminate/2 runs when the gateway stops.
    Process.flag(:trap_exit, true)
    # One left by a gateway that was killed, not stopped, is replaced.
    _ = :logger.remove_primary_filter(@filter)
    :ok = :logger.add_primary_filter(@filter, {&__MODULE__.filter/2, stats})
    {:ok, stats}
  end

  @impl true
  def terminate(_reason, _stats) do
    _ = :logger.remove_primary_filter(@filter)
    :ok
  end

  @doc false
  # Runs in the process that logs, for every log event of the node.
  def filter(
        %{msg: {:report, %{label: {:error_logger, _}, format: format, args: [{:error, reason}]}}} =
          event,
        stats
      )
      when format in @reports and reason in @gone do
    Stats.incr(stats, :client_errors)
    if :logger.allow(:debug, :yaws), do: %{event | level: :debug}, else: :stop
  end

  # A request in flight when a stop ends Yaws's server: the connection
  # Yaws accepted last outlives its server by a moment and finds its
  # tables gone ("Yaws process died: {badarg, [{ets, lookup, ...}]}").
  # Nothing is wrong with the server either: the stop cut the request.
  def filter(%{msg: {:report, %{label: {:error_logger, _}, format: @died}}} = event, stats) do
    if stopping?() do
      Stats.incr(stats, :cut_by_stop)
      if :logger.allow(:debug, :yaws), do: %{event | level: :debug}, else: :stop
    else
      :ignore
    end
  end

  def filter(_event, _stats), do: :ignore

  defp stopping? do
    Grove.Gateway.draining?()
  rescue
    ArgumentError -> false
  end
end
