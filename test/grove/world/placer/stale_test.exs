defmodule Grove.World.Placer.StaleTest do
  # The placer's rules alone, for a zone handed over stale: its new owner
  # knows a placement at the epoch it is handed at already, or a later
  # one, and refuses it (`State.take_over/8`).
  use ExUnit.Case, async: true

  alias Grove.Cluster.Placement
  alias Grove.World.Placer.State

  @a :a@host
  @b :b@host
  @c :c@host

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
