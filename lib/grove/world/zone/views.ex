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

  alias Grove.World
  alias Grove.World.{Entity, Feed, Grid, Relay, Stats, ViewFormat, Zone}
  alias Grove.World.Zone.State

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
    key = {pid, format}

    zone =
      case zone.subscribers do
        %{^key => {ref, ids}} ->
          put_in(zone.subscribers[key], {ref, MapSet.put(ids, entity_id)})

        _ ->
          ref = Process.monitor(pid)

          %{
            zone
            | subscribers: Map.put(zone.subscribers, key, {ref, MapSet.new([entity_id])}),
              monitors: Map.put(zone.monitors, ref, {:subscriber, key}),
              formats: Map.update(zone.formats, format, 1, &(&1 + 1))
          }
          |> watch_node(node(pid))
      end

    send_snapshot(zone, pid, format)
    watch(zone)
  end

  @doc false
  @spec unsubscribe(Zone.t(), pid(), Entity.id(), Feed.format()) :: Zone.t()
  def unsubscribe(zone, pid, entity_id, format) do
    :ets.delete_object(zone.world.subscriptions, {zone.index, pid, entity_id, format})
    key = {pid, format}

    case zone.subscribers do
      %{^key => {ref, ids}} ->
        ids = MapSet.delete(ids, entity_id)

        if MapSet.size(ids) == 0 do
          Process.demonitor(ref, [:flush])
          send_view(zone, pid, {:grove_view, zone.index, :closed})

          %{
            zone
            | subscribers: Map.delete(zone.subscribers, key),
              monitors: Map.delete(zone.monitors, ref)
          }
          |> drop_format(format)
          |> unwatch_node(node(pid))
          |> watch()
        else
          put_in(zone.subscribers[key], {ref, ids})
        end

      _ ->
        zone
    end
  end

  # A viewer that died: its subscriptions here in that format go, all at once.
  @doc false
  @spec subscriber_down(Zone.t(), pid(), Feed.format()) :: Zone.t()
  def subscriber_down(zone, pid, format) do
    :ets.match_delete(zone.world.subscriptions, {zone.index, pid, :_, format})

    %{zone | subscribers: Map.delete(zone.subscribers, {pid, format})}
    |> drop_format(format)
    |> unwatch_node(node(pid))
    |> watch()
  end

  defp drop_format(zone, format), do: %{zone | formats: count_down(zone.formats, format)}

  # One fewer under `key`; none left, no key.
  defp count_down(counts, key) do
    case counts do
      %{^key => 1} -> Map.delete(counts, key)
      %{^key => n} -> Map.put(counts, key, n - 1)
      _ -> counts
    end
  end

  # Viewers on other nodes, counted per node. A node that starts watching
  # is told the number the zone is at before any delta, so that its feed
  # matches the snapshots its viewers get.
  defp watch_node(zone, node) when node == node(), do: zone

  defp watch_node(zone, node) do
    case zone.watchers do
      %{^node => n} ->
        %{zone | watchers: Map.put(zone.watchers, node, n + 1)}

      _ ->
        :erlang.send(
          Relay.address(zone.world.name, node),
          {:feed_from, zone.index, zone.seq},
          [:noconnect]
        )

        %{zone | watchers: Map.put(zone.watchers, node, 1)}
    end
  end

  defp unwatch_node(zone, node), do: %{zone | watchers: count_down(zone.watchers, node)}

  defp watch(zone) do
    watched = map_size(zone.subscribers) > 0

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

    data =
      encode(
        format,
        :snapshot,
        zone.index,
        State.snapshot(zone.core),
        [],
        State.labels(zone.core)
      )

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

  @doc false
  @spec encode(
          Feed.format(),
          :snapshot | :delta,
          Grid.zone_index(),
          [ViewFormat.entry()],
          [Entity.id()],
          [ViewFormat.name()]
        ) :: term()
  def encode({module, name}, what, index, entries, departed, []),
    do: module.encode_view(name, what, index, entries, departed)

  def encode({module, name}, what, index, entries, departed, names) do
    if function_exported?(module, :encode_view, 6),
      do: module.encode_view(name, what, index, entries, departed, %{names: names}),
      else: module.encode_view(name, what, index, entries, departed)
  end
end
