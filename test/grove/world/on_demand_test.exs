defmodule Grove.World.OnDemandTest do
  @moduledoc "Zones on demand: a zone starts when first needed, sleeps when idle and wakes with what it held."
  use Grove.WorldCase, async: true

  import Grove.PropCase

  alias Grove.World
  alias Grove.World.Grid

  @on_demand [width: 40, height: 40, zone_size: 10, zones: :on_demand, zone_idle: :manual]

  defp zone_index(world, {x, y}), do: Grid.zone_of(World.grid(world), x, y)

  describe "a world of zones on demand" do
    @describetag world: @on_demand

    test "runs no zone until one is needed, then the one that is", %{world: world} do
      assert World.awake_zones(world) == []

      {:ok, id, cell} = World.join(world, at: {15, 15}, updates: :none)
      assert World.awake_zones(world) == [zone_index(world, {15, 15})]
      assert cell == {15, 15}
      assert World.position(world, id) == {15, 15}
      assert World.stats(world).zone_wakes == 1
    end

    test "a zone with only actors in it sleeps; they stay where they were, and a move wakes it",
         %{world: world} do
      {:ok, id, _} = World.join(world, at: {15, 15}, updates: :none)
      assert World.sleep_idle(world) == [zone_index(world, {15, 15})]
      assert World.awake_zones(world) == []
      assert World.stats(world).zone_sleeps == 1

      # Readers still find it where it stood, without waking anything.
      assert World.position(world, id) == {15, 15}
      assert [{^id, 15, 15, _kind}] = World.nearby(world, {15, 15}, 1)
      assert World.audit(world) == :ok

      :ok = World.move(world, id, :e, :step)
      assert assert_outcome(id, :step) == {:ok, {16, 15}}
      assert World.awake_zones(world) == [zone_index(world, {15, 15})]
      assert World.audit(world) == :ok
    end

    test "a move across into a sleeping zone wakes it and hands the entity over", %{world: world} do
      {:ok, id, _} = World.join(world, at: {19, 15}, updates: :none)
      # The zone east of it has never run.
      east = zone_index(world, {20, 15})
      refute east in World.awake_zones(world)

      :ok = World.move(world, id, :e, :across)
      assert assert_outcome(id, :across) == {:ok, {20, 15}}
      assert east in World.awake_zones(world)

      # Asleep, and back across.
      World.sleep_idle(world)
      :ok = World.move(world, id, :w, :back)
      assert assert_outcome(id, :back) == {:ok, {19, 15}}
      assert World.audit(world) == :ok
      assert World.entity_count(world) == 1
    end

    test "a player's entity keeps its zone awake, and so does a viewer", %{world: world} do
      {:ok, _player, _} = World.join(world, at: {5, 5}, kind: :player, updates: :none)
      {:ok, _viewer, _} = World.join(world, at: {35, 35}, updates: :view, view_radius: 2)
      {:ok, _actor, _} = World.join(world, at: {5, 35}, updates: :none)

      assert World.sleep_idle(world) == [zone_index(world, {5, 35})]

      assert Enum.sort(World.awake_zones(world)) ==
               Enum.sort([zone_index(world, {5, 5}), zone_index(world, {35, 35})])
    end

    test "a viewport that reaches a sleeping zone wakes it and gets its snapshot", %{world: world} do
      {:ok, actor, _} = World.join(world, at: {21, 15}, updates: :none)
      World.sleep_idle(world)
      assert World.awake_zones(world) == []

      {:ok, _viewer, _} = World.join(world, at: {18, 15}, updates: :view, view_radius: 3)
      east = zone_index(world, {21, 15})
      assert_receive {:grove_view, ^east, :snapshot, _seq, entries}, 2000
      assert <<^actor::32, 21::16, 15::16, _kind>> = entries
    end

    test "a leave reaches an entity whose zone sleeps", %{world: world} do
      {:ok, id, _} = World.join(world, at: {15, 15}, updates: :none)
      World.sleep_idle(world)
      assert :ok = World.leave(world, id)
      assert World.position(world, id) == nil
      assert World.entity_count(world) == 0
      assert World.audit(world) == :ok
    end
  end

  @tag world: Keyword.put(@on_demand, :zone_idle, 20)
  test "an idle zone sleeps by itself after its idle time", %{world: world} do
    {:ok, _id, _} = World.join(world, at: {15, 15}, updates: :none)
    assert World.awake_zones(world) != []
    eventually(fn -> assert World.awake_zones(world) == [] end)
  end

  test "the default world runs every zone from the start", %{world: world} do
    assert length(World.awake_zones(world)) == 16
    assert World.sleep_idle(world) == []
  end

  test "zones on demand are refused with bacteria or a cluster" do
    assert_raise ArgumentError, ~r/zones on demand/, fn ->
      World.new!(name: :w, zones: :on_demand, life: [])
    end

    assert_raise ArgumentError, ~r/:zone_idle/, fn ->
      World.new!(name: :w, zones: :on_demand, zone_idle: 0)
    end
  end

  # Entities walk across zone borders while another process puts every
  # idle zone to sleep, over and over: none is lost or duplicated, and
  # every move gets one outcome.
  test "entities crossing into zones as they fall asleep are never lost or duplicated" do
    walks =
      :proper_types.list({:proper_types.integer(0, 5), :proper_types.elements(Grid.directions())})

    property =
      forall(:proper_types.resize(60, walks), fn walks ->
        name = :"on_demand_#{System.unique_integer([:positive])}"

        {:ok, sup} =
          World.start_link(
            Keyword.merge(@on_demand,
              name: name,
              width: 12,
              height: 12,
              zone_size: 3,
              tick: :manual,
              terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
              rules: [move_rate: nil]
            )
          )

        try do
          walk(name, walks)
        after
          Supervisor.stop(sup)
        end
      end)

    check(property, numtests: 30)
  end

  defp walk(world, walks) do
    ids = for n <- 0..5, do: elem(World.join(world, at: {n * 2, n * 2}, updates: :none), 1)
    {sleeper, ref} = spawn_monitor(fn -> sleep_until_stopped(world) end)

    try do
      for {{n, direction}, tag} <- Enum.with_index(walks),
          do: :ok = World.move(world, Enum.at(ids, n), direction, tag)

      tags =
        for _ <- walks do
          assert_receive {:grove_move, _id, tag, _outcome}, 5000
          tag
        end

      send(sleeper, :stop)
      assert_receive {:DOWN, ^ref, :process, ^sleeper, :normal}, 5000
      refute_received {:grove_move, _, _, _}

      assert Enum.sort(tags) == Enum.to_list(0..(length(walks) - 1)//1)
      assert World.audit(world) == :ok
      assert World.entity_count(world) == 6
      for id <- ids, do: assert(World.position(world, id) != nil)
      true
    after
      Process.exit(sleeper, :kill)
    end
  end

  defp sleep_until_stopped(world) do
    World.sleep_idle(world)

    receive do
      :stop -> :ok
    after
      0 -> sleep_until_stopped(world)
    end
  end
end
