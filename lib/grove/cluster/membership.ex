defmodule Grove.Cluster.Membership do
  @moduledoc false
  # Who is in this node's cluster, kept by OTP: `:pg` holds one process per
  # member node in a group named after the world's fingerprint, so a node
  # whose world differs lands in another group and is never a member; this
  # process joins it, watches it (`:pg.monitor/2`) and publishes the
  # members and the zones' placement in `:persistent_term` when they change
  # (rarely: a node joining or leaving), where anyone reads them without a
  # message.
  #
  # Alongside, it reaches the configured peers (a list, or the addresses a
  # DNS name resolves to) every `connect_interval` until they answer, and
  # greets every node that comes up (`net_kernel:monitor_nodes/1`) with its
  # fingerprint: a node that differs is refused by name, with the
  # differences logged once and kept for `Grove.Cluster.refused/1`.
  #
  # It also says whether this node's side of the cluster has a quorum
  # (`Grove.Cluster.quorum?/1`): more than half of the cluster's size (the
  # `:size` option, else every node it was told of or has seen as a
  # member), or exactly half with the first of those nodes by name among
  # them. A node that leaves on purpose (`leave/1`) says so first, and is
  # not counted while it is away.

  use GenServer

  alias __MODULE__, as: State
  alias Grove.Cluster.Fingerprint
  alias Grove.Cluster.Placement

  require Logger

  defstruct [
    :instance,
    :scope,
    :group,
    :fingerprint,
    :zone_count,
    :peers,
    :dns,
    :basename,
    :connect_interval,
    :monitor,
    :timer,
    :member,
    :size,
    known: MapSet.new(),
    going: %{},
    left: MapSet.new(),
    quorum: nil,
    members: [],
    refused: %{},
    # What each node said it speaks (`speaks/1`), from its greeting.
    speaks: %{},
    subscribers: %{}
  ]

  # The forms of the placer's messages between nodes that came after the
  # first release, which this one speaks: many zones announced in one
  # message (`{:zones_at, zones}`), many zones handed over in one call
  # (`{:take_over_all, zones}`), and so with the stale ones refused alone
  # (`{:take_over_fresh, zones}`). A node of an older release matches
  # none, or not the later ones (its placer would crash on them, or
  # refuse them), and says nothing of those: it is sent the forms it
  # says it speaks, else the first release's, one zone a message
  # (`Grove.World.Placer`).
  @speaks [:zones_at, :take_over_all, :take_over_fresh]

  @type t :: %State{}

  @spec start_link(keyword()) :: GenServer.on_start()
  def start_link(opts),
    do: GenServer.start_link(__MODULE__, opts, name: name(Keyword.fetch!(opts, :instance)))

  @doc "The registered name of an instance's membership process (the same on every node)."
  @spec name(atom()) :: atom()
  def name(instance), do: :"#{instance}.Cluster.Membership"

  # Callbacks

  @impl true
  def init(opts) do
    instance = Keyword.fetch!(opts, :instance)
    fingerprint = Keyword.fetch!(opts, :fingerprint)

    state = %State{
      instance: instance,
      scope: Keyword.fetch!(opts, :scope),
      group: Fingerprint.group(fingerprint),
      fingerprint: fingerprint,
      zone_count: Keyword.fetch!(opts, :zone_count),
      peers: Keyword.get(opts, :peers, []),
      dns: Keyword.get(opts, :dns),
      basename: Keyword.get(opts, :basename),
      connect_interval: Keyword.fetch!(opts, :connect_interval),
      size: Keyword.get(opts, :size),
      known: MapSet.new([node() | Keyword.get(opts, :peers, [])])
    }

    # So that `terminate/2` runs on shutdown and unpublishes the members.
    Process.flag(:trap_exit, true)

    :persistent_term.put(
      {__MODULE__, instance, :boot_wait},
      if(Grove.Cluster.multi_node?(opts), do: Keyword.fetch!(opts, :boot_wait), else: 0)
    )

    # What nodes said they speak is heard again from each: a process killed
    # left its last word there, and a node rolled back since says nothing.
    :persistent_term.put({__MODULE__, instance, :speaks}, %{})

    :ok = :net_kernel.monitor_nodes(true, [:nodedown_reason])
    {monitor, _members} = :pg.monitor(state.scope, state.group)
    member = stand_in(state.scope, state.group)
    state = publish(%{state | monitor: monitor, member: member})
    # Nodes connected before this process started got no greeting at their
    # `nodeup`: greet them now, and ask for theirs.
    for node <- Node.list(), do: greet(state, node, true)

    {:ok, state, {:continue, :connect}}
  end

  @impl true
  def handle_continue(:connect, state), do: {:noreply, connect(state)}

  @doc """
  Leaves the cluster on purpose: out of the group, so the others stop
  counting on this node, and out of the size of the cluster they count
  for a quorum. The node stays connected, to hand its zones over.
  """
  @spec leave(atom()) :: :ok
  def leave(instance), do: GenServer.call(name(instance), :leave)

  @doc """
  Back in the group after `leave/1` (a no-op while in it): a world whose
  placer stopped, handing its zones over, and started again without the
  rest of the instance (its supervisor restarted it) is a member again.
  """
  @spec join(atom()) :: :ok
  def join(instance), do: GenServer.call(name(instance), :join)

  @impl true
  def handle_call(:leave, _from, %State{member: nil} = state), do: {:reply, :ok, state}

  # The others hear it before the group drops this node (the same
  # connection carries both, in this order): none counts it missing. The
  # group member that goes is named, so that one that joins after it is
  # not taken for it.
  def handle_call(:leave, _from, state) do
    for node <- state.members,
        node != node(),
        do: send({name(state.instance), node}, {:leaving, node(), state.member})

    Process.unlink(state.member)
    Process.exit(state.member, :kill)

    {:reply, :ok, %{state | member: nil}}
  end

  def handle_call(:join, _from, %State{member: nil} = state) do
    member = stand_in(state.scope, state.group)
    {:reply, :ok, publish(%{state | member: member}, true)}
  end

  def handle_call(:join, _from, state), do: {:reply, :ok, state}

  def handle_call({:subscribe, pid}, _from, state) do
    ref = Process.monitor(pid)
    {:reply, state.members, %{state | subscribers: Map.put(state.subscribers, ref, pid)}}
  end

  @impl true
  def handle_info(:connect, state), do: {:noreply, connect(%{state | timer: nil})}

  def handle_info({ref, action, _group, _pids}, %State{monitor: ref} = state)
      when action in [:join, :leave],
      do: {:noreply, publish(state)}

  # A node made distributed after this process started (as a test does)
  # hears of itself coming up: it is not a peer to greet, but its name
  # changed, and with it the members.
  def handle_info({:nodeup, node, _info}, state) when node == node(),
    do: {:noreply, publish(state)}

  def handle_info({:nodeup, node, _info}, state) do
    greet(state, node, true)
    {:noreply, state}
  end

  # This node stopped its distribution: every node is down, itself too.
  def handle_info({:nodedown, _node, info}, state)
      when info == [nodedown_reason: :net_kernel_terminated] and node() == :nonode@nohost,
      do: {:noreply, publish(state)}

  def handle_info({:nodedown, node, info}, state) do
    if node in state.members,
      do: Logger.warning("cluster: lost #{node}: #{inspect(info[:nodedown_reason])}")

    # It may come back running another release, and says again what it speaks.
    {:noreply, put_speaks(state, node, [])}
  end

  # Going on purpose: not counted from now until it is back, so that the
  # others keep their quorum (a rolling restart of two nodes pauses neither).
  def handle_info({:leaving, node, member}, state),
    do: {:noreply, publish(%{state | going: Map.put(state.going, member, node)}, true)}

  def handle_info({:DOWN, ref, :process, _pid, _reason}, state),
    do: {:noreply, %{state | subscribers: Map.delete(state.subscribers, ref)}}

  # The stand-in member is linked and never ends on its own.
  def handle_info({:EXIT, _pid, reason}, state), do: {:stop, reason, state}

  def handle_info({:hello, node, fingerprint, slot, answer?}, state) do
    if answer?, do: greet(state, node, false)
    # An older release's greeting says nothing of what it speaks.
    state = put_speaks(state, node, Keyword.get(fingerprint, :speaks, []))

    differences =
      Fingerprint.differences(state.fingerprint, fingerprint) ++
        if slot == Grove.Cluster.id_slot(),
          do: [
            "its name gives it the same range of entity ids as this node's (#{slot}): " <>
              "rename one of them"
          ],
          else: []

    case differences do
      [] ->
        refused = Map.delete(state.refused, node)
        :persistent_term.put({__MODULE__, state.instance, :refused}, refused)
        {:noreply, publish(%{state | refused: refused})}

      differences ->
        if state.refused[node] != differences,
          do:
            Logger.error(
              "cluster: node #{node} refused, its configuration differs: " <>
                Enum.join(differences, "; ")
            )

        refused = Map.put(state.refused, node, differences)
        :persistent_term.put({__MODULE__, state.instance, :refused}, refused)
        {:noreply, publish(%{state | refused: refused})}
    end
  end

  # A message of a later release's (this process is sent none it did
  # not say it speaks): ignored, not a crash.
  def handle_info(message, state) do
    Logger.warning(
      "cluster: a message of an unknown form, ignored: #{inspect(message, limit: 5)}"
    )

    {:noreply, state}
  end

  @impl true
  def terminate(_reason, state) do
    for what <- [:members, :refused, :boot_wait, :speaks],
        do: :persistent_term.erase({__MODULE__, state.instance, what})

    :ok
  end

  # What this process publishes, read without a message: it is the one
  # owner of these keys (`Grove.Cluster` reads them through it).

  @doc false
  # The members, the owners of the zones and the quorum; nil before any.
  @spec published(atom()) :: map() | nil
  def published(instance), do: :persistent_term.get({__MODULE__, instance, :members}, nil)

  @doc false
  @spec refused(atom()) :: %{node() => [String.t()]}
  def refused(instance), do: :persistent_term.get({__MODULE__, instance, :refused}, %{})

  @doc false
  # What each node said it speaks beyond the first release's forms (none
  # said: none).
  @spec speaks(atom()) :: %{node() => [atom()]}
  def speaks(instance), do: :persistent_term.get({__MODULE__, instance, :speaks}, %{})

  @doc false
  @spec boot_wait(atom()) :: non_neg_integer()
  def boot_wait(instance), do: :persistent_term.get({__MODULE__, instance, :boot_wait}, 0)

  # The group's member for this node is a linked process that does nothing
  # else: OTP 25's `:pg` scope crashes when one process that both joined a
  # group and monitors it goes down (`pg.erl` matches the join's monitor
  # against the other one's).
  defp stand_in(scope, group) do
    parent = self()

    member =
      :proc_lib.spawn_link(fn ->
        :ok = :pg.join(scope, group, self())
        send(parent, {:joined, self()})

        receive do
        end
      end)

    receive do
      {:joined, ^member} -> member
    end
  end

  # A greeting carries the fingerprint; the first one of a pair asks for an
  # answer, so each side learns the other's even when one of them started
  # after the nodes connected. What this node speaks goes with the
  # fingerprint, as one more entry: an older release compares only the
  # entries of its own fingerprint, and its greeting, of the same form,
  # lacks it. (Not in the fingerprint itself: the group's name is its
  # hash, and the two releases would never share one.)
  defp greet(state, node, answer?),
    do:
      send(
        {name(state.instance), node},
        {:hello, node(), state.fingerprint ++ [speaks: @speaks], Grove.Cluster.id_slot(), answer?}
      )

  # Written only when it changes: a node greets or goes now and then.
  defp put_speaks(state, node, forms) do
    speaks =
      if forms == [], do: Map.delete(state.speaks, node), else: Map.put(state.speaks, node, forms)

    if speaks != state.speaks,
      do: :persistent_term.put({__MODULE__, state.instance, :speaks}, speaks)

    %{state | speaks: speaks}
  end

  ## Members and placement

  # Members are the nodes of the group's processes, this one included,
  # but for any it refused.
  defp publish(state, force \\ false) do
    group = :pg.get_members(state.scope, state.group)

    members =
      group
      |> Enum.map(&node/1)
      |> Enum.reject(&is_map_key(state.refused, &1))
      |> Enum.concat([node()])
      |> Enum.uniq()
      |> Enum.sort()

    %{known: known, going: going, left: left, present: present, size: size, quorum: quorum} =
      tally(state, members, group)

    cond do
      quorum == state.quorum or (state.quorum == nil and quorum) ->
        :ok

      state.quorum == nil and not quorum ->
        Logger.info("cluster: waiting for a quorum, #{length(present)} of #{size} members")

      quorum ->
        Logger.warning("cluster: #{length(present)} members, a quorum again")

      true ->
        Logger.error(
          "cluster: this node sees #{length(present)} of #{size} " <>
            "members, fewer than half: its zones stop and its players are told to " <>
            "reconnect until it sees a quorum again"
        )
    end

    state = %{state | known: known, going: going, left: left, quorum: quorum}

    if members != state.members or force do
      if state.members != [] do
        {joined, left} = {members -- state.members, state.members -- members}

        Logger.info(
          "cluster: #{length(members)} members" <>
            if(joined != [], do: ", joined: #{Enum.join(joined, ", ")}", else: "") <>
            if(left != [], do: ", left: #{Enum.join(left, ", ")}", else: "")
        )
      end

      :persistent_term.put({__MODULE__, state.instance, :members}, %{
        members: members,
        owners: owners(state.zone_count, members),
        quorum: quorum
      })

      for {_ref, pid} <- state.subscribers,
          do: send(pid, {:grove_cluster, state.instance, members})
    end

    %{state | members: members}
  end

  # Every zone's owner, for a world whose zones can all run (the only
  # kind a cluster places); a world of more, whose zones start on demand
  # alone on a node, has none to place.
  @placed_zones 100_000
  defp owners(zone_count, members) when zone_count <= @placed_zones,
    do: Placement.owners(zone_count, members)

  defp owners(_zone_count, _members), do: nil

  # Who counts towards a quorum, given the group's members (nodes) and its
  # processes. A node that said it leaves is away while the group still
  # holds the process it named (going) and once it no longer does (left);
  # it counts again once it is back, under a process of its own.
  @doc false
  @spec tally(t(), [node()], [term()]) :: %{
          known: MapSet.t(node()),
          going: %{term() => node()},
          left: MapSet.t(node()),
          present: [node()],
          size: pos_integer(),
          quorum: boolean()
        }
  def tally(state, members, group) do
    known = Enum.into(members, state.known)
    {going, gone} = Map.split(state.going, group)
    still = going |> Map.values() |> Enum.uniq()

    # Out of the group with the process it named, and not back since.
    left =
      state.left
      |> MapSet.union(MapSet.new(Map.values(gone)))
      |> MapSet.difference(MapSet.new(members))

    away = MapSet.union(MapSet.new(still), left)
    counted = MapSet.difference(known, away)
    size = max((state.size || MapSet.size(known)) - MapSet.size(away), 1)
    present = members -- still

    %{
      known: known,
      going: going,
      left: left,
      present: present,
      size: size,
      quorum: quorum?(present, size, counted)
    }
  end

  # More than half of the cluster's size, or half with the first node of
  # the cluster by name: of two equal sides, exactly one goes on.
  @doc false
  @spec quorum?([node()], pos_integer(), MapSet.t(node())) :: boolean()
  def quorum?(members, size, known) do
    count = length(members)
    2 * count > size or (2 * count == size and Enum.min(known) in members)
  end

  ## Reaching the peers

  # Each try runs in a process of its own: connecting to a node that is
  # down can take seconds, and this process must go on greeting others.
  defp connect(state) do
    connected = MapSet.new([node() | Node.list()])

    if Node.alive?() do
      for peer <- peers(state), not MapSet.member?(connected, peer) do
        spawn(fn -> Node.connect(peer) end)
      end
    end

    %{state | timer: Process.send_after(self(), :connect, state.connect_interval)}
  end

  defp peers(%State{dns: nil, peers: peers}), do: peers

  defp peers(%State{dns: dns, basename: basename, peers: peers}) do
    addresses = :inet_res.lookup(String.to_charlist(dns), :in, :a)
    peers ++ for address <- addresses, do: :"#{basename}@#{:inet.ntoa(address)}"
  end
end
