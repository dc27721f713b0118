defmodule Grove.Gateway.Drainer do
  @moduledoc false
  # Graceful shutdown of the gateway. It comes after Yaws and the sessions'
  # supervisor among the gateway's children, so it stops before them: it
  # turns /readyz to 503 and refuses new players for `unready_ms`, so that
  # load balancers stop sending players while the port still answers, then
  # tells every session to say `bye` and close, and waits (up to
  # `drain_timeout`) until they have. A session writes its own frames, so
  # nothing is left half-written.

  use GenServer

  require Logger

  # The supervisor must give the drain its time, and a little more to log.
  @margin_ms 1_000

  def child_spec(config) do
    %{
      id: __MODULE__,
      start: {__MODULE__, :start_link, [config]},
      shutdown: config.unready_ms + config.drain_timeout + @margin_ms
    }
  end

  def start_link(config), do: GenServer.start_link(__MODULE__, config)

  @impl true
  def init(config) do
    # So that terminate/2 runs when the supervisor stops us.
    Process.flag(:trap_exit, true)
    {:ok, config}
  end

  @impl true
  def terminate(_reason, config) do
    # First, so that load balancers stop sending players (/readyz is 503),
    # and given the time to see it.
    :atomics.put(config.draining, 1, 1)

    if config.unready_ms > 0 do
      Logger.info("gateway: not ready; the players are told goodbye in #{config.unready_ms} ms")

      receive do
      after
        config.unready_ms -> :ok
      end
    end

    sessions = Grove.Gateway.sessions()
    refs = Map.new(sessions, fn pid -> {Process.monitor(pid), pid} end)
    for pid <- sessions, do: send(pid, :grove_drain)
    deadline = System.monotonic_time(:millisecond) + config.drain_timeout
    left = await(refs, deadline)

    if sessions != [] do
      Logger.info(
        "gateway: drained #{length(sessions) - map_size(left)} of #{length(sessions)} sessions"
      )
    end

    :ok
  end

  defp await(refs, _deadline) when map_size(refs) == 0, do: refs

  defp await(refs, deadline) do
    timeout = max(deadline - System.monotonic_time(:millisecond), 0)

    receive do
      {:DOWN, ref, :process, _pid, _reason} -> await(Map.delete(refs, ref), deadline)
    after
      timeout -> refs
    end
  end
end
