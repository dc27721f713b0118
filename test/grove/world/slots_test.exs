defmodule Grove.World.SlotsTest do
  @moduledoc """
  A world of zones on demand holds tables and counters for the zones it
  knows only: made as a zone wakes, dropped as it falls asleep with
  nothing in it, so that a world's size costs nothing until it is used.
  """
  use Grove.WorldCase, async: true

  import Grove.PropCase

  alias Grove.World
  alias Grove.World.{Counts, Grid, Slots}

  @on_demand [width: 40, height: 40, zone_size: 10, zones: :on_demand, zone_idle: :manual]
  @meadow [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]

  defp zone_index(world, {x, y}), do: Grid.zone_of(World.grid(world), x, y)

  describe "a world of zones on demand" do
    @describetag world: @on_demand

    test "holds no table nor counter for a zone before it wakes", %{world: world} do
      w = World.fetch!(world)
      assert w.tables == nil and w.zones == nil and w.load == nil
      assert Slots.count(w) == 0
      assert Slots.table(w, 3) == nil
      assert World.position(world, 12_345) == nil
      assert World.nearby(w, {35, 35}, 3) == []
    end

    test "a zone's table exists only while it is awake, when it holds nothing", %{world: world} do
      w = World.fetch!(world)
      pid = World.zone_address(w, 5)
      assert is_pid(pid)
      table = Slots.table(w, 5)
      assert :ets.info(table, :size) == 0
      assert Enum.to_list(Slots.known(w)) == [5]

      assert World.sleep_idle(world) == [5]
      assert Slots.known(w) == []
      assert Slots.table(w, 5) == nil
      assert :ets.info(table) == :undefined

      # It wakes with a new one, and counts from nothing.
      World.zone_address(w, 5)
      assert is_reference(Slots.table(w, 5))
      assert Slots.moves(w, 5) == 0
    end

    test "a zone asleep with an actor keeps its table, and the counts stay right across sleep and wake",
         %{world: world} do
      {:ok, a, _} = World.join(world, at: {1, 1}, updates: :none)
      {:ok, b, _} = World.join(world, at: {2, 2}, updates: :none)
      {:ok, c, _} = World.join(world, at: {35, 35}, updates: :none)
      here = zone_index(world, {1, 1})
      there = zone_index(world, {35, 35})
      w = World.fetch!(world)

      # Counted at each zone's tick (or as it falls asleep).
      assert Enum.sort(World.sleep_idle(world)) == Enum.sort([here, there])
      assert Enum.sort(Slots.known(w)) == Enum.sort([here, there])
      assert Slots.size(w, here) == 2
      assert Counts.zone_counts(world) == []
      assert Slots.entities(w, here) == 2 and Slots.entities(w, there) == 1
      assert World.entity_count(world) == 3
      assert World.stats(world).zones_awake == 0

      :ok = World.move(world, c, :w, :back)
      assert {:ok, {34, 35}} = assert_outcome(c, :back)
      assert World.awake_zones(world) == [there]
      assert Counts.zone_counts(world) == [{there, 1}]
      assert World.stats(world).zones_awake == 1
      assert World.position(world, a) == {1, 1} and World.position(world, b) == {2, 2}

      # Gone, the last one: its zone leaves nothing behind when it sleeps.
      :ok = World.leave(world, c)
      World.sleep_idle(world)
      assert Enum.to_list(Slots.known(w)) == [here]
      assert World.entity_count(world) == 2
      assert World.audit(world) == :ok
    end

    test "a zone that crashes leaves its table to the world, and its next run has it",
         %{world: world} do
      {:ok, id, _} = World.join(world, at: {15, 15}, updates: :none)
      index = zone_index(world, {15, 15})
      w = World.fetch!(world)
      table = Slots.table(w, index)
      pid = World.zone_pid(w, index)
      ref = Process.monitor(pid)
      Process.exit(pid, :kill)
      assert_receive {:DOWN, ^ref, :process, ^pid, :killed}

      assert Slots.table(w, index) == table
      assert [_] = :ets.lookup(table, id)
      :ok = World.move(world, id, :e, :after)
      assert {:ok, {16, 15}} = assert_outcome(id, :after, 5000)
      assert World.zone_pid(w, index) not in [nil, pid]
      assert World.audit(world) == :ok
    end

    test "a zone that died is not named, even before its registry has heard of it, and a move wakes it",
         %{world: world} do
      {:ok, id, _} = World.join(world, at: {15, 15}, updates: :none)
      index = zone_index(world, {15, 15})
      w = World.fetch!(world)
      pid = World.zone_pid(w, index)

      # The registry's partitions hold back the news of the death, as a
      # busy registry does for a while.
      registry = Grove.World.Supervisor.registry(w.name)

      partitions =
        for i <- 0..(System.schedulers_online() - 1),
            do: Process.whereis(Module.concat(registry, "PIDPartition#{i}"))

      Enum.each(partitions, &:sys.suspend/1)

      try do
        ref = Process.monitor(pid)
        Process.exit(pid, :kill)
        assert_receive {:DOWN, ^ref, :process, ^pid, :killed}
        assert World.zone_pid(w, index) != pid
        :ok = World.move(world, id, :e, :after)
        assert {:ok, {16, 15}} = assert_outcome(id, :after, 5000)
      after
        Enum.each(partitions, &:sys.resume/1)
      end

      assert World.audit(world) == :ok
    end

    test "moves in a batch are counted in the zone's slot", %{world: world} do
      {:ok, a, _} = World.join(world, at: {1, 1}, updates: :none)
      {:ok, b, _} = World.join(world, at: {5, 5}, updates: :none)
      :ok = World.move_many(world, [{a, :e, :a}, {b, :s, :b}])
      assert_receive {:grove_moves, outcomes}, 5000
      assert Enum.sort(outcomes) == [{a, :a, {:ok, {2, 1}}}, {b, :b, {:ok, {5, 6}}}]
      assert Slots.moves(World.fetch!(world), zone_index(world, {1, 1})) == 2
    end

    test "its zone loads and minimap read the zones it knows", %{world: world} do
      {:ok, _id, _} = World.join(world, at: {25, 5}, updates: :none)
      index = zone_index(world, {25, 5})
      loads = World.zone_loads(world)
      # A world this small is pictured whole, every zone in order.
      assert length(loads) == 16
      assert Enum.find(loads, &(&1.zone == index)).entities == 1
      assert World.density(world).cols > 0
    end
  end

  test "a world of zones that all run has more than 100,000 zones refused, and told how" do
    assert_raise ArgumentError, ~r/zones: :on_demand/, fn ->
      World.new!(name: :w, width: 20_000, height: 20_000, zone_size: 50)
    end
  end

  test "a world of a cluster has at most 100,000 zones, on demand or not, and a larger one is refused, told how" do
    # 500 x 200 zones of 50 cells: the most a cluster places.
    assert %World{} =
             World.new!(
               name: :w,
               width: 25_000,
               height: 10_000,
               zone_size: 50,
               zones: :on_demand,
               cluster: :grove_test_cluster
             )

    for zones <- [:on_demand, :always], width <- [25_050, 1_000_000] do
      error =
        assert_raise ArgumentError, fn ->
          World.new!(
            name: :w,
            width: width,
            height: 10_000,
            zone_size: 50,
            zones: zones,
            cluster: :grove_test_cluster
          )
        end

      assert error.message =~ "more than 100000"
      if zones == :on_demand, do: assert(error.message =~ "the most a cluster places")
      if zones == :on_demand, do: assert(error.message =~ "GROVE_WIDTH, GROVE_HEIGHT")
    end

    # Alone on a node, the same world starts its zones on demand.
    assert %World{} =
             World.new!(
               name: :w,
               width: 1_000_000,
               height: 10_000,
               zone_size: 50,
               zones: :on_demand
             )
  end

  test "a world of a million cells a side starts with no zone, and is walked from corner to corner" do
    name = :"million_#{System.unique_integer([:positive])}"

    start_supervised!(
      {World,
       Grove.MillionWorld.options(name,
         tick: :manual,
         terrain: @meadow,
         rules: [move_rate: nil]
       )}
    )

    w = World.fetch!(name)
    assert Grid.zone_count(w.grid) == 400_000_000
    assert Slots.count(w) == 0
    assert World.awake_zones(name) == []
    assert World.ready?(name)

    for cell <- [{0, 0}, {999_999, 999_999}, {499_999, 50}] do
      {:ok, id, ^cell} = World.join(name, at: cell, updates: :none)
      direction = if elem(cell, 0) == 0, do: :e, else: :w
      :ok = World.move(name, id, direction, :step)
      assert {:ok, _} = assert_outcome(id, :step)
    end

    assert length(World.awake_zones(name)) == 3
    # More zones than can be pictured one by one: those it knows only.
    assert length(World.zone_loads(name)) == 3
    assert World.entity_count(name) == 3
    assert World.audit(name) == :ok
    %{cols: cols, rows: rows} = World.density(name, 64)
    assert cols <= 64 and rows <= 64
    assert length(World.sleep_idle(name)) == 3
    assert World.entity_count(name) == 3
  end

  # Any sequence of joins, moves, leaves and sleeps in a few zones: after
  # each, the zones it knows are those awake and those asleep with
  # entities, each zone's table holds its entities and its count says so,
  # and no entity is lost.
  # Forty worlds started and run: a few seconds on a quiet machine, past
  # ExUnit's minute when the machine is loaded many times over.
  @tag timeout: 300_000
  test "the zones it knows are those awake or holding entities, whatever happens" do
    ops =
      :proper_types.list(
        :proper_types.oneof([
          {:join, :proper_types.integer(0, 19), :proper_types.integer(0, 19)},
          {:move, :proper_types.integer(0, 7), :proper_types.elements(Grid.directions())},
          {:leave, :proper_types.integer(0, 7)},
          :sleep
        ])
      )

    property =
      forall(:proper_types.resize(40, ops), fn ops ->
        with_world(
          Keyword.merge(@on_demand, width: 20, height: 20, zone_size: 5),
          &run_ops(&1, ops)
        )
      end)

    check(property, numtests: 40)
  end

  defp run_ops(name, ops) do
    ids =
      Enum.reduce(ops, [], fn
        {:join, x, y}, ids ->
          case World.join(name, at: {x, y}, updates: :none) do
            {:ok, id, _} -> ids ++ [id]
            {:error, _} -> ids
          end

        {:move, n, direction}, ids when ids != [] ->
          id = Enum.at(ids, rem(n, length(ids)))
          :ok = World.move(name, id, direction, :op)
          assert_receive {:grove_move, ^id, :op, _outcome}, 5000
          ids

        {:leave, n}, ids when ids != [] ->
          id = Enum.at(ids, rem(n, length(ids)))
          :ok = World.leave(name, id)
          List.delete(ids, id)

        :sleep, ids ->
          World.sleep_idle(name)
          ids

        _op, ids ->
          ids
      end)

    # Zones woken ahead of an entity are woken by the node's door, which
    # may not have got to the last of them when the moves are answered:
    # it has once it answers, and they are put to sleep with the rest.
    _ = :sys.get_state(Grove.World.Door.name(name))
    World.sleep_idle(name)
    w = World.fetch!(name)

    holding =
      ids
      |> Enum.map(&World.position(name, &1))
      |> Enum.map(fn {x, y} -> zone_index(name, {x, y}) end)

    assert Enum.sort(Slots.known(w)) == Enum.sort(Enum.uniq(holding))

    for {index, n} <- Enum.frequencies(holding) do
      assert Slots.size(w, index) == n
      assert Slots.entities(w, index) == n
    end

    assert World.entity_count(name) == length(ids)
    assert World.audit(name) == :ok
    true
  end
end
