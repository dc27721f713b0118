defmodule Grove.Store.Queue do
  @moduledoc false
  # The bounded queue with deadlines in front of a store's workers.
  #
  # A caller books a place with one atomic add on the `queued` gauge; past
  # the limit it takes the place back and answers `{:error, :unavailable}`
  # without sending any message, so a stalled database costs a rejected
  # caller next to nothing. With a place, it sends its request (an alias to
  # reply to, a deadline, the operation) to this process and waits until the
  # deadline and no longer. The alias is a monitor's (`reply_demonitor`):
  # giving up deactivates it, so a reply that comes later is dropped by the
  # runtime instead of landing in the caller's mailbox, and the monitor tells
  # the caller at once when this process is gone.
  #
  # This process only matches requests with idle workers, oldest request
  # first. It never touches the database, so it never blocks. A worker that
  # comes back ready takes everything that waits, up to `max_batch`
  # requests, at once: the writes among them go into one transaction, one
  # commit (and one sync of the disk) for all of them. That is the group
  # commit: the batch grows by itself with the backlog that built up while
  # the last commit was syncing, and needs no timer. A request holds its
  # place until a worker takes it, even once its caller has given up: while
  # the workers are stuck, the queue stays full and every further call is
  # answered at once, which is the point.

  use GenServer

  alias __MODULE__, as: State
  alias Grove.Metrics.Histogram
  alias Grove.Store

  defmodule Handle do
    @moduledoc false
    # What a call needs, published in :persistent_term so that calls read it
    # without a message.
    @enforce_keys [:queue, :gauges, :counters, :waits, :queue_limit, :timeout]
    defstruct @enforce_keys

    @type t :: %__MODULE__{
            queue: pid(),
            gauges: :atomics.atomics_ref(),
            counters: :counters.counters_ref(),
            waits: %{queue: Histogram.t(), database: Histogram.t()},
            queue_limit: pos_integer(),
            timeout: pos_integer()
          }
  end

  @gauges [:queued, :running, :connected]
  @counters [
    :completed,
    :rejected_full,
    :expired,
    :timed_out,
    :errors,
    :transactions,
    :batched_writes
  ]

  for {key, index} <- Enum.with_index(@gauges ++ @counters, 1) do
    index = if index > length(@gauges), do: index - length(@gauges), else: index
    defp index(unquote(key)), do: unquote(index)
  end

  defstruct [
    :store,
    :handle,
    :pool_size,
    :max_batch,
    pending: :queue.new(),
    idle: [],
    watched: MapSet.new(),
    down: MapSet.new()
  ]

  @type t :: %State{
          store: Store.name(),
          handle: Handle.t(),
          pool_size: pos_integer(),
          max_batch: pos_integer(),
          pending: :queue.queue(),
          idle: [pid()],
          watched: MapSet.t(pid()),
          down: MapSet.t(pid())
        }

  @typedoc """
  A request as it travels: where to reply, until when, since when it waits
  (monotonic milliseconds and microseconds), and what to run.
  """
  @type request :: {reference(), integer(), integer(), {atom(), list()}}

  ## Calls

  @doc "Runs `fun(conn, args...)` on a worker of the store, within the call's deadline."
  @spec call(Store.name(), atom(), list(), Store.call_opts()) :: term()
  def call(store, fun, args, opts) do
    case :persistent_term.get({__MODULE__, store}, nil) do
      nil ->
        _ = timeout!(opts, 1)
        {:error, :unavailable}

      %Handle{} = handle ->
        case timeout!(opts, handle.timeout) do
          timeout when timeout > 0 ->
            enqueue(handle, {fun, args}, timeout)

          _passed ->
            # The caller's deadline passed before it asked: nothing is sent.
            :counters.add(handle.counters, index(:timed_out), 1)
            {:error, :unavailable}
        end
    end
  end

  # Milliseconds left: the call's own timeout, or what is left of an
  # absolute deadline (monotonic milliseconds), or the store's default.
  defp timeout!(opts, default) when is_list(opts) do
    case opts do
      [] ->
        default

      [timeout: timeout] when is_integer(timeout) and timeout > 0 ->
        timeout

      [deadline: deadline] when is_integer(deadline) ->
        min(deadline - System.monotonic_time(:millisecond), default)

      _ ->
        bad_opts!(opts)
    end
  end

  defp timeout!(opts, _default), do: bad_opts!(opts)

  defp bad_opts!(opts) do
    raise ArgumentError,
          "the options of a store call are [timeout: positive integer] or " <>
            "[deadline: monotonic milliseconds], got: #{inspect(opts)}"
  end

  defp enqueue(%Handle{gauges: gauges, counters: counters} = handle, operation, timeout) do
    if :atomics.add_get(gauges, index(:queued), 1) > handle.queue_limit do
      :atomics.sub(gauges, index(:queued), 1)
      :counters.add(counters, index(:rejected_full), 1)
      {:error, :unavailable}
    else
      now = System.monotonic_time(:microsecond)
      deadline = div(now, 1000) + timeout
      ref = :erlang.monitor(:process, handle.queue, alias: :reply_demonitor)
      send(handle.queue, {:request, {ref, deadline, now, operation}})

      receive do
        {^ref, reply} ->
          reply

        {:DOWN, ^ref, :process, _, _} ->
          {:error, :unavailable}
      after
        timeout ->
          :erlang.demonitor(ref, [:flush])

          # The reply may have come between the timeout and the demonitor.
          receive do
            {^ref, reply} -> reply
          after
            0 ->
              :counters.add(counters, index(:timed_out), 1)
              {:error, :unavailable}
          end
      end
    end
  end

  ## What workers use

  @doc "The published handle of a running store."
  @spec handle!(Store.name()) :: Handle.t()
  def handle!(store), do: :persistent_term.get({__MODULE__, store})

  @doc "Tells the queue the worker has a connection and nothing to do."
  @spec ready(Handle.t(), pid()) :: :ok
  def ready(%Handle{queue: queue}, worker) do
    send(queue, {:ready, worker})
    :ok
  end

  @doc "Tells the queue the worker has lost its connection."
  @spec down(Handle.t(), pid()) :: :ok
  def down(%Handle{queue: queue}, worker) do
    send(queue, {:down, worker})
    :ok
  end

  @doc "Whether a request's deadline has passed."
  @spec expired?(request()) :: boolean()
  def expired?({_ref, deadline, _queued_at, _operation}),
    do: System.monotonic_time(:millisecond) >= deadline

  @doc "What a request runs: `{fun, args}`."
  @spec operation(request()) :: {atom(), list()}
  def operation({_ref, _deadline, _queued_at, operation}), do: operation

  @doc "Records how long a request waited for a worker, now that one took it."
  @spec taken(Handle.t(), request(), integer()) :: :ok
  def taken(%Handle{waits: waits}, {_ref, _deadline, queued_at, _operation}, now_us),
    do: Histogram.record(waits.queue, max(now_us - queued_at, 0))

  @doc "Records how long the database took over a request (its transaction, for a write)."
  @spec ran(Handle.t(), non_neg_integer()) :: :ok
  def ran(%Handle{waits: waits}, micros), do: Histogram.record(waits.database, micros)

  @doc "Counts a transaction that committed `writes` writes together."
  @spec committed(Handle.t(), pos_integer()) :: :ok
  def committed(%Handle{counters: counters}, writes) do
    :counters.add(counters, index(:transactions), 1)
    :counters.add(counters, index(:batched_writes), writes)
  end

  @doc "Answers a request without running it, counting why."
  @spec reject(Handle.t(), request(), :expired | :errors) :: :ok
  def reject(%Handle{counters: counters}, {ref, _deadline, _queued_at, _operation}, why) do
    :counters.add(counters, index(why), 1)
    send(ref, {ref, {:error, :unavailable}})
    :ok
  end

  @doc "Answers a request that ran, counting it as completed or as an error."
  @spec reply(Handle.t(), request(), term()) :: :ok
  def reply(%Handle{counters: counters}, {ref, _deadline, _queued_at, _operation}, result) do
    outcome = if result == {:error, :unavailable}, do: :errors, else: :completed
    :counters.add(counters, index(outcome), 1)
    send(ref, {ref, result})
    :ok
  end

  @doc "Moves the `running` gauge."
  @spec running(Handle.t(), integer()) :: :ok
  def running(%Handle{gauges: gauges}, delta), do: :atomics.add(gauges, index(:running), delta)

  @doc "The store's wait histograms (microseconds); `nil` when it is not running."
  @spec waits(Store.name()) :: %{queue: Histogram.t(), database: Histogram.t()} | nil
  def waits(store) do
    case :persistent_term.get({__MODULE__, store}, nil) do
      nil -> nil
      %Handle{waits: waits} -> waits
    end
  end

  @doc "The store's counters; zeros when it is not running."
  @spec stats(Store.name()) :: Store.stats()
  def stats(store) do
    case :persistent_term.get({__MODULE__, store}, nil) do
      nil ->
        Map.new(@gauges ++ @counters, &{&1, 0})

      %Handle{gauges: gauges, counters: counters} ->
        Map.merge(
          Map.new(@gauges, &{&1, :atomics.get(gauges, index(&1))}),
          Map.new(@counters, &{&1, :counters.get(counters, index(&1))})
        )
    end
  end

  ## The process

  @spec start_link(Store.t()) :: GenServer.on_start()
  def start_link(%Store{} = store),
    do: GenServer.start_link(__MODULE__, store, name: :"#{store.name}.Queue")

  @impl true
  def init(%Store{} = store) do
    # Trapping exits makes terminate/2 run on shutdown, to unpublish the handle.
    Process.flag(:trap_exit, true)
    # Every caller waits on this process and the workers, which do next to
    # no work of their own: on a node whose cores the world keeps busy,
    # they run ahead of it rather than wait seconds for a scheduler while
    # the queue fills (measured: see docs/benchmarks.md, "Launch day").
    Process.flag(:priority, :high)

    handle = %Handle{
      queue: self(),
      gauges: :atomics.new(length(@gauges), signed: true),
      counters: :counters.new(length(@counters), [:write_concurrency]),
      waits: %{queue: Histogram.new(), database: Histogram.new()},
      queue_limit: store.queue_limit,
      timeout: store.timeout
    }

    :persistent_term.put({__MODULE__, store.name}, handle)

    {:ok,
     %State{
       store: store.name,
       handle: handle,
       pool_size: store.pool_size,
       max_batch: store.max_batch
     }}
  end

  @impl true
  def handle_info({:request, request}, %State{} = state) do
    cond do
      all_down?(state) ->
        take_place(state)
        reject(state.handle, request, :errors)
        {:noreply, state}

      state.idle == [] ->
        {:noreply, %{state | pending: :queue.in(request, state.pending)}}

      true ->
        [worker | idle] = state.idle
        dispatch(state, worker, [request])
        {:noreply, %{state | idle: idle}}
    end
  end

  def handle_info({:ready, worker}, %State{} = state) do
    state = watch(state, worker)
    state = connected(%{state | down: MapSet.delete(state.down, worker)})

    # Everything that waits, oldest first, up to a batch: the group commit.
    case take(state.pending, state.max_batch, []) do
      {[], _pending} ->
        {:noreply, %{state | idle: [worker | state.idle]}}

      {batch, pending} ->
        dispatch(state, worker, batch)
        {:noreply, %{state | pending: pending}}
    end
  end

  def handle_info({:down, worker}, %State{} = state) do
    state = watch(state, worker)
    state = %{state | idle: List.delete(state.idle, worker), down: MapSet.put(state.down, worker)}
    state = connected(state)

    if all_down?(state) do
      # Nobody can serve what waits: answer it now rather than at its deadline.
      for request <- :queue.to_list(state.pending) do
        take_place(state)
        reject(state.handle, request, :errors)
      end

      {:noreply, %{state | pending: :queue.new()}}
    else
      {:noreply, state}
    end
  end

  def handle_info({:DOWN, _ref, :process, worker, _reason}, %State{} = state) do
    {:noreply,
     connected(%{
       state
       | idle: List.delete(state.idle, worker),
         watched: MapSet.delete(state.watched, worker),
         down: MapSet.delete(state.down, worker)
     })}
  end

  def handle_info({:EXIT, _pid, _reason}, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, %State{store: store}) do
    :persistent_term.erase({__MODULE__, store})
    :ok
  end

  defp watch(%State{watched: watched} = state, worker) do
    if MapSet.member?(watched, worker) do
      state
    else
      Process.monitor(worker)
      %{state | watched: MapSet.put(watched, worker)}
    end
  end

  defp all_down?(%State{down: down, pool_size: pool_size}), do: MapSet.size(down) >= pool_size

  # The workers with a connection now, for readiness checks.
  defp connected(%State{watched: watched, down: down} = state) do
    :atomics.put(state.handle.gauges, index(:connected), MapSet.size(watched) - MapSet.size(down))
    state
  end

  defp take(pending, 0, batch), do: {Enum.reverse(batch), pending}

  defp take(pending, room, batch) do
    case :queue.out(pending) do
      {{:value, request}, pending} -> take(pending, room - 1, [request | batch])
      {:empty, pending} -> {Enum.reverse(batch), pending}
    end
  end

  defp dispatch(%State{} = state, worker, batch) do
    take_place(state, length(batch))
    send(worker, {:run, batch})
  end

  defp take_place(%State{handle: handle}, count \\ 1),
    do: :atomics.sub(handle.gauges, index(:queued), count)
end
