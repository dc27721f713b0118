defmodule Grove.World.Placer do
  @moduledoc false
  # Runs this node's zones, and moves them when the cluster changes.
  #
  # A world alone runs every zone here, as it always did. A world of a
  # cluster (`:cluster`) runs the zones `Grove.World.Placement` gives this
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
  # until they hand it its share. When none runs it yet, the first of the
  # members by name starts it and the others wait for its placement: nodes
  # that start together see the others join at different moments, and
  # each starting a world over the members it saw would leave them with
  # placements that disagree, at the same epoch. A node of a cluster that
  # sees none of its peers within its `:boot_wait` starts the world alone.
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
  # zone it runs to its new owner before its world stops, once the
  # handovers under way have finished. A zone it fails to hand over starts
  # again, empty, on the node it was meant for (told so, or once the
  # stopped node is disconnected), as a lost node's zone does.

  use GenServer

  alias __MODULE__, as: State
  alias Grove.World
  alias Grove.World.{Directory, Entity, Feed, Grid, Minimap, Placement, Relay, Stats, Zone}

  require Logger

  # How often a node waiting for the first member to start the world asks again.
  @place_retry 100

  defstruct [
    :world,
    :supervisor,
    :locations,
    :epochs,
    nodes: {},
    members: [],
    handing: %{},
    retiring: %{},
    leaving: MapSet.new(),
    restarted: [],
    early: %{},
    paused: false
  ]

  @type t :: %State{}

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
         {locations, nodes, epochs} <- :persistent_term.get({World, world, :locations}, nil) do
      for index <- 1..:atomics.info(locations).size,
          do: {elem(nodes, :atomics.get(locations, index)), :atomics.get(epochs, index)}
    else
      _ -> :starting
    end
  end

  @doc "True while this node's world is paused, its side of the cluster short of a quorum."
  @spec paused?(atom()) :: boolean()
  def paused?(world), do: :persistent_term.get({__MODULE__, world, :paused}, false)

  # Callbacks

  @impl true
  def init(world_name) do
    Process.flag(:trap_exit, true)
    world = World.fetch!(world_name)

    state = %State{world: world, supervisor: World.zones_supervisor(world_name)}

    if world.cluster == nil do
      for index <- 0..(zone_count(world) - 1), do: start_zone(state, index)
      {:ok, state}
    else
      # A node leaves the group before its connection closes: zones it
      # could not hand over are started again once it is gone (`settle/2`).
      :ok = :net_kernel.monitor_nodes(true)
      # Stopped by its supervisor, this process left the cluster as a node
      # that stops does (`terminate/2` cannot tell the two apart); started
      # again alone, it is a member again, and takes its share as a node
      # that joins.
      :ok = Grove.Cluster.join(world.cluster)
      {:ok, place(state)}
    end
  end

  @impl true
  def handle_call(
        {:take_over, _index, _rows, _subscriptions, _seq, _epoch},
        _from,
        %State{paused: true} = state
      ),
      do: {:reply, {:error, :paused}, state}

  # Not placed yet: the zone stays where it is, and is offered again.
  def handle_call(
        {:take_over, _index, _rows, _subscriptions, _seq, _epoch},
        _from,
        %State{locations: nil} = state
      ),
      do: {:reply, {:error, :starting}, state}

  def handle_call({:take_over, index, rows, subscriptions, seq, epoch}, _from, state) do
    state = take_over(state, index, rows, subscriptions, seq, epoch)
    {:reply, :ok, state}
  end

  @impl true
  def handle_info({:grove_cluster, instance, members}, state) do
    # A node that said it leaves is no member, even while the group still
    # lists it; once the group no longer does, it may come back.
    leaving = MapSet.filter(state.leaving, &(&1 in members))
    before = state.members
    state = %{state | members: members -- MapSet.to_list(leaving), leaving: leaving}

    state =
      case {Grove.Cluster.quorum?(instance), state.paused} do
        {false, false} -> pause(state)
        {false, true} -> state
        {true, true} -> resume(state)
        {true, false} -> state |> rebalance() |> introduce(state.members -- before)
      end

    {:noreply, state}
  end

  # Sent by a node before it hands its zones over and stops: nothing is
  # to be handed to it any more.
  # One the group has dropped already is no member; remembering it would
  # keep it out when it comes back.
  def handle_info({:leaving, node}, state) do
    if node in state.members,
      do:
        {:noreply,
         %{state | leaving: MapSet.put(state.leaving, node), members: state.members -- [node]}},
      else: {:noreply, state}
  end

  # A paused node, or one waiting for a placement, reads the whole of it
  # from a member when it can; what it hears meanwhile it keeps (the
  # newest per zone) and reads after, as the member's copy may be older.
  def handle_info({:zone_at, index, node, epoch, how}, %State{paused: paused} = state)
      when paused or state.locations == nil do
    early =
      case state.early do
        %{^index => {first, known, _how}}
        when known > epoch or (known == epoch and first < node) ->
          state.early

        early ->
          Map.put(early, index, {node, epoch, how})
      end

    {:noreply, %{state | early: early}}
  end

  def handle_info({:zone_at, index, node, epoch, how}, state) do
    mine = epoch(state, index)

    cond do
      epoch < mine ->
        Logger.info("zone #{index}: a stale announcement from #{node} (epoch #{epoch}) ignored")
        {:noreply, state}

      # Two nodes started it at once (each saw other members), or each
      # took it at the same epoch: the first by name keeps it, on every
      # node, whatever order the two announcements come in (this one keeps
      # its copy if it runs it; the other gives its copy up when it hears
      # of the first's).
      epoch == mine and node > location(state, index) and
          (location(state, index) != node() or zone_pid(state, index) != nil) ->
        {:noreply, state}

      true ->
        state = state |> drop_stale_copy(index, node) |> locate(index, node, epoch)
        if how == :restarted, do: recovered(state, [index])
        {:noreply, state}
    end
  end

  # A handover finished: the zone runs elsewhere now.
  def handle_info({:EXIT, pid, reason}, %State{handing: handing} = state)
      when is_map_key(handing, pid) do
    {index, to, epoch} = handing[pid]
    state = %{state | handing: Map.delete(handing, pid)}
    taken = epoch(state, index) >= epoch and location(state, index) == to

    case reason do
      :normal ->
        {:noreply, locate(state, index, to, max(epoch, epoch(state, index)))}

      # The new owner took it and said so, though its answer did not come
      # back in time: it was handed over all the same.
      _reason when taken ->
        Logger.warning("zone #{index}: #{to} took it, though its answer came late")

        if zone = zone_pid(state, index),
          do: send(zone, {:handed_to, {elem(state.world.zones, index), to}})

        {:noreply, state}

      reason ->
        Logger.error("zone #{index}: handing it to #{to} failed: #{inspect(reason)}; kept here")
        if zone = zone_pid(state, index), do: send(zone, :keep)
        # Tried again a little later, if it still belongs elsewhere.
        Process.send_after(self(), {:settle, index}, 1000)
        {:noreply, cancel_retiring(state, index)}
    end
  end

  def handle_info({:EXIT, _pid, _reason}, state), do: {:noreply, state}

  def handle_info({:nodeup, _node}, state), do: {:noreply, state}

  # Its zones were waiting for it to be gone, out of the group and disconnected.
  def handle_info({:nodedown, _node}, %State{paused: false} = state),
    do: {:noreply, rebalance(state)}

  def handle_info({:nodedown, _node}, state), do: {:noreply, state}

  # A node that stopped on purpose could not hand this zone over, and
  # stays up (its world stopped, not its node): the zone's new owner
  # starts it again, empty, as it would a lost node's.
  def handle_info({:abandoned, index, from}, %State{paused: false} = state)
      when state.locations != nil do
    if location(state, index) == from do
      Logger.warning(
        "zone #{index}: #{from} stopped without handing it over; started again here, empty"
      )

      state = restart_lost(state, index)
      recovered(state, [index])
      {:noreply, state}
    else
      {:noreply, state}
    end
  end

  def handle_info({:abandoned, _index, _from}, state), do: {:noreply, state}

  # Waiting for the first member to place the zones: is it done?
  def handle_info(:place, %State{paused: false, locations: nil} = state),
    do: {:noreply, join_or_start(state)}

  def handle_info(:place, state), do: {:noreply, state}

  def handle_info({:settle, _index}, %State{paused: true} = state), do: {:noreply, state}
  def handle_info({:settle, index}, state), do: {:noreply, settle(state, index)}

  def handle_info({:stop_zone, index}, state) do
    {:noreply, state |> Map.update!(:retiring, &Map.delete(&1, index)) |> stop_zone(index)}
  end

  # A node that stops on purpose hands its zones over first.
  @impl true
  def terminate(_reason, %State{locations: nil}), do: :ok
  def terminate(_reason, %State{paused: true}), do: :ok

  def terminate(reason, state) when reason == :shutdown or elem(reason, 0) == :shutdown do
    :ok = Grove.Cluster.leave(state.world.cluster)
    others = state.members -- [node()]

    if others != [] do
      # Before any handover, from this process: each new owner hears it first.
      for node <- others, do: send({name(state.world.name), node}, {:leaving, node()})

      # Handovers under way finish first: their zones are no longer here,
      # or, if one failed, are handed over again below.
      state = await_handovers(state)

      running =
        for index <- 0..(zone_count(state.world) - 1),
            zone_pid(state, index),
            not is_map_key(state.retiring, index),
            do: index

      Logger.info("world: leaving the cluster; handing #{length(running)} zones over")

      for index <- running do
        to = Placement.owner(index, others)

        try do
          :ok = hand_over_now(state.world, index, to, epoch(state, index) + 1)
        catch
          kind, reason ->
            Logger.error(
              "zone #{index}: handing it to #{to} failed: #{inspect({kind, reason})}; " <>
                "it starts again there, empty"
            )

            send({name(state.world.name), to}, {:abandoned, index, node()})
        end
      end
    end

    :ok
  end

  # A crash is no reason to leave: the placer starts again and carries on.
  def terminate(_reason, _state), do: :ok

  # Each handover process is linked to this one, which traps exits, and
  # bounded by its own calls' timeouts.
  defp await_handovers(state) do
    Enum.reduce(state.handing, %{state | handing: %{}}, fn {pid, {index, _to, _epoch}}, state ->
      receive do
        {:EXIT, ^pid, :normal} -> state
        {:EXIT, ^pid, _reason} -> cancel_retiring(state, index)
      end
    end)
  end

  ## Placing

  # The first placement: join a world that runs, or start one.
  defp place(state) do
    instance = state.world.cluster
    members = Grove.Cluster.subscribe(instance)
    members = if members == [node()], do: await_peers(instance, members), else: members

    if Grove.Cluster.quorum?(instance),
      do: join_or_start(%{state | members: members}),
      else: pause(%{state | members: members, locations: nil})
  end

  defp join_or_start(state) do
    members = state.members

    running =
      Enum.find_value(members -- [node()], fn member ->
        case safe_locations(state.world.name, member) do
          list when is_list(list) -> list
          _ -> nil
        end
      end)

    cond do
      running != nil ->
        join_running(state, running)

      # Nodes that start together would each start a world of their own,
      # placed over the members each saw, and never agree: the first of
      # the members by name starts it, the others take its placement.
      Enum.min(members) != node() ->
        Process.send_after(self(), :place, @place_retry)
        state

      true ->
        owners = Placement.owners(zone_count(state.world), members)

        state = publish(state, for(node <- Tuple.to_list(owners), do: {node, 1}))

        for index <- 0..(zone_count(state.world) - 1), elem(owners, index) == node() do
          start_zone(state, index)
          announce(state, index, :started)
        end

        state
    end
  end

  # The others hand this node its share when they see it; what they
  # already place here (they saw this node before it saw them), it starts
  # now. Their locations follow the members they saw when they placed the
  # zones; this node may see more already (nodes that started with it),
  # and no change of members will come to tell it: what it now runs for
  # another, it hands over at once. Only that: a node it does not count
  # among its members yet may well be up (the others see it), so its zones
  # are not started again here.
  defp join_running(state, locations) do
    state = publish(state, locations)

    for {{at, _epoch}, index} <- Enum.with_index(locations),
        at == node(),
        do: start_zone(state, index)

    Enum.reduce(0..(zone_count(state.world) - 1), state, fn index, state ->
      owner = Placement.owner(index, state.members)

      if location(state, index) == node() and owner != node(),
        do: hand_over(state, index, owner),
        else: state
    end)
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

  # Members changed: hand over what is no longer this node's, and start
  # again what was on a node that is gone and is now this node's.
  defp rebalance(%State{locations: nil} = state), do: state

  defp rebalance(state) do
    state =
      Enum.reduce(0..(zone_count(state.world) - 1), %{state | restarted: []}, &settle(&2, &1))

    if state.restarted != [] do
      Logger.warning(
        "zones #{inspect(Enum.reverse(state.restarted), charlists: :as_lists)}: their node is gone; started again here, empty"
      )

      recovered(state, state.restarted)
    end

    %{state | restarted: []}
  end

  # Zones that run again, empty, after their node was lost: this node's
  # clients whose entities were in them are told, its viewers around them
  # subscribe again, and what was on its way to them is lost too.
  defp recovered(state, indexes) do
    told = Relay.lost(state.world, indexes)

    if told > 0,
      do:
        Logger.warning(
          "#{told} entities of this node's clients were lost with their zones; their clients are told"
        )

    for {{Zone, _}, pid, _, _} <- Supervisor.which_children(state.supervisor),
        is_pid(pid),
        do: GenServer.cast(pid, {:zones_lost, indexes})

    :ok
  end

  # One zone: handed over if it runs here and belongs elsewhere, started
  # again if it ran on a node that is down and belongs here now.
  defp settle(%State{locations: nil} = state, _index), do: state

  defp settle(state, index) do
    at = location(state, index)
    owner = Placement.owner(index, state.members)

    cond do
      at == node() and owner != node() and not handing?(state, index) ->
        hand_over(state, index, owner)

      # Gone means out of the members and disconnected: a member list may
      # lag behind a zone's announcement, and a connection may not be up yet.
      at != node() and at not in state.members and at not in Node.list() and owner == node() ->
        state = restart_lost(state, index)
        %{state | restarted: [index | state.restarted]}

      true ->
        state
    end
  end

  # A zone whose node is gone runs again here, empty, at the next epoch.
  defp restart_lost(state, index) do
    # Its viewers here hold numbers of the lost run: past them, so
    # that they ask the new one for a snapshot instead of reading its
    # deltas onto what they had.
    Feed.reset(state.world.feed, index, Feed.latest(state.world.feed, index) + 1)
    state = state |> drop_forwarding(index) |> tap(&start_zone(&1, index))
    state = locate(state, index, node(), epoch(state, index) + 1)
    announce(state, index, :restarted)
  end

  defp handing?(state, index), do: Enum.any?(state.handing, fn {_, {i, _, _}} -> i == index end)

  defp hand_over(state, index, to) do
    world = state.world
    epoch = epoch(state, index) + 1

    pid =
      spawn_link(fn ->
        # The new owner's world may still be starting: the zone goes on
        # here until it answers.
        await_placer(world.name, to, 300)
        :ok = hand_over_now(world, index, to, epoch)
      end)

    # The zone passes on what comes late for a while, then stops.
    timer = Process.send_after(self(), {:stop_zone, index}, 10 * world.handoff_timeout)

    %{
      state
      | handing: Map.put(state.handing, pid, {index, to, epoch}),
        retiring: Map.put(state.retiring, index, timer)
    }
  end

  # The zone gives its rows and subscriptions, the new owner takes them.
  defp hand_over_now(world, index, to, epoch) do
    zone = Process.whereis(elem(world.zones, index))
    {rows, subscriptions, seq} = GenServer.call(zone, :hand_over, 30_000)

    :ok =
      GenServer.call(
        {name(world.name), to},
        {:take_over, index, rows, subscriptions, seq, epoch},
        30_000
      )

    send(zone, {:handed_to, {elem(world.zones, index), to}})
    :ok
  end

  defp await_placer(_world, to, 0), do: exit({:no_placer, to})

  defp await_placer(world, to, tries) do
    case safe_locations(world, to) do
      list when is_list(list) ->
        :ok

      _ ->
        Process.sleep(100)
        await_placer(world, to, tries - 1)
    end
  end

  defp cancel_retiring(state, index) do
    case Map.pop(state.retiring, index) do
      {nil, _} ->
        state

      {timer, retiring} ->
        Process.cancel_timer(timer)
        %{state | retiring: retiring}
    end
  end

  defp stop_zone(state, index) do
    Supervisor.terminate_child(state.supervisor, {Zone, index})
    Supervisor.delete_child(state.supervisor, {Zone, index})
    state
  end

  defp zone_pid(state, index), do: Process.whereis(elem(state.world.zones, index))

  # The new owner's side: the zone's rows into this node's tables, then the zone.
  defp take_over(state, index, rows, subscriptions, seq, epoch) do
    world = state.world

    state = drop_forwarding(state, index)

    table = elem(world.tables, index)

    for row <- rows do
      entity = Entity.from_row(row)
      :ets.insert(table, row)
      Relay.assign(world, entity.id, index, entity.owner)
      Minimap.add(world, {entity.x, entity.y}, 1)
      Stats.incr(world.stats, if(entity.kind == 1, do: :players, else: :actors))
    end

    :ets.insert(world.subscriptions, subscriptions)
    # Its viewers hold the numbers of its deltas: it carries on from its own.
    Feed.carry_on(world.feed, index, seq)
    start_zone(state, index)
    state = locate(state, index, node(), epoch)
    announce(state, index, :handed)
    # Members may have changed again while it came: it may belong elsewhere already.
    settle(state, index)
  end

  # Another node announces a zone that still runs here, not handed away:
  # a handover whose answer timed out after the new owner took the zone
  # kept it here too. The newer placement wins; this copy, which its
  # clients' entities have left with the rows it handed over, goes.
  defp drop_stale_copy(state, index, node) do
    if node != node() and not is_map_key(state.retiring, index) and zone_pid(state, index) do
      Logger.warning("zone #{index}: runs on #{node} now; the copy here stops")
      stop_zone(state, index)
      _entities = Zone.forget(state.world, index)
    end

    state
  end

  # A zone that starts again on a node that had handed it away: its old,
  # forwarding copy goes first.
  defp drop_forwarding(state, index) do
    if is_map_key(state.retiring, index),
      do: state |> cancel_retiring(index) |> stop_zone(index),
      else: state
  end

  defp announce(state, index, how) do
    message = {:zone_at, index, node(), epoch(state, index), how}

    for member <- state.members,
        member != node(),
        do: send({name(state.world.name), member}, message)

    state
  end

  # A node new to this one may have read the placement from a member that
  # had not heard yet of a zone this node took since, and this node's
  # announcement did not go to it: it hears now of every zone this node
  # runs.
  defp introduce(%State{locations: nil} = state, _newcomers), do: state
  defp introduce(state, []), do: state

  defp introduce(state, newcomers) do
    for index <- 0..(zone_count(state.world) - 1),
        location(state, index) == node(),
        not is_map_key(state.retiring, index),
        zone_pid(state, index) != nil,
        message = {:zone_at, index, node(), epoch(state, index), :handed},
        newcomer <- newcomers,
        do: send({name(state.world.name), newcomer}, message)

    state
  end

  defp epoch(%State{epochs: nil}, _index), do: 0
  defp epoch(state, index), do: :atomics.get(state.epochs, index + 1)

  ## Pausing, without a quorum, and resuming

  defp pause(state) do
    world = state.world
    :persistent_term.put({__MODULE__, world.name, :paused}, true)
    for {_index, timer} <- state.retiring, do: Process.cancel_timer(timer)

    running =
      for {{Zone, index}, _pid, _, _} <- Supervisor.which_children(state.supervisor), do: index

    told =
      Enum.reduce(running, 0, fn index, told ->
        stop_zone(state, index)

        Enum.reduce(Zone.forget(world, index), told, fn entity, told ->
          Directory.release(world.name, entity.id, index)
          :counters.add(world.kind_counts, entity.kind + 1, -1)

          if node(entity.owner) == node(),
            do: send(entity.owner, {:grove_paused, entity.id}) && told + 1,
            else: told
        end)
      end)

    told = told + Relay.paused(world)

    Logger.error(
      "world: paused; #{length(running)} zones stopped, #{told} entities' clients told"
    )

    %{state | paused: true, handing: %{}, retiring: %{}}
  end

  defp resume(state) do
    Logger.warning("world: resumed; this node takes its share from the others")
    # Paused to the others until it has a placement again (`publish/2`):
    # what it published before it paused is stale.
    join_or_start(%{state | paused: false, locations: nil, nodes: {}})
  end

  defp start_zone(state, index) do
    case Supervisor.start_child(state.supervisor, {Zone, {state.world, index}}) do
      {:ok, _pid} ->
        :ok

      {:error, :already_present} ->
        {:ok, _} = Supervisor.restart_child(state.supervisor, {Zone, index})
        :ok

      {:error, {:already_started, _pid}} ->
        :ok
    end
  end

  ## Locations: a node number per zone in :atomics, the nodes in :persistent_term

  # A new placement is built whole before it is published, in one term:
  # another node that read it half built would take the zones not yet
  # written for this node's, at epoch 0, and keep them.
  defp publish(state, locations) do
    world = state.world

    state =
      locations
      |> Enum.with_index()
      |> Enum.reduce(
        %{
          state
          | locations: :atomics.new(zone_count(world), signed: false),
            epochs: :atomics.new(zone_count(world), signed: false),
            nodes: {}
        },
        fn {{node, epoch}, index}, state -> locate(state, index, node, epoch, false) end
      )

    put_locations(state)
    if paused?(world.name), do: :persistent_term.erase({__MODULE__, world.name, :paused})

    for {index, {node, epoch, how}} <- state.early,
        do: send(self(), {:zone_at, index, node, epoch, how})

    %{state | early: %{}}
  end

  defp put_locations(state),
    do:
      :persistent_term.put(
        {World, state.world.name, :locations},
        {state.locations, state.nodes, state.epochs}
      )

  defp locate(state, index, node, epoch, published? \\ true) do
    {state, number} = node_number(state, node, published?)
    :atomics.put(state.locations, index + 1, number)
    :atomics.put(state.epochs, index + 1, epoch)
    state
  end

  # Nodes are numbered as they are first seen; this node is always 0. A
  # node seen for the first time is published before any zone names it.
  defp node_number(%State{nodes: {}} = state, node, published?) do
    node_number(%{state | nodes: {node()}}, node, published?)
  end

  defp node_number(state, node, published?) do
    case Enum.find_index(Tuple.to_list(state.nodes), &(&1 == node)) do
      nil ->
        state = %{state | nodes: Tuple.append(state.nodes, node)}
        if published?, do: put_locations(state)
        {state, tuple_size(state.nodes) - 1}

      number ->
        {state, number}
    end
  end

  defp location(state, index), do: elem(state.nodes, :atomics.get(state.locations, index + 1))

  defp zone_count(world), do: Grid.zone_count(world.grid)
end
