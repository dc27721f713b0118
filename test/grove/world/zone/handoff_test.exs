defmodule Grove.World.Zone.HandoffTest do
  use ExUnit.Case, async: true

  alias Grove.World.{Entity, Grid, Rules, Terrain}
  alias Grove.World.Zone.{Handoff, State}

  # A 20 x 20 meadow cut into four 10 x 10 zones; zone 1 lies east of zone 0.
  defp zone(index) do
    terrain = %Terrain{width: 20, height: 20, cells: :binary.copy(<<0>>, 400)}
    State.new(index, Grid.new(20, 20, 10), terrain, Rules.new(move_rate: nil))
  end

  defp place!(state, id, cell) do
    {:ok, _entity, state} = State.place(state, %Entity{id: id, owner: self()}, [cell])
    state
  end

  defp env(directory, busy \\ false),
    do: %{locate: &Map.get(directory, &1), now: 0, busy: busy}

  defp nowhere(_id), do: nil

  test "a move inside the zone returns the plain result, with no effects" do
    state = zone(0) |> place!(1, {5, 5})

    assert {:moved, %Entity{x: 6, y: 5}, {5, 5}, _} =
             Handoff.move(state, 1, :e, self(), :t, 0, 0, &nowhere/1)
  end

  test "a move across the border sends the entity to its neighbour, whose answer settles it" do
    source = zone(0) |> place!(1, {9, 5})

    assert {:pending, [{:count, :handoffs}, {:send, 1, {:arrive, entity, {10, 5}, 0, :t}}],
            source} = Handoff.move(source, 1, :e, self(), :t, 0, 0, &nowhere/1)

    # Moves meanwhile wait for the answer.
    assert {:pending, [], source} = Handoff.move(source, 1, :s, self(), :u, 0, 0, &nowhere/1)

    assert {[
              {:adopt, %Entity{id: 1, x: 10, y: 5}},
              {:send, 0, {:arrived, 1, 1}},
              {:reply, _owner, 1, :t, {:ok, {10, 5}}}
            ], _target} = Handoff.arrive(zone(1), entity, {10, 5}, 0, :t)

    assert {[{:directory, 1, 1}, {:let_go, %Entity{id: 1}}, {:send, 1, {:move, 1, :s, _, :u, 1}}],
            source} = Handoff.arrived(source, 1, 1, env(%{1 => 0}))

    assert State.size(source) == 0
  end

  test "a refused handoff answers the move and replays what waited, busy if the zone sheds load" do
    source = zone(0) |> place!(1, {9, 5})
    {:pending, _, source} = Handoff.move(source, 1, :e, self(), :t, 0, 0, &nowhere/1)
    {:pending, [], source} = Handoff.move(source, 1, :w, self(), :u, 0, 0, &nowhere/1)

    assert {[
              {:count, :handoffs_refused},
              {:reply, _, 1, :t, {:rejected, :occupied}},
              {:moved, %Entity{x: 8, y: 5}, {9, 5}},
              {:reply, _, 1, :u, {:ok, {8, 5}}}
            ], _} = Handoff.refused(source, 1, self(), :t, :occupied, env(%{1 => 0}))

    assert {[_, _, {:reply, _, 1, :u, {:rejected, :busy}}], _} =
             Handoff.refused(source, 1, self(), :t, :occupied, env(%{1 => 0}, true))
  end

  test "a handoff with no answer is settled by the directory" do
    source = zone(0) |> place!(1, {9, 5}) |> place!(2, {9, 6})
    {:pending, _, source} = Handoff.move(source, 1, :e, self(), :t, 0, 0, &nowhere/1)
    {:pending, _, source} = Handoff.move(source, 2, :e, self(), :u, 0, 0, &nowhere/1)

    # Entity 1 arrived (the directory names zone 1); entity 2 never did.
    {effects, source} = Handoff.expire(source, 1, env(%{1 => 1, 2 => 0}))

    assert {:count, :handoffs_stale} in effects
    assert {:let_go, _} = List.keyfind(effects, :let_go, 0)
    assert {:reply, _, 2, :u, {:rejected, :busy}} = List.keyfind(effects, :reply, 0)
    assert State.fetch(source, 1) == :error
    assert {:ok, %Entity{x: 9, y: 6}} = State.fetch(source, 2)
    assert source.leaving == %{}
  end

  test "a leave mid-handoff waits for the answer, then follows the entity" do
    source = zone(0) |> place!(1, {9, 5})
    {:pending, _, source} = Handoff.move(source, 1, :e, self(), :t, 0, 0, &nowhere/1)
    assert {[], source} = Handoff.leave(source, 1, self(), :caller, 0, &nowhere/1)

    assert {[_, _, {:send, 1, {:leave, 1, _, :caller, 1}}], _} =
             Handoff.arrived(source, 1, 1, env(%{1 => 0}))
  end

  test "an owner that dies mid-handoff has its entity dropped if the handoff is refused" do
    source = zone(0) |> place!(1, {9, 5})
    {:pending, _, source} = Handoff.move(source, 1, :e, self(), :t, 0, 0, &nowhere/1)
    assert {[], source} = Handoff.owner_down(source, 1)

    assert {[_, _, {:dropped, %Entity{id: 1}}], source} =
             Handoff.refused(source, 1, self(), :t, :occupied, env(%{}))

    assert State.size(source) == 0
  end
end
