defmodule Grove.Actors.HerdTest do
  # Herds in front of worlds that do not keep up: what they shed, what they
  # keep bounded, how they join.
  use Grove.WorldCase, async: true

  alias Grove.Actors
  alias Grove.Actors.{Herd, Stats}
  alias Grove.Actors.Herd.Window
  alias Grove.Test.StubWorld
  alias Grove.World

  defp start_herd(stub, opts) do
    stats = Stats.new()

    opts =
      Keyword.merge(
        [world: stub, api: StubWorld, stats: stats, interval: 100, resolution: 10],
        opts
      )

    herd = start_supervised!({Herd, opts}, id: make_ref())
    {herd, stats}
  end

  # A herd that never gives up on a move, nor on a turn that came late:
  # what it does is decided by its turns alone, whatever the machine's load.
  defp start_patient_herd(stub, opts),
    do: start_herd(stub, [move_timeout: 600_000, target_ms: 600_000, late_ms: 600_000] ++ opts)

  defp counts(stats), do: Stats.read(stats).counts

  # The herd's moves in flight, read inside it, as one moment: those its
  # window holds unanswered, its stats' gauge, and its window's count.
  defp in_flight(herd, stats) do
    test = self()

    :sys.replace_state(herd, fn %Herd{window: window} = state ->
      send(
        test,
        {:in_flight, Enum.sum(Map.values(window.pending)), counts(stats).in_flight,
         window.in_flight}
      )

      state
    end)

    assert_received {:in_flight, held, counted, in_window}
    {held, counted, in_window}
  end

  # Every batch the herd sent so far, flattened.
  defp sent_moves(acc \\ []) do
    receive do
      {:stub_moves, _herd, moves} -> sent_moves(acc ++ moves)
    after
      0 -> acc
    end
  end

  # The actors seen in the herd's batches until `want` of them have moved,
  # or the deadline (monotonic ms) has passed.
  defp movers(seen, want, deadline) do
    if MapSet.size(seen) >= want do
      seen
    else
      receive do
        {:stub_moves, _herd, moves} ->
          movers(Enum.into(moves, seen, &elem(&1, 0)), want, deadline)
      after
        max(deadline - System.monotonic_time(:millisecond), 0) -> seen
      end
    end
  end

  # The actors that move, until `want` of them or until the herd has taken
  # `turns` turns (moves sent and turns rested), whichever comes first; a
  # minute at most, should the herd stop.
  defp movers_within_turns(seen, want, stats, turns) do
    deadline = System.monotonic_time(:millisecond) + 60_000
    movers_within_turns(seen, want, stats, turns, deadline)
  end

  defp movers_within_turns(seen, want, stats, turns, deadline) do
    %{sent: sent, rested: rested} = counts(stats)

    cond do
      MapSet.size(seen) >= want or sent + rested >= turns ->
        # The moves already in the mailbox were sent within those turns.
        movers(seen, want, System.monotonic_time(:millisecond))

      System.monotonic_time(:millisecond) > deadline ->
        seen

      true ->
        receive do
          {:stub_moves, _herd, moves} ->
            seen = Enum.into(moves, seen, &elem(&1, 0))
            movers_within_turns(seen, want, stats, turns, deadline)
        after
          50 -> movers_within_turns(seen, want, stats, turns, deadline)
        end
    end
  end

  defp drain_moves do
    receive do
      {:stub_moves, _herd, _moves} -> drain_moves()
    after
      0 -> :ok
    end
  end

  # Moves sent by each actor, until `want` in all or the deadline.
  defp moves_per_actor(counts, want, deadline) do
    if Enum.sum(Map.values(counts)) >= want do
      counts
    else
      receive do
        {:stub_moves, _herd, moves} ->
          counts = Enum.reduce(moves, counts, &Map.update(&2, elem(&1, 0), 1, fn n -> n + 1 end))
          moves_per_actor(counts, want, deadline)
      after
        max(deadline - System.monotonic_time(:millisecond), 0) -> counts
      end
    end
  end

  defp wheel_ids(herd) do
    %Herd{wheel: wheel} = :sys.get_state(herd)
    wheel |> Herd.Wheel.entries() |> Enum.map(&elem(&1, 0)) |> Enum.sort()
  end

  # The groups of resting actors on a herd's wheel (of one lane), as they are.
  defp groups(%Herd{wheel: wheel}) do
    held = Enum.concat(Map.values(wheel.slots))
    for {:group, _count, _index, _members, _zone} = group <- held, do: group
  end

  describe "outcomes" do
    test "a batch's outcomes are counted by kind, each with its round trip", %{world: world} do
      {herd, stats} =
        start_patient_herd(StubWorld.new(world, moves: :silent),
          count: 20
        )

      eventually(fn -> assert counts(stats).sent >= 2 end)
      :ok = Herd.pause(herd)
      [{a, _, sent_a}, {b, _, sent_b} | _] = sent_moves()
      before = Stats.read(stats)

      # Two moves of one batch answered in one message, mixed, then another
      # answer to an unknown batch (still counted, as a given-up batch's is).
      send(herd, {:grove_moves, [{a, sent_a, {:ok, {1, 1}}}, {b, sent_b, {:ok, {2, 2}}}]})
      send(herd, {:grove_moves, [{a, sent_a, {:rejected, :blocked}}, {b, 1, {:ok, {3, 3}}}]})

      # Every key in one batch, the common ones between the others.
      mixed =
        [{:rejected, :busy}, {:ok, {4, 4}}, {:rejected, :occupied}, {:rejected, :out_of_bounds}] ++
          [{:rejected, :busy}, {:rejected, :blocked}, {:rejected, :occupied}]

      send(herd, {:grove_moves, for(outcome <- mixed, do: {a, sent_a, outcome})})
      _ = :sys.get_state(herd)

      after_ = Stats.diff(Stats.read(stats), before)

      assert Map.take(after_.counts, [:ok, :blocked, :occupied, :busy, :out_of_bounds]) ==
               %{ok: 4, blocked: 2, occupied: 2, busy: 2, out_of_bounds: 1}

      assert Enum.sum(after_.latency) == 11
    end
  end

  describe "several kinds" do
    defmodule North do
      @behaviour Grove.Actor
      @impl true
      def init(_opts, _roll), do: 0
      @impl true
      def step(steps, _senses, _roll), do: {:n, steps + 1}
    end

    defmodule South do
      @behaviour Grove.Actor
      @impl true
      def init(_opts, _roll), do: 0
      @impl true
      def step(steps, _senses, _roll), do: {:s, steps + 1}
    end

    test "a herd of two kinds steps each by its own, sends a slot's moves of both in one batch and counts each apart",
         %{world: world} do
      stats = Stats.new(2)

      kinds =
        for {module, index} <- [{North, 0}, {South, 1}] do
          %{module: module, kind: 3 + index, stats: Stats.for_kind(stats, index), count: 10}
        end

      herd =
        start_supervised!(
          {Herd,
           world: StubWorld.new(world, moves: :answer),
           api: StubWorld,
           kinds: kinds,
           interval: 100,
           resolution: 10,
           move_timeout: 600_000,
           target_ms: 600_000,
           late_ms: 600_000},
          id: make_ref()
        )

      # Joined in order: North's ten, then South's.
      ids =
        for _ <- 1..20 do
          assert_receive {:stub_join, ^herd, {:ok, id, _cell}}, 5000
          id
        end

      {north, south} = Enum.split(ids, 10)

      eventually(fn ->
        assert Stats.read_kind(stats, 0).ok >= 20 and Stats.read_kind(stats, 1).ok >= 20
      end)

      :ok = Herd.pause(herd)
      batches = for {:stub_moves, ^herd, moves} <- collect_batches([]), do: moves

      # Each actor steps by its kind's module.
      for moves <- batches, {id, direction, _tag} <- moves do
        assert direction == if(id in north, do: :n, else: :s)
        assert id in north or id in south
      end

      # A slot's moves of both kinds go in one batch, where a herd per kind
      # sent one each.
      assert Enum.any?(batches, fn moves ->
               Enum.any?(moves, &(elem(&1, 1) == :n)) and Enum.any?(moves, &(elem(&1, 1) == :s))
             end)

      # Each kind's moves and outcomes in its own row.
      for index <- [0, 1] do
        counts = Stats.read_kind(stats, index)
        assert counts.joined == 10
        assert counts.sent >= counts.ok and counts.ok >= 20
      end
    end
  end

  describe "a slot's kinds" do
    defmodule East do
      @behaviour Grove.Actor
      @impl true
      def init(_opts, _roll), do: 0
      @impl true
      def step(steps, _senses, _roll), do: {:e, steps + 1}
    end

    defmodule West do
      @behaviour Grove.Actor
      @impl true
      def init(_opts, _roll), do: 0
      @impl true
      def step(steps, _senses, _roll), do: {:w, steps + 1}
    end

    # Actors come back eight to thirteen slots on, so each slot gathers
    # the actors of several walks: kept in one list, joined end to end, a
    # slot's kinds would tend to random order, a run of one kind or two.
    test "stay in runs, a run of each kind at most in every slot, after many turns",
         %{world: world} do
      stats = Stats.new(4)
      modules = [__MODULE__.North, __MODULE__.South, East, West]

      kinds =
        for {module, index} <- Enum.with_index(modules) do
          %{module: module, kind: 3 + index, stats: Stats.for_kind(stats, index), count: 50}
        end

      herd =
        start_supervised!(
          {Herd,
           world: StubWorld.new(world, moves: :answer),
           api: StubWorld,
           kinds: kinds,
           interval: 100,
           resolution: 10,
           move_timeout: 600_000,
           target_ms: 600_000,
           late_ms: 600_000},
          id: make_ref()
        )

      # Every actor has taken about ten turns.
      eventually(fn ->
        for index <- 0..3, do: assert(Stats.read_kind(stats, index).ok >= 500)
      end)

      :ok = Herd.pause(herd)
      %Herd{wheel: wheel} = :sys.get_state(herd)

      runs =
        for slot <- Map.keys(wheel.slots) do
          {due, _wheel} = Herd.Wheel.pop(wheel, slot)

          due
          |> Enum.chunk_by(fn {_id, last, _state, _zone} -> Bitwise.band(last, 255) end)
          |> length()
        end

      assert length(runs) >= 5
      assert Enum.max(runs) <= 4, "runs by slot: #{inspect(runs)}"
      assert length(Herd.Wheel.entries(wheel)) == 200
    end
  end

  defp collect_batches(acc) do
    receive do
      {:stub_moves, _herd, _moves} = batch -> collect_batches([batch | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  describe "pace" do
    # Slots of half the interval (the default), where every actor comes
    # back one to three slots on; the other tests' slots of a tenth of it
    # bring actors back eight to thirteen slots on.
    test "with slots of half the interval, every actor moves, again and again, and is on the wheel once",
         %{world: world} do
      {herd, stats} = start_herd(StubWorld.new(world, moves: :answer), count: 20, resolution: 50)

      per_actor = moves_per_actor(%{}, 200, System.monotonic_time(:millisecond) + 30_000)
      assert map_size(per_actor) == 20
      assert Enum.all?(Map.values(per_actor), &(&1 >= 2))
      assert wheel_ids(herd) == Enum.sort(Map.keys(per_actor))
      assert counts(stats).joined == 20
    end
  end

  describe "where nobody watches" do
    test "an actor takes one turn in unseen_every and rests the others, and every turn once seen",
         %{world: world} do
      stub = StubWorld.new(world, moves: :answer, seen: false)

      {herd, stats} =
        start_patient_herd(stub,
          count: 50,
          unseen_every: 4
        )

      eventually(fn -> assert counts(stats).rested >= 400 end)
      unseen = counts(stats)
      turns = unseen.sent + unseen.rested + Stats.skipped(unseen)
      # One turn in four on average: well inside a tenth to two fifths.
      assert unseen.sent > turns / 10 and unseen.sent < turns * 2 / 5

      # Seen from now on (the herd's next beat reads it): no turn rests.
      StubWorld.see(stub, true)
      _ = :sys.get_state(herd)
      rested = counts(stats).rested
      eventually(fn -> assert counts(stats).sent >= unseen.sent + 400 end)
      assert counts(stats).rested == rested
    end

    test "in one batch, actors of a zone watched take every turn and those of one unwatched rest",
         %{world: world} do
      # Zone 1 (odd ids) is watched, zone 0 (even ids) is not: the herd's
      # batches hold both, and whether a zone is watched is asked once per
      # zone in a batch.
      {_herd, _stats} =
        start_patient_herd(
          StubWorld.new(world, moves: :answer, seen: false, zones: 2, seen_zones: [1]),
          count: 40,
          unseen_every: 4
        )

      per_actor = moves_per_actor(%{}, 2_000, System.monotonic_time(:millisecond) + 20_000)
      {watched, unwatched} = Enum.split_with(per_actor, fn {id, _} -> rem(id, 2) == 1 end)
      assert watched != [] and unwatched != []
      mean = fn actors -> Enum.sum(Enum.map(actors, &elem(&1, 1))) / length(actors) end
      # Every turn against one in four on average: well over twice as many.
      assert mean.(watched) > 2 * mean.(unwatched)
    end

    test "an actor's zone is asked once after each of its moves, not at every turn it rests",
         %{world: world} do
      stub = StubWorld.new(world, moves: :answer, seen: false)

      {herd, stats} =
        start_patient_herd(stub,
          count: 50,
          unseen_every: 4
        )

      eventually(fn -> assert counts(stats).rested >= 400 end)
      # Between two of the herd's messages, so that its lookups and its
      # counts are of the same turns.
      :ok = :sys.suspend(herd)
      lookups = StubWorld.lookups(stub)
      %{sent: sent, rested: rested} = counts(stats)
      :ok = :sys.resume(herd)
      # Once for each actor's first turn, and once for each turn after a
      # move: about one turn in four, where every turn was a lookup.
      assert lookups <= sent + 50
      assert lookups < (sent + rested) / 2
    end

    test "a zone's actors that rest go back on the wheel together, each on it once",
         %{world: world} do
      {herd, stats} =
        start_patient_herd(StubWorld.new(world, moves: :answer, seen: false),
          count: 50,
          unseen_every: 4
        )

      eventually(fn -> assert counts(stats).rested >= 400 end)
      %Herd{wheel: wheel} = :sys.get_state(herd)
      # One zone: the actors that rest alone in a slot go back as one
      # entry, so the wheel holds fewer entries than actors (one an actor,
      # before: 50).
      held = wheel.slots |> Map.values() |> Enum.map(&length/1) |> Enum.sum()
      assert held < 45
      ids = wheel |> Herd.Wheel.entries() |> Enum.map(&elem(&1, 0))
      assert length(ids) == 50 and length(Enum.uniq(ids)) == 50
      assert Enum.all?(ids, &is_integer/1)
    end

    test "an actor lost while it rests with others comes off the wheel, and another joins",
         %{world: world} do
      {herd, stats} =
        start_patient_herd(StubWorld.new(world, moves: :answer, seen: false),
          count: 50,
          unseen_every: 4
        )

      # A member of a group lost inside the herd, in the message that found
      # it there: no beat comes between to take its group apart.
      test = self()

      lose_one = fn herd ->
        case groups(herd) do
          [{:group, count, _index, [{lost, _last, _state, _} | _], _zone} | _] ->
            before = herd.wheel |> Herd.Wheel.entries() |> Enum.map(&elem(&1, 0))
            {:noreply, herd} = Herd.handle_info({:grove_lost, lost}, herd)
            now = herd.wheel |> Herd.Wheel.entries() |> Enum.map(&elem(&1, 0))
            send(test, {:lost, lost, count, before, now})
            herd

          [] ->
            herd
        end
      end

      {lost, count, before, now} =
        eventually(fn ->
          :sys.replace_state(herd, lose_one)
          assert_received {:lost, lost, count, before, now}
          {lost, count, before, now}
        end)

      # Out of its group of two or more at once, and its group's others,
      # as every actor on the wheel, still on it.
      assert count >= 2 and lost in before
      refute lost in now
      assert MapSet.subset?(MapSet.new(before -- [lost]), MapSet.new(now))

      eventually(fn ->
        assert %{lost: 1, joined: 50} = counts(stats)
        ids = wheel_ids(herd)
        assert length(ids) == 50 and length(Enum.uniq(ids)) == 50
        refute lost in ids
      end)
    end

    test "a herd held up past late_ms with actors resting in groups skips every actor's move once",
         %{world: world} do
      # Every actor's turn comes while the herd is held up (an interval is
      # 100 ms, a wait at most 130 ms), more than late_ms before it runs.
      {herd, stats} =
        start_herd(StubWorld.new(world, moves: :answer, seen: false),
          count: 30,
          unseen_every: 4,
          late_ms: 100
        )

      # Held up once all have joined, while groups are on the wheel.
      eventually(fn ->
        assert counts(stats).joined == 30
        :ok = :sys.suspend(herd)

        if groups(:sys.get_state(herd)) == [] do
          :ok = :sys.resume(herd)
          flunk("no group on the wheel yet")
        end
      end)

      skipped_before = counts(stats).skipped_late
      held_since = System.monotonic_time(:millisecond)

      receive do
      after
        400 -> :ok
      end

      assert System.monotonic_time(:millisecond) - held_since >= 400
      :ok = :sys.resume(herd)
      # The beat that came while it was held up has run.
      _ = :sys.get_state(herd)

      # Each actor skipped once, those of a group each as one.
      assert counts(stats).skipped_late - skipped_before == 30
      assert wheel_ids(herd) |> Enum.uniq() |> length() == 30
    end

    test "actors retired while some rest in groups leave, each once, and the herd stops", %{
      world: world
    } do
      stats = Stats.new()
      stub = StubWorld.new(world, moves: :answer, seen: false)

      herd =
        start_supervised!(
          Supervisor.child_spec(
            {Herd,
             world: stub,
             api: StubWorld,
             stats: stats,
             count: 30,
             interval: 100,
             resolution: 10,
             unseen_every: 4},
            id: make_ref(),
            restart: :transient
          )
        )

      # Paused in the message that found groups on the wheel: no beat from
      # then on takes them apart.
      test = self()

      pause_grouped = fn herd ->
        if groups(herd) == [] do
          herd
        else
          {:reply, :ok, herd} = Herd.handle_call(:pause, {test, make_ref()}, herd)
          send(test, {:paused, groups(herd)})
          herd
        end
      end

      eventually(fn ->
        assert counts(stats).joined == 30
        :sys.replace_state(herd, pause_grouped)
        assert_received {:paused, [_ | _]}
      end)

      ref = Process.monitor(herd)
      assert Herd.retire(herd, 30) == 30
      assert_receive {:DOWN, ^ref, :process, ^herd, :normal}, 10_000
      assert counts(stats).left == 30
    end

    test "every actor takes turns unseen, even with waits that never vary", %{world: world} do
      # No jitter: each actor comes back exactly ten slots later, always.
      {_herd, stats} =
        start_patient_herd(StubWorld.new(world, moves: :answer, seen: false),
          count: 20,
          jitter: 0.0,
          unseen_every: 4
        )

      eventually(fn -> assert counts(stats).joined == 20 end)
      # Counted in turns, not seconds: a loaded machine gives the herd fewer
      # beats. Eighty turns an actor leave one that takes a fair share of
      # them moveless with odds of 20 x 0.75^80 (about 2e-9).
      assert MapSet.size(movers_within_turns(MapSet.new(), 20, stats, 20 * 80)) == 20
    end

    test "actors whose waits never vary keep their own slots after the herd stalls", %{
      world: world
    } do
      # A stall of five waits (a loaded machine, a long collection): the
      # herd walks the slots it missed at once. Were every actor put back
      # in the next slot, none would ever leave it, and the window (four
      # moves for 20 actors) would let the same few of them through.
      {herd, stats} =
        start_patient_herd(StubWorld.new(world, moves: :answer, seen: false),
          count: 20,
          jitter: 0.0,
          unseen_every: 4
        )

      eventually(fn -> assert counts(stats).joined == 20 end)
      :ok = :sys.suspend(herd)
      # Only the moves after the stall count; a suspended herd sends none
      # for the five waits it stalls.
      drain_moves()
      refute_receive {:stub_moves, ^herd, _moves}, 500
      :ok = :sys.resume(herd)
      %{sent: sent, rested: rested} = counts(stats)

      assert MapSet.size(movers_within_turns(MapSet.new(), 20, stats, sent + rested + 20 * 80)) ==
               20
    end

    test "rests nobody by default, seen or not", %{world: world} do
      {_herd, stats} =
        start_patient_herd(StubWorld.new(world, moves: :answer, seen: false),
          count: 50
        )

      eventually(fn -> assert counts(stats).sent >= 200 end)
      assert counts(stats).rested == 0
    end
  end

  describe "against a world that never answers" do
    test "a herd keeps at most max_in_flight moves out and counts every move it skips", %{
      world: world
    } do
      # Nothing is ever given up on or slowed down for here: only the bound is at work.
      {herd, stats} =
        start_patient_herd(StubWorld.new(world, moves: :silent),
          count: 50,
          max_in_flight: 20
        )

      # Each actor comes due every interval or so; let them come due several times.
      eventually(fn ->
        counts = counts(stats)
        assert counts.joined == 50
        assert Stats.skipped(counts) >= 150
      end)

      counts = counts(stats)
      moves = sent_moves()
      # Nothing was answered, so nothing beyond the bound ever went out...
      assert {counts.sent, length(moves)} == {20, 20}
      assert counts.in_flight == 20
      # ...and no actor sent a second move while its first was unanswered.
      assert moves |> Enum.map(&elem(&1, 0)) |> Enum.uniq() |> length() == 20
      assert counts.skipped_unanswered > 0 and counts.skipped_full > 0
      assert counts.ok == 0 and counts.expired == 0

      # The herd's state is as bounded as what it sent: 20 moves counted in
      # a few batches, each actor on the wheel once, no mail piling up.
      %Herd{window: %Window{pending: pending, in_flight: 20}} = :sys.get_state(herd)
      assert pending |> Map.values() |> Enum.sum() == 20
      assert length(wheel_ids(herd)) == 50 and length(Enum.uniq(wheel_ids(herd))) == 50
      # At most the herd's own beat, which its timer sends at any moment.
      assert {:message_queue_len, waiting} = Process.info(herd, :message_queue_len)
      assert waiting <= 1
    end

    test "an outcome frees its actor and a place in flight", %{world: world} do
      {herd, stats} =
        start_patient_herd(StubWorld.new(world, moves: :silent),
          count: 10,
          max_in_flight: 4
        )

      eventually(fn -> assert counts(stats).sent == 4 and Stats.skipped(counts(stats)) > 0 end)
      [{id, _direction, tag} | _] = sent_moves()

      send(herd, {:grove_moves, [{id, tag, {:ok, {1, 1}}}]})

      # Its actor moves again, or another takes its place: a fifth move goes out.
      eventually(fn -> assert counts(stats).sent == 5 end)
      assert counts(stats).in_flight == 4 and counts(stats).ok == 1
    end

    test "answers that are not steps free the window with the steps: nothing is left in flight",
         %{world: world} do
      {herd, stats} =
        start_patient_herd(StubWorld.new(world, moves: :silent),
          count: 8,
          max_in_flight: 8
        )

      eventually(fn -> assert counts(stats).sent == 8 end)
      :ok = Herd.pause(herd)
      moves = sent_moves()
      assert length(moves) == 8
      assert {8, 8, 8} == in_flight(herd, stats)

      # One answer of every sort, in one message: steps, by their tag alone
      # or with a place, and answers that are no step (busy, unknown,
      # refused, an action's), each between steps of the same batches.
      outcomes = [
        :step,
        {:rejected, :busy},
        {:ok, {1, 1}},
        {:rejected, :unknown_entity},
        {:refused, :out_of_reach},
        :step,
        {:ok, %{}},
        {:rejected, :occupied}
      ]

      answers =
        for {{id, _direction, tag}, outcome} <- Enum.zip(moves, outcomes) do
          if outcome == :step, do: tag, else: {id, tag, outcome}
        end

      send(herd, {:grove_moves, answers})

      assert {0, 0, 0} == in_flight(herd, stats)
      assert %Herd{window: %Window{pending: pending}} = :sys.get_state(herd)
      assert pending == %{}
    end

    test "a move with no outcome for move_timeout is given up, and its actor moves again", %{
      world: world
    } do
      {herd, stats} = start_herd(StubWorld.new(world, moves: :silent), count: 3, move_timeout: 1)

      # Three actors, each with a move unanswered: a fourth move is one
      # sent again after its first was given up on.
      eventually(fn -> assert counts(stats).expired >= 3 and counts(stats).sent > 3 end)
      moves = sent_moves()
      ids = Enum.map(moves, &elem(&1, 0))
      assert length(ids) > length(Enum.uniq(ids))
      assert counts(stats).in_flight <= 3

      # An answer to a move given up on changes nothing: the moves counted
      # in flight stay those the herd holds unanswered. They are read in
      # the herd, between two of its messages, since it goes on sending
      # and giving up meanwhile.
      [{id, _direction, tag} | _] = moves
      send(herd, {:grove_moves, [{id, tag, {:ok, {1, 1}}}]})
      eventually(fn -> assert counts(stats).ok == 1 end)
      assert {held, counted, in_window} = in_flight(herd, stats)
      assert held == counted and held == in_window and held <= 3
    end
  end

  test "a herd halves its window when answers come later than target_ms, and grows it back", %{
    world: world
  } do
    {herd, stats} =
      start_herd(StubWorld.new(world, moves: :silent),
        count: 40,
        max_in_flight: 20,
        target_ms: 300,
        move_timeout: 600_000,
        late_ms: 600_000
      )

    eventually(fn -> assert counts(stats).sent == 20 end)
    moves = sent_moves()
    # Answered late: after the target has gone by for every one of them.
    oldest = moves |> Enum.map(&elem(&1, 2)) |> Enum.min()
    wait_until(oldest + :erlang.convert_time_unit(400, :millisecond, :native))
    answer(herd, moves)

    # Half as many go out in their place, and no more.
    eventually(fn -> assert counts(stats).sent == 30 end)
    assert %Herd{window: %Window{size: 10}} = :sys.get_state(herd)
    assert counts(stats).in_flight == 10

    # Answered at once from now on, the herd takes back its whole bound.
    eventually(fn ->
      answer(herd, sent_moves())
      assert %Herd{window: %Window{size: 20}} = :sys.get_state(herd)
    end)
  end

  test "a herd held up past late_ms skips the moves it missed instead of sending them all",
       %{world: world} do
    {herd, stats} = start_herd(StubWorld.new(world, moves: :answer), count: 30, late_ms: 20)

    eventually(fn -> assert counts(stats).ok >= 30 end)
    :ok = :sys.suspend(herd)
    # Every actor comes due while the herd is held up (an interval is 100 ms).
    held_since = System.monotonic_time(:millisecond)

    receive do
    after
      300 -> :ok
    end

    assert System.monotonic_time(:millisecond) - held_since >= 300
    sent_before = counts(stats).sent
    :ok = :sys.resume(herd)

    eventually(fn -> assert counts(stats).skipped_late > 0 end)
    # Nobody was lost: each actor is still on the wheel once, and all move on.
    assert wheel_ids(herd) |> Enum.uniq() |> length() == 30
    eventually(fn -> assert counts(stats).sent - sent_before >= 30 end)
  end

  describe "retiring" do
    test "retired actors leave the world, each answered, and a herd left with none stops", %{
      world: world
    } do
      stats = Stats.new()

      herd =
        start_supervised!(
          Supervisor.child_spec(
            {Herd, world: world, stats: stats, count: 30, interval: 100, resolution: 10},
            id: make_ref(),
            restart: :transient
          )
        )

      eventually(fn -> assert World.entity_count(world) == 30 end)

      assert Herd.retire(herd, 10) == 10
      # The zone counts an entity out before its answer reaches the herd,
      # which counts it as left then.
      eventually(fn ->
        assert World.entity_count(world) == 20
        assert counts(stats).left == 10
      end)

      assert length(wheel_ids(herd)) == 20

      # The others still walk.
      sent = counts(stats).sent
      eventually(fn -> assert counts(stats).sent >= sent + 20 end)

      ref = Process.monitor(herd)
      assert Herd.retire(herd, 25) == 20
      assert_receive {:DOWN, ^ref, :process, ^herd, :normal}, 10_000
      assert World.entity_count(world) == 0
      assert counts(stats).left == 30
      assert counts(stats).in_flight == 0
    end

    test "actors not joined yet are retired first, by not joining", %{world: world} do
      stub = StubWorld.new(world, joins: {:busy_after, 5}, moves: :answer)
      {herd, stats} = start_herd(stub, count: 10, join_backoff: {10, 20})

      eventually(fn -> assert counts(stats).joined == 5 and counts(stats).join_retried >= 1 end)
      assert Herd.retire(herd, 7) == 7
      eventually(fn -> assert counts(stats).left == 2 end)
      assert length(wheel_ids(herd)) == 3
      assert %Herd{to_join: 0} = :sys.get_state(herd)
    end
  end

  describe "residents" do
    test "a resident herd's actors join with their walk, and their zones walk them", %{
      world: world
    } do
      stats = Stats.new()

      herd =
        start_supervised!(
          Supervisor.child_spec(
            {Herd,
             world: world, stats: stats, count: 12, interval: 100, resolution: 10, resident: true},
            id: make_ref(),
            restart: :transient
          )
        )

      eventually(fn -> assert counts(stats).joined == 12 end)
      assert wheel_ids(herd) == []
      assert length(:sys.get_state(herd).residents) == 12

      # The world ticks by hand here: one walk, one step each, none sent by the herd.
      before = World.stats(world)
      :ok = World.walk(world)
      eventually(fn -> assert World.audit(world) == :ok end)
      after_walk = World.stats(world)

      steps =
        for key <- [:moves_ok | World.rejections()], reduce: 0 do
          sum -> sum + after_walk[key] - before[key]
        end

      assert steps == 12
      assert counts(stats).sent == 0

      # Retired like any: they leave the world, and the herd stops.
      ref = Process.monitor(herd)
      assert Herd.retire(herd, 12) == 12
      assert_receive {:DOWN, ^ref, :process, ^herd, :normal}, 10_000
      assert World.entity_count(world) == 0
      assert counts(stats).left == 12
    end

    test "a kind that senses is walked by its herd, resident or not", %{world: world} do
      stats = Stats.new()

      herd =
        start_supervised!(
          {Herd,
           world: world,
           stats: stats,
           count: 5,
           interval: 100,
           resolution: 10,
           module: Grove.Actors.Wanderer,
           resident: true},
          id: make_ref()
        )

      eventually(fn -> assert counts(stats).sent >= 5 end)
      assert :sys.get_state(herd).residents == []
    end
  end

  describe "joining" do
    test "a join refused busy is tried again later, and nobody is counted as failed", %{
      world: world
    } do
      stub = StubWorld.new(world, joins: {:busy, 15})
      {_herd, stats} = start_herd(stub, count: 3, join_backoff: {1, 4})

      eventually(fn -> assert counts(stats).joined == 3 end)
      assert counts(stats).join_failed == 0
      assert counts(stats).join_retried == 15
    end

    test "a herd walks the actors it has while it waits to join the others", %{world: world} do
      # One join in, then nothing but refusals.
      stub = StubWorld.new(world, joins: {:busy_after, 1}, moves: :answer)
      {_herd, stats} = start_herd(stub, count: 2, join_backoff: {10, 20})

      eventually(fn -> assert counts(stats).ok >= 3 and counts(stats).join_retried >= 1 end)
      assert counts(stats).joined == 1
    end

    test "herds of a group join no more than join_concurrency at once", %{world: world} do
      stub = StubWorld.new(world, joins: :block)
      name = :"actors_#{System.unique_integer([:positive])}"

      start_supervised!(
        {Actors,
         name: name,
         world: stub,
         api: StubWorld,
         count: 40,
         per_herd: 5,
         interval: 100,
         resolution: 10,
         join_concurrency: 2},
        id: name
      )

      # Sixteen herds want to join; two may.
      assert_receive {:stub_joining, first}, 2000
      assert_receive {:stub_joining, second}, 2000
      assert first != second
      refute_receive {:stub_joining, _}, 200

      send(first, :stub_go)
      send(second, :stub_go)
      release_all(40)
      assert StubWorld.max_joining(stub) == 2
      eventually(fn -> assert Actors.joined(name) == 40 end)
    end
  end

  defp answer(herd, moves),
    do: send(herd, {:grove_moves, for({id, _dir, tag} <- moves, do: {id, tag, {:ok, {0, 0}}})})

  # Waits for the monotonic clock (native units) to pass `time`.
  defp wait_until(time) do
    if :erlang.monotonic_time() <= time do
      receive do
      after
        5 -> wait_until(time)
      end
    end
  end

  defp release_all(0), do: :ok

  defp release_all(left) do
    receive do
      {:stub_joining, herd} ->
        send(herd, :stub_go)
        release_all(left)

      {:stub_join, _herd, {:ok, _, _}} ->
        release_all(left - 1)
    after
      5000 -> flunk("joins stopped with #{left} to go")
    end
  end

  test "a herd of a kind that senses needs a world that can say what it senses", %{world: world} do
    # The stub world has no position/2 nor nearby/3.
    assert {:error, {{%ArgumentError{message: message}, _stack}, _child}} =
             start_supervised(
               {Herd,
                world: StubWorld.new(world, []),
                api: StubWorld,
                stats: Stats.new(),
                module: Grove.Actors.Wanderer,
                count: 1}
             )

    assert message =~ "Grove.Actors.Wanderer senses"
  end
end
