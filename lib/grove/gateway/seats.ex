defmodule Grove.Gateway.Seats do
  @moduledoc false
  # The gateway's `:max_sessions`, kept exactly: one atomic, the seats
  # taken, and the process that takes and gives them back, the seats'
  # keeper, which monitors every holder of one. An upgrade asks the keeper
  # for a seat (`take/3`); the keeper takes it, never past the limit, and
  # monitors the upgrade in the same step, so that the seat comes back
  # however the upgrade ends, killed before it asked or while it waited
  # included. The upgrade hands its seat to the connection it starts
  # (`hand/2`), as soon as it has started: the keeper monitors the
  # connection instead, and the seat comes back when it is gone, however
  # it went (a crash, a kill, an exit signal: a `terminate/2` runs for
  # none of these). An upgrade that started no connection gives its seat
  # back (`give_back/1`).
  #
  # The `sessions` gauge (Grove.Gateway.Stats) is kept here too, from the
  # same monitors: a connection that has its socket says so (`playing/1`)
  # and counts from then on, until the keeper sees it gone. Lowered by the
  # connection's own `terminate/2`, a killed one stayed counted.
  #
  # A call and two casts to the keeper a player, all as it joins, none on
  # its moves. A session counted once its connection had the socket
  # made the limit approximate: every upgrade in flight passed the check
  # against the same count, and a join storm took hundreds of players past
  # it; seats taken by each upgrade with a compare-and-swap of their own
  # were exact, but one killed before it told the keeper kept its seat.

  use GenServer

  alias Grove.Gateway.Stats

  @type t :: :atomics.atomics_ref()

  @doc "No seat taken; made once by the gateway."
  @spec new() :: t()
  def new, do: :atomics.new(1, signed: true)

  @doc """
  The seats' keeper, which also keeps the `sessions` gauge in `stats`. It
  comes before the connections and the server in the gateway's tree, so
  that when it starts, none is left: every seat is free, and no session
  counted.
  """
  @spec start_link({t(), Stats.t(), atom()}) :: GenServer.on_start()
  def start_link({seats, stats, name}),
    do: GenServer.start_link(__MODULE__, {seats, stats}, name: name)

  @doc """
  Takes a seat for the caller if fewer than `max` are taken: the keeper
  gives it back when the caller is gone, unless the caller has handed it
  to a connection (`hand/2`) or given it back (`give_back/1`) by then.
  `:busy` when the keeper has not answered within `timeout` (or is not
  running, restarting): no seat is held then.
  """
  @spec take(GenServer.server(), non_neg_integer(), timeout()) :: :ok | :full | :busy
  def take(keeper, max, timeout) do
    GenServer.call(keeper, {:take, max}, timeout)
  catch
    :exit, _timeout_or_gone ->
      # After the request: if the keeper took a seat for it, this gives it back.
      give_back(keeper)
      :busy
  end

  @doc "Hands the caller's seat to the connection `pid`: it comes back when `pid` is gone."
  @spec hand(GenServer.server(), pid()) :: :ok
  def hand(keeper, pid), do: GenServer.cast(keeper, {:hand, self(), pid})

  @doc "Gives the caller's seat back (an upgrade that started no connection)."
  @spec give_back(GenServer.server()) :: :ok
  def give_back(keeper), do: GenServer.cast(keeper, {:give_back, self()})

  @doc "Counts the calling connection, which has its socket, in `sessions` until it is gone."
  @spec playing(GenServer.server()) :: :ok
  def playing(keeper), do: GenServer.cast(keeper, {:playing, self()})

  @doc "The seats taken."
  @spec taken(t()) :: integer()
  def taken(seats), do: :atomics.get(seats, 1)

  @doc false
  # Taking a seat, having seen `seen` seats taken: `:full`, or a
  # compare-and-swap from what it saw, which fails if the count changed
  # meanwhile (`{:changed, now}`: look again). The keeper alone writes
  # the count, so for it the swap never fails; its tests interleave the
  # steps of takers at once, as writers that were not alone would.
  @spec attempt(t(), non_neg_integer(), integer()) :: :ok | :full | {:changed, integer()}
  def attempt(_seats, max, seen) when seen >= max, do: :full

  def attempt(seats, _max, seen) do
    case :atomics.compare_exchange(seats, 1, seen, seen + 1) do
      :ok -> :ok
      now -> {:changed, now}
    end
  end

  # Callbacks

  # `holders`: each holder of a seat, an upgrade or a connection, by pid:
  # its monitor, and whether it is counted in `sessions`. `early`: the
  # connections that said they play before the keeper was handed them
  # (their word and their upgrade's come from two processes), with their
  # monitors.
  @impl true
  def init({seats, stats}) do
    # Every upgrade waits on this process for its seat, and its work is a
    # few map writes a message: among the thousands of connections a join
    # storm makes runnable, at normal priority it ran once a round and its
    # queue grew to thousands while each upgrade waited.
    Process.flag(:priority, :high)
    :atomics.put(seats, 1, 0)
    Stats.incr(stats, :sessions, -Stats.get(stats, :sessions))
    {:ok, %{seats: seats, stats: stats, holders: %{}, early: %{}}}
  end

  # A caller holds one seat at most: one that has it already keeps it.
  @impl true
  def handle_call({:take, max}, {pid, _tag}, state) do
    cond do
      Map.has_key?(state.holders, pid) ->
        {:reply, :ok, state}

      take_seat(state.seats, max) == :ok ->
        holder = {Process.monitor(pid), false}
        {:reply, :ok, %{state | holders: Map.put(state.holders, pid, holder)}}

      true ->
        {:reply, :full, state}
    end
  end

  @impl true
  def handle_cast({:hand, upgrade, pid}, state) do
    case Map.pop(state.holders, upgrade) do
      {{ref, _}, holders} ->
        Process.demonitor(ref, [:flush])
        {early, rest} = Map.pop(state.early, pid)
        if early, do: Process.demonitor(early, [:flush])
        if early, do: Stats.incr(state.stats, :sessions)
        holders = Map.put(holders, pid, {Process.monitor(pid), early != nil})
        {:noreply, %{state | holders: holders, early: rest}}

      {nil, _} ->
        {:noreply, state}
    end
  end

  def handle_cast({:give_back, pid}, state) do
    case Map.pop(state.holders, pid) do
      {{ref, _}, holders} ->
        Process.demonitor(ref, [:flush])
        :atomics.sub(state.seats, 1, 1)
        {:noreply, %{state | holders: holders}}

      {nil, _} ->
        {:noreply, state}
    end
  end

  def handle_cast({:playing, pid}, state) do
    case state.holders do
      %{^pid => {ref, false}} ->
        Stats.incr(state.stats, :sessions)
        {:noreply, %{state | holders: Map.put(state.holders, pid, {ref, true})}}

      %{^pid => {_ref, true}} ->
        {:noreply, state}

      _not_handed_yet ->
        {:noreply,
         %{state | early: Map.put_new_lazy(state.early, pid, fn -> Process.monitor(pid) end)}}
    end
  end

  @impl true
  def handle_info({:DOWN, _ref, :process, pid, _reason}, state) do
    case Map.pop(state.holders, pid) do
      {{_ref, playing}, holders} ->
        :atomics.sub(state.seats, 1, 1)
        if playing, do: Stats.incr(state.stats, :sessions, -1)
        {:noreply, %{state | holders: holders}}

      {nil, _} ->
        {:noreply, %{state | early: Map.delete(state.early, pid)}}
    end
  end

  # The keeper alone writes the count: what it read is what it swaps.
  defp take_seat(seats, max), do: attempt(seats, max, taken(seats))
end
