defmodule Grove.Store.Worker do
  @moduledoc false
  # One connection and the loop that uses it: take a batch of requests from
  # the queue, drop those whose deadline has passed unrun, run the reads one
  # by one (each answered at once), then all the writes in one transaction,
  # answered only once it has committed; tell the queue it is ready again.
  #
  # A transaction that fails fails every write in it. When it held more than
  # one, each is tried again alone (those still within their deadline), so
  # that one write the database refuses (a race the statements could not
  # absorb) costs its batch nothing but time.
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
    # As the queue's (see Grove.Store.Queue): it waits on the database, not the CPU.
    Process.flag(:priority, :high)

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
  def handle_info({:run, batch}, %State{} = state) do
    now = System.monotonic_time(:microsecond)
    for request <- batch, do: Queue.taken(state.handle, request, now)

    {live, expired} = Enum.split_with(batch, &(not Queue.expired?(&1)))
    for request <- expired, do: Queue.reject(state.handle, request, :expired)

    {reads, writes} = Enum.split_with(live, &read?/1)
    state = state |> run_reads(reads) |> run_writes(writes)

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

  @reads [:fetch_account, :fetch_token, :fetch_position, :fetch_state, :list_state, :list_keys]

  defp read?(request), do: elem(Queue.operation(request), 0) in @reads

  # Handed over just as the connection went, or lost on the way: nothing to
  # run them on.
  defp run_reads(%State{conn: nil} = state, reads) do
    for request <- reads, do: Queue.reject(state.handle, request, :errors)
    state
  end

  defp run_reads(state, []), do: state

  defp run_reads(state, [request | rest]) do
    {fun, args} = Queue.operation(request)

    {[result], state} =
      attempt(state, 1, fun, fn -> apply(state.adapter, fun, [state.conn | args]) end)

    Queue.reply(state.handle, request, result)
    run_reads(state, rest)
  end

  defp run_writes(state, []), do: state

  defp run_writes(%State{conn: nil} = state, writes) do
    for request <- writes, do: Queue.reject(state.handle, request, :errors)
    state
  end

  defp run_writes(state, writes) do
    operations = Enum.map(writes, &Queue.operation/1)
    count = length(writes)

    {results, state} =
      attempt(state, count, :write, fn -> state.adapter.write(state.conn, operations) end)

    case results do
      {:ok, results} ->
        Queue.committed(state.handle, count)
        Enum.zip_with(writes, results, &Queue.reply(state.handle, &1, &2))
        state

      {:error, :unavailable} when count > 1 and state.conn != nil ->
        Enum.reduce(writes, state, fn request, state ->
          if Queue.expired?(request) do
            Queue.reject(state.handle, request, :expired)
            state
          else
            run_writes(state, [request])
          end
        end)

      {:error, :unavailable} ->
        for request <- writes, do: Queue.reply(state.handle, request, {:error, :unavailable})
        state
    end
  end

  # Runs `fun` on the connection, timed and counted as running; a crash
  # drops the connection and reads as `:unavailable`.
  defp attempt(%State{handle: handle} = state, count, what, fun) do
    Queue.running(handle, count)
    started = System.monotonic_time(:microsecond)

    {result, state} =
      try do
        {fun.(), state}
      catch
        kind, reason ->
          Logger.error(
            "store #{inspect(state.store)}: #{what} failed, reconnecting: " <>
              Exception.format(kind, reason, __STACKTRACE__)
          )

          {{:error, :unavailable}, lost(state)}
      end

    Queue.ran(handle, System.monotonic_time(:microsecond) - started)
    Queue.running(handle, -count)

    case what do
      :write -> {result, state}
      _read -> {[result], state}
    end
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
