defmodule Grove.World.ResidentsTest do
  @moduledoc """
  Resident actors (`Grove.World.join/2`'s `:walk`): their zone steps them,
  through the same rules as anyone's moves, with no message to or from
  their owner; they cross borders by the zones' handoff with their kind's
  state, come back after a zone's restart, and go with their owner.
  """
  use Grove.WorldCase, async: true

  import Grove.PropCase

  alias Grove.Shuttle
  alias Grove.World
  alias Grove.World.Grid

  defmodule Looker do
    @moduledoc false
    @behaviour Grove.Actor
    @impl true
    def init(_opts, _roll), do: nil
    @impl true
    def senses, do: [radius: 1]
    @impl true
    def step(state, _senses, _roll), do: {:stay, state}
  end

  defmodule Shy do
    @moduledoc false
    # Steps east where it sees the cell free, else stands; its state
    # counts the others it saw.
    @behaviour Grove.Actor
    alias Grove.Actor.Senses
    @impl true
    def init(_opts, _roll), do: 0
    @impl true
    def senses, do: [radius: 1, entities: true]
    @impl true
    def step(_seen, %Senses{at: {x, y}, entities: entities} = senses, _roll),
      do: {if(Senses.free?(senses, {x + 1, y}), do: :e, else: :stay), length(entities)}
  end

  # Every step taken or refused, counted where it was decided.
  defp steps(world) do
    stats = World.stats(world)
    stats.moves_ok + Enum.sum(for reason <- World.rejections(), do: stats[reason])
  end

  # Handoffs answer in a few messages between zones: a round of calls to
  # every zone passes one of them on; the world is sound once none waits.
  defp settle(world, rounds \\ 10) do
    case World.audit(world) do
      :ok -> :ok
      problems when rounds == 1 -> problems
      _waiting -> settle(world, rounds - 1)
    end
  end

  defp walk(world) do
    :ok = World.walk(world)
    :ok = settle(world)
  end

  # A resident's walk as its row holds it: its kind, state and interval.
  defp resident_walk(world, id) do
    world = World.fetch!(world)
    index = Grove.World.Directory.lookup(world.name, id)
    [row] = Grove.World.Slots.lookup(world, index, id)
    Grove.World.Entity.from_row(row).walk
  end

  test "a resident steps when its zone walks, and its owner hears nothing of it", %{world: world} do
    {:ok, id, {12, 12}} =
      World.join(world, at: {12, 12}, updates: :none, walk: {Shuttle, :e, 1000})

    walk(world)
    assert World.position(world, id) == {13, 12}
    walk(world)
    assert World.position(world, id) == {12, 12}
    assert World.stats(world).moves_ok == 2
    refute_received {:grove_move, ^id, _tag, _outcome}
    refute_received {:grove_moves, _outcomes}
  end

  test "a resident crosses into the next zone with its kind's state, and walks on from there",
       %{world: world} do
    {:ok, id, {9, 3}} = World.join(world, at: {9, 3}, updates: :none, walk: {Shuttle, :e, 1000})
    walk(world)
    assert World.position(world, id) == {10, 3}
    assert World.stats(world).handoffs == 1
    # Its state came along: it steps back west, from its new zone.
    walk(world)
    assert World.position(world, id) == {9, 3}
    assert World.stats(world).handoffs == 2
    assert World.entity_count(world) == 1
    refute_received {:grove_move, ^id, _tag, _outcome}
  end

  # `World.walk/1` sends its round to the zones one by one: the step that
  # takes a resident across a border may reach the zone beyond before the
  # round does, as here, where each zone hears the round by hand.
  test "a resident that crosses into a zone its round has not reached yet takes no second step in it",
       %{world: world} do
    {:ok, id, {9, 3}} = World.join(world, at: {9, 3}, updates: :none, walk: {Shuttle, :e, 1000})
    fetched = World.fetch!(world)
    [west, east] = for x <- [9, 10], do: Grid.zone_of(World.grid(world), x, 3)
    round = System.unique_integer([:monotonic])

    GenServer.cast(World.zone_address(fetched, west), {:walk, round})
    :ok = settle(world)
    assert World.position(world, id) == {10, 3}

    GenServer.cast(World.zone_address(fetched, east), {:walk, round})
    :ok = settle(world)
    assert World.position(world, id) == {10, 3}
    assert steps(world) == 1

    # The next round steps it back, from its new zone.
    walk(world)
    assert World.position(world, id) == {9, 3}
    assert steps(world) == 2
  end

  test "a resident's refused step is counted like anyone's", %{world: world} do
    {:ok, _wall, {13, 12}} = World.join(world, at: {13, 12}, updates: :none)

    {:ok, id, {12, 12}} =
      World.join(world, at: {12, 12}, updates: :none, walk: {Shuttle, :e, 1000})

    walk(world)
    assert World.position(world, id) == {12, 12}
    assert World.stats(world).occupied == 1
  end

  test "a resident that leaves, or whose owner dies, steps no more", %{world: world} do
    {:ok, gone, _} = World.join(world, at: {2, 2}, updates: :none, walk: {Shuttle, :e, 1000})
    :ok = World.leave(world, gone)

    owner = spawn(fn -> receive do: (:never -> :ok) end)

    {:ok, orphan, _} =
      World.join(world, at: {22, 2}, updates: :none, owner: owner, walk: {Shuttle, :e, 1000})

    ref = Process.monitor(owner)
    Process.exit(owner, :kill)
    assert_receive {:DOWN, ^ref, :process, ^owner, :killed}
    :ok = settle(world)
    assert World.position(world, orphan) == nil

    walk(world)
    assert steps(world) == 0
    assert World.entity_count(world) == 0
  end

  test "a killed zone restarts with its residents, which walk on", %{world: world} do
    {:ok, id, {3, 3}} = World.join(world, at: {3, 3}, updates: :none, walk: {Shuttle, :e, 1000})
    :ok = kill_zone(world, 0)

    walk(world)
    assert World.position(world, id) == {4, 3}
  end

  test "a kind that senses resides only in a world that makes senses", %{world: world} do
    assert_raise ArgumentError, ~r/senses, and this world has no :senses/, fn ->
      World.join(world, updates: :none, walk: {Looker, nil, 1000})
    end

    assert_raise ArgumentError, ~r/not an actor's kind/, fn ->
      World.join(world, updates: :none, walk: {Grove.World, nil, 1000})
    end

    assert_raise ArgumentError, ~r/:walk must be/, fn ->
      World.join(world, updates: :none, walk: {Shuttle, :e, 0})
    end
  end

  describe "in a world that makes senses" do
    @describetag world: [senses: Grove.Actor.Senses]

    test "its zone senses for a resident: it sees who stands next to it, across a border too",
         %{world: world} do
      # Zones of 10 cells: the shy one at the east edge of zone 0, the
      # other across the border, in zone 1.
      {:ok, _other, {10, 4}} = World.join(world, at: {10, 4}, updates: :none)
      {:ok, id, {9, 4}} = World.join(world, at: {9, 4}, updates: :none, walk: {Shy, 0, 1000})

      walk(world)
      assert World.position(world, id) == {9, 4}
      # It saw the cell taken and did not ask: nothing refused, one stood.
      assert World.stats(world).occupied == 0
      assert World.stats(world).resident_stayed == 1
      assert {Shy, 1, 1000} = resident_walk(world, id)
    end

    test "a resident that senses the game, in a world without one, sees no layer and walks",
         %{world: world} do
      walk = {Grove.Games.Orchard.Picker, 2, 1000}
      {:ok, id, {12, 12}} = World.join(world, at: {12, 12}, updates: :none, walk: walk)
      walk(world)
      # No tree or basket in sight: it wanders on its heading (east).
      assert World.position(world, id) == {13, 12}
    end

    test "a resident that sees the way free steps", %{world: world} do
      {:ok, id, {9, 4}} = World.join(world, at: {9, 4}, updates: :none, walk: {Shy, 0, 1000})
      walk(world)
      assert World.position(world, id) == {10, 4}
      walk(world)
      assert World.position(world, id) == {11, 4}
      assert {Shy, 0, 1000} = resident_walk(world, id)
    end
  end

  # What a resident that senses the game reads of the layer near it, from
  # its zone's core where the square lies in the zone, is what a herd
  # reads of the zone's table.
  @tag world: [
         width: 60,
         height: 60,
         zone_size: 20,
         terrain: [
           tree_density: 0.15,
           water_density: 0.05,
           rock_density: 0.0,
           flower_density: 0.2
         ],
         game: {Grove.Games.Orchard, baskets: 20, tick: :manual}
       ]
  test "a zone's layer near a cell, read from its core, is what its table says", %{world: world} do
    cores =
      for zone <- 0..8, into: %{}, do: {zone, :sys.get_state(World.zone_pid(world, zone)).core}

    # A square of radius 1 to 5 that lies in one of the nine zones of 20 x 20.
    property =
      forall(
        {:proper_types.integer(0, 8), :proper_types.integer(1, 5), :proper_types.integer(0, 9),
         :proper_types.integer(0, 9)},
        fn {zone, radius, dx, dy} ->
          core = Map.fetch!(cores, zone)
          {x0, y0, _x1, _y1} = core.bounds
          {x, y} = {x0 + radius + dx, y0 + radius + dy}
          square = {x - radius, y - radius, x + radius, y + radius}

          Grove.World.Zone.Game.near(core, square) ==
            Grove.World.Game.near(world, {x, y}, radius)
        end
      )

    check(property, numtests: 200)
  end

  test "each step taken is timed against its beat and counted in the world's metrics",
       %{world: world} do
    {:ok, _id, _} = World.join(world, at: {12, 12}, updates: :none, walk: {Shuttle, :e, 1000})
    {:ok, _id, _} = World.join(world, at: {2, 2}, updates: :none, walk: {Shuttle, :e, 1000})
    walk(world)
    walk(world)

    metrics =
      Map.new(Grove.World.Metrics.metrics(world), fn {name, _, _, rows} -> {name, rows} end)

    assert metrics["grove_resident_steps_total"] == [
             {[result: :taken], 4},
             {[result: :skipped], 0}
           ]

    assert [{[], lateness}] = metrics["grove_resident_step_lateness_seconds"]
    assert lateness.count == 4
    assert metrics["grove_resident_stood_total"] == [{[], 0}]
  end

  describe "on their world's beats" do
    @describetag world: [tick: 100, resident_beat: 20, resident_phases: 2]

    test "a resident walks on its own, each step timed", %{world: world} do
      {:ok, id, {12, 12}} =
        World.join(world, at: {12, 12}, updates: :none, walk: {Shuttle, :e, 20})

      eventually(fn -> assert World.stats(world).moves_ok >= 2 end)
      assert World.position(world, id) in [{12, 12}, {13, 12}]
      lateness = World.fetch!(world).resident_lateness
      assert Grove.Metrics.Histogram.count(lateness) >= 2
      refute_received {:grove_move, ^id, _tag, _outcome}
    end
  end

  test "the beats and their phases are checked as the world starts" do
    for {opts, message} <- [
          {[resident_beat: 0], ~r/:resident_beat must be a positive integer/},
          {[resident_phases: 0], ~r/:resident_phases must be a positive integer/},
          {[resident_beat: 2, resident_phases: 3], ~r/at most :resident_beat/}
        ] do
      assert_raise ArgumentError, message, fn -> World.new!([name: :residents] ++ opts) end
    end
  end

  describe "in zones on demand" do
    @describetag world: [zones: :on_demand, zone_idle: :manual, wake_ahead: 0]

    test "a zone with a resident stays awake, and sleeps once it has none", %{world: world} do
      {:ok, id, {12, 12}} =
        World.join(world, at: {12, 12}, updates: :none, walk: {Shuttle, :e, 1000})

      zone = Grid.zone_of(World.grid(world), 12, 12)
      assert World.sleep_idle(world) == []
      assert World.awake_zones(world) == [zone]

      walk(world)
      assert World.position(world, id) == {13, 12}

      :ok = World.leave(world, id)
      assert World.sleep_idle(world) == [zone]
    end

    test "a resident that steps into a zone that sleeps wakes it, and walks on from there",
         %{world: world} do
      {:ok, id, {19, 12}} =
        World.join(world, at: {19, 12}, updates: :none, walk: {Shuttle, :e, 1000})

      east = Grid.zone_of(World.grid(world), 20, 12)
      refute east in World.awake_zones(world)

      walk(world)
      assert World.position(world, id) == {20, 12}
      assert east in World.awake_zones(world)
      # The zone it left has no resident now: it sleeps; the one it is in does not.
      assert World.sleep_idle(world) == [Grid.zone_of(World.grid(world), 19, 12)]
      walk(world)
      assert World.position(world, id) == {19, 12}
    end
  end

  # Residents (walkers, and wanderers and sheep whose zones sense for
  # them) and clients' moves in any order, over zones of 5 x 5 cells with
  # trees: each step of a resident is counted exactly once, wherever it
  # was decided, and nothing is lost or doubled.
  # Thirty worlds started and run: a few seconds on a quiet machine, past
  # ExUnit's minute when the machine is loaded many times over.
  @tag timeout: 300_000
  test "residents walk beside clients' moves: one outcome a step, nothing lost or doubled" do
    property =
      forall(
        {:proper_types.integer(1, 1000), :proper_types.integer(1, 12),
         :proper_types.resize(
           30,
           :proper_types.list(
             :proper_types.oneof([
               :walk,
               {:move, :proper_types.integer(0, 3), :proper_types.elements(Grid.directions())}
             ])
           )
         )},
        fn {seed, residents, operations} ->
          [width: 20, height: 20, zone_size: 5, seed: seed]
          |> Keyword.merge(terrain: [tree_density: 0.2], senses: Grove.Actor.Senses)
          |> with_world(fn name ->
            # Walkers, and kinds whose zone senses for them.
            kinds = [Grove.Actors.Walker, Grove.Actors.Wanderer, Grove.Actors.Sheep]

            for n <- 1..residents do
              walk = {Enum.at(kinds, rem(n, 3)), 0, 1000}
              {:ok, _, _} = World.join(name, updates: :none, walk: walk)
            end

            clients = for _ <- 1..4, do: elem(World.join(name, updates: :none), 1)
            clients = List.to_tuple(clients)

            {walks, moves} =
              Enum.reduce(operations, {0, 0}, fn
                :walk, {walks, moves} ->
                  :ok = World.walk(name)
                  :ok = settle(name)
                  {walks + 1, moves}

                {:move, n, direction}, {walks, moves} ->
                  :ok = World.move(name, elem(clients, n), direction, moves)
                  assert_receive {:grove_move, _id, ^moves, _outcome}, 15_000
                  {walks, moves + 1}
              end)

            :ok = settle(name)
            # A kind that senses may see no way and stand: counted apart.
            stood = World.stats(name).resident_stayed

            steps(name) + stood == walks * residents + moves and
              World.entity_count(name) == residents + 4
          end)
        end
      )

    check(property, numtests: 30)
  end
end
