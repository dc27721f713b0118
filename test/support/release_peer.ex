defmodule Grove.ReleasePeer do
  @moduledoc """
  A node of another release, as far as the placer of a node of this one
  can tell: on a peer node (`Grove.ClusterCase.start_peer!/3`), a
  membership that greets with the fingerprint it is given, saying it
  speaks `speaks` (none: as an older release's greeting, which says
  nothing of them), and is a member of the group of that fingerprint; and
  a placer that takes every zone handed to it, and passes every message
  and call it gets on to `observer`, as `{:release_peer, what}`: a test
  sees which forms it was sent (an older release's placer would crash
  on `{:zones_at, zones}` or `{:take_over_all, zones}`).

  Its placer answers every call (`calls: :answer`), or none
  (`calls: :hold`: a node that hangs), or each once it is sent `:answer`
  (`calls: :step`: a test holds each call as long as it needs), or, at
  its first call, greets
  again as an older release's, saying nothing of what it speaks, and
  answers once that node's membership heard it (`calls: :downgrade`: a
  node back on an older build), or refuses as stale the zones of
  `indexes` (`calls: {:stale, indexes}`): in a call that refuses the
  stale ones alone (`{:take_over_fresh, zones}`), those, and in any
  other, the whole call, as a node of an older build does. It answers
  as `calls` says from `{:release_peer_calls, calls, pid}` on, which it
  acknowledges to `pid` with `:release_peer_calls`. Its membership
  leaves the group when sent `:leave`.
  """

  alias Grove.Cluster.{Fingerprint, Membership}
  alias Grove.World.Placer

  @doc "Starts it on this node (call it on the peer with `:erpc`); returns `:ok`."
  @spec start(atom(), atom(), Fingerprint.t(), [atom()], node(), pid(), keyword()) :: :ok
  def start(instance, world, fingerprint, speaks, to, observer, opts \\ []) do
    scope = :"#{instance}.Cluster.Scope"
    ready = self()

    spawn(fn ->
      true = Process.register(self(), Membership.name(instance))
      greeting = if speaks == [], do: fingerprint, else: fingerprint ++ [speaks: speaks]
      # Greeted before it is a member: that node knows what it speaks
      # before it sends it anything.
      hello = {:hello, node(), greeting, Grove.Cluster.id_slot(), true}
      send({Membership.name(instance), to}, hello)
      {:ok, _} = :pg.start_link(scope)
      :ok = :pg.join(scope, Fingerprint.group(fingerprint), self())
      send(ready, :membership)
      membership(instance, greeting, {scope, Fingerprint.group(fingerprint)})
    end)

    spawn(fn ->
      true = Process.register(self(), Placer.name(world))
      # Placed and not paused, as a placer that handovers wait for reads it.
      :persistent_term.put({Placer, world, :locations}, {:placed, {}, :placed})
      send(ready, :placer)
      placer(observer, Keyword.get(opts, :calls, :answer), {instance, fingerprint, to})
    end)

    for what <- [:membership, :placer] do
      receive do
        ^what -> :ok
      end
    end

    :ok
  end

  defp membership(instance, greeting, {scope, group} = in_group) do
    receive do
      :leave ->
        :ok = :pg.leave(scope, group, self())

      {:hello, node, _fingerprint, _slot, true} ->
        send(
          {Membership.name(instance), node},
          {:hello, node(), greeting, Grove.Cluster.id_slot(), false}
        )

      _other ->
        :ok
    end

    membership(instance, greeting, in_group)
  end

  defp placer(observer, calls, greeting) do
    receive do
      {:"$gen_call", from, call} ->
        send(observer, {:release_peer, call})
        calls = answer(from, call, calls, greeting)
        placer(observer, calls, greeting)

      {:release_peer_calls, calls, pid} ->
        send(pid, :release_peer_calls)
        placer(observer, calls, greeting)

      message ->
        send(observer, {:release_peer, message})
        placer(observer, calls, greeting)
    end
  end

  defp answer(_from, _call, :hold, _greeting), do: :hold

  defp answer(from, _call, :step, _greeting) do
    receive do
      :answer -> GenServer.reply(from, :ok)
    end

    :step
  end

  defp answer(from, {:take_over_fresh, zones}, {:stale, indexes} = calls, _greeting) do
    GenServer.reply(from, {:ok, for({index, _, _, _, _} <- zones, index in indexes, do: index)})
    calls
  end

  defp answer(from, call, {:stale, indexes} = calls, _greeting) do
    zones =
      case call do
        {:take_over_all, zones} -> Enum.map(zones, &elem(&1, 0))
        {:take_over, index, _rows, _subscriptions, _seq, _epoch} -> [index]
      end

    GenServer.reply(
      from,
      if(Enum.any?(zones, &(&1 in indexes)), do: {:error, :stale}, else: :ok)
    )

    calls
  end

  defp answer(from, _call, :downgrade, {instance, fingerprint, to}) do
    membership = {Membership.name(instance), to}
    send(membership, {:hello, node(), fingerprint, Grove.Cluster.id_slot(), false})
    # Heard there before the answer: a call from this process comes after it.
    _state = :sys.get_state(membership)
    GenServer.reply(from, :ok)
    :answer
  end

  defp answer(from, _call, :answer, _greeting) do
    GenServer.reply(from, :ok)
    :answer
  end
end
