defmodule Grove.ActorsTest do
  use Grove.WorldCase, async: true

  alias Grove.Actors
  alias Grove.Test.RecordingWorld
  alias Grove.World

  # A kind of one's own: it never moves, in the mood its options give it.
  defmodule Still do
    @behaviour Grove.Actor
    @impl true
    def init(opts, _roll), do: Keyword.fetch!(opts, :mood)
    @impl true
    def step(mood, _senses, _roll), do: {:stay, mood}
    @impl true
    def emoji, do: "🗿"
  end

  # How long a join or a move may take on a machine loaded many times over:
  # each is a round trip to a zone (a move waits for its actor's last one),
  # and a join was seen to take more than two seconds there.
  @wait 15_000

  # Turns are never skipped as late (`:late_ms`, half the interval by
  # default): on a loaded machine a herd that gets to every turn more than
  # 50 ms late would skip them all and send no move, and shedding is the
  # herd's own tests' business, not these.
  defp start_actors(world, opts) do
    name = :"actors_#{System.unique_integer([:positive])}"

    opts =
      Keyword.merge(
        [
          name: name,
          world: {world, self()},
          api: RecordingWorld,
          interval: 100,
          resolution: 10,
          late_ms: 600_000
        ],
        opts
      )

    start_supervised!({Actors, opts}, id: name)
    name
  end

  defp joined(count) do
    for _ <- 1..count do
      assert_receive {:world_join, herd, _opts, {:ok, id, cell}}, @wait
      {herd, id, cell}
    end
  end

  test "actors join and walk through the public client API, each on its own", %{world: world} do
    name = start_actors(world, count: 30, per_herd: 10, spawn: {:blob, {20, 20}, 5})
    actors = joined(30)
    assert World.entity_count(world) == 30
    assert length(Actors.herds_of(name)) == 3

    # Every actor moves, and only actors that joined move.
    ids = MapSet.new(actors, fn {_herd, id, _} -> id end)
    moved = receive_moves(MapSet.new(), ids)
    assert moved == ids

    # Outcomes come back and are counted by kind, with their round trip.
    eventually(fn ->
      counts = Actors.Stats.read(Actors.stats(name)).counts
      assert counts.ok + counts.occupied + counts.blocked + counts.out_of_bounds >= 30
    end)

    :ok = Actors.pause(name)
    eventually(fn -> assert World.audit(world) == :ok end)
  end

  test "a herd's steps are answered tallied, and counted as steps taken", %{world: world} do
    name = start_actors(world, count: 10, per_herd: 10, spawn: {:blob, {20, 20}, 5})
    [{herd, _id, _cell} | _] = joined(10)
    :erlang.trace(herd, true, [:receive])
    assert_receive {:trace, ^herd, :receive, {:grove_moved, [_ | _]}}, @wait
    :erlang.trace(herd, false, [:receive])

    eventually(fn ->
      counts = Actors.Stats.read(Actors.stats(name)).counts
      assert counts.ok >= 10
      assert counts.ok + counts.occupied + counts.blocked + counts.out_of_bounds <= counts.sent
    end)

    :ok = Actors.pause(name)

    eventually(fn ->
      counts = Actors.Stats.read(Actors.stats(name)).counts
      assert counts.in_flight == 0
    end)

    assert World.audit(world) == :ok
  end

  test "uniform spawn gives every zone its share", %{world: world} do
    # Herds of 10 at 10 actors a zone: a herd per zone.
    start_actors(world, count: 160, per_herd: 10)
    actors = joined(160)
    grid = World.grid(world)

    by_zone = Enum.frequencies_by(actors, fn {_, _, {x, y}} -> World.Grid.zone_of(grid, x, y) end)
    # 16 zones of equal meadow: 10 each.
    assert map_size(by_zone) == 16
    assert Enum.all?(Map.values(by_zone), &(&1 == 10))
  end

  test "bigger herds each take a block of neighbouring zones, in proportion to its ground", %{
    world: world
  } do
    # 10 actors a zone and herds of up to 100: blocks of 3 x 3 zones, so the
    # 4 x 4 zones make blocks of 9, 3, 3 and 1 zones, with 90, 30, 30 and 10 actors.
    name = start_actors(world, count: 160, per_herd: 100)
    actors = joined(160)
    grid = World.grid(world)

    sizes = actors |> Enum.frequencies_by(fn {herd, _, _} -> herd end) |> Map.values()
    assert Enum.sort(sizes) == [10, 30, 30, 90]
    assert length(Actors.herds_of(name)) == 4

    # Each herd's actors stay in its block: the 10 of the one-zone block in zone 15.
    {lone_herd, _, _} = Enum.find(actors, fn {_, _, {x, y}} -> x >= 30 and y >= 30 end)
    lone = for {^lone_herd, _, {x, y}} <- actors, do: World.Grid.zone_of(grid, x, y)
    assert lone == List.duplicate(15, 10)
  end

  test "a group's herds take their turns at moments spread evenly over a slot", %{world: world} do
    # 16 herds in slots of 1000 ms: drawn at random, two of them would
    # almost surely fall within 22 ms of each other (1 time in 700 not);
    # spread, each gap is at least about a third of the 62 ms each has.
    name = start_in_slots(world, 160)
    phases = phases(name)

    assert length(phases) == 16
    assert Enum.all?(phases, &(&1 in 0..999))
    gaps = gaps(phases)
    assert Enum.min(gaps) >= 22
  end

  test "herds added later go on the group's spread, not at random beside it", %{world: world} do
    # The herds of two calls, in slots of 1000 ms: one sequence of a
    # golden section apart has the gaps of one, two or three sizes (the
    # same whatever its start, to the ms the phases are cut to); two
    # sequences each from its own point have gaps of many sizes, some
    # far smaller.
    name = start_in_slots(world, 80)
    added = Actors.add(name, 80)
    joined(80)
    phases = phases(name)
    n = length(phases)
    assert n == 2 * length(added)
    golden = (:math.sqrt(5) - 1) / 2
    ideal = Enum.sort(for k <- 0..(n - 1), do: (k * golden - Float.floor(k * golden)) * 1000)

    assert sort_gaps(phases)
           |> Enum.zip(sort_gaps(ideal))
           |> Enum.all?(fn {a, b} -> abs(a - b) <= 1 end),
           "gaps #{inspect(sort_gaps(phases))}, of one sequence #{inspect(sort_gaps(ideal))}"
  end

  test "a group whose held term has no phases, as code before them started it, gets them at its next adds, once",
       %{world: world} do
    name = start_in_slots(world, 20)
    before = length(phases(name))
    held = :persistent_term.get({Actors, name})
    :persistent_term.put({Actors, name}, Map.delete(held, :phases))

    # Two adds at the same moment: their herds are counted on one sequence.
    added =
      for(_ <- 1..2, do: Task.async(fn -> Actors.add(name, 20) end))
      |> Enum.flat_map(&Task.await(&1, @wait))

    joined(40)
    assert %{phases: {_offset, started}} = :persistent_term.get({Actors, name})
    assert :atomics.get(started, 1) == length(added)
    assert length(phases(name)) == before + length(added)
  end

  # `count` actors in herds of 10 that take their turns in slots of
  # 1000 ms, all joined.
  defp start_in_slots(world, count) do
    name = start_actors(world, count: count, per_herd: 10, interval: 2000, resolution: 1000)
    joined(count)
    name
  end

  # Where in the slot each herd of the group takes its turn, in order.
  defp phases(name) do
    name
    |> Actors.herds_of()
    |> Enum.map(&:sys.get_state(&1).wheel.phase)
    |> Enum.sort()
  end

  # The gaps between points in order around a slot of 1000 ms, the last
  # to the first included.
  defp gaps(points),
    do: [hd(points) + 1000 - List.last(points) | Enum.zip_with(tl(points), points, &-/2)]

  defp sort_gaps(points), do: Enum.sort(gaps(points))

  test "blob spawn starts actors around a point", %{world: world} do
    start_actors(world, count: 40, spawn: {:blob, {20, 20}, 3})

    for {_herd, _id, {x, y}} <- joined(40) do
      assert abs(x - 20) <= 15 and abs(y - 20) <= 15
    end
  end

  test "blob spawn places every actor asked for, the blob growing outward as it fills", %{
    world: world
  } do
    # 600 actors around (20, 20), about 3 cells from it: far more than fit
    # near the point, in three herds that fill the same blob.
    name = start_actors(world, count: 600, per_herd: 200, spawn: {:blob, {20, 20}, 3})
    cells = for {_herd, _id, cell} <- joined(600), do: cell

    assert World.entity_count(world) == 600
    assert Actors.Stats.read(Actors.stats(name)).counts.join_failed == 0

    # Densest at the centre, thinning outward: the square of the spread
    # nearly full, none past the square that first held them all (radius
    # 3, doubled to 6, 12 and 24).
    ring = fn {x, y} -> max(abs(x - 20), abs(y - 20)) end
    assert Enum.count(cells, &(ring.(&1) <= 3)) >= 40
    assert Enum.all?(cells, &(ring.(&1) <= 24))
    # Once they stop walking (handoffs between zones settled), nothing is lost.
    :ok = Actors.pause(name)
    eventually(fn -> assert World.audit(world) == :ok end)
  end

  @tag world: [width: 20, height: 20]
  test "blob spawn in a world too small says how many could not join and why", %{world: world} do
    log =
      ExUnit.CaptureLog.capture_log(fn ->
        name = start_actors(world, count: 410, spawn: {:blob, {10, 10}, 2})
        joined(400)

        eventually(fn ->
          assert Actors.Stats.read(Actors.stats(name)).counts.join_failed == 10
        end)
      end)

    assert World.entity_count(world) == 400
    assert log =~ "an actor could not join (no_free_cell): the world has no free cell left for it"
  end

  test "a herd that crashes is restarted and its actors rejoin; the dead ones leave no ghost", %{
    world: world
  } do
    name = start_actors(world, count: 10, spawn: {:blob, {20, 20}, 5})
    first = joined(10)
    [herd] = Actors.herds_of(name)
    ref = Process.monitor(herd)
    Process.exit(herd, :kill)
    assert_receive {:DOWN, ^ref, :process, ^herd, :killed}

    second = joined(10)
    assert Enum.all?(second, fn {pid, _, _} -> pid != herd end)

    eventually(fn ->
      for {_, id, _} <- first, do: assert(World.position(world, id) == nil)
      assert World.entity_count(world) == 10
    end)
  end

  test "paused herds send no more moves", %{world: world} do
    name = start_actors(world, count: 5)
    joined(5)
    assert_receive {:world_move, _, _, _}, @wait
    :ok = Actors.pause(name)
    flush_moves()
    refute_receive {:world_move, _, _, _}, 300
  end

  test "bad options get a clear error", %{world: world} do
    assert_raise ArgumentError, ~r/:jitter/, fn ->
      Actors.start_link(name: :a, world: world, jitter: 2)
    end

    assert_raise ArgumentError, ~r/:spawn/, fn ->
      Actors.start_link(name: :a, world: world, spawn: :everywhere)
    end

    assert_raise ArgumentError, ~r/:world/, fn -> Actors.start_link(name: :a) end

    assert_raise ArgumentError, ~r/:herd_process must be a keyword list/, fn ->
      Actors.start_link(name: :a, world: world, herd_process: [message_queue_data: :nowhere])
    end

    # Herds run below the zones or among them, never above: :high is refused.
    for priority <- [:high, :max, "low"] do
      assert_raise ArgumentError, ~r/:herd_priority must be :low or :normal, got: /, fn ->
        Actors.start_link(name: :a, world: world, herd_priority: priority)
      end
    end
  end

  test "herds run at low priority, or at the one given", %{world: world} do
    low = start_actors(world, count: 2)
    normal = start_actors(world, count: 2, herd_priority: :normal)
    joined(4)

    for herd <- Actors.herds_of(low),
        do: assert(Process.info(herd, :priority) == {:priority, :low})

    for herd <- Actors.herds_of(normal),
        do: assert(Process.info(herd, :priority) == {:priority, :normal})
  end

  test "herds start with the process options given", %{world: world} do
    name = start_actors(world, count: 2, herd_process: [min_heap_size: 4096, fullsweep_after: 10])
    joined(2)

    for herd <- Actors.herds_of(name) do
      assert {:min_heap_size, size} = Process.info(herd, :min_heap_size)
      assert size >= 4096
      assert {:garbage_collection, gc} = Process.info(herd, :garbage_collection)
      assert gc[:fullsweep_after] == 10
    end
  end

  describe "kinds" do
    test "each kind joins with its own kind code and is counted apart", %{world: world} do
      name =
        start_actors(world,
          kinds: [{Grove.Actors.Walker, 6}, {Grove.Actors.Wanderer, 5}, {Grove.Actors.Sheep, 4}],
          per_herd: 10
        )

      actors = joined(15)
      codes = Enum.frequencies_by(actors, fn {herd, id, _} -> {herd, id} end)
      assert map_size(codes) == 15

      assert Enum.map(Actors.kinds(name), &{&1.name, &1.code, &1.count}) ==
               [{"walker", 3, 6}, {"wanderer", 4, 5}, {"sheep", 5, 4}]

      assert World.kind_counts(world) == %{3 => 6, 4 => 5, 5 => 4}

      eventually(fn ->
        by_kind = Actors.by_kind(name)

        assert Enum.map(by_kind, &{&1.name, &1.actors}) == [
                 {"walker", 6},
                 {"wanderer", 5},
                 {"sheep", 4}
               ]

        # Each kind's own moves get outcomes, counted in its own row.
        for kind <- by_kind, kind.name != "sheep" do
          assert kind.counts.sent > 0
          assert kind.counts.ok + kind.counts.occupied + kind.counts.out_of_bounds > 0
        end
      end)

      total = Actors.Stats.read(Actors.stats(name)).counts
      rows = Enum.map(Actors.by_kind(name), & &1.counts.joined)
      assert Enum.sum(rows) == total.joined
      # Audited once they stop walking: a handoff in flight is in two places.
      :ok = Actors.pause(name)
      eventually(fn -> assert World.audit(world) == :ok end)
    end

    test "herds walk an area's actors of every kind, each kind stepping by its own module", %{
      world: world
    } do
      # 10 actors a zone of two kinds and herds of up to 100: blocks of 3 x 3
      # zones, as for one kind, each herd with both kinds of its block.
      name =
        start_actors(world,
          kinds: [{Grove.Actors.Walker, 80}, {Grove.Actors.Wanderer, 80}],
          per_herd: 100
        )

      actors =
        for _ <- 1..160 do
          assert_receive {:world_join, herd, opts, {:ok, id, _cell}}, @wait
          {herd, id, opts[:kind]}
        end

      herds = Enum.group_by(actors, &elem(&1, 0), &elem(&1, 2))
      assert length(Actors.herds_of(name)) == 4
      assert herds |> Map.values() |> Enum.map(&length/1) |> Enum.sort() == [10, 30, 30, 90]
      assert Enum.all?(Map.values(herds), &(Enum.sort(Enum.uniq(&1)) == [3, 4]))

      # Only wanderers sense: the world is asked where they are, never a walker.
      wanderers = MapSet.new(for {_herd, id, 4} <- actors, do: id)
      assert_receive {:world_position, _herd, id}, @wait
      assert MapSet.member?(wanderers, id)

      eventually(fn ->
        for kind <- Actors.by_kind(name) do
          assert kind.counts.joined == 80
          assert kind.counts.sent > 0
          assert kind.counts.ok + kind.counts.occupied + kind.counts.out_of_bounds > 0
        end
      end)

      :ok = Actors.pause(name)
      positions = for {:world_position, _herd, id} <- drain([]), do: id
      assert Enum.all?(positions, &MapSet.member?(wanderers, &1))
    end

    test "only kinds that sense read the world, and never by message", %{world: world} do
      start_actors(world, kinds: [{Grove.Actors.Walker, 5}])
      joined(5)
      assert_receive {:world_move, _, _, _}, @wait
      assert_receive {:world_move, _, _, _}, @wait
      refute_received {:world_position, _, _}
      refute_received {:world_nearby, _, _, _}

      start_actors(world, kinds: [{Grove.Actors.Wanderer, 5}])
      joined(5)
      assert_receive {:world_position, herd, _id}, @wait
      assert_receive {:world_nearby, ^herd, {_, _}, 1}, @wait
      {:messages, messages} = Process.info(herd, :messages)

      assert Enum.all?(
               messages,
               &(elem(&1, 0) in [:grove_moved, :grove_moves, :grove_move, :beat, :join])
             )
    end

    @tag world: [terrain: [tree_density: 0.15, water_density: 0.05, rock_density: 0.01]]
    test "wanderers never walk into trees, water, rocks or the edge", %{world: world} do
      # Walkers would: among 8 on this ground some bump within 40 moves.
      name = start_actors(world, kinds: [{Grove.Actors.Wanderer, 8}], spawn: {:blob, {20, 20}, 3})
      joined(8)

      eventually(fn ->
        [wanderer] = Actors.by_kind(name)
        assert wanderer.counts.ok >= 40
        assert wanderer.counts.out_of_bounds == 0
        assert wanderer.counts.blocked == 0
      end)
    end

    test "a kind of one's own, with options, runs beside the others", %{world: world} do
      name = start_actors(world, kinds: [{Grove.Actors.Walker, 2}, {Still, 3, mood: :calm}])

      joined(5)

      eventually(fn ->
        [_walker, still] = Actors.by_kind(name)
        assert %{name: "still", emoji: "🗿", code: 4, actors: 3} = still
        assert still.counts.stayed >= 3
        assert still.counts.sent == 0
      end)
    end

    test "bad kinds get a clear error", %{world: world} do
      for {kinds, message} <- [
            {[], ~r/non-empty list/},
            {[{Enum, 3}], ~r/does not define init\/2/},
            {[{Grove.Actors.Walker, -1}], ~r/count of Grove.Actors.Walker/},
            {[{Grove.Actors.Walker, 1}, {Grove.Actors.Walker, 2}], ~r/more than once/},
            {[{Grove.Actors.Walker, 1, :fast}], ~r/keyword list/},
            {[Grove.Actors.Walker], ~r/\{module, count\}/}
          ] do
        assert_raise ArgumentError, message, fn ->
          Actors.start_link(name: :a, world: world, kinds: kinds)
        end
      end

      assert_raise ArgumentError, ~r/not both/, fn ->
        Actors.start_link(name: :a, world: world, count: 3, kinds: [{Grove.Actors.Walker, 1}])
      end

      assert_raise ArgumentError, ~r/refused its options/, fn ->
        Actors.start_link(name: :a, world: world, kinds: [{Still, 1}])
      end
    end
  end

  defp receive_moves(seen, ids) do
    if MapSet.subset?(ids, seen) do
      seen
    else
      assert_receive {:world_move, _herd, id, _direction}, @wait
      assert MapSet.member?(ids, id)
      receive_moves(MapSet.put(seen, id), ids)
    end
  end

  # Every message in the mailbox now.
  defp drain(acc) do
    receive do
      message -> drain([message | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  defp flush_moves do
    receive do
      {:world_move, _, _, _} -> flush_moves()
    after
      0 -> :ok
    end
  end
end
