defmodule Grove.Actors.Balancer do
  @moduledoc false
  # Keeps this node's share of a cluster's actors running (see the
  # "A cluster" section of Grove.Actors). It watches the members
  # (`Grove.Cluster.subscribe/1`) and, once they have stayed unchanged for
  # `settle` ms, computes every kind's share here (`Grove.Actors.Share`,
  # which every node computes alike) and moves towards it: it starts herds
  # for actors this node now owes, or asks its herds to retire the ones it
  # no longer owes (smallest herds first, so that whole herds go before one
  # is cut; see `Grove.Actors.Herd.retire/2`). The herds pace both, joins
  # and leaves alike, under the group's permits.
  #
  # It counts, per kind, the actors of the herds it started, less those
  # they retired. A herd that retires all its actors stops normally and is
  # forgotten. One that crashes is restarted by its supervisor with all
  # the actors it started with, under a pid this process does not know:
  # it keeps counting them (so it starts no more for them), but can no
  # longer retire them.

  use GenServer

  alias __MODULE__, as: State
  alias Grove.Actors
  alias Grove.Actors.{Herd, Share}

  require Logger

  defstruct [
    :name,
    :instance,
    :kinds,
    :settle,
    :membership,
    :timer,
    members: nil,
    herds: %{},
    orphans: %{},
    last: nil
  ]

  @type t :: %State{}

  @spec start_link(keyword()) :: GenServer.on_start()
  def start_link(opts), do: GenServer.start_link(__MODULE__, opts)

  # Callbacks

  @impl true
  def init(opts) do
    state = %State{
      name: Keyword.fetch!(opts, :name),
      instance: Keyword.fetch!(opts, :instance),
      kinds: Keyword.fetch!(opts, :kinds),
      settle: Keyword.fetch!(opts, :settle)
    }

    {:ok, state, {:continue, :subscribe}}
  end

  @impl true
  def handle_continue(:subscribe, state), do: {:noreply, subscribe(state)}

  @impl true
  def handle_info({:grove_cluster, instance, members}, %State{instance: instance} = state),
    do: {:noreply, settle_later(%{state | members: members})}

  def handle_info(:settle, state), do: {:noreply, balance(%{state | timer: nil})}

  def handle_info(:subscribe, state), do: {:noreply, subscribe(state)}

  # The membership restarted: its subscribers are gone with it.
  def handle_info({:DOWN, ref, :process, _, _}, %State{membership: ref} = state),
    do: {:noreply, subscribe_later(%{state | membership: nil})}

  def handle_info({:DOWN, _ref, :process, pid, reason}, state) do
    case Map.pop(state.herds, pid) do
      {nil, _} ->
        {:noreply, state}

      {_, herds} when reason == :normal ->
        {:noreply, %{state | herds: herds}}

      {{kind, count}, herds} ->
        orphans = Map.update(state.orphans, kind, count, &(&1 + count))
        {:noreply, %{state | herds: herds, orphans: orphans}}
    end
  end

  defp subscribe(state) do
    membership = Grove.Cluster.Membership.name(state.instance)

    ref = Process.monitor(membership)

    try do
      members = Grove.Cluster.subscribe(state.instance)
      settle_later(%{state | membership: ref, members: members})
    catch
      :exit, _ ->
        Process.demonitor(ref, [:flush])
        subscribe_later(state)
    end
  end

  defp subscribe_later(state) do
    Process.send_after(self(), :subscribe, state.settle)
    state
  end

  defp settle_later(state) do
    if state.timer, do: Process.cancel_timer(state.timer)
    %{state | timer: Process.send_after(self(), :settle, state.settle)}
  end

  # A node without a quorum of its cluster is paused (`Grove.World.Placer`):
  # the few members it sees are no reason to run everyone's actors. Its
  # herds wait, joining again once it runs; its share is settled then.
  defp balance(%State{} = state) do
    if Grove.Cluster.quorum?(state.instance), do: rebalance(state), else: state
  end

  # The new share is said before the kinds are started or retired to it, so
  # whoever sees the actors running can find the line that says why.
  defp rebalance(%State{members: members} = state) do
    share =
      Enum.sum(for kind <- state.kinds, do: Share.of(kind.count, members, node(), kind.index))

    total = Enum.sum(for kind <- state.kinds, do: kind.count)
    now = {share, total, length(members)}

    if now != state.last,
      do:
        Logger.info(
          "actors: this node now runs #{share} of #{total} (#{length(members)} members)"
        )

    state = Enum.reduce(state.kinds, state, &balance_kind(&2, &1, members))
    %{state | last: now}
  end

  defp balance_kind(state, kind, members) do
    share = Share.of(kind.count, members, node(), kind.index)
    Actors.put_share(state.name, kind.index, share)
    running = running(state, kind.index)

    cond do
      share > running -> start(state, kind, share - running)
      share < running -> retire(state, kind.index, running - share)
      true -> state
    end
  end

  defp running(state, kind_index) do
    Map.get(state.orphans, kind_index, 0) +
      Enum.sum(for {_pid, {^kind_index, count}} <- state.herds, do: count)
  end

  defp start(state, kind, count) do
    herds =
      for {pid, size} <- Actors.add_herds(state.name, count, kind: kind.module), into: %{} do
        Process.monitor(pid)
        {pid, {kind.index, size}}
      end

    %{state | herds: Map.merge(state.herds, herds)}
  end

  defp retire(state, kind_index, count) do
    state.herds
    |> Enum.filter(fn {_pid, {kind, _}} -> kind == kind_index end)
    |> Enum.sort_by(fn {_pid, {_, size}} -> size end)
    |> Enum.reduce_while({state, count}, fn
      _herd, {state, 0} ->
        {:halt, {state, 0}}

      {pid, {kind, size}}, {state, left} ->
        retired =
          try do
            Herd.retire(pid, min(left, size))
          catch
            # It went meanwhile: its DOWN settles the count.
            :exit, _ -> 0
          end

        herds =
          if retired == size,
            do: Map.delete(state.herds, pid),
            else: Map.put(state.herds, pid, {kind, size - retired})

        {:cont, {%{state | herds: herds}, left - retired}}
    end)
    |> elem(0)
  end
end
