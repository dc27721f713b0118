defmodule Grove.World.Relay do
  @moduledoc false
  # This node's directory, kept for zones that run on other nodes.
  #
  # Each node has a directory (`Grove.World.Directory`) of where entities
  # are: those in its own zones, written by the zones themselves, and
  # those its own clients own, wherever they are, since a client's moves
  # are routed from its own node's directory. A zone that takes or drops
  # an entity whose owner lives on another node tells that node's relay,
  # which writes the entry there. The relay holds nothing of its own: the
  # tables are the keeper's, so it can crash and restart at no cost.
  #
  # It keeps this node's feed (`Grove.World.Feed`) the same way for zones
  # that run elsewhere and have viewers here: such a zone sends each delta,
  # encoded once in every format, once to this relay, whatever the number
  # of viewers here, and the relay publishes it under the zone's own number,
  # where the viewers read it as they read a local zone's. What crosses the
  # network per tick is one message per watching node, not per viewer (the
  # idea of Discord's Manifold). A zone that starts being watched from here
  # first sends the number it is at (`{:feed_from, zone, seq}`), and what
  # it sends viewers here itself (snapshots, and `:closed` when one stops
  # watching) comes through the relay too, in the order the zone sent it:
  # a snapshot carrying number `seq` reaches its viewer only once this
  # node's feed holds `seq` (or later), so the viewer reads on from there
  # and never finds a number of another run of the zone; and a `:closed`
  # never overtakes the snapshot before it, which would leave the viewer
  # holding a zone that no longer sends it anything.
  #
  # For those entities, whose owners live here and whose zones run
  # elsewhere, it also keeps the owner and the node that holds them (the
  # world's `away` table), so that when a node is lost with its zones, the
  # owners here of what they held are told (`{:grove_lost, id}`, see
  # `lost/3`) and can place their entities again: nobody else could, since
  # what the zones knew is gone.

  use GenServer

  alias Grove.World
  alias Grove.World.{Directory, Feed, Slots}

  require Logger

  @spec start_link(World.t()) :: GenServer.on_start()
  def start_link(%World{} = world),
    do: GenServer.start_link(__MODULE__, world.name, name: name(world.name))

  @doc "The relay's registered name for a world (the same on every node)."
  @spec name(atom()) :: atom()
  def name(world), do: :"#{world}.relay"

  @doc "A node's relay for a world, as an address to send to."
  @spec address(atom(), node()) :: {atom(), node()}
  def address(world, node), do: {name(world), node}

  @doc """
  Records that an entity is in `zone`: in this node's directory and, when
  its owner lives on another node, in that node's.
  """
  @spec assign(World.t(), non_neg_integer(), non_neg_integer(), pid()) :: :ok
  def assign(%World{} = world, id, zone, owner) do
    ensure_chunk(world, id)
    Directory.assign(world.name, id, zone)

    cond do
      node(owner) != node() ->
        send({name(world.name), node(owner)}, {:assign, id, zone, owner, node()})

      # Back from another node's zone: no longer away.
      world.cluster != nil ->
        :ets.delete(world.away, id)

      true ->
        :ok
    end

    :ok
  end

  @doc "Forgets an entity that left `zone`, here and on its owner's node."
  @spec release(World.t(), non_neg_integer(), non_neg_integer(), node()) :: :ok
  def release(%World{} = world, id, zone, owner_node) do
    Directory.release(world.name, id, zone)
    if owner_node != node(), do: send({name(world.name), owner_node}, {:release, id, zone})
    :ok
  end

  @doc """
  The zones of `runs` (`{index, epoch}`, the epoch each runs at now) were
  lost with their node, and every node but `live` is gone: tells the
  owners here of the entities they held, and of those held on a node gone
  (`{:grove_lost, id}`), and forgets those entities. Returns how many
  owners were told.

  A node gone (out of the members and disconnected, while this one keeps
  its quorum) has paused or died, and its zones with it, whichever zone
  this node believes they ran in: it may have taken one of them into a
  copy of a zone that another node had started again already, after this
  node heard of that.
  """
  @spec lost(World.t(), [{non_neg_integer(), non_neg_integer()}], [node()]) ::
          non_neg_integer()
  def lost(%World{} = world, runs, live) do
    GenServer.call(name(world.name), {:lost, runs, live}, 30_000)
  end

  @doc """
  Every node but `live` is gone: the owners here of the entities those
  held are told, as by `lost/3`, once the zones they were last heard in
  run on a node that is not gone (a zone still placed on a node gone is
  told when it starts again, so that its owners find it running when they
  place their entities again). Does not wait.
  """
  @spec gone(World.t(), [node()]) :: :ok
  def gone(%World{} = world, live), do: GenServer.cast(name(world.name), {:gone, live})

  @doc """
  An entity in `zone` went with a copy of the zone that stopped here: its
  owner's node's relay tells the owner (`{:grove_lost, id}`) if it last
  heard the entity was in this copy (`lost_one?/3`), not if the entity
  lives on in another node's copy (the zone was handed over, or a copy
  here ran on after the zone was started again elsewhere, and the owner
  was told already, or the entity stood where it was held).
  """
  @spec lost_one(World.t(), non_neg_integer(), non_neg_integer(), pid()) :: :ok
  def lost_one(%World{} = world, id, zone, owner) do
    send({name(world.name), node(owner)}, {:lost_one, id, zone, owner, node()})
    :ok
  end

  @doc false
  # The rule of `lost_one/4`, a plain function: the owner of an entity in
  # a copy of `zone` on `holder` that stopped is told when this node's
  # record of it (`rows`, what the `away` table holds for the id) is that
  # copy, or when there is none and the copy was this node's own (an
  # entity of a client here in a zone here has no record). A record of
  # another zone or another holder means the entity lives on there; none,
  # for a copy on another node, that its owner was told already.
  @spec lost_one?([away()], away(), node()) :: boolean()
  def lost_one?(rows, {_id, _zone, _owner, holder} = copy, here),
    do: rows == [copy] or (rows == [] and holder == here)

  @doc """
  This node lost its quorum: tells the owners here of entities in other
  nodes' zones (`{:grove_paused, id}`) and forgets them. Returns how many
  owners were told.
  """
  @spec paused(World.t()) :: non_neg_integer()
  def paused(%World{} = world), do: GenServer.call(name(world.name), :paused, 30_000)

  @doc false
  # On each member: the ids of these that a zone running here holds, with
  # the zone and the epoch this node knows it runs at.
  @spec held_here(atom(), [non_neg_integer()]) :: %{
          non_neg_integer() => {non_neg_integer(), non_neg_integer()}
        }
  def held_here(name, ids) do
    world = World.fetch!(name)

    for id <- ids,
        Directory.ready?(name, id),
        index = Directory.lookup(name, id),
        index != nil,
        World.zone_node(world, index) == node(),
        Slots.member?(world, index, id),
        into: %{},
        do: {id, {index, elem(World.zone_placement(world, index), 1)}}
  end

  @typedoc "A record of an entity of a client here, in a zone of another node: `{id, zone, owner, holder}`."
  @type away :: {non_neg_integer(), non_neg_integer(), pid(), node()}

  @doc false
  # The rule of `lost/3`, a plain function: of this node's records, those
  # of a zone started again (`runs`, zone => the epoch it runs at now) or
  # held on a node not `live` are in question; of these, an entity that a
  # live node holds (`held`: id => `{zone, epoch, holder}`) stands,
  # recorded where it is, and every other is lost. A live node that still
  # holds one in an older run of a zone started again (it was cut off from
  # the node that started it, not from this one) holds it still: that copy
  # may yet be the one that runs (handed on at the new run's epoch, it
  # wins by its node's name), and if it goes instead, with the news or
  # with its node's quorum, its node tells the owner then (`lost_one/4`).
  # Told now, the owner would place the entity again beside the one that
  # lives on. Returns `{lost, standing}`.
  @spec judge([away()], %{non_neg_integer() => non_neg_integer()}, MapSet.t(node()), %{
          non_neg_integer() => {non_neg_integer(), non_neg_integer(), node()}
        }) :: {[away()], [away()]}
  def judge(rows, runs, live, held) do
    rows
    |> Enum.filter(fn {_id, zone, _owner, holder} ->
      is_map_key(runs, zone) or holder not in live
    end)
    |> Enum.reduce({[], []}, fn {id, _zone, owner, _holder} = row, {lost, standing} ->
      case held do
        %{^id => {zone, _epoch, holder}} ->
          if holder in live,
            do: {lost, [{id, zone, owner, holder} | standing]},
            else: {[row | lost], standing}

        _ ->
          {[row | lost], standing}
      end
    end)
  end

  # What the others hold, with the epoch each holder runs the zone at.
  defp held_elsewhere(_world, []), do: %{}

  defp held_elsewhere(world, ids) do
    others = Grove.Cluster.members(world.cluster) -- [node()]

    others
    |> :erpc.multicall(__MODULE__, :held_here, [world.name, ids], 5_000)
    |> Enum.zip(others)
    |> Enum.reduce(%{}, fn
      {{:ok, held}, holder}, acc ->
        for {id, {zone, epoch}} <- held, into: acc, do: {id, {zone, epoch, holder}}

      _failed, acc ->
        acc
    end)
  end

  # The first id of a chunk from another node's range makes room for it here.
  defp ensure_chunk(world, id) do
    unless Directory.ready?(world.name, id),
      do: :ok = GenServer.call(world.keeper, {:directory_chunk, id})
  end

  # Callbacks

  @impl true
  def init(name), do: {:ok, name}

  @impl true
  def handle_call({:lost, runs, live}, _from, name),
    do: {:reply, settle_lost(name, Map.new(runs), MapSet.new([node() | live])), name}

  def handle_call(:paused, _from, name) do
    world = World.fetch!(name)
    away = :ets.tab2list(world.away)
    :ets.delete_all_objects(world.away)

    for {id, index, owner, _holder} <- away do
      Directory.release(name, id, index)
      send(owner, {:grove_paused, id})
    end

    {:reply, length(away), name}
  end

  @impl true
  def handle_cast({:gone, live}, name) do
    told = settle_lost(name, %{}, MapSet.new([node() | live]))

    if told > 0,
      do:
        Logger.warning(
          "#{told} entities of this node's clients were lost with a node gone; their clients are told"
        )

    {:noreply, name}
  end

  defp settle_lost(name, runs, live) do
    world = World.fetch!(name)

    # A record held on a node gone waits while its zone is still placed on
    # a node gone: it is told when that zone starts again.
    rows =
      for {_id, zone, _owner, holder} = row <- :ets.tab2list(world.away),
          is_map_key(runs, zone) or holder in live or World.zone_node(world, zone) in live,
          do: row

    {questioned, _} = judge(rows, runs, live, %{})

    # What this node last heard of an entity may be older than where it
    # is: the records of where it went and where it had been come from two
    # nodes, in either order. The others say which of these they hold.
    held = held_elsewhere(world, for({id, _zone, _owner, _holder} <- questioned, do: id))
    {lost, standing} = judge(questioned, runs, live, held)

    standing = Map.new(standing, &{elem(&1, 0), &1})

    for {id, index, _owner, _holder} = row <- questioned do
      :ets.delete_object(world.away, row)

      case standing do
        %{^id => {^id, zone, _owner, _holder} = moved} ->
          Directory.moved_on(name, id, index, zone)
          :ets.insert(world.away, moved)

        _lost ->
          Directory.release(name, id, index)
      end
    end

    for {id, _zone, owner, _holder} <- lost, do: send(owner, {:grove_lost, id})
    length(lost)
  end

  @impl true
  def handle_info({:assign, id, zone, owner, holder}, name) do
    world = World.fetch!(name)
    ensure_chunk(world, id)
    Directory.assign(name, id, zone)
    :ets.insert(world.away, {id, zone, owner, holder})
    {:noreply, name}
  end

  def handle_info({:lost_one, id, zone, owner, holder}, name) do
    world = World.fetch!(name)

    if lost_one?(:ets.lookup(world.away, id), {id, zone, owner, holder}, node()) do
      :ets.delete(world.away, id)
      Directory.release(name, id, zone)
      send(owner, {:grove_lost, id})
    end

    {:noreply, name}
  end

  def handle_info({:feed, zone, seq, encoded}, name) do
    :ok = Feed.publish(World.fetch!(name).feed, zone, seq, encoded)
    {:noreply, name}
  end

  def handle_info({:feed_from, zone, seq}, name) do
    :ok = Feed.reset(World.fetch!(name).feed, zone, seq)
    {:noreply, name}
  end

  def handle_info({:view, viewer, message}, name) do
    send(viewer, message)
    {:noreply, name}
  end

  def handle_info({:release, id, zone}, name) do
    if Directory.ready?(name, id), do: Directory.release(name, id, zone)
    # Only the row of the zone that let go: a later zone's stays.
    :ets.select_delete(World.fetch!(name).away, [{{id, zone, :_, :_}, [], [true]}])
    {:noreply, name}
  end
end
