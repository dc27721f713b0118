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
  """

  alias Grove.Cluster.{Fingerprint, Membership}
  alias Grove.World.Placer

  @doc "Starts it on this node (call it on the peer with `:erpc`); returns `:ok`."
  @spec start(atom(), atom(), Fingerprint.t(), [atom()], node(), pid()) :: :ok
  def start(instance, world, fingerprint, speaks, to, observer) do
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
      membership(instance, greeting)
    end)

    spawn(fn ->
      true = Process.register(self(), Placer.name(world))
      # Placed and not paused, as a placer that handovers wait for reads it.
      :persistent_term.put({Placer, world, :locations}, {:placed, {}, :placed})
      send(ready, :placer)
      placer(observer)
    end)

    for what <- [:membership, :placer] do
      receive do
        ^what -> :ok
      end
    end

    :ok
  end

  defp membership(instance, greeting) do
    receive do
      {:hello, node, _fingerprint, _slot, true} ->
        send(
          {Membership.name(instance), node},
          {:hello, node(), greeting, Grove.Cluster.id_slot(), false}
        )

      _other ->
        :ok
    end

    membership(instance, greeting)
  end

  defp placer(observer) do
    receive do
      {:"$gen_call", from, call} ->
        send(observer, {:release_peer, call})
        GenServer.reply(from, :ok)

      message ->
        send(observer, {:release_peer, message})
    end

    placer(observer)
  end
end
