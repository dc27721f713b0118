defmodule Grove.World.Zone.ViewsTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.World.{Entity, Grid, Rules, Terrain}
  alias Grove.World.Zone.{State, Views}

  # A format that says which it is: a viewer's snapshot tells its format.
  defmodule Tagged do
    @moduledoc false
    @behaviour Grove.World.ViewFormat

    @impl true
    def encode_view(name, what, zone, entries, departed),
      do: {name, what, zone, Enum.sort(entries), Enum.sort(departed)}
  end

  @a {Tagged, :a}
  @b {Tagged, :b}

  # A 30 x 30 meadow cut into nine 10 x 10 zones; the zone is the middle one.
  @grid Grid.new(30, 30, 10)
  @index 4

  defp core do
    terrain = %Terrain{width: 30, height: 30, cells: :binary.copy(<<0>>, 900)}
    core = State.new(@index, @grid, terrain, Rules.new(move_rate: nil))
    {:ok, _entity, core} = State.place(core, %Entity{id: 1, owner: self()}, [{15, 15}])
    core
  end

  # A pid of another node, as that node would hand it over.
  defp remote(node, serial \\ 0) do
    name = Atom.to_string(:"other#{node}@host")

    :erlang.binary_to_term(
      <<131, 88, 119, byte_size(name), name::binary, serial::32, 0::32, 0::32>>
    )
  end

  defp views(seq \\ 0), do: Views.new(@index, @grid, node(), seq)

  defp viewer_entity(id, cell, radius \\ 3) do
    {x, y} = cell

    %Entity{
      id: id,
      owner: self(),
      x: x,
      y: y,
      view_radius: radius,
      updates: :view,
      view_format: @a
    }
  end

  # Monitors as the zone would put them.
  defp carry_out({effects, views}) do
    Enum.reduce(effects, views, fn
      {:monitor, viewer}, views -> Views.monitored(views, viewer, {:ref, viewer})
      _effect, views -> views
    end)
  end

  describe "a viewer" do
    test "that subscribes is remembered, monitored and sent a snapshot at the zone's number, and the zone is watched" do
      me = self()
      {effects, views} = Views.subscribe(views(7), core(), me, 1, @a)

      assert [
               {:remember, ^me, 1, @a},
               {:monitor, {^me, @a}},
               {:count, :snapshots_sent},
               {:tell, ^me, {:grove_view, @index, :snapshot, 7, snapshot}},
               {:watch, true}
             ] = effects

      assert {:a, :snapshot, @index, [{1, 15, 15, 0}], []} = snapshot
      assert Views.watched?(views)
      assert Views.member?(views, {me, @a})
    end

    test "that subscribes again, through another entity, gets a fresh snapshot and nothing else" do
      me = self()
      views = carry_out(Views.subscribe(views(), core(), me, 1, @a))
      {effects, views} = Views.subscribe(views, core(), me, 2, @a)

      assert [
               {:remember, ^me, 2, @a},
               {:count, :snapshots_sent},
               {:tell, ^me, {:grove_view, @index, :snapshot, 0, _}}
             ] = effects

      # Watching through one entity still, it is neither told nor let go.
      assert {[{:forget, ^me, 1, @a}], views} = Views.unsubscribe(views, me, 1, @a)

      assert {[
                {:forget, ^me, 2, @a},
                {:demonitor, {:ref, {^me, @a}}},
                {:tell, ^me, {:grove_view, @index, :closed}},
                {:watch, false}
              ], views} = Views.unsubscribe(views, me, 2, @a)

      refute Views.watched?(views)
      assert {[{:forget, ^me, 2, @a}], _} = Views.unsubscribe(views, me, 2, @a)
    end

    test "that died is forgotten in every entity at once; one that does not watch gets no snapshot" do
      me = self()
      views = carry_out(Views.subscribe(views(), core(), me, 1, @a))
      views = carry_out(Views.subscribe(views, core(), me, 2, @a))
      assert {[], ^views} = Views.snapshot(views, core(), me, @b)

      assert {[{:count, :snapshots_sent}, {:tell, ^me, {:grove_view, @index, :snapshot, 0, _}}],
              _} = Views.snapshot(views, core(), me, @a)

      assert {[{:forget_viewer, ^me, @a}, {:watch, false}], views} = Views.down(views, me, @a)
      refute Views.member?(views, {me, @a})
    end

    test "on another node: its node's relay learns the number first, and gets each delta" do
      far = remote(2)
      subscribed = Views.subscribe(views(3), core(), far, 1, @b)

      assert {[
                {:remember, ^far, 1, @b},
                {:monitor, {^far, @b}},
                {:feed_from, :other2@host, 3} | _
              ], _} = subscribed

      views = carry_out(subscribed)

      # A second viewer there: that node knows already.
      second = remote(2, 1)
      {effects, views} = Views.subscribe(views, core(), second, 2, @b)
      refute Enum.any?(effects, &match?({:feed_from, _, _}, &1))

      {effects, views} = Views.publish(views, core(), [{9, 1, 1, 0}], [], nil)
      encoded = [{@b, {:b, :delta, @index, [{9, 1, 1, 0}], []}}]

      assert [
               {:publish, 4, ^encoded},
               {:count, :deltas_published},
               {:relay, :other2@host, 4, ^encoded}
             ] = effects

      assert views.seq == 4
    end
  end

  describe "a delta" do
    test "is encoded once per format read, whatever the number of viewers, under the next number" do
      views =
        Enum.reduce([{self(), 1, @a}, {self(), 2, @b}, {remote(1), 3, @a}], views(), fn {pid, id,
                                                                                         format},
                                                                                        views ->
          carry_out(Views.subscribe(views, core(), pid, id, format))
        end)

      {[{:publish, 1, encoded} | _], views} = Views.publish(views, core(), [], [5], nil)

      assert Enum.sort(encoded) == [
               {@a, {:a, :delta, @index, [], [5]}},
               {@b, {:b, :delta, @index, [], [5]}}
             ]

      assert {[{:publish, 2, _} | _], _} = Views.publish(views, core(), [], [6], nil)
    end

    test "is not published when nothing changed" do
      views = carry_out(Views.subscribe(views(), core(), self(), 1, @a))
      assert {[], ^views} = Views.publish(views, core(), [], [], nil)
    end
  end

  describe "a viewing entity" do
    test "that steps within the zones it sees changes nothing" do
      views = views()
      assert {[], ^views} = Views.follow(views, core(), viewer_entity(1, {15, 15}), {14, 15})
    end

    test "that joins subscribes to every zone it sees: to this one at once, to others by message" do
      me = self()
      # At the middle zone's north-west corner, seeing into four zones.
      {effects, views} = Views.follow(views(), core(), viewer_entity(1, {11, 11}), nil)
      sends = for {:send, to, message} <- effects, do: {to, message}
      assert sends == for(to <- [0, 1, 3], do: {to, {:subscribe, me, 1, @a}})
      assert {:remember, me, 1, @a} in effects
      assert Views.member?(views, {me, @a})
    end

    test "that walks out of sight of zones lets them go and takes in the new ones" do
      me = self()
      views = carry_out(Views.follow(views(), core(), viewer_entity(1, {11, 15}), nil))
      # From seeing zones 3 and 4 to seeing 4 and 5.
      {effects, _} = Views.follow(views, core(), viewer_entity(1, {19, 15}), {11, 15})

      assert effects == [
               {:send, 3, {:unsubscribe, me, 1, @a}},
               {:send, 5, {:subscribe, me, 1, @a}}
             ]

      # Out of this zone's sight altogether: it closes here.
      {effects, views} = Views.follow(views, core(), viewer_entity(1, {5, 15}), {11, 15})
      assert {:tell, me, {:grove_view, @index, :closed}} in effects
      refute Views.watched?(views)
    end

    test "that goes lets go of every zone it saw" do
      me = self()
      entity = viewer_entity(1, {11, 15})
      views = carry_out(Views.follow(views(), core(), entity, nil))
      {effects, views} = Views.drop(views, entity)
      assert {:send, 3, {:unsubscribe, me, 1, @a}} in effects
      assert {:forget, me, 1, @a} in effects
      refute Views.watched?(views)
    end
  end

  test "a zone that watches again monitors every viewer anew" do
    views = carry_out(Views.subscribe(views(), core(), self(), 1, @a))
    views = carry_out(Views.subscribe(views, core(), remote(1), 2, @b))
    {effects, _} = Views.monitor_all(views)

    assert Enum.sort(effects) ==
             Enum.sort([{:monitor, {self(), @a}}, {:monitor, {remote(1), @b}}])
  end

  ## The property

  # Viewers: two on this node and three on two others, each reading one
  # format (as a session does); a viewer watches through up to three entities.
  defp pids, do: [self(), :c.pid(0, 1, 0), remote(1), remote(1, 1), remote(2)]
  defp format_of(p), do: if(rem(p, 2) == 0, do: @a, else: @b)

  defp command do
    p = :proper_types.integer(0, 4)
    id = :proper_types.integer(1, 3)

    :proper_types.frequency([
      {4, {:subscribe, p, id}},
      {3, {:unsubscribe, p, id}},
      {1, {:down, p}},
      {1, {:snapshot, p}},
      {4, {:publish, :proper_types.integer(0, 9)}}
    ])
  end

  test "whatever viewers do, each watching one gets every delta once, in order, after its snapshot, and the others none" do
    check(
      forall(:proper_types.list(command()), fn commands ->
        core = core()
        pids = pids()

        sim = %{
          views: views(),
          watching: MapSet.new(),
          streams: %{},
          nodes: %{},
          table: MapSet.new(),
          monitors: %{},
          watched: false
        }

        sim =
          Enum.reduce(commands, sim, fn command, sim ->
            sim = run(sim, core, pids, command)
            check_invariants!(sim)
            sim
          end)

        # A zone that restarts rebuilds its viewers from the table alone.
        rebuilt =
          Enum.reduce(sim.table, views(sim.views.seq), fn {pid, id, format}, views ->
            carry_out(Views.subscribe(views, core, pid, id, format))
          end)

        for {pid, p} <- Enum.with_index(pids) do
          viewer = {pid, format_of(p)}
          assert Views.member?(rebuilt, viewer) == Views.member?(sim.views, viewer)
        end

        true
      end),
      numtests: 300
    )
  end

  defp run(sim, core, pids, {action, p, id}) when action in [:subscribe, :unsubscribe] do
    {pid, format} = viewer = {Enum.at(pids, p), format_of(p)}
    was_watching = watches?(sim, viewer)

    {effects, views} =
      case action do
        :subscribe -> Views.subscribe(sim.views, core, pid, id, format)
        :unsubscribe -> Views.unsubscribe(sim.views, pid, id, format)
      end

    watching =
      case action do
        :subscribe -> MapSet.put(sim.watching, {viewer, id})
        :unsubscribe -> MapSet.delete(sim.watching, {viewer, id})
      end

    sim = apply_effects(%{sim | views: views, watching: watching}, effects)
    snapshots = for {:tell, ^pid, {:grove_view, _, :snapshot, _, _}} <- effects, do: :snapshot
    closed = for {:tell, ^pid, {:grove_view, _, :closed}} <- effects, do: :closed

    case action do
      # Subscribing, again or not, always brings a snapshot.
      :subscribe ->
        assert snapshots == [:snapshot]

      # The last entity it watched through: told once, never before.
      :unsubscribe ->
        assert snapshots == []
        assert closed == if(was_watching and not watches?(sim, viewer), do: [:closed], else: [])
    end

    sim
  end

  defp run(sim, _core, pids, {:down, p}) do
    {pid, format} = viewer = {Enum.at(pids, p), format_of(p)}
    {effects, views} = Views.down(sim.views, pid, format)
    refute Enum.any?(effects, &match?({:tell, _, _}, &1))
    # Its monitor fired: the zone has forgotten it.
    sim = %{
      sim
      | monitors: Map.delete(sim.monitors, viewer),
        streams: Map.delete(sim.streams, viewer)
    }

    watching = MapSet.reject(sim.watching, &match?({^viewer, _}, &1))
    apply_effects(%{sim | views: views, watching: watching}, effects)
  end

  defp run(sim, core, pids, {:snapshot, p}) do
    {pid, format} = viewer = {Enum.at(pids, p), format_of(p)}
    {effects, views} = Views.snapshot(sim.views, core, pid, format)
    told = for {:tell, _, _} = effect <- effects, do: effect
    assert length(told) == if(watches?(sim, viewer), do: 1, else: 0)
    apply_effects(%{sim | views: views}, effects)
  end

  defp run(sim, core, _pids, {:publish, n}) do
    before = sim.views.seq
    {effects, views} = Views.publish(sim.views, core, [{n, n, n, 0}], [], nil)
    assert views.seq == before + 1
    sim = apply_effects(%{sim | views: views}, effects)

    # Every viewer that watches has read it, by now, from its node's feed.
    for {viewer, _id} <- sim.watching,
        do: assert(Map.fetch!(sim.streams, viewer) == views.seq + 1)

    sim
  end

  # The zone's effects, as its process and the viewers would see them.
  defp apply_effects(sim, effects), do: Enum.reduce(effects, sim, &apply_effect(&2, &1))

  defp apply_effect(sim, {:remember, pid, id, format}),
    do: %{sim | table: MapSet.put(sim.table, {pid, id, format})}

  defp apply_effect(sim, {:forget, pid, id, format}),
    do: %{sim | table: MapSet.delete(sim.table, {pid, id, format})}

  defp apply_effect(sim, {:forget_viewer, pid, format}),
    do: %{sim | table: MapSet.reject(sim.table, &match?({^pid, _, ^format}, &1))}

  defp apply_effect(sim, {:monitor, viewer}) do
    refute Map.has_key?(sim.monitors, viewer), "monitored twice"
    ref = make_ref()

    %{
      sim
      | views: Views.monitored(sim.views, viewer, ref),
        monitors: Map.put(sim.monitors, viewer, ref)
    }
  end

  defp apply_effect(sim, {:demonitor, ref}) do
    assert [viewer] = for({viewer, ^ref} <- sim.monitors, do: viewer)
    %{sim | monitors: Map.delete(sim.monitors, viewer)}
  end

  # A snapshot at the number of the last delta: the viewer reads on from the next.
  defp apply_effect(sim, {:tell, pid, {:grove_view, @index, :snapshot, seq, data}}) do
    {name, :snapshot, @index, _entries, []} = data
    viewer = {pid, {Tagged, name}}
    assert watches?(sim, viewer)
    assert seq == sim.views.seq
    %{sim | streams: Map.put(sim.streams, viewer, seq + 1)}
  end

  defp apply_effect(sim, {:tell, pid, {:grove_view, @index, :closed}}) do
    [viewer] = for {{^pid, _} = viewer, _next} <- sim.streams, do: viewer
    refute watches?(sim, viewer)
    %{sim | streams: Map.delete(sim.streams, viewer)}
  end

  # A node's relay: from the number it is told, on.
  defp apply_effect(sim, {:feed_from, node, seq}) do
    there =
      for {{pid, _} = viewer, _id} <- sim.watching, node(pid) == node, uniq: true, do: viewer

    assert length(there) == 1, "told again while it had viewers"
    %{sim | nodes: Map.put(sim.nodes, node, seq + 1)}
  end

  # This node's feed: every viewer here that has its snapshot reads it.
  defp apply_effect(sim, {:publish, seq, encoded}) do
    assert encoded |> Enum.map(fn {{Tagged, name}, _data} -> name end) |> Enum.sort() ==
             formats_read(sim)

    read(sim, node(), seq)
  end

  defp apply_effect(sim, {:relay, node, seq, _encoded}) do
    assert Map.fetch!(sim.nodes, node) == seq, "the relay's feed has a gap"
    assert Enum.any?(sim.watching, fn {{pid, _}, _} -> node(pid) == node end)
    read(%{sim | nodes: Map.put(sim.nodes, node, seq + 1)}, node, seq)
  end

  defp apply_effect(sim, {:watch, watched}) do
    refute watched == sim.watched
    %{sim | watched: watched}
  end

  defp apply_effect(sim, {:count, _stat}), do: sim

  defp read(sim, node, seq) do
    streams =
      Map.new(sim.streams, fn
        {{pid, _} = viewer, next} when node(pid) == node ->
          assert next == seq, "a delta read twice, or missed"
          {viewer, seq + 1}

        other ->
          other
      end)

    %{sim | streams: streams}
  end

  defp watches?(sim, viewer), do: Enum.any?(sim.watching, &match?({^viewer, _}, &1))

  defp formats_read(sim),
    do: sim.watching |> Enum.map(fn {{_, {_, name}}, _} -> name end) |> Enum.uniq() |> Enum.sort()

  defp check_invariants!(sim) do
    viewers = sim.watching |> Enum.map(&elem(&1, 0)) |> Enum.uniq()
    assert sim.watched == (viewers != [])
    assert Views.watched?(sim.views) == sim.watched
    # The table a restarted zone rebuilds from says what the zone knows.
    assert sim.table == MapSet.new(sim.watching, fn {{pid, format}, id} -> {pid, id, format} end)
    # Every viewer is monitored, and only they; every one has its snapshot.
    assert Enum.sort(Map.keys(sim.monitors)) == Enum.sort(viewers)
    for viewer <- viewers, do: assert(Map.has_key?(sim.streams, viewer))
  end
end
