defmodule Grove.World.Zone.Views do
  @moduledoc false
  # The zone's side of views (the viewer's side is Grove.World.View): who
  # watches the zone, in which format and from which node, and what goes to
  # one viewer alone (its snapshot, the end of its subscription). The
  # functions take and return the zone process's state; `Grove.World.Zone`
  # calls them from its callbacks and as its viewers' entities move. Its
  # tick publishes the deltas, encoded by `encode/5` like the snapshots.
  #
  # Viewers subscribe (the zone of a viewer's entity does it for them
  # as it moves) and get a snapshot in their format at once. While anyone
  # watches, each tick that changed something encodes the delta once per
  # format and publishes it in the world's feed (Grove.World.Feed), where
  # viewers read it when they are ready: the zone sends nothing per viewer
  # and per tick.
  #
  # Viewers on other nodes read their own node's feed: the zone counts them
  # per node (`watchers`) and sends each delta, as encoded for the feed,
  # once to each such node's relay (Grove.World.Relay), which publishes it
  # there under the same number. A node that starts watching is first told
  # the number the zone is at, and snapshots for viewers there go through
  # its relay, behind the deltas before them.
  #
  # Who watches is `Zone.Subscriptions`, plain data; here are the monitors,
  # the world's table of subscriptions and the messages.

  alias Grove.World
  alias Grove.World.{Entity, Feed, Grid, Relay, Stats, ViewFormat, Zone}
  alias Grove.World.Zone.{State, Subscriptions}

  # Keeps a viewer subscribed to exactly the zones its viewport overlaps.
  # `before` is the cell it came from (nil on join); only the differences are sent.
  @doc false
  @spec update_view(Zone.t(), Entity.t(), Grid.cell() | nil) :: Zone.t()
  def update_view(zone, %Entity{} = now, before) do
    grid = zone.world.grid

    # Most steps leave the viewport over the same zones: tell that cheaply.
    if before != nil and
         Grid.view_span(grid, {now.x, now.y}, now.view_radius) ==
           Grid.view_span(grid, before, now.view_radius) do
      zone
    else
      wanted = Grid.view_zones(grid, {now.x, now.y}, now.view_radius)
      had = if before, do: Grid.view_zones(grid, before, now.view_radius), else: []
      zone = Enum.reduce(had -- wanted, zone, &send_subscription(&2, &1, :unsubscribe, now))
      Enum.reduce(wanted -- had, zone, &send_subscription(&2, &1, :subscribe, now))
    end
  end

  @doc false
  @spec drop_view(Zone.t(), Entity.t()) :: Zone.t()
  def drop_view(zone, %Entity{} = entity) do
    zones = Grid.view_zones(zone.world.grid, {entity.x, entity.y}, entity.view_radius)
    Enum.reduce(zones, zone, &send_subscription(&2, &1, :unsubscribe, entity))
  end

  @doc false
  @spec send_subscription(Zone.t(), Grid.zone_index(), :subscribe | :unsubscribe, Entity.t()) ::
          Zone.t()
  def send_subscription(%Zone{index: index} = zone, index, :subscribe, entity),
    do: subscribe(zone, entity.owner, entity.id, entity.view_format)

  def send_subscription(%Zone{index: index} = zone, index, :unsubscribe, entity),
    do: unsubscribe(zone, entity.owner, entity.id, entity.view_format)

  def send_subscription(zone, to, action, entity) do
    GenServer.cast(
      World.zone_address(zone.world, to),
      {action, entity.owner, entity.id, entity.view_format}
    )

    zone
  end

  # Subscriptions are idempotent: subscribing again only sends a fresh snapshot.
  @doc false
  @spec subscribe(Zone.t(), pid(), Entity.id(), Feed.format()) :: Zone.t()
  def subscribe(zone, pid, entity_id, format) do
    :ets.insert(zone.world.subscriptions, {zone.index, pid, entity_id, format})
    viewer = {pid, format}
    ref = if not Subscriptions.member?(zone.subscriptions, viewer), do: Process.monitor(pid)
    {subscriptions, result} = Subscriptions.subscribe(zone.subscriptions, viewer, entity_id, ref)
    zone = %{zone | subscriptions: subscriptions}

    zone =
      case result do
        :added ->
          zone

        new ->
          # A node that starts watching is told the number the zone is at
          # before any delta, so that its feed matches the snapshots its
          # viewers get.
          with {:new, node} <- new,
               do:
                 :erlang.send(
                   Relay.address(zone.world.name, node),
                   {:feed_from, zone.index, zone.seq},
                   [:noconnect]
                 )

          %{zone | monitors: Map.put(zone.monitors, ref, {:subscriber, viewer})}
      end

    send_snapshot(zone, pid, format)
    watch(zone)
  end

  @doc false
  @spec unsubscribe(Zone.t(), pid(), Entity.id(), Feed.format()) :: Zone.t()
  def unsubscribe(zone, pid, entity_id, format) do
    :ets.delete_object(zone.world.subscriptions, {zone.index, pid, entity_id, format})

    case Subscriptions.unsubscribe(zone.subscriptions, {pid, format}, entity_id) do
      {subscriptions, {:last, ref}} ->
        Process.demonitor(ref, [:flush])
        send_view(zone, pid, {:grove_view, zone.index, :closed})

        watch(%{zone | subscriptions: subscriptions, monitors: Map.delete(zone.monitors, ref)})

      {subscriptions, _kept_or_none} ->
        %{zone | subscriptions: subscriptions}
    end
  end

  # A viewer that died: its subscriptions here in that format go, all at once.
  @doc false
  @spec subscriber_down(Zone.t(), pid(), Feed.format()) :: Zone.t()
  def subscriber_down(zone, pid, format) do
    :ets.match_delete(zone.world.subscriptions, {zone.index, pid, :_, format})
    watch(%{zone | subscriptions: Subscriptions.down(zone.subscriptions, {pid, format})})
  end

  defp watch(zone) do
    watched = Subscriptions.watched?(zone.subscriptions)

    if watched == zone.core.watched,
      do: zone,
      else: Zone.ensure_tick(%{zone | core: State.watch(zone.core, watched)})
  end

  # The zone as it is now, for a viewer that starts (or starts again) from
  # `seq`: the deltas after it complete the picture, so the snapshot carries
  # the number of the last delta published. A viewer on another node gets
  # it through that node's relay, once the feed there holds that number.
  @doc false
  @spec send_snapshot(Zone.t(), pid(), Feed.format()) :: term()
  def send_snapshot(zone, pid, format) do
    Stats.incr(zone.world.stats, :snapshots_sent)
    core = zone.core
    extra = State.snapshot_extra(core)
    data = encode(format, :snapshot, zone.index, State.snapshot(core), [], extra)
    send_view(zone, pid, {:grove_view, zone.index, :snapshot, zone.seq, data})
  end

  # What a zone tells one viewer (a snapshot, the end of its subscription)
  # goes to a viewer on another node through that node's relay, like the
  # deltas: so the viewer gets it in the order the zone sent it, and never
  # a zone's word that it is no longer watched before the snapshot that
  # preceded it.
  defp send_view(_zone, pid, message) when node(pid) == node(), do: send(pid, message)

  defp send_view(zone, pid, message) do
    :erlang.send(
      Relay.address(zone.world.name, node(pid)),
      {:view, pid, message},
      [:noconnect]
    )
  end

  # What a world without names, a game or events publishes goes through
  # `encode_view/5` alone; the rest (`extra`: players' names, the game's
  # cells and looks, the events) to formats that take it, `encode_view/6`.
  @doc false
  @spec encode(
          Feed.format(),
          :snapshot | :delta,
          Grid.zone_index(),
          [ViewFormat.entry()],
          [Entity.id()],
          ViewFormat.extra() | nil
        ) :: term()
  def encode({module, name}, what, index, entries, departed, nil),
    do: module.encode_view(name, what, index, entries, departed)

  def encode({module, name}, what, index, entries, departed, extra) do
    if function_exported?(module, :encode_view, 6),
      do: module.encode_view(name, what, index, entries, departed, extra),
      else: module.encode_view(name, what, index, entries, departed)
  end
end
