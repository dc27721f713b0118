defmodule Grove.World.OnDemandTest do
  @moduledoc "Zones on demand: a zone starts when first needed, sleeps when idle and wakes with what it held."
  use Grove.WorldCase, async: true

  import Grove.PropCase

  alias Grove.{AppleGame, World}
  alias Grove.Test.MemoryStore
  alias Grove.World.{Grid, Slots, Zone}
  alias Grove.World.Game.Saver

  # Zones wake only when something is sent to them, but where a test says otherwise.
  @on_demand [
    width: 40,
    height: 40,
    zone_size: 10,
    zones: :on_demand,
    zone_idle: :manual,
    wake_ahead: 0
  ]
  @meadow [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]

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

    test "a description made before it named its registry, as one kept across a code reload, still finds its zones",
         %{world: world} do
      {:ok, id, _} = World.join(world, at: {15, 15}, updates: :none)
      index = zone_index(world, {15, 15})
      described = World.fetch!(world)
      before = Map.delete(described, :registry)

      assert is_pid(World.zone_pid(before, index))
      assert World.zone_pid(before, index) == World.zone_pid(world, index)
      assert World.awake_zones(before) == [index]

      # Published as it was: a move still reaches its zone.
      :ok = World.publish(before)

      try do
        :ok = World.move(world, id, :e, :step)
        assert assert_outcome(id, :step) == {:ok, {16, 15}}
      after
        World.publish(described)
      end
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

    @tag world: Keyword.put(@on_demand, :wake_ahead, 2)
    test "an entity that comes near a sleeping zone wakes it before it steps in", %{world: world} do
      {:ok, id, _} = World.join(world, at: {15, 15}, updates: :none)
      east = zone_index(world, {20, 15})

      for {x, tag} <- [{16, :a}, {17, :b}] do
        :ok = World.move(world, id, :e, tag)
        assert assert_outcome(id, tag) == {:ok, {x, 15}}
      end

      refute east in World.awake_zones(world)

      # Two cells from its border: the zone east is woken, and nothing else.
      :ok = World.move(world, id, :e, :near)
      assert assert_outcome(id, :near) == {:ok, {18, 15}}

      eventually(fn ->
        assert Enum.sort(World.awake_zones(world)) == [zone_index(world, {15, 15}), east]
      end)

      # The door that woke it counts the wake once the zone has started,
      # and so is seen to run a moment before it is counted: the count is
      # read once the door is done with the wake.
      _ = :sys.get_state(Grove.World.Door.name(world))
      assert World.stats(world).zone_wakes_ahead == 1

      # The move across finds it awake: no zone is woken for it.
      for {x, tag} <- [{19, :c}, {20, :across}] do
        :ok = World.move(world, id, :e, tag)
        assert assert_outcome(id, tag) == {:ok, {x, 15}}
      end

      assert World.stats(world).zone_wakes == 2
      assert World.audit(world) == :ok
    end

    test "the door hears once of a zone however many ask to wake it ahead, and again once it has slept",
         %{world: world} do
      w = World.fetch!(world)
      door = Process.whereis(Grove.World.Door.name(world))
      :ok = :sys.suspend(door)

      for _ <- 1..10, do: World.wake_zone(w, 5)
      for _ <- 1..3, do: World.wake_zone(w, 6)
      assert {:message_queue_len, 2} = Process.info(door, :message_queue_len)

      :ok = :sys.resume(door)
      _ = :sys.get_state(door)
      assert Enum.sort(World.awake_zones(world)) == [5, 6]

      assert Enum.sort(World.sleep_idle(world)) == [5, 6]
      World.wake_zone(w, 5)
      _ = :sys.get_state(door)
      assert World.awake_zones(world) == [5]
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

    # A move sent to the zone's process (its address taken before it gave up
    # its name) that reaches it after its lingering is over, before it has
    # run again to stop: it goes to the next run all the same. The end of
    # its lingering is sent here, so that the move is behind it in its
    # mailbox; the world's own is an hour away.
    @tag world: Keyword.put(@on_demand, :handoff_timeout, 3_600_000)
    test "a zone whose lingering is over passes on what is still in its mailbox before it stops",
         %{world: world} do
      {:ok, id, _} = World.join(world, at: {15, 15}, updates: :none)
      index = zone_index(world, {15, 15})
      lingering = World.zone_pid(world, index)
      assert World.sleep_idle(world) == [index]
      ref = Process.monitor(lingering)

      send(lingering, :linger_over)
      GenServer.cast(lingering, {:move, id, :e, self(), :late, 0})

      assert_receive {:DOWN, ^ref, :process, ^lingering, :normal}
      assert assert_outcome(id, :late) == {:ok, {16, 15}}
      assert World.zone_pid(world, index) not in [nil, lingering]
      assert World.audit(world) == :ok
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

  describe "a world of zones on demand with a store" do
    setup do
      store = {MemoryStore, start_supervised!(MemoryStore)}
      game = {AppleGame, trees: [{9, 5}, {10, 5}], tick: :manual, save: 3_600_000}
      name = :"on_demand_store_#{System.unique_integer([:positive])}"
      opts = Keyword.merge(@on_demand, name: name, store: store, game: game, tick: :manual)
      start_supervised!({World, Keyword.merge(opts, terrain: @meadow, rules: [move_rate: nil])})
      %{world: name, store: store}
    end

    test "a zone that sleeps puts its entities and its game's layer in the store, and has them back as it wakes",
         %{world: world, store: store} do
      {:ok, id, {8, 5}} = World.join(world, at: {8, 5}, updates: :none)
      {:ok, other, {3, 7}} = World.join(world, at: {3, 7}, updates: :none)
      assert act(world, id, :pick, :e) == {:ok, %{carrying: 1}}
      zone = zone_index(world, {8, 5})

      assert World.sleep_idle(world) == [zone]
      # Its memory is empty: what it held is in the store alone, its
      # tables are gone, and only its counters are left.
      assert Slots.table(World.fetch!(world), zone) == nil
      assert Slots.game_table(World.fetch!(world), zone) == nil
      assert Slots.entities(World.fetch!(world), zone) == 2
      assert MemoryStore.keys(store, "zones/") == ["#{zone}"]
      assert MemoryStore.keys(store, "game/") == ["#{zone}"]
      assert World.stats(world).zone_saves == 2
      # Counted and found as before, without waking it.
      assert World.entity_count(world) == 2
      assert World.position(world, other) == {3, 7}
      assert World.audit(world) == :ok
      assert World.awake_zones(world) == []

      # A move wakes it: everything is where it was.
      :ok = World.move(world, other, :s, :woken)
      assert assert_outcome(other, :woken) == {:ok, {3, 8}}
      assert World.stats(world).zone_loads == 1
      assert World.position(world, id) == {8, 5}
      assert {%{carrying: 1}, _look} = World.attrs(world, id)
      assert World.cell(world, {9, 5}) == {{:tree, 0}, 0}
      assert World.audit(world) == :ok
    end

    test "a zone whose state the store cannot take stays awake with it, and sleeps once the store takes it",
         %{world: world, store: store} do
      {:ok, id, _} = World.join(world, at: {15, 15}, updates: :none)
      zone = zone_index(world, {15, 15})
      MemoryStore.refuse(store, true)

      log =
        ExUnit.CaptureLog.capture_log(fn ->
          assert World.sleep_idle(world) == []
        end)

      assert log =~ "the store could not take it"
      assert World.stats(world).zone_save_failures >= 1
      assert World.awake_zones(world) == [zone]
      assert World.position(world, id) == {15, 15}
      :ok = World.move(world, id, :e, :step)
      assert assert_outcome(id, :step) == {:ok, {16, 15}}

      MemoryStore.refuse(store, false)
      assert World.sleep_idle(world) == [zone]
      assert Slots.table(World.fetch!(world), zone) == nil
      :ok = World.move(world, id, :e, :woken)
      assert assert_outcome(id, :woken) == {:ok, {17, 15}}
      assert World.stats(world).zone_loads == 1
      assert World.audit(world) == :ok
    end

    test "a layer the game's saver wrote, unchanged since, is not written again as its zone sleeps",
         %{world: world, store: store} do
      {:ok, id, {8, 5}} = World.join(world, at: {8, 5}, updates: :none)
      zone = zone_index(world, {8, 5})
      assert act(world, id, :pick, :e) == {:ok, %{carrying: 1}}

      {_, saver, _, _} =
        world
        |> Supervisor.which_children()
        |> Enum.find(&(elem(&1, 0) == Grove.World.Game.Saver))

      assert Grove.World.Game.Saver.save_now(saver) == :ok
      assert MemoryStore.keys(store, "game/") == ["#{zone}"]
      assert World.stats(world).zone_saves == 0

      # Its entities are written as it sleeps; its layer is in the store already.
      assert World.sleep_idle(world) == [zone]
      assert World.stats(world).zone_saves == 1
      assert Slots.game_table(World.fetch!(world), zone) == nil

      :ok = World.move(world, id, :s, :woken)
      assert assert_outcome(id, :woken) == {:ok, {8, 6}}
      assert {{:tree, 0}, _code} = World.cell(world, {9, 5})
    end

    test "zones woken and put to sleep again and again leave no table behind, whatever the store did",
         %{world: world, store: store} do
      w = World.fetch!(world)

      for round <- 1..20 do
        # Every other round the store refuses at first: the zones stay
        # awake until it takes what they hold.
        refuse? = rem(round, 2) == 0
        MemoryStore.refuse(store, refuse?)

        tables =
          for index <- 0..15 do
            _ = World.zone_address(w, index)
            :ok = Zone.recovered(w, index)
            {Slots.table(w, index), Slots.game_table(w, index)}
          end

        if refuse? do
          ExUnit.CaptureLog.capture_log(fn -> World.sleep_idle(world) end)
          MemoryStore.refuse(store, false)
        end

        World.sleep_idle(world)
        assert World.awake_zones(world) == []
        assert Slots.count(w) == 0

        for {table, game_table} <- tables do
          assert :ets.info(table) == :undefined
          assert :ets.info(game_table) == :undefined
        end
      end

      # The layers were as the game laid them: nothing of them was saved.
      assert MemoryStore.keys(store, "game/") == []
    end

    test "a layer as the game laid it is laid again as it wakes, not saved; a changed one is saved",
         %{world: world, store: store} do
      {:ok, id, {8, 5}} = World.join(world, at: {8, 5}, updates: :none)
      zone = zone_index(world, {8, 5})
      assert World.sleep_idle(world) == [zone]
      assert MemoryStore.keys(store, "game/") == []
      assert World.cell(world, {9, 5}) == nil

      :ok = World.move(world, id, :s, :woken)
      assert assert_outcome(id, :woken) == {:ok, {8, 6}}
      assert {{:tree, 1}, _code} = World.cell(world, {9, 5})
      :ok = World.move(world, id, :n, :back)
      assert assert_outcome(id, :back) == {:ok, {8, 5}}
      assert act(world, id, :pick, :e) == {:ok, %{carrying: 1}}

      assert World.sleep_idle(world) == [zone]
      assert MemoryStore.keys(store, "game/") == ["#{zone}"]
      :ok = World.move(world, id, :s, :again)
      assert assert_outcome(id, :again) == {:ok, {8, 6}}
      assert {{:tree, 0}, _code} = World.cell(world, {9, 5})
    end

    test "a layer only the game's ticks changed is not saved: its zone sleeps without writing it and wakes with it laid, or as last saved",
         %{world: world, store: store} do
      {:ok, id, {8, 5}} = World.join(world, at: {8, 5}, updates: :none)
      zone = zone_index(world, {8, 5})

      {_, saver, _, _} =
        world |> Supervisor.which_children() |> Enum.find(&(elem(&1, 0) == Saver))

      # Two ticks grow the tree's apples from one to three.
      World.Game.tick(world)
      World.Game.tick(world)
      eventually(fn -> assert {{:tree, 3}, _code} = World.cell(world, {9, 5}) end)
      assert Saver.save_now(saver) == :ok
      assert World.stats(world).game_zones_saved == 0

      # Its entity is written as it sleeps (one save), its layer not.
      assert World.sleep_idle(world) == [zone]
      assert World.stats(world).zone_saves == 1
      assert MemoryStore.keys(store, "game/") == []
      :ok = World.move(world, id, :s, :woken)
      assert assert_outcome(id, :woken) == {:ok, {8, 6}}
      assert {{:tree, 1}, _code} = World.cell(world, {9, 5})

      # A pick changes it: what the ticks did after it is saved with it.
      :ok = World.move(world, id, :n, :back)
      assert assert_outcome(id, :back) == {:ok, {8, 5}}
      assert act(world, id, :pick, :e) == {:ok, %{carrying: 1}}
      World.Game.tick(world)
      World.Game.tick(world)
      eventually(fn -> assert {{:tree, 2}, _code} = World.cell(world, {9, 5}) end)
      assert World.sleep_idle(world) == [zone]
      assert World.stats(world).zone_saves == 3
      assert MemoryStore.keys(store, "game/") == ["#{zone}"]

      # Woken from that save, ticked, and put to sleep: nothing of its
      # layer written again, and it wakes as saved.
      :ok = World.move(world, id, :s, :again)
      assert assert_outcome(id, :again) == {:ok, {8, 6}}
      assert {{:tree, 2}, _code} = World.cell(world, {9, 5})
      World.Game.tick(world)
      eventually(fn -> assert {{:tree, 3}, _code} = World.cell(world, {9, 5}) end)
      assert Saver.save_now(saver) == :ok
      assert World.stats(world).game_zones_saved == 0
      assert World.sleep_idle(world) == [zone]
      assert World.stats(world).zone_saves == 4
      :ok = World.move(world, id, :n, :last)
      assert assert_outcome(id, :last) == {:ok, {8, 5}}
      assert {{:tree, 2}, _code} = World.cell(world, {9, 5})
    end

    test "a zone that never had a save lays its game's layer without asking the store; one with a save reads it",
         %{world: world, store: store} do
      {:ok, id, {8, 5}} = World.join(world, at: {8, 5}, updates: :none)
      zone = zone_index(world, {8, 5})
      assert MemoryStore.reads(store, "game/") == 0
      assert World.stats(world).game_loads_skipped == 1
      assert act(world, id, :pick, :e) == {:ok, %{carrying: 1}}

      # Its layer changed: saved as it sleeps, and read back as it wakes.
      assert World.sleep_idle(world) == [zone]
      assert MemoryStore.keys(store, "game/") == ["#{zone}"]
      :ok = World.move(world, id, :s, :woken)
      assert assert_outcome(id, :woken) == {:ok, {8, 6}}
      # Two reads: its base, and the changes of its base (none).
      assert MemoryStore.reads(store, "game/") == 2
      assert {{:tree, 0}, _code} = World.cell(world, {9, 5})

      # Another zone, never saved, still asks nothing.
      {:ok, _other, {25, 25}} = World.join(world, at: {25, 25}, updates: :none)
      assert MemoryStore.reads(store, "game/") == 2
      assert World.stats(world).game_loads_skipped == 2
    end

    test "a world that starts again on its store knows which zones have a save of their layer",
         %{world: world, store: store} do
      {:ok, id, {8, 5}} = World.join(world, at: {8, 5}, updates: :none)
      zone = zone_index(world, {8, 5})
      assert act(world, id, :pick, :e) == {:ok, %{carrying: 1}}
      assert World.sleep_idle(world) == [zone]
      :ok = stop_supervised(world)

      # The same world (its game, shape and seed) on the same store.
      again = :"on_demand_again_#{System.unique_integer([:positive])}"
      game = {AppleGame, trees: [{9, 5}, {10, 5}], tick: :manual, save: 3_600_000}

      start_supervised!(
        {World,
         Keyword.merge(@on_demand,
           name: again,
           store: store,
           game: game,
           tick: :manual,
           terrain: @meadow,
           rules: [move_rate: nil]
         )},
        id: again
      )

      reads = MemoryStore.reads(store, "game/")
      {:ok, _, {8, 5}} = World.join(again, at: {8, 5}, updates: :none)
      # Its base and the changes of its base.
      assert MemoryStore.reads(store, "game/") == reads + 2
      assert World.cell(again, {9, 5}) == {{:tree, 0}, 0}
      {:ok, _, {25, 25}} = World.join(again, at: {25, 25}, updates: :none)
      assert MemoryStore.reads(store, "game/") == reads + 2
      assert World.stats(again).game_loads_skipped == 1
    end

    test "a zone that slept and woke many times loses nothing", %{world: world} do
      ids = for x <- [1, 4, 7], do: elem(World.join(world, at: {x, 3}, updates: :none), 1)

      for round <- 1..50 do
        assert World.sleep_idle(world) == [0]
        id = Enum.at(ids, rem(round, 3))
        direction = if rem(div(round, 3), 2) == 0, do: :s, else: :n
        :ok = World.move(world, id, direction, round)
        assert {:ok, _} = assert_outcome(id, round)
      end

      assert World.entity_count(world) == 3
      assert World.audit(world) == :ok
      assert World.stats(world).zone_loads == 50
    end
  end

  describe "bacteria in a world of zones on demand" do
    @describetag world:
                   Keyword.merge(@on_demand,
                     width: 30,
                     height: 10,
                     terrain: @meadow,
                     life: [interval: :manual, soup: 1.0, soup_density: 0.4]
                   )

    test "a zone that sleeps keeps its board as it was, and wakes with every cell of it",
         %{world: world} do
      {:ok, id, _} = World.join(world, at: {:within, {0, 0, 10, 10}}, updates: :none)

      {:ok, _player, _} =
        World.join(world, at: {:within, {20, 0, 30, 10}}, kind: :player, updates: :none)

      # The zone between them is woken by a viewer, for their bacteria to be computed.
      {:ok, viewer, _} =
        World.join(world, at: {:within, {10, 0, 20, 10}}, updates: :view, view_radius: 1)

      assert Enum.sort(World.awake_zones(world)) == [0, 1, 2]
      eventually(fn -> assert World.generation(world) == 0 end)
      step_to(world, 3)
      before = World.bacteria(world)
      assert {3, [_ | _] = cells} = before[0]

      :ok = World.leave(world, viewer)
      # Zone 2 holds a player; zones 0 and 1 sleep, their boards frozen.
      assert Enum.sort(World.sleep_idle(world)) == [0, 1]
      assert World.bacteria(world)[0] == {3, cells}
      assert World.bacteria(world)[1] == before[1]

      # The zone awake goes on against its neighbour's borders as they stand.
      step_to(world, 6)
      assert World.bacteria(world)[0] == {3, cells}
      assert World.bacteria(world)[1] == before[1]

      # Woken, zone 0 resumes at the world's generation with the board it slept with.
      # (Whatever the move's outcome: bacteria may stand in its way.)
      :ok = World.move(world, id, :s, :wake)
      assert_outcome(id, :wake)
      assert World.bacteria(world)[0] == {6, cells}
      step_to(world, 7)
      assert World.stats(world).bacteria == live_count(world)
      assert World.audit(world) == :ok
    end

    test "with a store, a sleeping zone's cells are there, not in memory, and come back as it wakes",
         %{world: world} do
      world = restart_with_store(world)
      {:ok, id, _} = World.join(world, at: {:within, {0, 0, 10, 10}}, updates: :none)
      eventually(fn -> assert World.generation(world) == 0 end)
      step_to(world, 2)
      {2, cells} = World.bacteria(world)[0]
      assert cells != []

      assert World.sleep_idle(world) == [0]
      life_table = World.fetch!(world).life_table
      assert [{0, 2, nil, _edges, _}] = :ets.lookup(life_table, 0)
      # Read from the store while it sleeps, without waking it.
      assert World.bacteria(world)[0] == {2, cells}
      assert World.awake_zones(world) == []

      for round <- 1..5 do
        :ok = World.move(world, id, if(rem(round, 2) == 0, do: :n, else: :s), round)
        assert_outcome(id, round)
        assert World.bacteria(world)[0] == {2, cells}
        assert World.sleep_idle(world) == [0]
      end

      assert World.stats(world).zone_loads == 5
      assert World.stats(world).bacteria == length(cells)
    end
  end

  defp restart_with_store(world) do
    opts = World.fetch!(world)
    store = {MemoryStore, start_supervised!(MemoryStore)}
    name = :"#{world}_stored"

    start_supervised!(
      {World,
       Keyword.merge(@on_demand,
         name: name,
         width: opts.grid.width,
         height: opts.grid.height,
         terrain: @meadow,
         store: store,
         life: [interval: :manual, soup: 1.0, soup_density: 0.4]
       )},
      id: name
    )

    name
  end

  defp live_count(world),
    do: world |> World.bacteria() |> Map.values() |> Enum.map(&length(elem(&1, 1))) |> Enum.sum()

  # Steps the zones awake until the slowest of them reaches `generation`.
  defp step_to(world, generation) do
    for _ <- (World.generation(world) + 1)..generation//1, do: World.step_life(world)
    eventually(fn -> assert World.generation(world) == generation end)
  end

  @tag world: Keyword.put(@on_demand, :zone_idle, 20)
  test "an idle zone sleeps by itself after its idle time", %{world: world} do
    {:ok, _id, _} = World.join(world, at: {15, 15}, updates: :none)
    # Woken by the join; on a busy machine it may be asleep again already.
    assert World.stats(world).zone_wakes == 1
    eventually(fn -> assert World.awake_zones(world) == [] end)
    # Asleep by itself: nothing here put it to sleep.
    assert World.stats(world).zone_sleeps == 1
  end

  # A viewer keeps its zone awake; once it has gone, the zone's idle time
  # is counted from then, by one check.
  @tag world: Keyword.merge(@on_demand, zone_idle: 2_000, handoff_timeout: 100)
  test "a zone that becomes idle takes one check before it sleeps, when its idle time is up",
       %{world: world} do
    {client, _id, _} = spawn_client(world, at: {15, 15}, updates: :view, view_radius: 1)
    zone = World.zone_pid(world, zone_index(world, {15, 15}))
    ref = Process.monitor(zone)
    :erlang.trace(zone, true, [:receive])
    Process.exit(client, :kill)

    # It sleeps, lingers and stops; what it got meanwhile, traced, says
    # how often it looked.
    assert_receive {:DOWN, ^ref, :process, ^zone, :normal}, 10_000
    assert World.stats(world).zone_sleeps == 1

    checks =
      count_traced(zone, fn message ->
        message == :idle_check or match?({:timeout, _, :idle_check}, message)
      end)

    assert checks == 1
  end

  # A player's entity keeps its zone awake, told from the one it found
  # there, not by a look through the zone's entities at every move: the
  # looks (`find_player/1`, private, so traced as a local function) are
  # counted, whatever else the zone does at a move or an idle check.
  @tag world: Keyword.put(@on_demand, :zone_idle, 100)
  test "a player who walks a zone nobody watches does not have it look through its entities at each move",
       %{world: world} do
    for x <- 11..18, do: {:ok, _, _} = World.join(world, at: {x, 12}, updates: :none)
    {:ok, player, _} = World.join(world, at: {15, 15}, kind: :player, updates: :none)
    zone = World.zone_pid(world, zone_index(world, {15, 15}))
    look = {Zone, :find_player, 1}
    1 = :erlang.trace_pattern(look, true, [:local])
    1 = :erlang.trace(zone, true, [:call, :receive])

    try do
      # Its idle check finds it busy: from now on it tells at each turn
      # whether it became idle.
      assert_receive {:trace, ^zone, :receive, {:timeout, _, :idle_check}}, 5000

      for {direction, tag} <- Enum.zip(Stream.cycle([:e, :w]), 1..20) do
        :ok = World.move(world, player, direction, tag)
        assert {:ok, _} = assert_outcome(player, tag)
      end

      # Asked whether it is idle, it is not.
      assert World.sleep_idle(world) == []
    after
      :erlang.trace(zone, false, [:call, :receive])
      :erlang.trace_pattern(look, false, [:local])
    end

    delivered = :erlang.trace_delivered(zone)
    assert_receive {:trace_delivered, ^zone, ^delivered}
    {looks, checks} = count_looks(zone)
    # One at an idle check until a move finds the player, and the one
    # that does: none at the moves after it, nor at the checks.
    assert looks <= checks + 2
  end

  defp count_looks(zone, {looks, checks} = counts \\ {0, 0}) do
    receive do
      {:trace, ^zone, :call, {Zone, :find_player, [_entities]}} ->
        count_looks(zone, {looks + 1, checks})

      {:trace, ^zone, :receive, {:timeout, _, :idle_check}} ->
        count_looks(zone, {looks, checks + 1})

      {:trace, ^zone, :receive, _other} ->
        count_looks(zone, counts)
    after
      0 -> counts
    end
  end

  # The player it found goes, and it finds the other; that one goes too,
  # and it sleeps, after its idle time, by itself.
  @tag world: Keyword.merge(@on_demand, zone_idle: 100, handoff_timeout: 100)
  test "a zone with a player's entity in it stays awake; once the last has gone, left or handed over, it sleeps by itself",
       %{world: world} do
    here = zone_index(world, {15, 15})
    {:ok, one, _} = World.join(world, at: {15, 15}, kind: :player, updates: :none)
    {:ok, two, _} = World.join(world, at: {19, 16}, kind: :player, updates: :none)
    zone = World.zone_pid(world, here)
    ref = Process.monitor(zone)
    :erlang.trace(zone, true, [:receive])

    for {direction, tag} <- Enum.zip(Stream.cycle([:n, :s]), 1..6) do
      :ok = World.move(world, one, direction, tag)
      assert {:ok, _} = assert_outcome(one, tag)
    end

    await_idle_checks(zone, 2)
    assert here in World.awake_zones(world)

    :ok = World.leave(world, one)
    await_idle_checks(zone, 2)
    assert here in World.awake_zones(world)

    :ok = World.move(world, two, :e, :across)
    assert assert_outcome(two, :across) == {:ok, {20, 16}}
    assert_receive {:DOWN, ^ref, :process, ^zone, :normal}, 10_000
    refute here in World.awake_zones(world)
    assert zone_index(world, {20, 16}) in World.awake_zones(world)
    assert World.position(world, two) == {20, 16}
  end

  defp await_idle_checks(_zone, 0), do: :ok

  defp await_idle_checks(zone, count) do
    assert_receive {:trace, ^zone, :receive, {:timeout, _, :idle_check}}, 5000
    await_idle_checks(zone, count - 1)
  end

  defp count_traced(pid, check, count \\ 0) do
    receive do
      {:trace, ^pid, :receive, message} ->
        count_traced(pid, check, if(check.(message), do: count + 1, else: count))
    after
      0 -> count
    end
  end

  # Its ground made from the seed, as in a world too large to be made
  # whole, whose zones wake by the thousand.
  @tag world: [
         width: 400,
         height: 400,
         zone_size: 50,
         zones: :on_demand,
         zone_idle: :manual,
         wake_ahead: 0,
         terrain: [whole_limit: 0]
       ]
  test "a zone that wakes and makes its ground keeps none of the making's garbage",
       %{world: world} do
    refute Grove.World.Terrain.whole?(World.terrain(world))
    # Woken by what is sent to it, as by a move from a zone next to it.
    index = zone_index(world, {75, 75})
    pid = World.zone_address(World.fetch!(world), index)
    assert World.awake_zones(world) == [index]
    :ok = World.Zone.recovered(World.fetch!(world), index)

    # Its state is a few thousand words; making its ground from the seed
    # allocates some fifty thousand more, which it must not keep.
    {:total_heap_size, words} = Process.info(pid, :total_heap_size)
    assert words < 16_384
  end

  test "the default world runs every zone from the start", %{world: world} do
    assert length(World.awake_zones(world)) == 16
    assert World.sleep_idle(world) == []
  end

  test "a bad idle time or distance to wake ahead is refused" do
    assert_raise ArgumentError, ~r/:wake_ahead/, fn ->
      World.new!(name: :w, zones: :on_demand, wake_ahead: -1)
    end

    assert_raise ArgumentError, ~r/:zone_idle/, fn ->
      World.new!(name: :w, zones: :on_demand, zone_idle: 0)
    end
  end

  # Entities walk across zone borders while another process puts every
  # idle zone to sleep, over and over: none is lost or duplicated, and
  # every move gets one outcome. It puts them to sleep once more each time
  # a move is answered, not in a loop that never waits: a run woken to
  # take a move that came to a zone asleep may be put to sleep before the
  # move reaches it, and pass it on to the next run, and such a loop, on
  # a busy machine, kept a move going from run to run for longer than
  # the test waited for its outcome.
  # With a store, each zone that sleeps puts its entities there and reads
  # them back as it wakes.
  for store? <- [false, true] do
    @tag store: store?
    # Worlds started and run over and over: past ExUnit's minute when the
    # machine is loaded many times over.
    @tag timeout: 300_000
    test "entities crossing into zones as they fall asleep are never lost or duplicated#{if store?, do: " (their state in the store)"}",
         context do
      property_never_lost(context.store)
    end
  end

  defp property_never_lost(store?) do
    walks =
      :proper_types.list({:proper_types.integer(0, 5), :proper_types.elements(Grid.directions())})

    property =
      forall(:proper_types.resize(60, walks), fn walks ->
        store = if store?, do: {MemoryStore, elem(MemoryStore.start_link(), 1)}

        try do
          with_world(
            Keyword.merge(@on_demand,
              width: 12,
              height: 12,
              zone_size: 3,
              # Zones are woken ahead too, as entities come near them.
              wake_ahead: 1,
              store: store
            ),
            &walk(&1, walks)
          )
        after
          if store, do: Agent.stop(elem(store, 1))
        end
      end)

    check(property, numtests: 15, deep_numtests: 300)
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
          send(sleeper, :again)
          tag
        end

      send(sleeper, :stop)
      assert_receive {:DOWN, ^ref, :process, ^sleeper, :normal}, 5000
      refute_received {:grove_move, _, _, _}

      assert Enum.sort(tags) == Enum.to_list(0..(length(walks) - 1)//1)
      assert World.audit(world) == :ok
      assert World.entity_count(world) == 6
      for id <- ids, do: assert(World.position(world, id) != nil)

      # Every zone asleep: each entity is where it stood, and one move
      # wakes its zone with it there.
      stood = Map.new(ids, &{&1, World.position(world, &1)})
      # Zones woken ahead of the walkers are woken by the node's door, which
      # may not have got to the last of them when their moves are answered:
      # it has once it answers, and they are put to sleep with the rest.
      _ = :sys.get_state(Grove.World.Door.name(world))
      World.sleep_idle(world)
      assert World.awake_zones(world) == []
      assert Map.new(ids, &{&1, World.position(world, &1)}) == stood
      assert World.audit(world) == :ok
      for id <- ids, do: :ok = World.move(world, id, :s, {:wake, id})

      for id <- ids do
        assert_receive {:grove_move, ^id, {:wake, ^id}, outcome}, 5000
        {x, y} = stood[id]

        case outcome do
          {:ok, cell} -> assert cell == {x, y + 1}
          {:rejected, _reason} -> :ok
        end
      end

      assert World.audit(world) == :ok
      assert World.entity_count(world) == 6
      true
    after
      Process.exit(sleeper, :kill)
    end
  end

  defp sleep_until_stopped(world) do
    World.sleep_idle(world)

    receive do
      :again -> sleep_until_stopped(world)
      :stop -> :ok
    end
  end
end
