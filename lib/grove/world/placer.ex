defmodule Grove.World.Placer do
  @moduledoc false
  # Runs this node's zones, and moves them when the cluster changes.
  #
  # A world alone runs every zone here, as it always did. A world of a
  # cluster (`:cluster`) runs the zones `Grove.World.Placement` gives this
  # node, and keeps where every zone runs now in `:atomics` (a node number
  # per zone, into a tuple of nodes in `:persistent_term`), which
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
  # until they hand it its share. A node of a cluster that sees none of its
  # peers within `@boot_wait` starts the world alone.
  #
  # A zone whose node is gone starts again, empty, on its new owner: what
  # a lost node held is lost with it.

  use GenServer

  alias __MODULE__, as: State
  alias Grove.World
  alias Grove.World.{Entity, Feed, Grid, Minimap, Placement, Relay, Stats, Zone}

  require Logger

  @boot_wait 5_000

  defstruct [
    :world,
    :supervisor,
    :locations,
    nodes: {},
    members: [],
    handing: %{},
    retiring: %{}
  ]

  @type t :: %State{}

  @spec start_link(atom()) :: GenServer.on_start()
  def start_link(world_name),
    do: GenServer.start_link(__MODULE__, world_name, name: name(world_name))

  @doc "The placer's registered name (the same on every node)."
  @spec name(atom()) :: atom()
  def name(world), do: :"#{world}.placer"

  @doc "Where a node's placer believes each zone runs, or `:starting`."
  @spec locations(atom(), node()) :: [node()] | :starting
  def locations(world, node), do: GenServer.call({name(world), node}, :locations, 10_000)

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
      {:ok, place(state)}
    end
  end

  @impl true
  def handle_call(:locations, _from, %State{locations: nil} = state),
    do: {:reply, :starting, state}

  def handle_call(:locations, _from, state), do: {:reply, location_list(state), state}

  def handle_call({:take_over, index, rows, subscriptions, seq}, _from, state) do
    state = take_over(state, index, rows, subscriptions, seq)
    {:reply, :ok, state}
  end

  @impl true
  def handle_info({:grove_cluster, _instance, members}, state),
    do: {:noreply, rebalance(%{state | members: members})}

  def handle_info({:zone_at, index, node}, state) do
    {:noreply, locate(state, index, node)}
  end

  # A handover finished: the zone runs elsewhere now.
  def handle_info({:EXIT, pid, reason}, %State{handing: handing} = state)
      when is_map_key(handing, pid) do
    {index, to} = handing[pid]
    state = %{state | handing: Map.delete(handing, pid)}

    case reason do
      :normal ->
        {:noreply, locate(state, index, to)}

      reason ->
        Logger.error("zone #{index}: handing it to #{to} failed: #{inspect(reason)}; kept here")
        if zone = zone_pid(state, index), do: send(zone, :keep)
        # Tried again a little later, if it still belongs elsewhere.
        Process.send_after(self(), {:settle, index}, 1000)
        {:noreply, cancel_retiring(state, index)}
    end
  end

  def handle_info({:EXIT, _pid, _reason}, state), do: {:noreply, state}

  def handle_info({:settle, index}, state), do: {:noreply, settle(state, index)}

  def handle_info({:stop_zone, index}, state) do
    {:noreply, state |> Map.update!(:retiring, &Map.delete(&1, index)) |> stop_zone(index)}
  end

  ## Placing

  # The first placement: join a world that runs, or start one.
  defp place(state) do
    instance = state.world.cluster
    members = Grove.Cluster.subscribe(instance)
    members = if members == [node()], do: await_peers(instance, members), else: members
    state = %{state | members: members}

    running =
      Enum.find_value(members -- [node()], fn member ->
        case safe_locations(state.world.name, member) do
          list when is_list(list) -> list
          _ -> nil
        end
      end)

    case running do
      nil ->
        owners = Placement.owners(zone_count(state.world), members)
        state = publish(state, Tuple.to_list(owners))

        for index <- 0..(zone_count(state.world) - 1),
            elem(owners, index) == node(),
            do: start_zone(state, index)

        state

      locations ->
        # The others hand this node its share when they see it.
        publish(state, locations)
    end
  end

  # A node with peers to find waits a little for one before starting alone.
  defp await_peers(instance, members) do
    if Grove.Cluster.expects_peers?(instance) do
      receive do
        {:grove_cluster, ^instance, members} -> members
      after
        @boot_wait -> members
      end
    else
      members
    end
  end

  defp safe_locations(world, member) do
    locations(world, member)
  catch
    :exit, _ -> nil
  end

  # Members changed: hand over what is no longer this node's, and start
  # again what was on a node that is gone and is now this node's.
  defp rebalance(%State{locations: nil} = state), do: state

  defp rebalance(state) do
    Enum.reduce(0..(zone_count(state.world) - 1), state, &settle(&2, &1))
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
        Logger.warning("zone #{index}: its node #{at} is gone; started again here, empty")
        start_zone(state, index)
        announce(locate(state, index, node()), index)

      true ->
        state
    end
  end

  defp handing?(state, index), do: Enum.any?(state.handing, fn {_, {i, _}} -> i == index end)

  defp hand_over(state, index, to) do
    world = state.world
    zone = Process.whereis(elem(world.zones, index))

    pid =
      spawn_link(fn ->
        # The new owner's world may still be starting: the zone goes on
        # here until it answers.
        await_placer(world.name, to, 300)
        {rows, subscriptions, seq} = GenServer.call(zone, :hand_over, 30_000)

        :ok =
          GenServer.call(
            {name(world.name), to},
            {:take_over, index, rows, subscriptions, seq},
            30_000
          )

        send(zone, {:handed_to, {elem(world.zones, index), to}})
      end)

    # The zone passes on what comes late for a while, then stops.
    timer = Process.send_after(self(), {:stop_zone, index}, 10 * world.handoff_timeout)

    %{
      state
      | handing: Map.put(state.handing, pid, {index, to}),
        retiring: Map.put(state.retiring, index, timer)
    }
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
  defp take_over(state, index, rows, subscriptions, seq) do
    world = state.world

    # The zone comes back to a node that had handed it away: its old,
    # forwarding copy goes first.
    state =
      if is_map_key(state.retiring, index),
        do: state |> cancel_retiring(index) |> stop_zone(index),
        else: state

    table = elem(world.tables, index)

    for row <- rows do
      entity = Entity.from_row(row)
      :ets.insert(table, row)
      Relay.assign(world, entity.id, index, node(entity.owner))
      Minimap.add(world, {entity.x, entity.y}, 1)
      Stats.incr(world.stats, if(entity.kind == 1, do: :players, else: :actors))
    end

    :ets.insert(world.subscriptions, subscriptions)
    # Its viewers hold the numbers of its deltas: it carries on from its own.
    Feed.carry_on(world.feed, index, seq)
    start_zone(state, index)
    state = locate(state, index, node())
    announce(state, index)
    # Members may have changed again while it came: it may belong elsewhere already.
    settle(state, index)
  end

  defp announce(state, index) do
    for member <- state.members,
        member != node(),
        do: send({name(state.world.name), member}, {:zone_at, index, node()})

    state
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

  defp publish(state, locations) do
    world = state.world
    atomics = :atomics.new(zone_count(world), signed: false)
    state = %{state | locations: atomics}

    state =
      locations
      |> Enum.with_index()
      |> Enum.reduce(state, fn {node, index}, state -> locate(state, index, node) end)

    :persistent_term.put({World, world.name, :locations}, {atomics, state.nodes})
    state
  end

  defp locate(state, index, node) do
    {state, number} = node_number(state, node)
    :atomics.put(state.locations, index + 1, number)
    state
  end

  # Nodes are numbered as they are first seen; this node is always 0.
  defp node_number(%State{nodes: {}} = state, node) do
    node_number(%{state | nodes: {node()}}, node)
  end

  defp node_number(state, node) do
    case Enum.find_index(Tuple.to_list(state.nodes), &(&1 == node)) do
      nil ->
        nodes = Tuple.append(state.nodes, node)

        if state.locations,
          do:
            :persistent_term.put({World, state.world.name, :locations}, {state.locations, nodes})

        {%{state | nodes: nodes}, tuple_size(nodes) - 1}

      number ->
        {state, number}
    end
  end

  defp location(state, index), do: elem(state.nodes, :atomics.get(state.locations, index + 1))

  defp location_list(state),
    do: for(index <- 0..(zone_count(state.world) - 1), do: location(state, index))

  defp zone_count(world), do: Grid.zone_count(world.grid)
end
