defmodule Grove.World.Placer do
  @moduledoc false
  # Runs this node's zones, and moves them when the cluster changes.
  #
  # A world alone runs every zone here, as it always did. A world of a
  # cluster (`:cluster`) runs the zones `Grove.Cluster.Placement` gives this
  # node, and keeps where every zone runs now in `:atomics` (a node number
  # per zone, into a tuple of nodes, and the epoch of each placement; all
  # three in one `:persistent_term`), which
  # `Grove.World.zone_address/2` reads on every message to a zone.
  # Where a zone runs is where it was last announced, not where placement
  # would put it: a zone moves by a handover, and only once the new owner
  # runs it do the others send it there.
  #
  # A handover, when members change and a zone this node runs belongs to
  # another now: the zone gives its rows, subscriptions and the number of
  # its last view delta, and holds what it gets (`Grove.World.Zone`); the
  # new owner's placer writes them into its own tables, directory and feed,
  # starts the zone (which recovers from them as from a restart) and
  # announces it to every member; the old zone then
  # passes what it held, and what still comes, on to it, until it stops
  # after `handoff_timeout` twice over. A handover runs in a process of its
  # own, so that two placers handing zones to each other never wait on
  # each other.
  #
  # A node that starts while others already run the world runs nothing
  # until they hand it its share, but what their placement gives it (it
  # read it from one of them) it starts, and announces: the placement
  # read may be older than another's (a placer its supervisor started
  # again read it while another node started the zones its old one
  # abandoned), and that node answers with the newer one, which stops the
  # copy here. It also tells the others it joined, since one may count it
  # as leaving still: the group may never have shown it the node gone.
  #
  # When none runs it yet, the first of the members by name starts it and
  # the others wait for its placement: nodes that start together see the
  # others join at different moments, and each starting a world over the
  # members it saw would leave them with placements that disagree, at the
  # same epoch. A node of a cluster that sees none of its peers within its
  # `:boot_wait` starts the world alone.
  #
  # Every placement of a zone has an epoch, one more than the one before
  # (a handover's, or a start after its node was lost), announced with it:
  # an announcement older than what a node knows is stale and ignored.
  #
  # A zone whose node is gone starts again, empty, on its new owner, and is
  # announced as restarted: what a lost node held is lost with it, but
  # each node then tells its own clients whose entities were in it
  # (`Grove.World.Relay.lost/2`), which place them again, and has its zones
  # subscribe their viewers to it again.
  #
  # A node whose side of the cluster has no quorum (`Grove.Cluster.quorum?/1`)
  # pauses: it stops its zones, empties their tables and tells its clients
  # (`{:grove_paused, id}`), and answers no placement, while the side with
  # the quorum starts those zones again, as it would a lost node's. When it
  # sees a quorum again it starts over as a node that joins: it takes the
  # placement from a running member, and the others hand it its share.
  #
  # A node that stops on purpose leaves the cluster first and hands every
  # zone it runs to its new owner before its world stops, the handovers
  # under way ended first (killed, their zones kept here unless already
  # heard to run where they went). A zone it fails to hand over starts
  # again, empty, on the node it was meant for (told so, or once the
  # stopped node is disconnected), as a lost node's zone does.
  #
  # The rules are `Grove.World.Placer.State`'s, plain functions that return
  # the effects this process carries out (`run/3`): it owns the mailbox,
  # the handover processes and their timers, the zones' processes and
  # tables, and what it publishes for the other processes to read.

  use GenServer

  alias Grove.World

  alias Grove.World.{
    Directory,
    Door,
    Entity,
    Feed,
    Grid,
    Minimap,
    Places,
    Relay,
    Slots,
    Stats,
    Zone
  }

  alias Grove.World.Placer.State
  alias Grove.World.Zone.Saves

  require Logger

  defstruct [
    :world,
    :supervisor,
    :core,
    # The published placement: a node number per zone and the epochs, in
    # `:atomics`, and the nodes by number (this node is 0).
    :locations,
    :epochs,
    nodes: {},
    # Handover processes, one per run of effects and node zones go to
    # (`start_handovers/1`): pid => the indexes of its zones not ended
    # yet. And the handovers a run of effects asked for, last first:
    # {to, index, epoch}, started as the run ends.
    handovers: %{},
    handing_out: [],
    # Timers after which a zone handed away stops: zone index => {its
    # number, ref} (`Grove.World.Placer.State.retired/3`).
    timers: %{},
    # When this placer started, ms: how long it waits for a first node.
    started_at: nil
  ]

  # How often a node that waits for a first node by name looks again, ms.
  @first_retry 100
  # Zones handed to one node in one call at most (`{:take_over_all, zones}`).
  @handover_batch 100

  @type t :: %__MODULE__{core: State.t()}

  @spec start_link(atom()) :: GenServer.on_start()
  def start_link(world_name),
    do: GenServer.start_link(__MODULE__, world_name, name: name(world_name))

  @doc "The placer's registered name (the same on every node)."
  @spec name(atom()) :: atom()
  def name(world), do: :"#{world}.placer"

  @doc """
  Where a node's placer believes each zone runs, with the epoch of that
  placement, or `:starting` (also while the node is paused).
  """
  @spec locations(atom(), node()) :: [{node(), non_neg_integer()}] | :starting
  def locations(world, node), do: :erpc.call(node, __MODULE__, :locations, [world], 10_000)

  # Read from what the placer published, not asked of it: two placers
  # that start together each ask the other, and neither could answer.
  @doc false
  @spec locations(atom()) :: [{node(), non_neg_integer()}] | :starting
  def locations(world) do
    with false <- paused?(world),
         {locations, nodes, epochs} <- published(world) do
      for index <- 1..:atomics.info(locations).size,
          do: {elem(nodes, :atomics.get(locations, index)), :atomics.get(epochs, index)}
    else
      _ -> :starting
    end
  end

  @doc false
  # What the placer published for routing: a node number per zone and the
  # epochs in `:atomics`, and the nodes by number; nil before it did. The
  # placer is the one owner of these keys.
  @spec published(atom()) :: {:atomics.atomics_ref(), tuple(), :atomics.atomics_ref()} | nil
  def published(world), do: :persistent_term.get({__MODULE__, world, :locations}, nil)

  @doc false
  # A world that stops takes what its placer published with it.
  @spec forget(atom()) :: :ok
  def forget(world) do
    :persistent_term.erase({__MODULE__, world, :locations})
    :persistent_term.erase({__MODULE__, world, :paused})
    :ok
  end

  @doc "True while this node's world is paused, its side of the cluster short of a quorum."
  @spec paused?(atom()) :: boolean()
  def paused?(world), do: :persistent_term.get({__MODULE__, world, :paused}, false)

  # Callbacks

  @impl true
  def init(world_name) do
    Process.flag(:trap_exit, true)
    world = World.fetch!(world_name)
    supervisor = World.zones_supervisor(world_name)

    # Zones that outlived a placer that crashed run on.
    running =
      for {{Zone, index}, pid, _, _} <- Supervisor.which_children(supervisor),
          is_pid(pid),
          do: index

    placer = %__MODULE__{
      world: world,
      supervisor: supervisor,
      core: State.new(node(), zone_count(world), running),
      started_at: System.monotonic_time(:millisecond)
    }

    if world.cluster == nil do
      # Zones on demand start when first needed (`Grove.World.Zone.wake/2`).
      unless world.zones_on_demand do
        for index <- 0..(zone_count(world) - 1), do: start_zone(placer, index)
        # Zones recover (their entities, their game's layer) in
        # `handle_continue/2`, all at once; a world whose start has returned
        # has them ready, so that what it reads of them without a message
        # (a game's cells) is there.
        for index <- 0..(zone_count(world) - 1), do: :ok = Zone.recovered(world, index)
      end

      {:ok, placer}
    else
      # A node leaves the group before its connection closes: zones it
      # could not hand over are started again once it is gone.
      :ok = :net_kernel.monitor_nodes(true)
      # Stopped by its supervisor, this process left the cluster as a node
      # that stops does (`terminate/2` cannot tell the two apart); started
      # again alone, it is a member again, and takes its share as a node
      # that joins.
      :ok = Grove.Cluster.join(world.cluster)
      {:ok, place(placer)}
    end
  end

  @impl true
  def handle_call({:take_over, index, rows, subscriptions, seq, epoch}, {pid, _tag}, placer) do
    placer.core
    |> State.take_over(index, rows, subscriptions, seq, epoch, Node.list(), node(pid))
    |> taken(placer)
  end

  # Many zones from one node, as a node that says it speaks this sends
  # them (`hand_over_zones/4`).
  def handle_call({:take_over_all, zones}, {pid, _tag}, placer),
    do: placer.core |> State.take_over_all(zones, Node.list(), node(pid)) |> taken(placer)

  # Many zones, the stale ones refused alone, as a node that says it
  # speaks this sends them: answered `{:ok, refused}`, the indexes of
  # those refused (`State.take_over_fresh/4`). A node that sent
  # `{:take_over_all, zones}` knows no such answer, and is answered as
  # before.
  def handle_call({:take_over_fresh, zones}, {pid, _tag}, placer) do
    case State.take_over_fresh(placer.core, zones, Node.list(), node(pid)) do
      {:ok, core, effects, refused} -> {:reply, {:ok, refused}, run(placer, core, effects)}
      {:error, reason} -> {:reply, {:error, reason}, placer}
    end
  end

  # A call of a later release's (none is made to this node that it did
  # not say it speaks): refused, not a crash.
  def handle_call(request, _from, placer) do
    Logger.warning(
      "world: the placer was called with an unknown request: #{inspect(request, limit: 5)}"
    )

    {:reply, {:error, :unknown_request}, placer}
  end

  # What a take came to: taken; refused, as stale (the sender is told
  # where its zones run now, `State.take_over_all/4`); or refused for now.
  defp taken({:ok, core, effects}, placer), do: {:reply, :ok, run(placer, core, effects)}

  defp taken({:error, :stale, effects}, placer),
    do: {:reply, {:error, :stale}, run(placer, placer.core, effects)}

  defp taken({:error, reason}, placer), do: {:reply, {:error, reason}, placer}

  @impl true
  def handle_info({:grove_cluster, instance, members}, placer) do
    quorum? = Grove.Cluster.quorum?(instance)
    resuming? = quorum? and placer.core.paused
    {core, effects} = State.members(placer.core, members, quorum?, Node.list())
    placer = run(placer, core, effects)

    {:noreply,
     if(resuming?, do: join_or_start(%{placer | nodes: {}}), else: lost_with_gone(placer))}
  end

  def handle_info({:leaving, node}, placer),
    do: {:noreply, %{placer | core: State.leaving(placer.core, node)}}

  def handle_info({:joined, node}, placer),
    do: {:noreply, run(placer, &State.joined(&1, node, Node.list()))}

  def handle_info({:zone_at, index, node, epoch, how}, placer),
    do: {:noreply, run(placer, &State.announced(&1, index, node, epoch, how, Node.list()))}

  # Many zones at once, as a node that joins hears what a member serves.
  def handle_info({:zones_at, zones}, placer),
    do: {:noreply, run(placer, &State.announced_all(&1, zones, Node.list()))}

  # A batch of zones' handovers finished, or failed, each with how it
  # ended, in one message and one rule; its process goes on with the
  # others. (One of a process from before a pause is no longer awaited.)
  def handle_info({:handed_over, pid, ended}, placer) do
    case placer.handovers do
      %{^pid => indexes} ->
        placer = %{
          placer
          | handovers: Map.put(placer.handovers, pid, indexes -- Enum.map(ended, &elem(&1, 0)))
        }

        {:noreply, run(placer, &State.handovers_ended(&1, ended))}

      _none ->
        {:noreply, placer}
    end
  end

  # A handover process ended: the zones it had not handed yet failed with it.
  def handle_info({:EXIT, pid, reason}, %__MODULE__{handovers: handovers} = placer)
      when is_map_key(handovers, pid) do
    {indexes, handovers} = Map.pop!(handovers, pid)
    placer = %{placer | handovers: handovers}
    reason = if reason == :normal, do: :ended_early, else: reason
    ended = for index <- indexes, do: {index, reason}
    {:noreply, run(placer, &State.handovers_ended(&1, ended))}
  end

  def handle_info({:EXIT, _pid, _reason}, placer), do: {:noreply, placer}

  def handle_info({:nodeup, node}, placer),
    do: {:noreply, %{placer | core: State.nodeup(placer.core, node)}}

  # Its zones were waiting for it to be gone, out of the group and disconnected.
  def handle_info({:nodedown, _node}, placer),
    do: {:noreply, placer |> run(&State.nodedown(&1, Node.list())) |> lost_with_gone()}

  def handle_info({:abandoned, index, from}, placer),
    do: {:noreply, run(placer, &State.abandoned(&1, index, from, Node.list()))}

  # Waiting for the first member to place the zones: is it done?
  def handle_info(:place, %__MODULE__{core: %State{paused: false, locations: nil}} = placer),
    do: {:noreply, join_or_start(placer)}

  def handle_info(:place, placer), do: {:noreply, placer}

  def handle_info({:settle, index}, placer),
    do: {:noreply, run(placer, &State.settle(&1, index, Node.list()))}

  def handle_info({:settle_all, indexes}, placer),
    do: {:noreply, run(placer, &State.settle_all(&1, indexes, Node.list()))}

  # A timer cancelled as it went off sent this all the same: one set
  # since for the zone stays.
  def handle_info({:stop_zone, index, timer}, placer) do
    placer =
      case placer.timers do
        %{^index => {^timer, _ref}} -> %{placer | timers: Map.delete(placer.timers, index)}
        _other -> placer
      end

    {:noreply, run(placer, &State.retired(&1, index, timer))}
  end

  # A message of a later release's (none is sent to this node that it did
  # not say it speaks): ignored, not a crash, which would start the placer
  # again only to be sent the same once it says it joined.
  def handle_info(message, placer) do
    Logger.warning(
      "world: the placer got a message of an unknown form, ignored: #{inspect(message, limit: 5)}"
    )

    {:noreply, placer}
  end

  # A node that stops on purpose hands its zones over first.
  @impl true
  def terminate(_reason, %__MODULE__{core: %State{locations: nil}}), do: :ok
  def terminate(_reason, %__MODULE__{core: %State{paused: true}}), do: :ok

  def terminate(reason, placer) when reason == :shutdown or elem(reason, 0) == :shutdown do
    :ok = Grove.Cluster.leave(placer.world.cluster)
    others = placer.core.members -- [node()]

    if others != [] do
      # Before any handover, from this process: each new owner hears it first.
      for node <- others, do: send({name(placer.world.name), node}, {:leaving, node()})

      # Handovers under way end now (`end_handovers/1`): their zones are
      # no longer here, or are handed over again below.
      placer = end_handovers(placer)

      # A zone whose process is gone already (its supervisor stopped first,
      # and this placer with it) has nothing to hand over.
      zones =
        for {index, _to, _epoch} = zone <- State.leave(placer.core),
            zone_pid(placer, index) != nil,
            do: zone

      Logger.info("world: leaving the cluster; handing #{length(zones)} zones over")

      for {to, zones} <- Enum.group_by(zones, &elem(&1, 1), &{elem(&1, 0), elem(&1, 2)}) do
        hand_over_zones(placer.world, to, zones, fn ended ->
          for {index, reason} <- ended,
              reason != :normal,
              do: abandon(placer.world, to, index, reason)
        end)
      end
    end

    :ok
  end

  # A crash is no reason to leave: the placer starts again and carries on.
  def terminate(_reason, _placer), do: :ok

  # A zone refused alone as stale runs where that node places it, newer
  # than here: it is not told the zone is abandoned, which it would
  # ignore (where that placement names this node, that node starts it
  # again itself, `State.take_over_fresh/4`). Any other that was not
  # handed over starts again there, empty; one of a call refused whole,
  # as stale, by a node of an older build (`:stale_call`) too, where
  # it was not the stale one.
  defp abandon(_world, to, index, {:error, :stale}) do
    Logger.warning("zone #{index}: #{to} refused it as stale: it runs where that node places it")
  end

  defp abandon(world, to, index, reason) do
    Logger.error(
      "zone #{index}: handing it to #{to} failed: #{inspect(reason)}; " <>
        if(reason == {:error, :stale_call},
          do: "it runs where that node placed it, or starts again there, empty",
          else: "it starts again there, empty"
        )
    )

    send({name(world.name), to}, {:abandoned, index, node()})
  end

  # Each handover process is linked to this one, which traps exits. A
  # node that stops kills them, as a pause does, rather than wait for the
  # call each may be in: a call to a node that does not answer (down, or
  # hung) holds it for the call's timeout, or a wait for a node to place
  # the zones for tens of seconds, and the handovers of its own leave
  # come after that, past its shutdown time, at which it is killed with
  # zones neither handed over nor abandoned. What a handover reported
  # before it was killed comes before its exit, and is heard as ever;
  # the zones it had not reported end unfinished
  # (`State.handovers_ended/2`, `:stopping`): those it gave wait for word,
  # and are kept here, unless heard to run on the node they went to
  # already, and are handed over again as the node leaves. One that node
  # took from the call under way refuses them then, as stale: they run
  # there.
  defp end_handovers(placer) do
    for {pid, _indexes} <- placer.handovers, do: Process.exit(pid, :kill)

    Enum.reduce(placer.handovers, %{placer | handovers: %{}}, fn {pid, indexes}, placer ->
      await_handover(placer, pid, indexes)
    end)
  end

  defp await_handover(placer, pid, indexes) do
    receive do
      {:handed_over, ^pid, ended} ->
        placer = run(placer, &State.handovers_ended(&1, ended))
        await_handover(placer, pid, indexes -- Enum.map(ended, &elem(&1, 0)))

      {:EXIT, ^pid, _reason} ->
        ended = for index <- indexes, do: {index, :stopping}
        run(placer, &State.handovers_ended(&1, ended))
    end
  end

  ## Placing

  # The first placement: join a world that runs, or start one.
  defp place(placer) do
    instance = placer.world.cluster
    members = Grove.Cluster.subscribe(instance)
    members = if members == [node()], do: await_peers(instance, members), else: members
    placer = %{placer | core: %{placer.core | members: members}}

    if Grove.Cluster.quorum?(instance),
      do: join_or_start(placer),
      else: run(placer, &State.pause/1)
  end

  # Members appear at different moments on each node: a node connected
  # to this one and first by name, which runs this world's placer
  # already, may not be a member here yet while it sees this node; were
  # both to start, their placements at epoch 1 would disagree on where
  # some zones run, each leaving them to the other, and those zones would
  # run nowhere. So a placement any connected node published is joined,
  # and a node that would start waits while such a first node has
  # published none; for at most the boot wait from its own start (a node
  # of another cluster runs a placer of the same name, and never becomes a
  # member).
  defp join_or_start(placer) do
    world = placer.world.name
    members = placer.core.members

    running =
      placement_on(world, members -- [node()]) || placement_on(world, Node.list() -- members)

    if running == nil and Enum.min(members) == node() and first_elsewhere?(placer) do
      Process.send_after(self(), :place, @first_retry)
      placer
    else
      run(placer, &State.join_or_start(&1, running))
    end
  end

  defp placement_on(world, nodes) do
    Enum.find_value(nodes, fn other ->
      case safe_locations(world, other) do
        list when is_list(list) -> list
        _ -> nil
      end
    end)
  end

  defp first_elsewhere?(placer) do
    waited = System.monotonic_time(:millisecond) - placer.started_at
    name = name(placer.world.name)

    waited < Grove.Cluster.boot_wait(placer.world.cluster) and
      Enum.any?(Node.list() -- placer.core.members, fn other ->
        other < node() and is_pid(safe_whereis(other, name))
      end)
  end

  defp safe_whereis(node, name) do
    :erpc.call(node, Process, :whereis, [name], 1000)
  catch
    :exit, _ -> nil
    :error, {:erpc, _} -> nil
  end

  # A node with peers to find waits a little for one before starting alone.
  defp await_peers(instance, members) do
    receive do
      {:grove_cluster, ^instance, members} -> members
    after
      Grove.Cluster.boot_wait(instance) -> members
    end
  end

  # A member that cannot be reached (`:erpc` raises) or does not answer
  # in time (it exits) has nothing to say.
  defp safe_locations(world, member) do
    locations(world, member)
  catch
    :exit, _ -> nil
    :error, {:erpc, _} -> nil
  end

  ## Effects

  defp run(placer, rule) do
    {core, effects} = rule.(placer.core)
    run(placer, core, effects)
  end

  # The core's effects, in order; see `Grove.World.Placer.State`. The
  # handovers they ask for start as they end, one process per node the
  # zones go to (`start_handovers/1`).
  defp run(placer, core, effects),
    do: effects |> Enum.reduce(%{placer | core: core}, &effect(&2, &1)) |> start_handovers()

  defp start_handovers(%__MODULE__{handing_out: []} = placer), do: placer

  defp start_handovers(placer) do
    world = placer.world
    placer_pid = self()

    placer.handing_out
    |> Enum.reverse()
    |> Enum.group_by(&elem(&1, 0), &{elem(&1, 1), elem(&1, 2)})
    |> Enum.reduce(%{placer | handing_out: []}, fn {to, zones}, placer ->
      pid =
        spawn_link(fn ->
          # The new owner's world may still be starting: the zones go on
          # here until it answers.
          await_placer(world.name, to, 300)

          hand_over_zones(world, to, zones, fn ended ->
            send(placer_pid, {:handed_over, self(), ended})
          end)
        end)

      %{placer | handovers: Map.put(placer.handovers, pid, Enum.map(zones, &elem(&1, 0)))}
    end)
  end

  defp effect(placer, {:start_zone, index}), do: tap(placer, &start_zone(&1, index))
  defp effect(placer, {:stop_zone, index}), do: tap(placer, &stop_zone(&1, index))

  # A stale copy that stops: the owners of its entities are told they are
  # lost by their nodes' relays, unless those heard the entities live on
  # in another copy (`Relay.lost_one/4`).
  defp effect(placer, {:forget, index}) do
    world = placer.world

    for entity <- Zone.forget(world, index) do
      # An entity of a client here is the relay's to settle, directory included.
      if node(entity.owner) != node(), do: Directory.release(world.name, entity.id, index)
      Relay.lost_one(world, entity.id, index, entity.owner)
    end

    placer
  end

  defp effect(placer, {:hand_over, index, to, epoch}),
    do: %{placer | handing_out: [{to, index, epoch} | placer.handing_out]}

  # The zone handed away passes on what comes late for a while, then stops.
  defp effect(placer, {:retire, index, timer}) do
    ref =
      Process.send_after(self(), {:stop_zone, index, timer}, 10 * placer.world.handoff_timeout)

    %{placer | timers: Map.put(placer.timers, index, {timer, ref})}
  end

  defp effect(placer, {:cancel_retire, index}) do
    case Map.pop(placer.timers, index) do
      {nil, _} ->
        placer

      {{_timer, ref}, timers} ->
        Process.cancel_timer(ref)
        %{placer | timers: timers}
    end
  end

  # A zone on demand handed over as it slept, with nothing of its own
  # anywhere: it starts here when first needed.
  defp effect(placer, {:take_rows, _index, :asleep, _subscriptions, _seq}), do: placer

  # The zone's rows into this node's tables: its entities', and its game's
  # layer. A zone on demand starts at once, to take what its old owner
  # held for it.
  defp effect(placer, {:take_rows, index, {rows, layer, life}, subscriptions, seq}) do
    placer = take_rows(placer, index, {rows, layer, life}, subscriptions, seq)
    if placer.world.zones_on_demand, do: Zone.wake(placer.world, index)
    placer
  end

  defp effect(placer, {:handed_to, index, to}) do
    if zone = zone_pid(placer, index),
      do: send(zone, {:handed_to, address_on(placer.world, index, to)})

    placer
  end

  defp effect(placer, {:keep, index}) do
    if zone = zone_pid(placer, index), do: send(zone, :keep)
    placer
  end

  defp effect(placer, {:publish, locations}), do: publish(placer, locations)

  defp effect(placer, {:locate, index, node, epoch}) do
    placer = locate(placer, index, node, epoch)
    share_beside(placer.world, index, node)
    placer
  end

  defp effect(placer, {:reset_feed, index}) do
    feed = placer.world.feed
    Feed.reset(feed, index, Feed.latest(feed, index) + 1)
    placer
  end

  defp effect(placer, {:recovered, indexes}), do: tap(placer, &recovered(&1, indexes))

  defp effect(placer, {:fetch_life, indexes}), do: tap(placer, &fetch_life(&1, indexes))

  # A zone on demand that slept on the node lost, its state in the shared
  # store: its save is read here, into its tables as a handover writes
  # them, and the zone woken, before the nodes hear that it runs and ask
  # who holds its entities; else their owners would be told they were
  # lost, and place them again beside the ones its save gives back. One
  # read of the store per zone the lost node ran; a save is there only
  # while its zone sleeps (`Grove.World.Zone.Saves.drop/2`).
  defp effect(
         %__MODULE__{world: %World{zones_on_demand: true, store: store} = world} = placer,
         {:wake_saved, index}
       )
       when store != nil do
    case Saves.load(world, index) do
      {:ok, {rows, life}} ->
        wake_saved(world, index, rows, life)

      {:error, :not_found} ->
        wake_alive(world, index)

      {:error, reason} ->
        Stats.incr(world.stats, :zone_load_failures)

        Logger.error(
          "zone #{index}: what it saved asleep on the node lost could not be read " <>
            "(#{inspect(reason)}); the owners of its entities are told they are lost"
        )
    end

    placer
  end

  defp effect(placer, {:wake_saved, index}) do
    if placer.world.zones_on_demand, do: wake_alive(placer.world, index)
    placer
  end

  # Zones announced together go to a node of an older release one a
  # message, in the form it knows (`Grove.Cluster.speaks?/3`).
  defp effect(placer, {:send, node, {:zones_at, zones} = message}) do
    to = {name(placer.world.name), node}

    if Grove.Cluster.speaks?(placer.world.cluster, node, :zones_at),
      do: send(to, message),
      else: for({index, at, epoch, how} <- zones, do: send(to, {:zone_at, index, at, epoch, how}))

    placer
  end

  defp effect(placer, {:send, node, message}) do
    send({name(placer.world.name), node}, message)
    placer
  end

  defp effect(placer, {:send_self, message}) do
    send(self(), message)
    placer
  end

  defp effect(placer, {:send_after, message, ms}) do
    Process.send_after(self(), message, ms)
    placer
  end

  defp effect(placer, {:pause}), do: pause(placer)

  defp effect(placer, {:count, key, n}) do
    Stats.incr(placer.world.stats, key, n)
    placer
  end

  defp effect(placer, {:log, level, text}) do
    Logger.log(level, text)
    placer
  end

  defp take_rows(placer, index, {rows, layer, life}, subscriptions, seq) do
    world = placer.world
    # Its bacteria's row, for it to carry on from (`Grove.World.Zone.Bacteria`).
    for row <- life, do: Grove.World.Bacteria.put_row(world, row)
    # A zone on demand's tables are made here, in its slot, for the run
    # that is woken next to find (`Grove.World.Slots`).
    {table, game_table} = Slots.open(world, index)
    if game_table, do: :ets.insert(game_table, layer)
    put_rows(world, index, table, rows)
    :ets.insert(world.subscriptions, subscriptions)
    # Its viewers hold the numbers of its deltas: it carries on from its own.
    Feed.carry_on(world.feed, index, seq)
    placer
  end

  # Rows of entities new to this node: in the zone's table, and in this
  # node's directory and counts (population, minimap).
  defp put_rows(world, index, table, rows) do
    for row <- rows do
      entity = Entity.from_row(row)
      :ets.insert(table, row)
      Relay.assign(world, entity.id, index, entity.owner)
      Minimap.add(world, {entity.x, entity.y}, 1)
      Places.add(world, index, entity.id, {entity.x, entity.y})
      Stats.incr(world.stats, if(entity.kind == 1, do: :players, else: :actors))
    end
  end

  # Its entities are written here as a handover's are, but one that this
  # node's directory places in another zone, which is where it is; its
  # bacteria's row goes back in the life table. An owner that was lost
  # with its node is seen to be gone as the zone recovers, and its entity
  # goes. The save goes from the store once the zone holds what it said.
  defp wake_saved(world, index, rows, life) do
    {table, _game_table} = Slots.open(world, index)

    rows = for row <- rows, Directory.lookup(world.name, elem(row, 0)) in [nil, index], do: row

    put_rows(world, index, table, rows)
    if life, do: :ets.insert(world.life_table, life)
    Stats.incr(world.stats, :zone_loads)
    _pid = Zone.wake(world, index)
    :ok = Zone.recovered(world, index)

    with {:error, reason} <- Saves.drop(world, index),
         do:
           Logger.warning(
             "zone #{index} woke with its save still in the store: " <>
               "it could not be dropped (#{inspect(reason)})"
           )
  end

  # A zone that now runs on another node (handed over, or started again
  # there; heard of by whatever way, and that node's door runs, since it
  # is a member) is told of the zones beside it that run here, by their
  # rows of bacteria as they stand (placed first: a zone of this node that
  # writes its row after this read sends it there itself). A zone sends
  # its row only as it computes one, or starts, to the nodes that run its
  # neighbours as this node knows them then, and that node may hold none
  # of it, or an old one, whose next row its zone would wait for for good:
  # two zones side by side of a node lost, started again at once on two
  # nodes, each before it heard of the other, each sent its row to the
  # node lost, and neither moved again. A zone on demand that sleeps
  # sends nothing more: its row goes without its cells, as it sent it
  # when it fell asleep, which says it sleeps (`Grove.World.Zone`).
  defp share_beside(%World{life_table: table} = world, index, to)
       when table != nil and to != node() do
    rows =
      for {_direction, neighbour} <- Grove.World.Life.neighbours(world.grid, index),
          neighbour != nil,
          World.zone_node(world, neighbour) == node(),
          row <- :ets.lookup(table, neighbour),
          do: if(asleep_here?(world, neighbour), do: put_elem(row, 2, nil), else: row)

    if rows != [], do: Door.share_rows(world.name, to, rows)
    :ok
  end

  defp share_beside(_world, _index, _to), do: :ok

  defp asleep_here?(world, index),
    do: world.zones_on_demand and World.zone_pid(world, index) == nil

  # Zones about to start again here after their node was lost: each goes
  # on from the last row of its bacteria, which went to the zone's heir
  # (the member that would own it were its node lost) and to the nodes
  # that ran its neighbours, as the members stood when it was computed.
  # They may have changed since: this node, its owner now, may hold no
  # row of it, or an old one, and without it the zone would start over at
  # the clock's generation, while its neighbours on other nodes wait for
  # the rows it skipped, for good. Every member is asked at once; the
  # newest row is kept, one with cells before one that says it slept.
  defp fetch_life(%__MODULE__{world: %World{life_table: nil}}, _indexes), do: :ok

  defp fetch_life(%__MODULE__{world: world, core: core}, indexes) do
    others = Enum.filter(core.members, &(&1 != node() and &1 in Node.list()))

    others
    |> :erpc.multicall(Grove.World.Bacteria, :rows, [world.name, indexes], world.handoff_timeout)
    |> Enum.flat_map(fn
      {:ok, rows} -> rows
      _failed -> []
    end)
    |> Enum.sort_by(fn {_index, generation, bits, _, _} -> {generation, bits != nil} end)
    |> Enum.each(&Grove.World.Bacteria.put_row(world, &1))
  end

  # A zone on demand that was awake on the node lost, with bacteria whose
  # row this node holds (it is the zone's heir, `Grove.World.Zone`): woken
  # here, it goes on from that row, and falls asleep again when idle; else
  # the nodes that run its neighbours would wait for its next row for good.
  defp wake_alive(%World{life_table: nil}, _index), do: :ok

  defp wake_alive(world, index) do
    case :ets.lookup(world.life_table, index) do
      [{_, _, bits, _, _}] when bits != nil ->
        _pid = Zone.wake(world, index)
        :ok = Zone.recovered(world, index)

      _asleep_or_none ->
        :ok
    end
  end

  # Zones that run again, empty, after their node was lost: this node's
  # clients whose entities were in them are told, its viewers around them
  # subscribe again, and what was on its way to them is lost too.
  defp recovered(placer, indexes) do
    # With the epoch each runs at now: this news may reach a zone after it
    # sent an entity to the new run, which it must not count as lost.
    lost = for index <- indexes, do: {index, State.epoch(placer.core, index)}
    told = Relay.lost(placer.world, lost, placer.core.members ++ Node.list())

    if told > 0,
      do:
        Logger.warning(
          "#{told} entities of this node's clients were lost with their zones; their clients are told"
        )

    zones =
      if placer.world.zones_on_demand,
        do:
          for(
            index <- World.awake_zones(placer.world),
            pid = World.zone_pid(placer.world, index),
            pid != nil,
            do: pid
          ),
        else:
          for(
            {{Zone, _}, pid, _, _} <- Supervisor.which_children(placer.supervisor),
            is_pid(pid),
            do: pid
          )

    for zone <- zones, do: GenServer.cast(zone, {:zones_lost, lost})

    :ok
  end

  # A node gone (out of the members and disconnected) while this one runs
  # has paused or died, with whatever it held: this node's clients whose
  # entities it held are told, wherever this node believed those were (it
  # may have taken one into a zone this node had heard ran elsewhere).
  defp lost_with_gone(%__MODULE__{core: %State{paused: false, locations: locations}} = placer)
       when locations != nil do
    :ok = Relay.gone(placer.world, placer.core.members ++ Node.list())
    placer
  end

  defp lost_with_gone(placer), do: placer

  # The zone gives its rows and subscriptions, the new owner takes them. A
  # zone on demand that sleeps with something of its own (in its tables or
  # the store) wakes to give it; one with nothing anywhere is only placed,
  # but under its name here stands in a zone that holds nothing
  # (`Grove.World.Zone.wake/3`, `:stand_in`) until the new owner runs it:
  # a zone woken here meanwhile would be that stand-in, which holds what
  # is sent to it and passes it on, and not a second run beside the new
  # owner's.
  #
  # Zones handed to one node go one after the other, in one process (one
  # per run of effects and node they go to), and `report` hears how each
  # batch's zones ended, in one list: `:normal`, or why it failed. To a
  # node that says it speaks it, up to 100 zones in one call
  # (`{:take_over_all, zones}`): the new owner's placer writes the whole
  # placement each call (`Grove.World.Placer.State`), and one call a
  # zone, for the tens of thousands of zones a node hands over in a world
  # of 100,000, would grow with the square of the zones. To a node of an
  # older release, one call a zone, the form it knows
  # (`Grove.Cluster.speaks?/3`), read again before each call: a node may
  # go down and come back on an older build while its zones go.
  #
  # A node that says it speaks it is handed them in the call that
  # refuses only the stale zones (`{:take_over_fresh, zones}`), and takes
  # the others: those of a node that stops, each of which would else
  # start again, empty, on its owner. A refusal as stale is an answer,
  # and the run goes on.
  #
  # A call that fails (the node down, or refusing, or silent until the
  # call's timeout) ends the run: the zones not given yet are reported
  # as not attempted, kept here and tried again later, and not each
  # held, then kept, a batch a timeout at a time behind a node that does
  # not answer.
  defp hand_over_zones(_world, _to, [], _report), do: :ok

  defp hand_over_zones(world, to, zones, report) do
    {call, size} =
      cond do
        Grove.Cluster.speaks?(world.cluster, to, :take_over_fresh) ->
          {&{:take_over_fresh, &1}, @handover_batch}

        Grove.Cluster.speaks?(world.cluster, to, :take_over_all) ->
          {&{:take_over_all, &1}, @handover_batch}

        true ->
          {fn [{index, rows, subs, seq, epoch}] ->
             {:take_over, index, rows, subs, seq, epoch}
           end, 1}
      end

    {batch, rest} = Enum.split(zones, size)

    case hand_over_batch(world, to, batch, call, report) do
      :normal ->
        hand_over_zones(world, to, rest, report)

      reason ->
        if rest != [],
          do: report.(for({index, _epoch} <- rest, do: {index, {:not_attempted, reason}}))

        :ok
    end
  end

  # The batch's zones given, and taken in one call; how the call ended.
  defp hand_over_batch(world, to, zones, call, report) do
    {given, failed} =
      Enum.reduce(zones, {[], []}, fn {index, epoch}, {given, failed} ->
        case attempt(fn -> give(world, index) end) do
          {:ok, {zone, {rows, subscriptions, seq}}} ->
            {[{zone, {index, rows, subscriptions, seq, epoch}} | given], failed}

          {:error, reason} ->
            {given, [{index, reason} | failed]}
        end
      end)

    given = Enum.reverse(given)

    {result, {stale, why}} =
      case given != [] and
             attempt(fn ->
               GenServer.call(
                 {name(world.name), to},
                 call.(for({_zone, zone} <- given, do: zone)),
                 30_000
               )
             end) do
        {:ok, :ok} ->
          {:normal, {[], nil}}

        # The stale ones refused, the others taken (`{:take_over_fresh, zones}`).
        {:ok, {:ok, refused}} ->
          {:normal, {refused, :stale}}

        # Refused whole, as stale: the one zone of a call, or by a node
        # of an older build every zone of a call, stale or not
        # (`:stale_call`). The node answers: the run goes on.
        {:ok, {:error, :stale}} ->
          {:normal,
           {for({_zone, {index, _, _, _, _}} <- given, do: index),
            if(length(given) == 1, do: :stale, else: :stale_call)}}

        {:ok, refused} ->
          {refused, {[], nil}}

        {:error, reason} ->
          {reason, {[], nil}}

        false ->
          {:normal, {[], nil}}
      end

    ended =
      for {zone, {index, _, _, _, _}} <- given do
        cond do
          result != :normal ->
            {index, result}

          index in stale ->
            {index, {:error, why}}

          true ->
            send(zone, {:handed_to, address_on(world, index, to)})
            {index, :normal}
        end
      end

    report.(Enum.reverse(failed) ++ ended)
    result
  end

  defp attempt(fun) do
    {:ok, fun.()}
  catch
    :exit, reason -> {:error, reason}
    :error, reason -> {:error, {reason, __STACKTRACE__}}
    :throw, value -> {:error, {{:nocatch, value}, __STACKTRACE__}}
  end

  # The zone's side: it gives what it holds, and holds what comes from
  # now until it is told where it went (or that it stays).
  defp give(world, index) do
    zone =
      case World.zone_pid(world, index) do
        nil when world.zones_on_demand ->
          if Saves.holds?(world, index),
            do: Zone.wake(world, index),
            else: Zone.wake(world, index, :stand_in)

        zone ->
          zone
      end

    case GenServer.call(zone, :hand_over, 30_000) do
      :nothing ->
        {zone, {:asleep, [], Feed.latest(world.feed, index)}}

      {rows, subscriptions, seq, layer} ->
        {zone, {{rows, layer, life_row(world, index)}, subscriptions, seq}}
    end
  end

  # A zone's row of bacteria as it handed over, which it stopped writing.
  defp life_row(%World{life_table: nil}, _index), do: []
  defp life_row(world, index), do: :ets.lookup(world.life_table, index)

  # Where a zone handed over to node `to` is reached from here: its name
  # there, or that node's door for a zone on demand, which has no name a
  # node can send to (`Grove.World.Door`).
  defp address_on(%World{zones_on_demand: true} = world, index, to),
    do: Grove.World.Door.address(world.name, index, to)

  defp address_on(world, index, to), do: {elem(world.zones, index), to}

  defp await_placer(_world, to, 0), do: exit({:no_placer, to})

  # Asked once per node zones go to, and only whether it placed the
  # zones: its placement itself (`locations/2`) is a list of every zone.
  defp await_placer(world, to, tries) do
    if placed_on?(world, to) do
      :ok
    else
      Process.sleep(100)
      await_placer(world, to, tries - 1)
    end
  end

  # Both are read there without a message. A build before `published/1`
  # raises `:undef` there: it is asked for its placement instead
  # (`locations/1`, which every build has, a list once it placed the
  # zones and is not paused); else its zones would wait, as for a node
  # not placed yet, be kept once it is given up on, offered again, and
  # never go.
  defp placed_on?(world, node) do
    not :erpc.call(node, __MODULE__, :paused?, [world], 10_000) and
      :erpc.call(node, __MODULE__, :published, [world], 10_000) != nil
  catch
    :error, {:exception, :undef, [{__MODULE__, :published, _args, _at} | _]} ->
      is_list(older_locations(world, node))

    :exit, _ ->
      false

    :error, {:erpc, _} ->
      false

    :error, {:exception, _reason, _stack} ->
      false
  end

  defp older_locations(world, node) do
    locations(world, node)
  catch
    :exit, _ -> nil
    :error, _ -> nil
  end

  defp stop_zone(%__MODULE__{world: %World{zones_on_demand: true} = world} = placer, index) do
    if pid = zone_pid(placer, index),
      do: DynamicSupervisor.terminate_child(World.Supervisor.awake_supervisor(world.name), pid)

    :ok
  end

  defp stop_zone(placer, index) do
    Supervisor.terminate_child(placer.supervisor, {Zone, index})
    Supervisor.delete_child(placer.supervisor, {Zone, index})
  end

  defp zone_pid(placer, index), do: World.zone_pid(placer.world, index)

  ## Pausing, without a quorum

  defp pause(placer) do
    world = placer.world
    :persistent_term.put({__MODULE__, world.name, :paused}, true)
    # Handovers under way stop before the zones: one that went on would
    # wake and give zones of a paused node, and could give one, at its old
    # epoch, to a node that took it since, after this node had it back.
    for {pid, _indexes} <- placer.handovers, do: Process.exit(pid, :kill)
    for {_index, {_timer, ref}} <- placer.timers, do: Process.cancel_timer(ref)

    running =
      if world.zones_on_demand,
        do: World.awake_zones(world),
        else:
          for(
            {{Zone, index}, _pid, _, _} <- Supervisor.which_children(placer.supervisor),
            do: index
          )

    # A zone being handed over may yet be taken: what it held is not
    # known to be lost.
    handing = placer.handovers |> Map.values() |> List.flatten() |> MapSet.new()

    told =
      Enum.reduce(running, 0, fn index, told ->
        stop_zone(placer, index)

        Enum.reduce(Zone.forget(world, index), told, fn entity, told ->
          Directory.release(world.name, entity.id, index)
          :counters.add(world.kind_counts, entity.kind + 1, -1)

          cond do
            node(entity.owner) == node() ->
              send(entity.owner, {:grove_paused, entity.id}) && told + 1

            # The owner on another node, which runs on, is told by its
            # relay, if it last heard the entity was in this copy.
            index not in handing ->
              Relay.lost_one(world, entity.id, index, entity.owner) && told

            true ->
              told
          end
        end)
      end)

    told = told + Relay.paused(world)

    Logger.error(
      "world: paused; #{length(running)} zones stopped, #{told} entities' clients told"
    )

    %{placer | handovers: %{}, handing_out: [], timers: %{}}
  end

  # A zone on demand starts when first needed, wherever it is placed.
  defp start_zone(%__MODULE__{world: %World{zones_on_demand: true}}, _index), do: :ok

  defp start_zone(placer, index) do
    case Supervisor.start_child(placer.supervisor, {Zone, {placer.world, index}}) do
      {:ok, _pid} ->
        :ok

      {:error, :already_present} ->
        {:ok, _} = Supervisor.restart_child(placer.supervisor, {Zone, index})
        :ok

      {:error, {:already_started, _pid}} ->
        :ok
    end
  end

  ## Locations: a node number per zone in :atomics, the nodes in :persistent_term

  # A new placement is built whole before it is published, in one term.
  defp publish(placer, locations) do
    world = placer.world

    placer =
      locations
      |> Enum.with_index()
      |> Enum.reduce(
        %{
          placer
          | locations: :atomics.new(zone_count(world), signed: false),
            epochs: :atomics.new(zone_count(world), signed: false),
            nodes: {}
        },
        fn {{node, epoch}, index}, placer -> locate(placer, index, node, epoch, false) end
      )

    put_locations(placer)
    if paused?(world.name), do: :persistent_term.erase({__MODULE__, world.name, :paused})
    placer
  end

  defp put_locations(placer),
    do:
      :persistent_term.put(
        {__MODULE__, placer.world.name, :locations},
        {placer.locations, placer.nodes, placer.epochs}
      )

  defp locate(placer, index, node, epoch, published? \\ true) do
    {placer, number} = node_number(placer, node, published?)
    # The epoch first: whoever reads the new node reads its epoch too
    # (`Grove.World.zone_placement/2`).
    :atomics.put(placer.epochs, index + 1, epoch)
    :atomics.put(placer.locations, index + 1, number)
    placer
  end

  # Nodes are numbered as they are first seen; this node is always 0. A
  # node seen for the first time is published before any zone names it.
  defp node_number(%__MODULE__{nodes: {}} = placer, node, published?) do
    node_number(%{placer | nodes: {node()}}, node, published?)
  end

  defp node_number(placer, node, published?) do
    case Enum.find_index(Tuple.to_list(placer.nodes), &(&1 == node)) do
      nil ->
        placer = %{placer | nodes: Tuple.append(placer.nodes, node)}
        if published?, do: put_locations(placer)
        {placer, tuple_size(placer.nodes) - 1}

      number ->
        {placer, number}
    end
  end

  defp zone_count(world), do: Grid.zone_count(world.grid)
end
