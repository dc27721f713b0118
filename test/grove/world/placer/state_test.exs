defmodule Grove.World.Placer.StateTest do
  # The placer's rules alone: no process, no node. The property at the end
  # runs whole clusters of them, the network simulated.
  use ExUnit.Case, async: true
  use Grove.Test.PlacerNodes

  import Grove.PropCase
  import Grove.Test.PlacerStates, only: [taking: 1, announced_in: 1]

  alias Grove.Cluster.Placement
  alias Grove.World.Placer.State

  doctest State

  defp placed(node, members, zones \\ 4) do
    state = %{State.new(node, zones) | members: members}
    {state, _effects} = State.join_or_start(state, nil)
    state
  end

  describe "placing" do
    test "the first member by name starts the world; another asks again later" do
      {a, effects} = State.join_or_start(%{State.new(@a, 4) | members: [@a, @b]}, nil)
      owners = Placement.owners(4, [@a, @b])
      assert {:publish, Enum.map(Tuple.to_list(owners), &{&1, 1})} in effects
      mine = for index <- 0..3, elem(owners, index) == @a, do: index

      for index <- mine do
        assert {:start_zone, index} in effects
        assert index in a.running
      end

      # Announced to b in one message.
      assert [{:send, @b, started}, {:send, @b, {:joined, @a}}] =
               for({:send, _, _} = send <- effects, do: send)

      assert announced_in(started) == for(index <- mine, do: {index, @a, 1, :started})

      assert {_b, [{:send_after, :place, _}]} =
               State.join_or_start(%{State.new(@b, 4) | members: [@a, @b]}, nil)
    end

    test "a node that joins a running world starts what is placed on it and hands over what is no longer its own" do
      running = [{@b, 1}, {@b, 1}, {@a, 1}, {@b, 1}]
      {a, effects} = State.join_or_start(%{State.new(@a, 4) | members: [@a]}, running)
      assert {:start_zone, 2} in effects
      assert State.placement(a, 0) == {@b, 1}
      refute Enum.any?(effects, &match?({:hand_over, _, _, _}, &1))

      # Members it counts that the placement did not: its zones for them go.
      {a, effects} = State.join_or_start(%{State.new(@a, 4) | members: [@a, @c]}, running)

      if Placement.owner(2, [@a, @c]) == @c do
        assert {:hand_over, 2, @c, 2} in effects
        assert 2 in a.retiring
      end
    end

    test "what is heard before the placement is heard again once placed, the newest per zone" do
      state = %{State.new(@c, 4) | members: [@a, @b, @c]}
      {state, []} = State.announced(state, 1, @b, 2, :handed, [@b])
      {state, []} = State.announced(state, 1, @a, 1, :started, [@a])
      assert state.early == %{1 => {@b, 2, :handed}}

      {state, []} = State.announced(state, 1, @a, 2, :handed, [@a])
      assert state.early == %{1 => {@a, 2, :handed}}

      {state, effects} = State.join_or_start(state, List.duplicate({@a, 1}, 4))
      assert {:send_self, {:zone_at, 1, @a, 2, :handed}} in effects
      assert state.early == %{}
    end
  end

  describe "announcements" do
    test "an older placement is ignored, a newer one taken" do
      a = placed(@a, [@a])
      later = %{a | locations: put_elem(a.locations, 0, {@a, 3})}
      # The node that announced it hears the newer one back.
      assert {^later, [{:log, :info, _}, {:send, @b, {:zone_at, 0, @a, 3, :handed}}]} =
               State.announced(later, 0, @b, 2, :handed, [@b])

      {a, effects} = State.announced(a, 0, @b, 2, :handed, [@b])
      assert State.placement(a, 0) == {@b, 2}
      # This node's copy, not handed away, stops and is emptied.
      assert {:stop_zone, 0} in effects and {:forget, 0} in effects
      refute 0 in a.running
    end

    test "a tie at one epoch goes to the first node by name, whichever is heard first" do
      # Each of a and b started the world alone, at epoch 1.
      a = placed(@a, [@a])
      b = placed(@b, [@b])

      # b hears a's: it gives its copy up.
      {b, effects} = State.announced(b, 0, @a, 1, :started, [@a])
      assert State.placement(b, 0) == {@a, 1}
      assert {:stop_zone, 0} in effects

      # a hears b's: it keeps its own, and tells b.
      assert {^a, [{:send, @b, {:zone_at, 0, @a, 1, :handed}}]} =
               State.announced(a, 0, @b, 1, :started, [@b])
    end

    test "a copy that nobody heard was started again stops once it is announced: the node that knows the newer run answers" do
      # c, which did not see b, started b's zone 0 again at epoch 2 and
      # told a; b never heard, and runs its copy on at epoch 1.
      a = placed(@a, [@a, @b])

      a = %{
        a
        | locations: put_elem(a.locations, 0, {@b, 1}),
          running: MapSet.delete(a.running, 0)
      }

      b = %{placed(@b, [@b]) | members: [@a, @b]}
      {a, _effects} = State.announced(a, 0, @c, 2, :restarted, [@b, @c])

      # b announces its copy (to a newcomer, as it hands it on...): a answers.
      assert {^a, [{:log, :info, _}, {:send, @b, answer}]} =
               State.announced(a, 0, @b, 1, :handed, [@b, @c])

      assert answer == {:zone_at, 0, @c, 2, :handed}
      {:zone_at, 0, node, epoch, how} = answer
      {b, effects} = State.announced(b, 0, node, epoch, how, [@a, @c])
      assert State.placement(b, 0) == {@c, 2}
      assert {:stop_zone, 0} in effects and {:forget, 0} in effects
      refute 0 in b.running

      # A node it does not reach is not answered: the send would wait for a connection.
      assert {^a, [{:log, :info, _}]} = State.announced(a, 0, @b, 1, :handed, [@c])
    end

    test "this node's placement of its own counts only while the zone runs here" do
      # Placed here by a placement it read, but not started: another's at the same epoch wins.
      a = %{placed(@a, [@a]) | running: MapSet.new()}
      {a, _effects} = State.announced(a, 0, @b, 1, :started, [@b])
      assert State.placement(a, 0) == {@b, 1}
    end

    test "a zone announced as restarted is recovered here" do
      a = placed(@a, [@a])
      {_a, effects} = State.announced(a, 0, @b, 5, :restarted, [@b])
      assert {:recovered, [0]} in effects
    end
  end

  describe "handovers" do
    test "members that change hand over what belongs elsewhere; its end places it there" do
      a = placed(@a, [@a], 8)
      {a, effects} = State.members(a, [@a, @b], true, [@b])
      moves = for {:hand_over, index, @b, 2} <- effects, do: index
      assert moves == for(index <- 0..7, Placement.owner(index, [@a, @b]) == @b, do: index)
      assert moves != []

      [index | _] = moves
      {a, effects} = State.handover_ended(a, index, :normal)
      assert [{:locate, ^index, @b, 2}, {:retire, ^index, timer}] = effects
      assert State.placement(a, index) == {@b, 2}

      # The handed zone passes on what comes late, then stops.
      assert index in a.retiring and index in a.running
      {a, [{:stop_zone, ^index}]} = State.retired(a, index, timer)
      refute index in a.running
    end

    test "a stop whose timer was cancelled as it went off stops no copy of the zone handed straight back and away again" do
      zone =
        Enum.find(0..63, fn index ->
          Placement.owner(index, [@a, @b]) == @b and Placement.owner(index, [@a, @c]) == @c
        end)

      a = placed(@a, [@a], 64)
      {a, effects} = State.members(a, [@a, @b], true, [@b])
      assert {:hand_over, zone, @b, 2} in effects
      {a, effects} = State.handover_ended(a, zone, :normal)
      assert [{:retire, ^zone, first}] = for({:retire, _, _} = retire <- effects, do: retire)

      # c joins and b leaves: b hands the zone straight back as a's timer
      # goes off, too late to cancel; a takes it and hands it on to c.
      {a, _} = State.members(a, [@a, @b, @c], true, [@b, @c])
      a = State.leaving(a, @b)
      {:ok, a, effects} = State.take_over(a, zone, [], [], 0, 3, [@b, @c], @b)
      assert {:cancel_retire, zone} in effects
      assert {:hand_over, zone, @c, 4} in effects
      assert zone in a.running and zone in a.retiring

      # The first timer's message comes all the same: the zone runs on,
      # until its handover to c ends and the stop set then comes.
      assert State.retired(a, zone, first) == {a, []}
      {a, effects} = State.handover_ended(a, zone, :normal)
      assert [{:retire, ^zone, second}] = for({:retire, _, _} = retire <- effects, do: retire)
      assert second != first
      assert State.retired(a, zone, first) == {a, []}
      assert {a, [{:stop_zone, ^zone}]} = State.retired(a, zone, second)
      refute zone in a.running
    end

    test "announcements go out, batched, before the handovers that come after them" do
      # c is gone and d joins: a starts again the zones of c that are its
      # own now, and hands d its share, zone by zone.
      a = placed(@a, [@a, @b, @c], 64)
      {_a, effects} = State.members(a, [@a, @b, @d], true, [@b, @d])

      order =
        Enum.flat_map(effects, fn
          {:send, @b, {:zone_at, index, @a, _epoch, :restarted}} ->
            [{:announced, index}]

          {:send, @b, {:zones_at, zones}} ->
            for {index, @a, _, :restarted} <- zones, do: {:announced, index}

          {:hand_over, index, @d, _epoch} ->
            [{:handed, index}]

          _other ->
            []
        end)

      assert {:announced, _} = Enum.find(order, &match?({:announced, _}, &1))
      assert {:handed, _} = Enum.find(order, &match?({:handed, _}, &1))
      assert Enum.any?(effects, &match?({:send, @b, {:zones_at, [_, _ | _]}}, &1))
      assert order == Enum.sort_by(order, &elem(&1, 1))
    end

    test "a node that joins announces what it read was its own before it hands it on" do
      # The placement read puts zones on a that b owns now: a announces
      # each, then hands it to b at the next epoch, which would take the
      # announcement coming after the handover for a stale one.
      running = List.duplicate({@a, 1}, 64)
      {_a, effects} = State.join_or_start(%{State.new(@a, 64) | members: [@a, @b]}, running)

      announced =
        Enum.find_index(effects, fn
          {:send, @b, {:zones_at, _}} -> true
          {:send, @b, {:zone_at, _, _, _, _}} -> true
          _other -> false
        end)

      handed = Enum.find_index(effects, &match?({:hand_over, _, @b, 2}, &1))
      assert announced != nil and handed != nil
      assert announced < handed
    end

    test "handovers that end together end as each alone would, placed in one write; one its new owner announced first is not placed again" do
      a = placed(@a, [@a], 8)
      {a, effects} = State.members(a, [@a, @b], true, [@b])
      moves = for {:hand_over, index, @b, 2} <- effects, do: index
      assert length(moves) > 2
      [heard | _] = moves

      # The new owner's announcement came before the handover's end.
      {a, [{:locate, ^heard, @b, 2}]} = State.announced(a, heard, @b, 2, :handed, [@b])

      ended = Enum.zip(moves, [:normal, :timeout | List.duplicate(:normal, length(moves))])

      {one_by_one, each} =
        Enum.reduce(ended, {a, []}, fn {index, reason}, {a, effects} ->
          {a, more} = State.handover_ended(a, index, reason)
          {a, effects ++ more}
        end)

      {together, effects} = State.handovers_ended(a, ended)
      # The one that failed is tried again after the others' ends.
      {retry, others} = Enum.split_with(each, &match?({:send_after, _, _}, &1))
      assert effects == others ++ retry
      assert together == one_by_one
      refute Enum.any?(effects, &match?({:locate, ^heard, _, _}, &1))
      assert State.placement(together, heard) == {@b, 2}
    end

    test "a batch partly failing keeps its failed zones here and tries them again together" do
      a = placed(@a, [@a], 8)
      {a, effects} = State.members(a, [@a, @b], true, [@b])
      [taken | failed] = moves = for {:hand_over, index, @b, 2} <- effects, do: index
      assert failed != []

      {a, effects} =
        State.handovers_ended(a, [{taken, :normal} | for(i <- failed, do: {i, :timeout})])

      assert State.placement(a, taken) == {@b, 2}
      for index <- failed, do: assert({:keep, index} in effects)

      assert [{:send_after, {:settle_all, ^failed}, 1000}] =
               for({:send_after, _, _} = e <- effects, do: e)

      assert List.last(effects) == {:send_after, {:settle_all, failed}, 1000}
      assert moves -- failed == [taken]

      {_a, effects} = State.settle_all(a, failed, [@b])
      assert effects == for(index <- failed, do: {:hand_over, index, @b, 2})
    end

    test "a handover that fails keeps the zone here and is tried again" do
      a = placed(@a, [@a], 8)
      {a, effects} = State.members(a, [@a, @b], true, [@b])
      [index | _] = for {:hand_over, index, _, _} <- effects, do: index

      {a, effects} = State.handover_ended(a, index, :timeout)
      assert {:keep, index} in effects
      assert {:send_after, {:settle, index}, 1000} in effects
      assert {:cancel_retire, index} in effects
      refute index in a.retiring

      # Later, still due: handed over again, at the same next epoch.
      {_a, effects} = State.settle(a, index, [@b])
      assert effects == [{:hand_over, index, @b, 2}]
    end

    test "a handover whose answer came late, though taken, is no failure" do
      a = placed(@a, [@a], 8)
      {a, effects} = State.members(a, [@a, @b], true, [@b])
      [index | _] = for {:hand_over, index, _, _} <- effects, do: index
      {a, _} = State.announced(a, index, @b, 2, :handed, [@b])
      {_a, effects} = State.handover_ended(a, index, :timeout)
      assert {:handed_to, index, @b} in effects
      refute {:keep, index} in effects
    end

    test "a handover that ends after the zone went on from the new owner, as its next owner said first, leaves it there" do
      for reason <- [:normal, :timeout] do
        a = placed(@a, [@a], 8)
        {a, effects} = State.members(a, [@a, @b], true, [@b])
        [index | _] = for {:hand_over, index, @b, 2} <- effects, do: index

        # The new owner handed it on to a third node at once, which said
        # so before the handover's answer came back.
        {a, _} = State.announced(a, index, @c, 3, :handed, [@b, @c])
        {a, effects} = State.handover_ended(a, index, reason)
        assert State.placement(a, index) == {@c, 3}
        refute Enum.any?(effects, &match?({:locate, _, _, _}, &1))
        refute {:keep, index} in effects
        assert Enum.any?(effects, &match?({:retire, ^index, _}, &1))

        # Placed on the new owner at that epoch, the first by name, the
        # third node's word would be stale here.
        assert State.announced(a, index, @c, 3, :handed, [@b, @c]) == {a, []}
      end
    end

    test "a handover that ends after the new owner handed the zone straight back leaves it running here" do
      for reason <- [:normal, :timeout] do
        a = placed(@a, [@a], 8)
        {a, effects} = State.members(a, [@a, @b], true, [@b])
        [index | _] = for {:hand_over, index, @b, 2} <- effects, do: index

        # b took it and, leaving as it came, handed it back before the
        # handover's end reached a.
        a = State.leaving(a, @b)
        {:ok, a, _} = State.take_over(a, index, [], [], 0, 3, [@b], @b)
        assert index in a.running and index not in a.retiring

        {a, effects} = State.handover_ended(a, index, reason)
        refute Enum.any?(effects, &match?({:retire, _, _}, &1))
        refute {:keep, index} in effects
        assert State.placement(a, index) == {@a, 3}
        assert index in a.running and index not in a.retiring
        # Taken while the handover was under way, it is settled now.
        assert {:send_self, {:settle, index}} in effects
        assert State.settle(a, index, [@b]) == {a, []}

        # A stop that was due for the copy handed away stops no copy that came back.
        assert State.retired(a, index, 0) == {a, []}
      end
    end

    test "a zone lost with the node it was handed to and started again here runs on when the handover ends" do
      a = placed(@a, [@a], 8)
      {a, effects} = State.members(a, [@a, @b], true, [@b])
      [index | _] = for {:hand_over, index, @b, 2} <- effects, do: index

      # b took it and said so, then was lost before the end reached a: a
      # starts it again.
      {a, _} = State.announced(a, index, @b, 2, :handed, [@b])
      {a, effects} = State.members(a, [@a], true, [])
      assert {:start_zone, index} in effects
      assert State.placement(a, index) == {@a, 3}

      {a, effects} = State.handover_ended(a, index, :normal)
      refute Enum.any?(effects, &match?({:retire, _, _}, &1))
      assert index in a.running and index not in a.retiring
    end

    test "a zone is taken over only once placed and not paused" do
      assert State.take_over(State.new(@b, 4), 0, [], [], 0, 2, [], @a) == {:error, :starting}
      {paused, [{:pause}]} = State.pause(placed(@b, [@b]))
      assert State.take_over(paused, 0, [], [], 0, 2, [], @a) == {:error, :paused}

      b = %{placed(@b, [@b]) | members: [@a, @b]}
      {:ok, b, effects} = State.take_over(b, 0, [:row], [:sub], 7, 9, [@a], @a)

      assert {:take_rows, 0, [:row], [:sub], 7} in effects
      assert {:send, @a, {:zone_at, 0, @b, 9, :handed}} in effects
      assert State.placement(b, 0) == {@b, 9}
      assert 0 in b.running
    end

    test "a zone handed over at an epoch no newer than the one known is refused, its sender told where it runs, nothing of it taken" do
      # b runs zone 0 at epoch 3 (it started it again while a was taken
      # for lost); a, which never heard, hands its old copy to b at 3, or
      # at 2; or to c at 4, once c heard b took it at 4.
      b = %{placed(@b, [@b]) | members: [@a, @b]}
      b = %{b | locations: put_elem(b.locations, 0, {@b, 3})}

      for epoch <- [2, 3] do
        assert {:error, :stale, effects} =
                 State.take_over(b, 0, [:row], [:sub], 7, epoch, [@a], @a)

        refute Enum.any?(effects, &match?({:take_rows, _, _, _, _}, &1))
        refute Enum.any?(effects, &match?({:locate, _, _, _}, &1))
        assert {:count, :zone_handovers_stale, 1} in effects
        assert {:send, @a, {:zone_at, 0, @b, 3, :handed}} in effects
        assert [_once] = for({:log, :warning, _} = log <- effects, do: log)
      end

      c = %{placed(@c, [@c]) | members: [@a, @b, @c]}
      {c, _} = State.announced(c, 0, @b, 4, :handed, [@a, @b])

      assert {:error, :stale, effects} = State.take_over(c, 0, [], [], 0, 4, [@a, @b], @a)
      assert {:send, @a, {:zone_at, 0, @b, 4, :handed}} in effects
      # A sender not connected is not answered (a send would wait for the connection).
      assert {:error, :stale, effects} = State.take_over(c, 0, [], [], 0, 4, [@b], @a)
      refute Enum.any?(effects, &match?({:send, _, _}, &1))
      assert State.placement(c, 0) == {@b, 4}

      # A newer epoch is taken.
      assert {:ok, c, _} = State.take_over(c, 0, [], [], 0, 5, [@a, @b], @a)
      assert State.placement(c, 0) == {@c, 5}
    end

    test "a batch with a zone handed over at a stale epoch is refused whole, the stale ones counted and answered in one message, logged once" do
      {d, zones} = taking(64)
      [{first, _, _, _, epoch} = zone, {second, _, _, _, _} | rest] = zones
      # d placed the first two at the epochs they are handed at already.
      {d, _} = State.announced(d, first, @b, epoch, :handed, [@a, @b, @c])
      {d, _} = State.announced(d, second, @b, epoch + 1, :handed, [@a, @b, @c])

      assert {:error, :stale, effects} =
               State.take_over_all(d, [zone | rest] ++ [Enum.at(zones, 1)], [@a, @b, @c], @a)

      assert {:count, :zone_handovers_stale, 2} in effects
      assert [_once] = for({:log, :warning, _} = log <- effects, do: log)
      assert [{:send, @a, answer}] = for({:send, _, _} = send <- effects, do: send)

      assert announced_in(answer) == [
               {first, @b, epoch, :handed},
               {second, @b, epoch + 1, :handed}
             ]

      refute Enum.any?(effects, &match?({:take_rows, _, _, _, _}, &1))

      # Without them, the rest is taken.
      assert {:ok, d, _} = State.take_over_all(d, rest, [@a, @b, @c], @a)
      for {index, _, _, _, epoch} <- rest, do: assert(State.placement(d, index) == {@d, epoch})
    end
  end

  describe "lost nodes" do
    test "the zones of a node gone (out of the members and disconnected) start again here, empty" do
      {a, _} =
        %{State.new(@a, 8) | members: [@a, @b]}
        |> State.join_or_start(nil)

      lost = for index <- 0..7, State.location(a, index) == @b, do: index

      # Still connected: not yet.
      assert {_, []} = State.members(a, [@a], true, [@b])

      {a, effects} = State.members(a, [@a], true, [])
      assert {:recovered, lost} in effects

      for index <- lost do
        assert {:reset_feed, index} in effects
        assert State.placement(a, index) == {@a, 2}

        # What it saved as it slept there is held before anyone is told it was lost.
        assert Enum.find_index(effects, &(&1 == {:wake_saved, index})) <
                 Enum.find_index(effects, &(&1 == {:recovered, lost}))

        # The rows of its bacteria, asked of the members, are here before it starts.
        assert Enum.find_index(effects, &(&1 == {:fetch_life, lost})) <
                 Enum.find_index(effects, &(&1 == {:start_zone, index}))
      end

      # Asked once for them all.
      assert length(for {:fetch_life, _} <- effects, do: 1) == 1
    end

    test "a node that joins starts nothing again for a node it has not reached yet; it does once that node, seen, is gone, or on another's word" do
      a = placed(@a, [@a, @b], 8)
      running = Tuple.to_list(a.locations)
      joining = %{State.new(@c, 8) | members: [@a, @c]}
      {c, _} = State.join_or_start(joining, running)

      # b's zones that c owns while it sees only a and itself.
      ours =
        for index <- 0..7,
            State.location(c, index) == @b,
            Placement.owner(index, [@a, @c]) == @c,
            do: index

      assert ours != []

      # c has not reached b yet: b is no more gone than it is up.
      {unreached, effects} = State.members(c, [@a, @c], true, [@a])
      refute Enum.any?(effects, &match?({:recovered, _}, &1))
      for index <- ours, do: assert(State.location(unreached, index) == @b)

      # Reached, then lost: its zones start again here.
      {c, _} = State.members(unreached, [@a, @b, @c], true, [@a, @b])
      {c, effects} = State.members(c, [@a, @c], true, [@a])
      assert {:recovered, ours} in effects
      for index <- ours, do: assert(State.placement(c, index) == {@c, 2})

      # Never reached, but a, which saw b go, says so (`{:zone_at, ..., :restarted}`
      # naming the node gone): c starts the zone again as its own.
      [index | _] = ours
      {c, effects} = State.announced(unreached, index, @b, 1, :restarted, [@a])
      assert {:start_zone, index} in effects
      assert State.placement(c, index) == {@c, 2}
    end

    test "a zone started again by a node cut off from its owner first is started again by its owner, once that node is gone" do
      members = [@a, @b, @c]

      # A zone of a's, which c takes when it loses a, and a again when c is gone.
      zone =
        Enum.find(0..15, fn index ->
          Placement.owner(index, members) == @a and Placement.owner(index, [@b, @c]) == @c
        end)

      a = placed(@a, members, 16)

      {b, _} =
        State.join_or_start(%{State.new(@b, 16) | members: members}, Tuple.to_list(a.locations))

      assert zone in a.running

      # c lost a, but not b: with b it had a quorum, started the zone again
      # and told b (a it could not tell). Then b lost c.
      {b, _} = State.announced(b, zone, @c, 2, :restarted, [@a, @c])
      {b, effects} = State.members(b, [@a, @b], true, [@a])
      assert State.placement(b, zone) == {@c, 2}

      assert {zone, @c, 2, :restarted} in for(
               {:send, @a, m} <- effects,
               z <- announced_in(m),
               do: z
             )

      # a lost c, and runs its own, older copy on; until it hears from b.
      {a, _} = State.members(a, [@a, @b], true, [@b])
      assert State.placement(a, zone) == {@a, 1}
      {a, effects} = State.announced(a, zone, @c, 2, :restarted, [@b])
      assert State.placement(a, zone) == {@a, 3}
      assert zone in a.running
      assert {:send, @b, {:zone_at, zone, @a, 3, :restarted}} in effects

      # b takes it, and tells nobody again.
      {b, effects} = State.announced(b, zone, @a, 3, :restarted, [@a])
      assert State.placement(b, zone) == {@a, 3}
      refute Enum.any?(effects, &match?({:send, _, _}, &1))
    end

    test "a side without a quorum pauses, and is placed again when it has one" do
      a = placed(@a, [@a, @b])
      {a, [{:pause}]} = State.members(a, [@a], false, [])
      assert a.paused and a.running == MapSet.new()
      {a, [{:log, :warning, _}]} = State.members(a, [@a, @b], true, [@b])
      refute a.paused
      assert a.locations == nil
    end
  end

  describe "nodes that start at once" do
    # A node is a member as soon as its membership runs, before its world:
    # what another tells its placer then is lost. And one that pauses and
    # resumes reads the placement again, from a member that may not have
    # heard what it was told.
    test "a node that says it joined hears of every zone this one serves, and of every zone this one places on it" do
      a = placed(@a, [@a, @b], 8)
      {_a, effects} = State.joined(a, @b, [@b])
      owners = Placement.owners(8, [@a, @b])
      assert length(Enum.uniq(Tuple.to_list(owners))) == 2
      # In one message.
      assert effects == [
               {:send, @b,
                {:zones_at, for(index <- 0..7, do: {index, elem(owners, index), 1, :handed})}}
             ]

      # Not placed yet, it has nothing to tell.
      assert State.joined(%{State.new(@a, 8) | members: [@a, @b]}, @b, [@b]) ==
               {%{State.new(@a, 8) | members: [@a, @b]}, []}
    end

    test "a zone a node ran as it paused, which another heard of only after the node read the placement again, starts again: none is left where each believes the other runs it" do
      members = [@a, @b]
      a = placed(@a, members, 8)

      {b, _} =
        State.join_or_start(%{State.new(@b, 8) | members: members}, Tuple.to_list(a.locations))

      [zone | _] = for index <- 0..7, State.location(a, index) == @b, do: index

      # b's placer stops as a node that leaves does, and says the zone is
      # abandoned: a starts it again at 2, telling nobody (b is leaving).
      # b's new placer read the placement before, runs the zone at 1 and
      # says so: a answers with its own.
      a = State.leaving(a, @b)
      {a, _} = State.abandoned(a, zone, @b, [@b])
      assert State.placement(a, zone) == {@a, 2}
      {a, answer} = State.announced(a, zone, @b, 1, :handed, [@b])
      assert {:send, @b, {:zone_at, zone, @a, 2, :handed}} in answer

      # a pauses, resumes and reads the placement from b, which has not
      # heard the answer yet; then b hears it, and its copy stops.
      {a, [{:pause}]} = State.members(a, [@a], false, [])
      {a, _} = State.members(a, members, true, [@b])
      {a, a_said} = State.join_or_start(a, Tuple.to_list(b.locations))
      refute zone in a.running
      {b, _} = State.announced(b, zone, @a, 2, :handed, [@a])
      refute zone in b.running

      # b hears that a joined, and tells it where it places the zone.
      cores = exchange(%{@a => a, @b => b}, sends(@a, a_said))

      for index <- 0..7 do
        serving =
          for {node, core} <- cores, index in core.running, index not in core.retiring, do: node

        assert serving == [State.location(cores[@a], index)],
               "zone #{index} served by #{inspect(serving)}"

        assert State.location(cores[@a], index) == Placement.owner(index, members)
      end

      assert State.placements(cores[@a]) == State.placements(cores[@b])
    end

    test "a member new here is told what this node serves, and asked what it serves" do
      a = placed(@a, [@a, @b], 8)
      {_a, effects} = State.members(a, [@a, @b, @c], true, [@b, @c])
      assert {:send, @c, {:joined, @a}} in effects
      refute {:send, @b, {:joined, @a}} in effects

      assert [_ | _] =
               for(
                 {:send, @c, message} <- effects,
                 {_, @a, _, :handed} <- announced_in(message),
                 do: 1
               )
    end

    test "a node that joins hears of each zone a member serves from that member alone, twice at most (as it is seen new, and as it says it joined), and of each zone placed on it from each member that places it there at most" do
      zones = 48
      {a, a_said} = State.join_or_start(%{State.new(@a, zones) | members: [@a, @b]}, nil)

      {b, b_said} =
        State.join_or_start(
          %{State.new(@b, zones) | members: [@a, @b]},
          Tuple.to_list(a.locations)
        )

      cores = exchange(%{@a => a, @b => b}, sends(@a, a_said) ++ sends(@b, b_said))

      # c joins: a and b see it new, and c reads the placement and says it joined.
      members = [@a, @b, @c]
      running = Tuple.to_list(State.placements(cores[@a]))
      {a, a_said} = State.members(cores[@a], members, true, [@b, @c])
      {b, b_said} = State.members(cores[@b], members, true, [@a, @c])
      {c, c_said} = State.join_or_start(%{State.new(@c, zones) | members: members}, running)
      said = sends(@a, a_said) ++ sends(@b, b_said) ++ sends(@c, c_said)
      turn = fn more -> send(self(), {:turn, more}) end
      cores = exchange(%{@a => a, @b => b, @c => c}, said, turn: turn)

      heard =
        for {@c, message} <- said ++ turns(),
            {index, at, _epoch, _how} <- announced_in(message),
            do: {index, at}

      # Each zone a or b serves, from the one that serves it: twice at most.
      served = for {index, at} <- heard, at != @c, do: {index, at}
      assert served != []

      for {zone, count} <- Enum.frequencies(served),
          do: assert(count <= 2, "#{inspect(zone)} heard #{count} times")

      placed_here = for {index, @c} <- heard, do: index

      for {index, count} <- Enum.frequencies(placed_here),
          do: assert(count <= 2, "zone #{index} heard #{count} times")

      for index <- 0..(zones - 1),
          do: assert(State.location(cores[@c], index) == Placement.owner(index, members))
    end
  end

  describe "a world of many zones" do
    # A node that joins hears of every zone each member serves: a zone a
    # message, a member of 100,000 zones sent tens of thousands in one turn.
    @many 4_000

    test "a node that joins hears what each member serves in a few messages, and all are placed as a zone a message placed them" do
      # Each turn sends each node a message a thousand zones at most, and
      # says it joined; a handover is a process of its own, not counted.
      turn = fn more ->
        for {_to, count} <-
              more
              |> Enum.reject(&match?({_, {:hand_over, _, _, _}}, &1))
              |> Enum.frequencies_by(&elem(&1, 0)) do
          assert count <= div(@many, 1000) + 1
        end
      end

      {a, a_said} = State.join_or_start(%{State.new(@a, @many) | members: [@a, @b]}, nil)
      running = Tuple.to_list(a.locations)
      {b, b_said} = State.join_or_start(%{State.new(@b, @many) | members: [@a, @b]}, running)
      said = sends(@a, a_said) ++ sends(@b, b_said)
      turn.(said)

      cores = exchange(%{@a => a, @b => b}, said, turn: turn)

      assert settled(cores) ==
               settled(
                 exchange(%{@a => a, @b => b}, Enum.flat_map(said, &singly/1), singly: true)
               )

      # c joins the two.
      members = [@a, @b, @c]
      running = Tuple.to_list(State.placements(cores[@a]))
      {a, a_said} = State.members(cores[@a], members, true, [@b, @c])
      {b, b_said} = State.members(cores[@b], members, true, [@a, @c])
      {c, c_said} = State.join_or_start(%{State.new(@c, @many) | members: members}, running)
      said = sends(@a, a_said) ++ sends(@b, b_said) ++ sends(@c, c_said)
      turn.(sends(@a, a_said))
      turn.(sends(@b, b_said))

      cores = exchange(%{@a => a, @b => b, @c => c}, said, turn: turn)

      assert settled(cores) ==
               settled(
                 exchange(%{@a => a, @b => b, @c => c}, Enum.flat_map(said, &singly/1),
                   singly: true
                 )
               )

      for core <- Map.values(cores),
          do: assert(State.placements(core) == State.placements(cores[@a]))

      for index <- 0..(@many - 1) do
        at = Placement.owner(index, members)
        assert State.location(cores[@a], index) == at

        assert [at] ==
                 for(
                   {node, core} <- cores,
                   index in core.running,
                   index not in core.retiring,
                   do: node
                 )
      end
    end
  end

  describe "a world of 100,000 zones" do
    # The huge world's zones on demand are placed by these rules: a rule
    # that appends to the effects it gathers, or writes the placement's
    # tuple once a zone (a copy of it each time), grows with the square
    # of the zones. What a rule allocates is counted, not timed.
    @many_taken 8_000

    test "what a rule allocates grows with the zones, not with their square" do
      small = growth_rules(5_000)
      large = growth_rules(50_000)

      for {name, rule} <- small do
        {words_small, _} = Grove.Allocation.words(rule)
        {words_large, _} = Grove.Allocation.words(large[name])

        # About 10 times as much when linear, 100 when quadratic.
        assert words_large < 20 * words_small,
               "#{name}: #{words_small} words at 5,000 zones, #{words_large} at 50,000"
      end
    end

    test "many zones handed over at once are taken as one at a time takes them, announced in a few messages" do
      {d, zones} = taking(@many_taken)
      connected = [@a, @b, @c]

      {one_by_one, each} =
        Enum.reduce(zones, {d, []}, fn {index, rows, subs, seq, epoch}, {d, effects} ->
          {:ok, d, more} = State.take_over(d, index, rows, subs, seq, epoch, connected, @a)
          {d, effects ++ more}
        end)

      {:ok, all, effects} = State.take_over_all(d, zones, connected, @a)
      assert settled(all) == settled(one_by_one)

      assert for(index <- 0..(@many_taken - 1), do: State.placement(all, index)) ==
               Tuple.to_list(State.placements(all))

      # The same effects, in the same order, but for the announcements,
      # which go to each member in order, a thousand zones a message.
      apart = fn effects ->
        {Enum.reject(effects, &match?({:send, _, _}, &1)),
         Enum.group_by(
           for({:send, to, message} <- effects, zone <- announced_in(message), do: {to, zone}),
           &elem(&1, 0),
           &elem(&1, 1)
         )}
      end

      assert apart.(effects) == apart.(each)
      taken = length(zones)
      assert taken > 1000

      for member <- connected do
        assert Enum.count(effects, &match?({:send, ^member, _}, &1)) == div(taken - 1, 1000) + 1
      end

      # Refused all together while not placed, or paused.
      assert State.take_over_all(State.new(@d, @many_taken), zones, connected, @a) ==
               {:error, :starting}

      assert State.take_over_all(%{d | paused: true}, zones, connected, @a) == {:error, :paused}
    end
  end

  defp growth_rules(zones) do
    start = %{State.new(@a, zones) | members: [@a, @b, @c]}
    {a, _} = State.join_or_start(start, nil)
    running = Tuple.to_list(a.locations)
    {d, taken} = taking(zones)

    # b announces a new epoch of every zone it runs, a thousand a
    # message, each heard in a rule of its own.
    heard =
      for({{@b, epoch}, index} <- Enum.with_index(running), do: {index, @b, epoch + 1, :handed})
      |> Enum.chunk_every(1000)

    [
      start: fn -> State.join_or_start(start, nil) end,
      restart: fn -> State.join_or_start(start, running) end,
      join: fn -> State.members(a, [@a, @b, @c, @d], true, [@b, @c, @d]) end,
      lost: fn -> State.members(a, [@a, @b], true, [@b]) end,
      taken: fn -> State.take_over_all(d, taken, [@a, @b, @c], @a) end,
      heard: fn ->
        Enum.reduce(heard, d, fn zones, d ->
          {d, _effects} = State.announced_all(d, zones, [@a, @b, @c])
          d
        end)
      end
    ]
  end

  describe "a placer started again on a node that stays up" do
    # Its supervisor restarted it (its zones' supervisor died): the old
    # placer left the cluster as a node that stops does, and said that a
    # zone whose process it still saw, dying, was abandoned; the new one
    # joins the group under a process of its own, and reads the placement
    # from a member.
    test "runs each zone on one node once the two have spoken, though the group never showed it gone and it read the placement before its zone was started again elsewhere" do
      members = [@a, @b]
      a = placed(@a, members, 8)
      running = Tuple.to_list(a.locations)
      {b, _} = State.join_or_start(%{State.new(@b, 8) | members: members}, running)
      [zone | _] = for index <- 0..7, State.location(a, index) == @b, do: index
      assert zone in b.running

      # b's old placer says it leaves; the group dropped its process and
      # took the new one's before a's membership looked: a hears the same
      # members again, never b gone.
      a = State.leaving(a, @b)
      {a, _} = State.members(a, members, true, [@b])

      # b's new placer reads a's placement before a has heard that the zone
      # was abandoned (or while a asks the members for its bacteria), and
      # starts it; a then starts it again, as b's old placer asked.
      {b, b_said} = State.join_or_start(%{State.new(@b, 8) | members: members}, running)
      assert zone in b.running
      {a, a_said} = State.abandoned(a, zone, @b, [@b])
      assert zone in a.running

      cores = exchange(%{@a => a, @b => b}, sends(@a, a_said) ++ sends(@b, b_said))

      for index <- 0..7 do
        serving =
          for {node, core} <- cores, index in core.running, index not in core.retiring, do: node

        assert serving == [State.location(cores[@a], index)],
               "zone #{index} served by #{inspect(serving)}"

        assert State.location(cores[@a], index) == Placement.owner(index, members)
      end

      for core <- Map.values(cores), do: assert(core.members == members)
      assert State.placements(cores[@a]) == State.placements(cores[@b])
    end
  end

  # A placer's state, or each of a cluster's, with its placement whole:
  # two that placed the same zones alike, whenever each built its tuple.
  defp settled(%State{} = state), do: %{state | locations: State.placements(state), located: %{}}
  defp settled(cores), do: Map.new(cores, fn {node, core} -> {node, settled(core)} end)

  # The messages of `effects` from `node`, in order.
  # What each turn of `exchange/3` sent, given `turn: &send(self(), {:turn, &1})`.
  defp turns do
    receive do
      {:turn, more} -> more ++ turns()
    after
      0 -> []
    end
  end

  defp sends(node, effects) do
    for effect <- effects, message = outgoing(node, effect), do: message
  end

  defp outgoing(_node, {:send, to, message}), do: {to, message}
  defp outgoing(node, {:send_self, message}), do: {node, message}
  defp outgoing(node, {:hand_over, index, to, epoch}), do: {node, {:hand_over, index, to, epoch}}
  defp outgoing(_node, _effect), do: nil

  # Two or three placers that hear each other's messages in the order sent,
  # until none is left; a handover is taken at once. Options: `:turn`, a
  # function given what each turn sends; `:singly`, many zones' messages
  # heard a zone a message, as they were sent before they went in one.
  defp exchange(cores, messages, opts \\ [])

  defp exchange(cores, [], _opts), do: cores

  defp exchange(cores, [{to, message} | rest], opts) do
    connected = Map.keys(cores) -- [to]
    core = cores[to]

    {cores, more} =
      case message do
        {:zone_at, index, node, epoch, how} ->
          {core, effects} = State.announced(core, index, node, epoch, how, connected)
          {Map.put(cores, to, core), sends(to, effects)}

        {:zones_at, zones} ->
          {core, effects} = State.announced_all(core, zones, connected)
          {Map.put(cores, to, core), sends(to, effects)}

        {:joined, node} ->
          {core, effects} = State.joined(core, node, connected)
          {Map.put(cores, to, core), sends(to, effects)}

        {:hand_over, index, new_owner, epoch} ->
          {:ok, taker, taken} =
            State.take_over(
              cores[new_owner],
              index,
              [],
              [],
              0,
              epoch,
              Map.keys(cores) -- [new_owner],
              to
            )

          {core, ended} = State.handover_ended(core, index, :normal)
          cores = cores |> Map.put(new_owner, taker) |> Map.put(to, core)
          {cores, sends(new_owner, taken) ++ sends(to, ended)}

        _timer ->
          {cores, []}
      end

    if turn = opts[:turn], do: turn.(more)

    more = if opts[:singly], do: Enum.flat_map(more, &singly/1), else: more

    exchange(cores, rest ++ more, opts)
  end

  defp singly({to, {:zones_at, zones}}),
    do: for({index, node, epoch, how} <- zones, do: {to, {:zone_at, index, node, epoch, how}})

  defp singly(message), do: [message]

  ## A cluster of placers, the network simulated

  # Nodes of a cluster of three start (each seeing some of the others at
  # first), stop on purpose (handing their zones over) or are killed, never
  # leaving fewer than two, as in Grove.ClusterPropertyTest; their messages
  # arrive in any order that keeps each sender's order to each receiver, as
  # Erlang's do, and a side without a quorum pauses. Once everything is
  # delivered, every live node places every zone where rendezvous hashing
  # over the live nodes puts it, at the same epoch, and exactly one node
  # serves it, handing none.
  #
  # Handovers go as `Grove.World.Placer` makes them: the zones one run of
  # effects hands to one node go in one process (a job here), a batch a
  # call, each batch's ends in one message to the placer, and the job's
  # exit after them; a call that fails ends the job, the rest reported
  # not attempted, and one that refuses stale zones alone is answered,
  # the job going on; a pause kills the jobs; so does a node that stops,
  # the call under way taken by its new owner or not, and it hands what
  # it still serves itself, a batch a call. A node may start on an older
  # build, which speaks only the single-zone forms: it is announced zones
  # one a message and handed them one a call, and does the same.
  #
  # That node runs these rules, not its build's: what this property
  # holds is that this build's rules agree whatever forms a link
  # carries (a call of one zone refused as stale is refused alone, as
  # `State.take_over_fresh/4` refuses it in a batch; zones heard one a
  # message are placed as in one, "a world of many zones" above). Where
  # an older build's own rules differ (one from before stale handovers
  # were refused takes them, and runs its copy beside the newer one),
  # no rule of this build makes up for them: a cluster is as sound as
  # its oldest build until that build is gone, and this is not
  # modelled.
  @nodes [:n1@h, :n2@h, :n3@h]
  @zones 12
  @batch 3
  # Zones handed to a node in one call at most, when both speak it.
  @handover_batch 2

  test "whatever starts, stops and dies, in whatever order the messages come, the live nodes agree where every zone runs, and each runs on one" do
    check(
      forall(commands(), fn {first, commands} -> simulate(first, commands) end),
      numtests: 100
    )
  end

  defp commands do
    node = :proper_types.integer(0, length(@nodes) - 1)
    seed = :proper_types.integer(1, 1_000_000)

    # On an older build, speaking only the single-zone forms, or not.
    old = :proper_types.frequency([{3, false}, {1, true}])

    command =
      :proper_types.frequency([
        {4, {:start, node, :proper_types.list(:proper_types.boolean()), seed, old}},
        {1, {:stop, node, seed}},
        {2, {:restart, node, :proper_types.list(:proper_types.boolean()), seed}},
        {2, {:kill, node, seed}},
        {2, {:split, node, seed}}
      ])

    {:proper_types.list({node, old}), :proper_types.resize(15, :proper_types.list(command))}
  end

  defp simulate(first, commands) do
    :rand.seed(:exsss, 42)

    sim = %{
      cores: %{},
      channels: %{},
      timers: [],
      cut: MapSet.new(),
      # Nodes on an older build.
      old: MapSet.new(),
      # Handover processes: id => %{from, to, zones}; and for
      # each node's placer, those it awaits: id => the zones not ended yet.
      jobs: %{},
      awaited: %{},
      jobs_started: 0
    }

    # A few nodes first, each seeing those started before it.
    starts =
      for {n, old} <- Enum.uniq_by(first, &elem(&1, 0)),
          do: {:start, n, [true, true, true], 1, old}

    sim =
      sim
      |> then(&Enum.reduce(starts, &1, fn start, sim -> command(sim, start) end))
      |> quiesce(0)

    check_agreement(sim)

    # Then one change at a time, each settled before the next, as the
    # cluster property test does with real nodes.
    Enum.reduce(commands, sim, fn command, sim ->
      sim = sim |> command(command) |> quiesce(0)
      check_agreement(sim)
      sim
    end)

    true
  end

  # A node's placer: it announces @batch zones a message at most, so that
  # what a node serves goes to another in several.
  defp new_core(node, members), do: %{State.new(node, @zones) | members: members, batch: @batch}

  # As `Grove.Cluster.Membership`: more than half of the three, or half
  # with the first of them.
  defp quorum?(members),
    do: Grove.Cluster.Membership.quorum?(members, length(@nodes), MapSet.new(@nodes))

  defp command(sim, {:start, n, sees, seed, old}) do
    node = Enum.at(@nodes, n)

    if Map.has_key?(sim.cores, node) do
      sim
    else
      :rand.seed(:exsss, seed)

      sim = %{
        sim
        | old: if(old, do: MapSet.put(sim.old, node), else: MapSet.delete(sim.old, node))
      }

      live = sim.cores |> Map.keys() |> Enum.sort()
      # What the node sees of the group when it starts: itself and some others.
      seen = for {other, true} <- Enum.zip(live, sees ++ List.duplicate(false, 3)), do: other
      core = new_core(node, Enum.sort([node | seen]))
      sim = %{sim | cores: Map.put(sim.cores, node, core)}
      sim = membership(sim)
      if quorum?(core.members), do: place(sim, node), else: rule(sim, node, State.pause(core))
    end
  end

  defp command(sim, {:stop, n, seed}) do
    node = Enum.at(@nodes, n)

    case sim.cores do
      %{^node => core}
      when map_size(sim.cores) > 1 and core.locations != nil and not core.paused ->
        :rand.seed(:exsss, seed)
        stop(sim, node)

      _ ->
        sim
    end
  end

  # A node's placer started again by its supervisor (its zones' supervisor
  # died), while the node stays up: the old one says it leaves, and each
  # zone it serves whose process it still saw, dying (`dying`), it says is
  # abandoned, to start again on its owner among the others; those whose
  # process it saw gone already it says nothing of. What was on its way to
  # it is lost. The group may show the others the node gone, then back, or
  # never (its old process and its new one changed places before they
  # looked). The new placer reads the placement from a member at any moment
  # among the others' events.
  defp command(sim, {:restart, n, dying, seed}) do
    node = Enum.at(@nodes, n)

    case sim.cores[node] do
      %State{locations: locations, paused: false}
      when map_size(sim.cores) > 1 and locations != nil ->
        :rand.seed(:exsss, seed)
        sim = finish_handovers(sim, node)
        core = sim.cores[node]
        others = core.members -- [node]
        # It says it leaves before it leaves the group (`Grove.World.Placer`),
        # and this comes before the group shows its new process.
        sim =
          Enum.reduce(others, sim, fn other, sim ->
            sim |> enqueue(node, other, {:leaving, node}) |> deliver_channel({node, other})
          end)

        sim =
          core
          |> State.leave()
          |> Enum.zip(dying ++ List.duplicate(true, @zones))
          |> Enum.reduce(sim, fn
            {{index, to, _epoch}, true}, sim -> enqueue(sim, node, to, {:abandoned, index, node})
            {_zone, false}, sim -> sim
          end)

        channels = Map.reject(sim.channels, fn {{_from, to}, _} -> to == node end)
        timers = Enum.reject(sim.timers, fn {at, _} -> at == node end)
        sim = %{sim | channels: channels, timers: timers, awaited: Map.delete(sim.awaited, node)}

        # Its new placer, a member of the group again.
        members = members_of(sim, node)
        sim = put_in(sim.cores[node], new_core(node, members))

        sim =
          if :rand.uniform(2) == 1 do
            Enum.reduce(others, sim, fn other, sim ->
              enqueue(sim, :group, other, {:members, members_of(sim, other) -- [node]})
            end)
            |> membership()
          else
            sim
          end

        sim |> steps(:rand.uniform(10) - 1) |> place(node)

      _ ->
        sim
    end
  end

  defp command(sim, {:kill, n, _seed}) do
    node = Enum.at(@nodes, n)

    if Map.has_key?(sim.cores, node) and map_size(sim.cores) > 2,
      do: sim |> gone(node) |> membership() |> nodedown(),
      else: sim
  end

  # A node is cut off from the others one link at a time, with some of
  # the cluster's messages delivered between two cuts: for a moment it
  # still has a quorum with some. Once all is delivered the others agree
  # and it has paused; then the links are back, and it takes its share again.
  defp command(sim, {:split, n, seed}) do
    node = Enum.at(@nodes, n)
    others = Map.keys(sim.cores) -- [node]

    if Map.has_key?(sim.cores, node) and length(others) == 2 do
      :rand.seed(:exsss, seed)

      sim =
        Enum.reduce(Enum.shuffle(others), sim, fn other, sim ->
          sim |> cut(node, other) |> steps(:rand.uniform(30) - 1)
        end)
        |> quiesce(0)

      assert sim.cores[node].paused
      check_agreement(%{sim | cores: Map.delete(sim.cores, node)})

      %{sim | cut: MapSet.new()}
      |> membership()
    else
      sim
    end
  end

  # A link drops: what was on its way either way is lost, and each end
  # hears the other go, from the group and from the network.
  defp cut(sim, a, b) do
    channels = Map.drop(sim.channels, [{a, b}, {b, a}])
    sim = %{sim | cut: MapSet.put(sim.cut, link(a, b)), channels: channels}

    Enum.reduce([a, b], sim, fn node, sim ->
      sim
      |> enqueue(:group, node, {:members, members_of(sim, node)})
      |> enqueue(:net, node, :nodedown)
    end)
  end

  defp link(a, b), do: Enum.sort([a, b])

  defp cut?(sim, a, b), do: MapSet.member?(sim.cut, link(a, b))

  defp steps(sim, 0), do: sim

  defp steps(sim, n) do
    case step(sim) do
      nil -> sim
      sim -> steps(sim, n - 1)
    end
  end

  # Every live node hears that a node went down.
  defp nodedown(sim),
    do: Enum.reduce(Map.keys(sim.cores), sim, &enqueue(&2, :net, &1, :nodedown))

  # Every live node hears of the members (the group's view, in time): the
  # nodes it is connected to.
  defp membership(sim) do
    Enum.reduce(
      Map.keys(sim.cores),
      sim,
      &enqueue(&2, :group, &1, {:members, members_of(sim, &1)})
    )
  end

  defp members_of(sim, node), do: Enum.sort([node | connected(sim, node)])

  defp gone(sim, node) do
    channels = Map.reject(sim.channels, fn {{from, to}, _} -> from == node or to == node end)
    timers = Enum.reject(sim.timers, fn {at, _} -> at == node end)

    %{
      kill_jobs(sim, node)
      | cores: Map.delete(sim.cores, node),
        channels: channels,
        timers: timers,
        awaited: Map.delete(sim.awaited, node)
    }
  end

  # A node's handover processes die with it, or as it pauses.
  defp kill_jobs(sim, node),
    do: %{sim | jobs: Map.reject(sim.jobs, fn {_id, job} -> job.from == node end)}

  # A node that stops on purpose: its handovers under way end first, then
  # it says it leaves and hands every zone it serves to its owner among the
  # others, a batch a call; a batch refused is abandoned, and the rest for
  # that node with it, to start again there.
  defp stop(sim, node) do
    sim = finish_handovers(sim, node)
    core = sim.cores[node]
    others = core.members -- [node]

    sim = Enum.reduce(others, sim, &enqueue(&2, node, &1, {:leaving, node}))

    sim =
      core
      |> State.leave()
      |> Enum.group_by(&elem(&1, 1), &{elem(&1, 0), elem(&1, 2)})
      |> Enum.reduce(sim, fn {to, zones}, sim ->
        # The leaving message goes first, on the same channel.
        sim |> deliver_channel({node, to}) |> leave_to(node, to, zones)
      end)

    # Its messages already sent still arrive; nothing more comes from it.
    core_channels = Map.filter(sim.channels, fn {{from, _}, _} -> from == node end)
    sim = gone(sim, node)
    sim = %{sim | channels: Map.merge(sim.channels, core_channels)}
    sim |> membership() |> nodedown()
  end

  # A zone refused alone as stale runs where its new owner places it: it
  # is not said to be abandoned (`Grove.World.Placer`); any other not
  # handed over is, and the rest for that node with it once a call fails.
  defp leave_to(sim, _node, _to, []), do: sim

  defp leave_to(sim, node, to, zones) do
    {batch, rest} = Enum.split(zones, call_size(sim, node, to))
    {sim, ended, result} = take(sim, node, to, batch)
    left = for {index, reason} <- ended, reason not in [:normal, {:error, :stale}], do: index
    left = if result == :normal, do: left, else: left ++ Enum.map(rest, &elem(&1, 0))
    sim = Enum.reduce(left, sim, &enqueue(&2, node, to, {:abandoned, &1, node}))
    if result == :normal, do: leave_to(sim, node, to, rest), else: sim
  end

  defp place(sim, node) do
    core = sim.cores[node]

    running =
      Enum.find_value(core.members -- [node], fn member ->
        case sim.cores[member] do
          %State{locations: locations, paused: false} = core when locations != nil ->
            Tuple.to_list(State.placements(core))

          _ ->
            nil
        end
      end)

    {core, effects} = State.join_or_start(core, running)
    effects(put_in(sim.cores[node], core), node, effects)
  end

  defp connected(sim, node),
    do: for(other <- Map.keys(sim.cores), other != node, not cut?(sim, node, other), do: other)

  ## The network

  defp enqueue(sim, from, to, message) do
    if cut?(sim, from, to),
      do: sim,
      else: %{sim | channels: Map.update(sim.channels, {from, to}, [message], &(&1 ++ [message]))}
  end

  defp deliver_channel(sim, channel) do
    case sim.channels[channel] do
      [message | rest] ->
        sim = %{sim | channels: put_channel(sim.channels, channel, rest)}
        sim = receive_message(sim, elem(channel, 1), message)
        deliver_channel(sim, channel)

      _ ->
        sim
    end
  end

  defp put_channel(channels, channel, []), do: Map.delete(channels, channel)
  defp put_channel(channels, channel, rest), do: Map.put(channels, channel, rest)

  # One event, chosen at random: a message, a handover's end or a timer; nil when none is left.
  defp step(sim) do
    choices =
      Enum.map(Map.keys(sim.channels), &{:channel, &1}) ++
        Enum.map(Map.keys(sim.jobs), &{:job, &1}) ++ Enum.map(sim.timers, &{:timer, &1})

    case choices do
      [] ->
        nil

      choices ->
        case Enum.random(choices) do
          {:channel, channel} ->
            [message | rest] = sim.channels[channel]
            sim = %{sim | channels: put_channel(sim.channels, channel, rest)}
            receive_message(sim, elem(channel, 1), message)

          {:job, id} ->
            run_job(sim, id)

          {:timer, {node, message} = timer} ->
            sim = %{sim | timers: List.delete(sim.timers, timer)}
            receive_message(sim, node, message)
        end
    end
  end

  defp quiesce(sim, steps) when steps > 20_000,
    do: flunk("no quiet after 20000 events: #{inspect(sim, limit: 5)}")

  defp quiesce(sim, steps) do
    case step(sim) do
      nil -> sim
      sim -> quiesce(sim, steps + 1)
    end
  end

  defp receive_message(sim, node, message) do
    case sim.cores[node] do
      nil -> sim
      core -> handle(sim, node, core, message)
    end
  end

  defp handle(sim, node, core, {:members, members}) do
    resuming? = core.paused
    quorum? = quorum?(members)
    {core, effects} = State.members(core, members, quorum?, connected(sim, node))
    sim = effects(put_in(sim.cores[node], core), node, effects)
    if resuming? and quorum?, do: place(sim, node), else: sim
  end

  defp handle(sim, node, core, :nodedown),
    do: rule(sim, node, State.nodedown(core, connected(sim, node)))

  defp handle(sim, node, core, {:leaving, from}),
    do: put_in(sim.cores[node], State.leaving(core, from))

  defp handle(sim, node, core, {:zone_at, index, at, epoch, how}),
    do: rule(sim, node, State.announced(core, index, at, epoch, how, connected(sim, node)))

  defp handle(sim, node, core, {:zones_at, zones}),
    do: rule(sim, node, State.announced_all(core, zones, connected(sim, node)))

  defp handle(sim, node, core, {:joined, from}),
    do: rule(sim, node, State.joined(core, from, connected(sim, node)))

  defp handle(sim, node, core, {:abandoned, index, from}),
    do: rule(sim, node, State.abandoned(core, index, from, connected(sim, node)))

  defp handle(sim, node, core, :place) do
    if core.locations == nil and not core.paused, do: place(sim, node), else: sim
  end

  defp handle(sim, node, core, {:settle, index}),
    do: rule(sim, node, State.settle(core, index, connected(sim, node)))

  defp handle(sim, node, core, {:settle_all, indexes}),
    do: rule(sim, node, State.settle_all(core, indexes, connected(sim, node)))

  defp handle(sim, node, core, {:retired, index, timer}),
    do: rule(sim, node, State.retired(core, index, timer))

  # A batch's ends, from a job this placer awaits (not one killed as it
  # paused, or of its placer before it started again).
  defp handle(sim, node, core, {:handed_over, id, ended}) do
    case sim.awaited[node] do
      %{^id => indexes} ->
        sim = put_in(sim.awaited[node][id], indexes -- Enum.map(ended, &elem(&1, 0)))
        rule(sim, node, State.handovers_ended(core, ended))

      _none ->
        sim
    end
  end

  # A job ended: the zones it had not reported ended with it.
  defp handle(sim, node, core, {:job_exit, id}) do
    case sim.awaited[node] do
      %{^id => indexes} ->
        sim = %{sim | awaited: Map.update!(sim.awaited, node, &Map.delete(&1, id))}
        rule(sim, node, State.handovers_ended(core, for(i <- indexes, do: {i, :ended_early})))

      _none ->
        sim
    end
  end

  defp rule(sim, node, {core, effects}), do: effects(put_in(sim.cores[node], core), node, effects)

  # A handover process's next batch: the new owner takes it, or refuses
  # its stale zones (a call, the zones of a batch at once); the old one
  # hears how each ended later, in one message, after whatever the new
  # owner did with the zones meanwhile, handing them on or back
  # included. A call that failed ends the job, the rest not attempted.
  defp run_job(sim, id) do
    job = sim.jobs[id]
    {batch, rest} = Enum.split(job.zones, call_size(sim, job.from, job.to))
    {sim, ended, result} = take(sim, job.from, job.to, batch)
    rest_reason = if result != :normal, do: {:not_attempted, result}

    if rest_reason == nil and rest != [] do
      sim = enqueue(sim, {:job, id}, job.from, {:handed_over, id, ended})
      put_in(sim.jobs[id].zones, rest)
    else
      end_job(sim, id, ended, rest, rest_reason)
    end
  end

  # A job that ends: the zones of its last batch as they ended, the rest
  # not attempted, in one message, and its exit after it.
  defp end_job(sim, id, ended, rest, reason) do
    from = sim.jobs[id].from
    ended = ended ++ for({index, _epoch} <- rest, do: {index, reason})

    %{sim | jobs: Map.delete(sim.jobs, id)}
    |> enqueue({:job, id}, from, {:handed_over, id, ended})
    |> enqueue({:job, id}, from, {:job_exit, id})
  end

  # Zones in one call: a batch to a node that speaks it, from one that
  # does (`Grove.Cluster.speaks?/3`, read before each call), else one.
  defp call_size(sim, from, to),
    do: if(old?(sim, from, to), do: 1, else: @handover_batch)

  defp old?(sim, from, to), do: from in sim.old or to in sim.old

  # One call of a handover: how each of its zones ended, and how the
  # call did (`:normal` when answered; a refusal as stale is an answer).
  # Between nodes that speak it, the stale zones are refused alone
  # (`State.take_over_fresh/4`); else the call is of one zone.
  defp take(sim, from, to, zones) do
    core = sim.cores[to]
    indexes = Enum.map(zones, &elem(&1, 0))

    cond do
      core == nil or cut?(sim, from, to) ->
        {sim, for(index <- indexes, do: {index, {:error, :noconnection}}),
         {:error, :noconnection}}

      old?(sim, from, to) ->
        [{index, epoch}] = zones

        case State.take_over(core, index, [], [], 0, epoch, connected(sim, to), from) do
          {:ok, core, effects} ->
            {effects(put_in(sim.cores[to], core), to, effects), [{index, :normal}], :normal}

          {:error, :stale, effects} ->
            {effects(sim, to, effects), [{index, {:error, :stale}}], :normal}

          {:error, reason} ->
            {sim, [{index, {:error, reason}}], {:error, reason}}
        end

      true ->
        zones = for {index, epoch} <- zones, do: {index, [], [], 0, epoch}

        case State.take_over_fresh(core, zones, connected(sim, to), from) do
          {:ok, core, effects, refused} ->
            ended =
              for index <- indexes,
                  do: {index, if(index in refused, do: {:error, :stale}, else: :normal)}

            {effects(put_in(sim.cores[to], core), to, effects), ended, :normal}

          {:error, reason} ->
            {sim, for(index <- indexes, do: {index, {:error, reason}}), {:error, reason}}
        end
    end
  end

  # A node that stops, or whose placer stops, kills its jobs
  # (`Grove.World.Placer`): the call one was in may have reached its new
  # owner, which took its zones, or not; the node cannot tell. It hears
  # the ends they reported before they died, as ever, and those not
  # reported end unfinished (`:stopping`): kept, to be handed over as it
  # leaves (`State.leave/1`), unless heard to run where they went.
  defp finish_handovers(sim, node) do
    sim =
      sim.jobs
      |> Enum.filter(fn {_id, job} -> job.from == node end)
      |> Enum.reduce(sim, fn {id, job}, sim ->
        sim =
          if :rand.uniform(2) == 1 do
            {batch, _rest} = Enum.split(job.zones, call_size(sim, job.from, job.to))
            {sim, _ended, _result} = take(sim, job.from, job.to, batch)
            sim
          else
            sim
          end

        %{sim | jobs: Map.delete(sim.jobs, id)}
      end)

    Enum.reduce(Map.get(sim.awaited, node, %{}), sim, fn {id, indexes}, sim ->
      channel = {{:job, id}, node}
      ended = for {:handed_over, ^id, ended} <- Map.get(sim.channels, channel, []), do: ended
      ended = List.flatten(ended)
      sim = %{sim | channels: Map.delete(sim.channels, channel)}
      stopped = for index <- indexes -- Enum.map(ended, &elem(&1, 0)), do: {index, :stopping}
      {core, _effects} = State.handovers_ended(sim.cores[node], ended ++ stopped)
      put_in(sim.cores[node], core)
    end)
    |> then(&%{&1 | awaited: Map.put(&1.awaited, node, %{})})
  end

  defp effects(sim, node, effects) do
    # A zone started again after its node was lost is woken from its save
    # before any node hears that it runs (and tells the owners of what it
    # held that they are lost).
    for {{:send, _to, message}, at} <- Enum.with_index(effects),
        {index, ^node, _epoch, :restarted} <- announced_in(message) do
      woken = Enum.find_index(effects, &(&1 == {:wake_saved, index}))
      assert woken != nil and woken < at
    end

    {sim, handing} =
      Enum.reduce(effects, {sim, []}, fn
        {:send, to, message}, {sim, handing} ->
          {if(Map.has_key?(sim.cores, to), do: send_to(sim, node, to, message), else: sim),
           handing}

        {:send_self, message}, {sim, handing} ->
          {enqueue(sim, node, node, message), handing}

        {:send_after, message, _ms}, {sim, handing} ->
          {%{sim | timers: [{node, message} | sim.timers]}, handing}

        {:hand_over, index, to, epoch}, {sim, handing} ->
          {sim, [{to, index, epoch} | handing]}

        {:retire, index, timer}, {sim, handing} ->
          {%{sim | timers: [{node, {:retired, index, timer}} | sim.timers]}, handing}

        # A pause kills the handovers under way, and those asked for in
        # its run (`Grove.World.Placer`); their ends, sent already, are
        # no longer awaited.
        {:pause}, {sim, _handing} ->
          {%{kill_jobs(sim, node) | awaited: Map.put(sim.awaited, node, %{})}, []}

        # A timer cancelled may have gone off already: its message comes all
        # the same, at any later moment.
        {:cancel_retire, _index}, acc ->
          acc

        _other, acc ->
          acc
      end)

    start_jobs(sim, node, Enum.reverse(handing))
  end

  # The handovers of one run of effects, a job per node they go to.
  defp start_jobs(sim, node, handing) do
    handing
    |> Enum.group_by(&elem(&1, 0), &{elem(&1, 1), elem(&1, 2)})
    |> Enum.reduce(sim, fn {to, zones}, sim ->
      id = sim.jobs_started

      %{
        sim
        | jobs: Map.put(sim.jobs, id, %{from: node, to: to, zones: zones}),
          awaited:
            Map.update(sim.awaited, node, %{id => Enum.map(zones, &elem(&1, 0))}, fn awaited ->
              Map.put(awaited, id, Enum.map(zones, &elem(&1, 0)))
            end),
          jobs_started: id + 1
      }
    end)
  end

  # Zones announced together go one a message to or from a node of an
  # older build.
  defp send_to(sim, from, to, {:zones_at, _zones} = message) do
    if old?(sim, from, to),
      do:
        Enum.reduce(singly({to, message}), sim, fn {^to, one}, sim ->
          enqueue(sim, from, to, one)
        end),
      else: enqueue(sim, from, to, message)
  end

  defp send_to(sim, from, to, message), do: enqueue(sim, from, to, message)

  ## The checks

  defp check_agreement(sim) do
    live = sim.cores |> Map.keys() |> Enum.sort()

    if live != [] and not quorum?(live) do
      assert Enum.all?(Map.values(sim.cores), & &1.paused)
    end

    if live != [] and quorum?(live) do
      cores = Map.values(sim.cores)

      assert Enum.all?(cores, &(&1.locations != nil and not &1.paused)),
             inspect(sim.cores, pretty: true)

      [first | _] = cores

      for core <- cores do
        assert core.members == live

        assert State.placements(core) == State.placements(first),
               "#{core.node} and #{first.node} disagree: #{inspect(Enum.map(cores, &{&1.node, State.placements(&1)}), pretty: true)}"
      end

      for index <- 0..(@zones - 1) do
        {at, _epoch} = elem(State.placements(first), index)

        assert at == Placement.owner(index, live),
               "zone #{index} on #{at}: #{inspect(Enum.map(cores, &{&1.node, State.placements(&1)}), pretty: true)}"

        serving =
          for core <- cores, index in core.running, index not in core.retiring, do: core.node

        assert serving == [at], "zone #{index} served by #{inspect(serving)}, placed on #{at}"
        assert Enum.all?(cores, &(not is_map_key(&1.handing, index)))
        assert Enum.all?(cores, &(index not in &1.running or &1.node == at))
      end
    end
  end
end
