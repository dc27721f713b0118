defmodule Grove.Store.Worker do
  @moduledoc false
  # One connection and the loop that uses it: take a request from the queue,
  # drop it unrun if its deadline has passed, run it otherwise, reply, and
  # tell the queue it is ready again.
  #
  # A lost connection does not kill the worker: it tells the queue it is
  # down (so that calls fail fast when every worker is down), reconnects with
  # backoff, and tells the queue it is ready once connected again.

  use GenServer

  alias __MODULE__, as: State
  alias Grove.Store
  alias Grove.Store.Queue

  require Logger

  # Delays between reconnection attempts double from the first to the last.
  @first_backoff 100
  @last_backoff 5_000

  defstruct [:store, :adapter, :config, :handle, :conn, :timer, backoff: @first_backoff]

  @type t :: %State{
          store: Store.name(),
          adapter: module(),
          config: term(),
          handle: Queue.Handle.t(),
          conn: pid() | nil,
          timer: reference() | nil,
          backoff: pos_integer()
        }

  @spec start_link(Store.t()) :: GenServer.on_start()
  def start_link(%Store{} = store), do: GenServer.start_link(__MODULE__, store)

  # Callbacks

  @impl true
  def init(%Store{} = store) do
    # A connection's death arrives as a message (the worker reconnects instead
    # of dying with it), and terminate/2 runs on shutdown to close it.
    Process.flag(:trap_exit, true)

    state = %State{
      store: store.name,
      adapter: store.adapter,
      config: store.adapter_config,
      handle: Queue.handle!(store.name)
    }

    # The first attempt is made here, not in handle_continue/2, so that a
    # store whose start_link/1 returned serves at once. A failure does not
    # fail the start (it would make a restart loop while the database is
    # away): the worker starts down and keeps trying.
    {:ok, connect(state)}
  end

  @impl true
  def handle_info({:run, request}, %State{conn: nil} = state) do
    # Handed over just as the connection went: nothing to run it on.
    Queue.reject(state.handle, request, :errors)
    {:noreply, state}
  end

  def handle_info({:run, request}, %State{} = state) do
    state =
      if Queue.expired?(request) do
        Queue.reject(state.handle, request, :expired)
        state
      else
        run(request, state)
      end

    if state.conn, do: Queue.ready(state.handle, self())
    {:noreply, state}
  end

  def handle_info(:reconnect, state), do: {:noreply, connect(%{state | timer: nil})}

  def handle_info({:EXIT, conn, reason}, %State{conn: conn} = state) do
    Logger.warning("store #{inspect(state.store)}: lost its connection: #{inspect(reason)}")
    {:noreply, lost(%{state | conn: nil})}
  end

  # A connection given up on earlier, or an attempt that failed to open.
  def handle_info({:EXIT, _pid, _reason}, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, %State{conn: conn, adapter: adapter}) do
    if conn, do: adapter.disconnect(conn)
    :ok
  end

  defp run({_ref, _deadline, {fun, args}} = request, %State{handle: handle} = state) do
    Queue.running(handle, 1)

    {result, state} =
      try do
        {apply(state.adapter, fun, [state.conn | args]), state}
      catch
        kind, reason ->
          Logger.error(
            "store #{inspect(state.store)}: #{fun} failed, reconnecting: " <>
              Exception.format(kind, reason, __STACKTRACE__)
          )

          {{:error, :unavailable}, lost(state)}
      end

    Queue.running(handle, -1)
    Queue.reply(handle, request, result)
    state
  end

  defp connect(%State{} = state) do
    result =
      try do
        state.adapter.connect(state.config)
      catch
        kind, reason -> {:error, Exception.format(kind, reason, __STACKTRACE__)}
      end

    case result do
      {:ok, conn} ->
        if state.backoff > @first_backoff,
          do: Logger.info("store #{inspect(state.store)}: connected again")

        Queue.ready(state.handle, self())
        %{state | conn: conn, backoff: @first_backoff}

      {:error, reason} ->
        Logger.warning(
          "store #{inspect(state.store)}: cannot connect (#{inspect(reason)}), " <>
            "retrying in #{state.backoff} ms"
        )

        lost(%{state | conn: nil})
    end
  end

  # Drops the connection (if any), tells the queue, and schedules a retry.
  defp lost(%State{} = state) do
    if state.conn, do: state.adapter.disconnect(state.conn)
    Queue.down(state.handle, self())
    timer = state.timer || Process.send_after(self(), :reconnect, state.backoff)
    %{state | conn: nil, timer: timer, backoff: min(state.backoff * 2, @last_backoff)}
  end
end
