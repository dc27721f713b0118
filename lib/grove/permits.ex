defmodule Grove.Permits do
  @moduledoc """
  A bounded number of permits with a bounded wait: at most `:concurrency`
  holders at once, at most `:queue` callers waiting, and no caller waits past
  its deadline. Used where expensive work must not pile up, such as password
  hashing during a login storm: the work itself runs in the caller's
  process, this only says when it may start.

      case Permits.run(MyPermits, 500, fn -> expensive() end) do
        {:ok, result} -> result
        {:error, :busy} -> # answer 503 at once
      end

  A holder that dies gives its permit back.

  ## Options

    * `:name` - registered name (required)
    * `:concurrency` - permits (default `System.schedulers_online()`)
    * `:queue` - callers that may wait (default `64`)
  """

  use GenServer

  defstruct [
    :concurrency,
    :queue_limit,
    holders: %{},
    waiting: :queue.new(),
    waiting_count: 0,
    stats: nil
  ]

  @doc false
  def start_link(opts),
    do: GenServer.start_link(__MODULE__, opts, name: Keyword.fetch!(opts, :name))

  @doc """
  Runs `fun` under a permit, waiting at most `timeout` ms for one. Returns
  `{:ok, result}` or `{:error, :busy}` (no permit in time, or the queue full).
  """
  @spec run(GenServer.server(), non_neg_integer(), (() -> result)) ::
          {:ok, result} | {:error, :busy}
        when result: var
  def run(permits, timeout, fun) do
    deadline = System.monotonic_time(:millisecond) + timeout
    ref = make_ref()

    case GenServer.call(permits, {:acquire, ref, deadline}, :infinity) do
      :granted ->
        try do
          {:ok, fun.()}
        after
          GenServer.cast(permits, {:release, ref})
        end

      :queued ->
        await(permits, ref, deadline, fun)

      :busy ->
        {:error, :busy}
    end
  end

  defp await(permits, ref, deadline, fun) do
    receive do
      {:granted, ^ref} ->
        try do
          {:ok, fun.()}
        after
          GenServer.cast(permits, {:release, ref})
        end
    after
      max(deadline - System.monotonic_time(:millisecond), 0) ->
        # Withdraw, synchronously: a grant may be on its way, and the
        # server, which alone knows, takes the permit back if so. Its grant
        # (sent before its reply) is then in our mailbox: drop it, since
        # Yaws reuses this process for the connection's next request.
        :ok = GenServer.call(permits, {:withdraw, ref}, :infinity)

        receive do
          {:granted, ^ref} -> :ok
        after
          0 -> :ok
        end

        {:error, :busy}
    end
  end

  @doc "Holders now, callers waiting, and how many were turned away since start."
  @spec stats(GenServer.server()) :: %{
          holders: non_neg_integer(),
          waiting: non_neg_integer(),
          refused: non_neg_integer()
        }
  def stats(permits), do: GenServer.call(permits, :stats)

  # Callbacks

  @impl true
  def init(opts) do
    {:ok,
     %__MODULE__{
       concurrency: Keyword.get(opts, :concurrency, System.schedulers_online()),
       queue_limit: Keyword.get(opts, :queue, 64),
       stats: %{refused: 0}
     }}
  end

  @impl true
  def handle_call({:acquire, ref, deadline}, {pid, _}, state) do
    cond do
      map_size(state.holders) < state.concurrency ->
        {:reply, :granted, hold(state, ref, pid)}

      state.waiting_count < state.queue_limit ->
        waiting = :queue.in({ref, pid, deadline}, state.waiting)
        {:reply, :queued, %{state | waiting: waiting, waiting_count: state.waiting_count + 1}}

      true ->
        {:reply, :busy, refuse(state)}
    end
  end

  def handle_call({:withdraw, ref}, _from, state) do
    waiting = :queue.filter(fn {r, _, _} -> r != ref end, state.waiting)

    state =
      %{state | waiting: waiting, waiting_count: :queue.len(waiting)}
      |> drop_holder(ref)
      |> grant_next()
      |> refuse()

    {:reply, :ok, state}
  end

  def handle_call(:stats, _from, state) do
    {:reply,
     %{
       holders: map_size(state.holders),
       waiting: state.waiting_count,
       refused: state.stats.refused
     }, state}
  end

  @impl true
  def handle_cast({:release, ref}, state),
    do: {:noreply, state |> drop_holder(ref) |> grant_next()}

  @impl true
  def handle_info({:DOWN, monitor, :process, _pid, _reason}, state) do
    case Enum.find(state.holders, fn {_ref, m} -> m == monitor end) do
      {ref, _} -> {:noreply, state |> drop_holder(ref) |> grant_next()}
      nil -> {:noreply, state}
    end
  end

  defp hold(state, ref, pid),
    do: %{state | holders: Map.put(state.holders, ref, Process.monitor(pid))}

  defp drop_holder(state, ref) do
    case Map.pop(state.holders, ref) do
      {nil, _} ->
        state

      {monitor, holders} ->
        Process.demonitor(monitor, [:flush])
        %{state | holders: holders}
    end
  end

  # Hands a free permit to the oldest waiter still within its deadline.
  defp grant_next(state) do
    if map_size(state.holders) < state.concurrency do
      case :queue.out(state.waiting) do
        {:empty, _} ->
          state

        {{:value, {ref, pid, deadline}}, waiting} ->
          state = %{state | waiting: waiting, waiting_count: state.waiting_count - 1}

          if deadline >= System.monotonic_time(:millisecond) and Process.alive?(pid) do
            send(pid, {:granted, ref})
            state |> hold(ref, pid) |> grant_next()
          else
            grant_next(state)
          end
      end
    else
      state
    end
  end

  defp refuse(state), do: %{state | stats: %{state.stats | refused: state.stats.refused + 1}}
end
