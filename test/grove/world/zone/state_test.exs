defmodule Grove.World.Zone.StateTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.World.{Entity, Grid, Rules, Terrain}
  alias Grove.World.Zone.State

  # A 20 x 20 meadow cut into four 10 x 10 zones; zone 0 is the north-west one.
  defp zone(index \\ 0, rules \\ [], terrain \\ meadow(20, 20)) do
    State.new(
      index,
      Grid.new(20, 20, 10),
      terrain,
      Rules.new(Keyword.put_new(rules, :move_rate, nil))
    )
  end

  defp meadow(width, height),
    do: %Terrain{width: width, height: height, cells: :binary.copy(<<0>>, width * height)}

  # A meadow with trees on the given cells.
  defp with_trees(terrain, cells) do
    bytes =
      Enum.reduce(cells, terrain.cells, fn {x, y}, bytes ->
        offset = y * terrain.width + x
        <<before::binary-size(offset), _::8, rest::binary>> = bytes
        <<before::binary, 1, rest::binary>>
      end)

    %{terrain | cells: bytes}
  end

  defp entity(id, owner \\ self()), do: %Entity{id: id, owner: owner}

  defp place!(state, id, cell) do
    {:ok, _entity, state} = State.place(state, entity(id), [cell])
    state
  end

  defp at(state, id) do
    {:ok, %Entity{x: x, y: y}} = State.fetch(state, id)
    {x, y}
  end

  describe "place/3" do
    test "puts an entity on the first free candidate" do
      state = zone() |> place!(1, {2, 2})
      assert {:ok, %Entity{x: 3, y: 2}, state} = State.place(state, entity(2), [{2, 2}, {3, 2}])
      assert at(state, 2) == {3, 2}
    end

    test "refuses blocking ground and cells outside the zone" do
      state = zone(0, [], with_trees(meadow(20, 20), [{1, 1}]))
      assert {:rejected, :blocked, _} = State.place(state, entity(1), [{1, 1}])
      assert {:rejected, :out_of_bounds, _} = State.place(state, entity(1), [{15, 1}])
    end

    test "refuses an occupied cell" do
      state = zone() |> place!(1, {2, 2})
      assert {:rejected, :occupied, _} = State.place(state, entity(2), [{2, 2}])
    end

    test "prefers a cell with a neighbour to step to over one boxed in, and takes a boxed one when no other is free" do
      # {3, 3}: a tree north, entities east, south and west.
      state =
        zone(0, [], with_trees(meadow(20, 20), [{3, 2}]))
        |> place!(1, {4, 3})
        |> place!(2, {3, 4})
        |> place!(3, {2, 3})

      assert {:ok, %Entity{x: 7, y: 7}, _} = State.place(state, entity(4), [{3, 3}, {7, 7}])
      assert {:ok, %Entity{x: 3, y: 3}, _} = State.place(state, entity(4), [{3, 3}, {4, 3}])
    end

    test "counts a neighbour in another zone as one to step to, and the world's edge as none" do
      # {9, 0}, at zone 0's east edge and the world's north edge: west and
      # south taken, east in zone 1.
      state = zone() |> place!(1, {8, 0}) |> place!(2, {9, 1})
      assert {:ok, %Entity{x: 9, y: 0}, _} = State.place(state, entity(3), [{9, 0}, {5, 5}])

      # {0, 0}, the world's corner: east and south taken, nothing beyond.
      state = zone() |> place!(1, {1, 0}) |> place!(2, {0, 1})
      assert {:ok, %Entity{x: 5, y: 5}, _} = State.place(state, entity(3), [{0, 0}, {5, 5}])
    end
  end

  describe "apply_move/6 inside the zone" do
    test "moves one step in each of the eight directions" do
      for {direction, cell} <- [
            n: {5, 4},
            ne: {6, 4},
            e: {6, 5},
            se: {6, 6},
            s: {5, 6},
            sw: {4, 6},
            w: {4, 5},
            nw: {4, 4}
          ] do
        state = zone() |> place!(1, {5, 5})

        assert {:moved, %Entity{x: x, y: y}, _from, state} =
                 State.apply_move(state, 1, direction, self(), nil, 0)

        assert {x, y} == cell
        assert at(state, 1) == cell
        assert State.audit(state) == []
      end
    end

    test "rejects a move into a tree, an occupied cell, or off the world" do
      state =
        zone(0, [], with_trees(meadow(20, 20), [{5, 4}]))
        |> place!(1, {5, 5})
        |> place!(2, {6, 5})
        |> place!(3, {0, 0})

      assert {:rejected, :blocked, _} = State.apply_move(state, 1, :n, self(), nil, 0)
      assert {:rejected, :occupied, _} = State.apply_move(state, 1, :e, self(), nil, 0)
      assert {:rejected, :out_of_bounds, _} = State.apply_move(state, 3, :nw, self(), nil, 0)
      assert at(state, 1) == {5, 5}
    end

    test "rules can be turned off one by one" do
      terrain = with_trees(meadow(20, 20), [{5, 4}])

      loose =
        zone(0, [blocking: false, exclusive: false], terrain)
        |> place!(1, {5, 5})
        |> place!(2, {6, 5})

      assert {:moved, _, _from, _} = State.apply_move(loose, 1, :n, self(), nil, 0)

      assert {:moved, %Entity{x: 6, y: 5}, _from, loose} =
               State.apply_move(loose, 1, :e, self(), nil, 0)

      assert State.audit(loose) == []
    end

    test "without the bounds rule the world wraps around" do
      state = zone(0, bounds: false) |> place!(1, {0, 5})
      # {-1, 5} wraps to {19, 5}, which is in zone 1: a handoff.
      assert {:handoff, _entity, 1, {19, 5}, _state} =
               State.apply_move(state, 1, :w, self(), nil, 0)
    end

    test "only the owner moves an entity" do
      other = spawn(fn -> :ok end)
      state = zone() |> place!(1, {5, 5})
      assert {:rejected, :not_owner, _} = State.apply_move(state, 1, :n, other, nil, 0)
      assert {:unknown, _} = State.apply_move(state, 99, :n, self(), nil, 0)
    end

    test "the move rate allows a burst, then one move per interval" do
      state = zone(0, move_rate: 10, move_burst: 2) |> place!(1, {5, 5})
      assert {:moved, _, _from, state} = State.apply_move(state, 1, :e, self(), nil, 1000)
      assert {:moved, _, _from, state} = State.apply_move(state, 1, :w, self(), nil, 1000)
      assert {:rejected, :rate_limited, state} = State.apply_move(state, 1, :e, self(), nil, 1000)
      # 10 per second: one more after 100 ms.
      assert {:rejected, :rate_limited, state} = State.apply_move(state, 1, :e, self(), nil, 1050)
      assert {:moved, _, _from, state} = State.apply_move(state, 1, :e, self(), nil, 1100)
      assert {:rejected, :rate_limited, _} = State.apply_move(state, 1, :w, self(), nil, 1100)
    end

    test "the move rate counts from the first move even when the clock is negative" do
      state = zone(0, move_rate: 1, move_burst: 1) |> place!(1, {5, 5})
      assert {:moved, _, _from, state} = State.apply_move(state, 1, :e, self(), nil, -5_000_000)

      assert {:rejected, :rate_limited, _} =
               State.apply_move(state, 1, :w, self(), nil, -4_999_500)
    end
  end

  describe "handoffs" do
    test "a move across the border reserves the old cell until the neighbour answers" do
      a = zone(0) |> place!(1, {9, 5})
      assert {:handoff, entity, 1, {10, 5}, a} = State.apply_move(a, 1, :e, self(), :tag, 0)
      assert State.leaving?(a, 1)
      # Still held: nobody else may take the old cell meanwhile.
      assert {:rejected, :occupied, _} = State.place(a, entity(2), [{9, 5}])
      assert {:leaving, _} = State.apply_move(a, 1, :w, self(), nil, 0)

      b = zone(1)
      assert {:ok, %Entity{x: 10, y: 5}, b} = State.accept_arrival(b, entity, {10, 5})
      assert at(b, 1) == {10, 5}

      assert {%Entity{id: 1}, [], a} = State.finish_handoff(a, 1)
      assert State.fetch(a, 1) == :error
      assert {:ok, _, _} = State.place(a, entity(2), [{9, 5}])
    end

    test "a refused handoff keeps the entity where it was" do
      a = zone(0) |> place!(1, {9, 5})
      b = zone(1) |> place!(2, {10, 5})
      {:handoff, entity, 1, target, a} = State.apply_move(a, 1, :e, self(), :tag, 0)
      assert {:rejected, :occupied, _} = State.accept_arrival(b, entity, target)
      assert {:ok, :tag, [], a} = State.cancel_handoff(a, 1)
      refute State.leaving?(a, 1)
      assert at(a, 1) == {9, 5}
      assert {:moved, _, _from, _} = State.apply_move(a, 1, :w, self(), nil, 0)
    end

    test "operations during a handoff are deferred in order, and bounded" do
      a = zone(0) |> place!(1, {9, 5})
      {:handoff, _entity, 1, _target, a} = State.apply_move(a, 1, :e, self(), :tag, 0)
      {:ok, a} = State.defer(a, 1, :first)
      {:ok, a} = State.defer(a, 1, :second)
      assert {_entity, [:first, :second], _a} = State.finish_handoff(a, 1)

      # Two are queued already; six more fill the queue of eight.
      full = Enum.reduce(1..6, a, fn n, a -> elem(State.defer(a, 1, n), 1) end)
      assert {:error, :busy} = State.defer(full, 1, :one_too_many)
    end

    test "a handoff with no answer becomes stale after the cutoff" do
      a = zone(0) |> place!(1, {9, 5})
      {:handoff, _entity, 1, _target, a} = State.apply_move(a, 1, :e, self(), :tag, 100)
      assert State.stale_handoffs(a, 100) == []
      assert State.stale_handoffs(a, 101) == [1]
    end
  end

  describe "deltas" do
    test "only a watched zone collects changes, and a flush empties them" do
      state = zone() |> place!(1, {5, 5})
      {:moved, _, _from, state} = State.apply_move(state, 1, :e, self(), nil, 0)
      assert {[], [], [], _} = State.flush(state)

      state = State.watch(state, true)
      {:moved, _, _from, state} = State.apply_move(state, 1, :e, self(), nil, 0)
      state = place!(state, 2, {1, 1})
      {_removed, state} = State.remove(state, 2)
      state = place!(state, 3, {2, 2})
      assert {changes, departed, [], state} = State.flush(state)
      assert Enum.sort(changes) == [{1, 7, 5, 0}, {3, 2, 2, 0}]
      assert departed == [2]
      assert {[], [], [], _} = State.flush(state)
    end

    test "an entity that leaves and comes back in one tick is listed once, where it is" do
      state = zone() |> State.watch(true) |> place!(1, {5, 5})
      {_entity, state} = State.remove(state, 1)
      state = place!(state, 1, {6, 6})
      assert {[{1, 6, 6, 0}], [], [], _} = State.flush(state)
    end

    test "a labelled entity's name goes with its arrival in the zone, never with its moves" do
      ada = %{entity(1) | label: {"Ada", "🦊"}}
      state = zone() |> State.watch(true)
      {:ok, _, state} = State.place(state, ada, [{5, 5}])
      state = place!(state, 2, {1, 1})
      assert {_changes, [], [{1, "Ada", "🦊"}], state} = State.flush(state)

      # Moving within the zone: its cell, not its name.
      {:moved, _, _from, state} = State.apply_move(state, 1, :e, self(), nil, 0)
      assert {[{1, 6, 5, 0}], [], [], state} = State.flush(state)

      # Gone and back in the same tick (a handoff there and back): named again.
      {_, state} = State.remove(state, 1)
      {:ok, _, state} = State.place(state, ada, [{7, 7}])
      assert {_, [], [{1, "Ada", "🦊"}], state} = State.flush(state)

      # Gone for good before the tick: not named.
      {:ok, _, state} = State.place(state, %{entity(3) | label: {"Bo", "🐻"}}, [{8, 8}])
      {_, state} = State.remove(state, 3)
      assert {_, [3], [], _} = State.flush(state)

      # A snapshot names every labelled entity in the zone, and only those.
      assert State.labels(state) == [{1, "Ada", "🦊"}]
    end

    test "a zone nobody watches collects no names" do
      state = zone()
      {:ok, _, state} = State.place(state, %{entity(1) | label: {"Ada", "🦊"}}, [{5, 5}])
      assert {[], [], [], _} = State.flush(state)
    end

    test "a snapshot lists every entity" do
      state = zone() |> place!(1, {1, 1}) |> place!(2, {2, 2})
      assert Enum.sort(State.snapshot(state)) == [{1, 1, 1, 0}, {2, 2, 2, 0}]
    end
  end

  describe "who stands where" do
    # A zone 20 rows high: its rows are kept in groups of eight, two full
    # and one of four, and a step between rows may cross from one group
    # to the next.
    test "a crowd's steps keep the cells and the entities agreeing, across the rows' groups" do
      property =
        forall(crowd_walk(), fn {starts, steps} ->
          grid = Grid.new(40, 40, 20)
          state = State.new(0, grid, meadow(40, 40), Rules.new(move_rate: nil))

          {state, ids} =
            starts
            |> Enum.uniq()
            |> Enum.with_index(1)
            |> Enum.reduce({state, []}, fn {cell, id}, {state, ids} ->
              {place!(state, id, cell), [id | ids]}
            end)

          state =
            Enum.reduce(steps, state, fn {pick, direction}, state ->
              id = Enum.at(ids, rem(pick, length(ids)))

              state =
                case State.apply_move(state, id, direction, self(), nil, 0) do
                  {:moved, _entity, _from, state} -> state
                  {:rejected, _reason, state} -> state
                  {:handoff, _entity, _to, _target, state} -> state
                  {:leaving, state} -> state
                end

              assert State.audit(state) == []
              state
            end)

          for id <- ids, {:ok, %Entity{x: x, y: y}} = State.fetch(state, id) do
            assert State.occupant(state, x, y) == id
            assert State.occupied?(state, x, y)
          end

          true
        end)

      check(property, numtests: 100, deep_numtests: 2_000)
    end
  end

  describe "plain_step/7" do
    # A batch's step in a plain zone, on its entities and cells held
    # apart: what `apply_move/6` gives, or `:other` (nothing changed)
    # where it gives something else than a step inside the zone taken or
    # refused on a taken or a blocking cell, or the entity watches (its
    # view follows it: every fifth entity here). Zone 0 of a 40 x 40
    # world (so steps also leave it), trees, a move rate that limits some
    # steps, and steps by another owner.
    test "agrees with apply_move/6, and leaves to it only what is not a plain step" do
      property =
        forall({crowd_walk(), trees(), timed_steps()}, fn {{starts, _}, trees, steps} ->
          grid = Grid.new(40, 40, 20)
          terrain = with_trees(meadow(40, 40), trees)
          rules = Rules.new(move_rate: 5, move_burst: 2)
          state = State.new(0, grid, terrain, rules)

          {state, ids} =
            starts
            |> Enum.uniq()
            |> Enum.reject(&(&1 in trees))
            |> Enum.with_index(1)
            |> Enum.reduce({state, []}, fn {cell, id}, {state, ids} ->
              updates = if rem(id, 5) == 0, do: :view, else: :self
              entity = %{entity(id) | updates: updates}
              {:ok, _entity, state} = State.place(state, entity, [cell])
              {state, [id | ids]}
            end)

          true = State.plain?(state)
          stranger = spawn(fn -> :ok end)

          Enum.reduce(steps, {state, 0}, fn {pick, direction, by_stranger, wait}, {state, now} ->
            now = now + wait
            id = if ids == [], do: 1, else: Enum.at(ids, rem(pick, length(ids)))
            owner = if by_stranger, do: stranger, else: self()
            general = State.apply_move(state, id, direction, owner, nil, now)

            plain =
              State.plain_step(state, state.entities, state.cells, id, direction, owner, now)

            watches = match?({:ok, %Entity{updates: :view}}, State.fetch(state, id))

            case {general, plain} do
              _ when watches ->
                assert plain == :other

              {{:moved, entity, {fx, fy}, after_general}, {:moved, entity, fx, fy, e, c}} ->
                assert State.put_plain(state, e, c) == after_general

              {{:rejected, reason, after_general}, {reason, e}}
              when reason in [:occupied, :blocked] ->
                assert State.put_plain(state, e, state.cells) == after_general

              {{:rejected, :blocked, _}, :other} ->
                {x, y} = Grid.step(at(state, id), direction)
                refute State.inside?(state, x, y)

              {{:rejected, reason, _}, :other} when reason not in [:occupied, :blocked] ->
                :ok

              {{:handoff, _, _, _, _}, :other} ->
                :ok

              {{away_or_unknown, _}, :other} when away_or_unknown in [:leaving, :unknown] ->
                :ok
            end

            {elem(general, tuple_size(general) - 1), now}
          end)

          true
        end)

      check(property, numtests: 100, deep_numtests: 1_000)
    end

    test "a watched zone is not plain: its steps are recorded for a delta" do
      state = zone() |> place!(1, {2, 2})
      assert State.plain?(state)
      refute State.plain?(State.watch(state, true))
    end
  end

  defp trees,
    do:
      :proper_types.resize(
        30,
        :proper_types.list({:proper_types.integer(0, 21), :proper_types.integer(0, 21)})
      )

  defp timed_steps do
    step =
      {:proper_types.integer(0, 1000), :proper_types.elements(Grid.directions()),
       :proper_types.frequency([{1, true}, {9, false}]), :proper_types.integer(0, 400)}

    :proper_types.resize(200, :proper_types.list(step))
  end

  defp crowd_walk do
    cell = {:proper_types.integer(0, 19), :proper_types.integer(0, 19)}
    step = {:proper_types.integer(0, 1000), :proper_types.elements(Grid.directions())}

    {:proper_types.non_empty(:proper_types.resize(40, :proper_types.list(cell))),
     :proper_types.resize(200, :proper_types.list(step))}
  end

  describe "audit/1" do
    test "reports entities that break the rules" do
      state = zone() |> place!(1, {1, 1})
      # Forge a broken state: a second entity on the same cell, bypassing the rules.
      broken = State.put_entity(state, %Entity{id: 2, owner: self(), x: 1, y: 1})
      assert [_ | _] = State.audit(broken)
      assert State.audit(state) == []
    end
  end
end
