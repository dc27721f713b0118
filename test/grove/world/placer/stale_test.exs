defmodule Grove.World.Placer.StaleTest do
  # The placer's rules alone, for a zone handed over stale: its new owner
  # knows a placement at the epoch it is handed at already, or a later
  # one, and refuses it (`State.take_over_all/4`, `State.take_over_fresh/4`).
  use ExUnit.Case, async: true
  use Grove.Test.PlacerNodes

  import Grove.Test.PlacerStates, only: [taking: 1, announced_in: 1]

  alias Grove.Cluster.Placement
  alias Grove.World.Placer.State

  describe "a handover refused as stale" do
    # c ran every zone alone at epoch 1; a and b join, and c hands each
    # its share at epoch 2. The new owner (`to`) refuses, as it knows the
    # zone placed at 2 on `at` (started again there while c was taken for
    # lost). Its answer, sent before its reply on the same link, comes
    # first: the copy here stops, however `to` and `at` compare by name.
    for {to, at, name} <- [
          {@a, @b, "the new owner first by name"},
          {@a, @a, "the new owner itself"},
          {@b, @a, "the new owner after it by name"}
        ] do
      test "stops the copy here when the answer, heard first, places the zone on another node: #{name}" do
        to = unquote(to)
        at = unquote(at)
        {c, index} = handing(to)

        {c, heard} = State.announced(c, index, at, 2, :handed, [@a, @b])
        refute {:stop_zone, index} in heard
        assert State.placement(c, index) == {at, 2}

        {c, effects} = State.handover_ended(c, index, {:error, :stale})

        assert {:stop_zone, index} in effects
        assert {:forget, index} in effects
        assert {:cancel_retire, index} in effects
        refute Enum.any?(effects, &match?({:keep, _}, &1))
        refute Enum.any?(effects, &match?({:handed_to, _, _}, &1))
        refute Enum.any?(effects, &match?({:retire, _, _}, &1))
        refute Enum.any?(effects, &match?({:send_after, {:settle, _}, _}, &1))
        refute index in c.running or index in c.retiring
        assert c.retire_timers == %{}
        assert State.placement(c, index) == {at, 2}
        assert [{:log, :warning, _}] = for({:log, _, _} = log <- effects, do: log)
      end
    end

    test "keeps the copy here until the answer comes, when the end comes first; the answer then stops it" do
      {c, index} = handing(@a)
      {c, effects} = State.handover_ended(c, index, {:error, :stale})

      assert {:keep, index} in effects
      refute {:stop_zone, index} in effects
      assert index in c.running and index not in c.retiring
      assert State.placement(c, index) == {@c, 1}

      {c, effects} = State.announced(c, index, @b, 2, :handed, [@a, @b])
      assert {:stop_zone, index} in effects
      assert {:forget, index} in effects
      refute index in c.running
      assert State.placement(c, index) == {@b, 2}
    end
  end

  describe "many zones handed over, some stale" do
    test "the fresh ones are taken, as without the stale ones; the stale ones alone refused, counted and answered, logged once" do
      {d, zones} = taking(64)
      [{first, _, _, _, epoch} = zone, {second, _, _, _, _} = other | rest] = zones
      connected = [@a, @b, @c]
      # d placed the first two at the epochs they are handed at already.
      {d, _} = State.announced(d, first, @b, epoch, :handed, connected)
      {d, _} = State.announced(d, second, @b, epoch + 1, :handed, connected)

      assert {:ok, taken, effects, [^first, ^second]} =
               State.take_over_fresh(d, [zone | rest] ++ [other], connected, @a)

      {:ok, alone, alone_effects} = State.take_over_all(d, rest, connected, @a)
      assert taken == alone

      for {index, _, _, _, epoch} <- rest,
          do: assert(State.placement(taken, index) == {@d, epoch})

      assert State.placement(taken, first) == {@b, epoch}
      assert State.placement(taken, second) == {@b, epoch + 1}

      taken_rows = for {:take_rows, index, _, _, _} <- effects, do: index
      assert taken_rows == Enum.map(rest, &elem(&1, 0))
      assert {:count, :zone_handovers_stale, 2} in effects
      assert [_once] = for({:log, :warning, _} = log <- effects, do: log)

      # The sender hears where the stale ones run, and what was taken.
      to_sender = for {:send, @a, message} <- effects, zone <- announced_in(message), do: zone
      assert {first, @b, epoch, :handed} in to_sender
      assert {second, @b, epoch + 1, :handed} in to_sender

      assert to_sender -- [{first, @b, epoch, :handed}, {second, @b, epoch + 1, :handed}] ==
               for({:send, @a, message} <- alone_effects, zone <- announced_in(message), do: zone)
    end

    test "none stale: taken as take_over_all/4 takes them" do
      {d, zones} = taking(64)
      {:ok, all, effects} = State.take_over_all(d, zones, [@a, @b, @c], @a)
      assert State.take_over_fresh(d, zones, [@a, @b, @c], @a) == {:ok, all, effects, []}
    end

    test "refused all together while not placed, or paused" do
      {d, zones} = taking(64)

      assert State.take_over_fresh(State.new(@d, 64), zones, [@a], @a) == {:error, :starting}
      assert State.take_over_fresh(%{d | paused: true}, zones, [@a], @a) == {:error, :paused}
    end
  end

  describe "a zone refused as stale that this node places on its sender" do
    # b runs a zone at 1, as it knows; a heard it announced there at 3
    # (b paused after it took the zone at 3, and read the placement
    # again from a member that had not heard of it). b stops, and hands
    # the zone to a at 2: refused, and b says nothing more of it.
    test "starts again here, as one abandoned, when the sender left" do
      {a, index} = placed_on_b_newer()
      a = State.leaving(a, @b)
      refute @b in a.members

      assert {:ok, a, effects, [^index]} =
               State.take_over_fresh(a, [{index, [], [], 0, 2}], [@b], @b)

      assert {:send_self, {:abandoned, index, @b}} in effects
      {a, restarted} = State.abandoned(a, index, @b, [@b])
      assert {:start_zone, index} in restarted
      assert State.placement(a, index) == {@a, 4}
    end

    test "is left to its sender while that one is a member" do
      {a, index} = placed_on_b_newer()

      assert {:ok, _a, effects, [^index]} =
               State.take_over_fresh(a, [{index, [], [], 0, 2}], [@b], @b)

      refute Enum.any?(effects, &match?({:send_self, {:abandoned, _, _}}, &1))
      assert {:send, @b, {:zone_at, index, @b, 3, :handed}} in effects
    end
  end

  describe "a handover the node ended as it stops" do
    test "keeps the zone here, to be handed over again as the node leaves, tried again no other way" do
      {c, index} = handing(@a)
      {c, effects} = State.handover_ended(c, index, :stopping)

      assert effects == [{:keep, index}, {:cancel_retire, index}]
      assert index in c.running and index not in c.retiring
      assert {index, @a, 2} in State.leave(c)
    end

    test "leaves a zone its new owner announced first where it runs: it is not handed over again" do
      {c, index} = handing(@a)
      {c, _heard} = State.announced(c, index, @a, 2, :handed, [@a, @b])
      {c, effects} = State.handover_ended(c, index, :stopping)

      assert {:handed_to, index, @a} in effects
      refute {:keep, index} in effects
      assert index in c.retiring
      refute Enum.any?(State.leave(c), &(elem(&1, 0) == index))
    end
  end

  # a, of a and b, which places a zone of b's on b at 3, where b knows it
  # at 1: the zone and a.
  defp placed_on_b_newer do
    {a, _} = State.join_or_start(%{State.new(@a, 8) | members: [@a, @b]}, nil)
    index = Enum.find(0..7, &(State.location(a, &1) == @b))
    {a, _} = State.announced(a, index, @b, 3, :handed, [@b])
    assert State.placement(a, index) == {@b, 3}
    {a, index}
  end

  # c, which ran `zones` zones alone at epoch 1, once a and b joined: a
  # zone it hands to `to` at epoch 2, and the state.
  defp handing(to, zones \\ 16) do
    {c, _} = State.join_or_start(%{State.new(@c, zones) | members: [@c]}, nil)
    {c, effects} = State.members(c, [@a, @b, @c], true, [@a, @b])
    index = Enum.find(0..(zones - 1), &(Placement.owner(&1, [@a, @b, @c]) == to))
    assert {:hand_over, index, to, 2} in effects
    assert index in c.retiring
    {c, index}
  end
end
