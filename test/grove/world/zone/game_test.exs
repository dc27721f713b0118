defmodule Grove.World.Zone.GameTest do
  @moduledoc "The game's rules on a zone's pure core: actions, effects, hooks, layer, failures."
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.AppleGame
  alias Grove.World.Game.Spec
  alias Grove.World.{Entity, Grid, Rules, Terrain}
  alias Grove.World.Zone.{Game, Handoff, State}

  # 8 x 8 cells in four zones of 4 x 4. Trees at {1, 1} and {4, 1} (the
  # second in zone 1), water at {2, 3}, a basket at {2, 2}.
  @grid Grid.new(8, 8, 4)

  defp terrain do
    cells =
      for y <- 0..7, x <- 0..7, into: <<>> do
        case {x, y} do
          {1, 1} -> <<1>>
          {4, 1} -> <<1>>
          {2, 3} -> <<3>>
          _ -> <<0>>
        end
      end

    %Terrain{width: 8, height: 8, cells: cells}
  end

  defp zone(index, opts \\ []) do
    spec = Spec.new!({AppleGame, Keyword.merge([baskets: [{2, 2}], tick: :manual], opts)})
    state = State.new(index, @grid, terrain(), Rules.new(move_rate: nil))
    Game.setup(state, spec, :generate)
  end

  defp join(state, id, cell, info \\ %{account: 7}) do
    {:ok, entity, state} = State.place(state, %Entity{id: id, owner: self()}, [cell], info)
    {entity, state}
  end

  defp act(state, id, name, target, args \\ %{}) do
    {:ok, name, args} = Grove.Game.check(AppleGame, name, args)
    Game.act(state, id, {name, target, args}, self(), :tag, 0, 0, fn _ -> nil end)
  end

  defp key({x, y}), do: Grid.cell_key(@grid, x, y)

  test "a zone lays its layer from cell/3, with what players see of it" do
    state = zone(0)
    assert state.game.layer == %{key({1, 1}) => {:tree, 1}, key({2, 2}) => :basket}
    assert state.game.codes == %{key({1, 1}) => 1, key({2, 2}) => 2}
    assert state.game.walk == %{key({1, 1}) => true, key({2, 2}) => true}

    assert Game.rows(state) |> Enum.sort() == [
             {key({1, 1}), {:tree, 1}, 1, true},
             {key({2, 2}), :basket, 2, true}
           ]
  end

  test "a game without ticks?/1 has its ticks given every cell whose layer holds a value" do
    state = zone(0)
    assert Grove.Game.Area.ticking(state) == Grove.Game.Area.cells(state)
    assert length(Grove.Game.Area.ticking(state)) == 2
  end

  # The apple game, but for a cell whose cell/3 raises.
  defmodule Stumbling do
    @moduledoc false
    use Grove.Test.GameLike, of: Grove.AppleGame, keep: [:actions, :init, :act, :show]

    @impl true
    def cell({5, 2}, _ground, _config), do: raise("no orchard here")
    def cell(cell, ground, config), do: AppleGame.cell(cell, ground, config)
  end

  test "a cell whose cell/3 fails has no value; the rest of the zone is laid, and the failure kept" do
    spec = Spec.new!({Stumbling, baskets: [{6, 2}], tick: :manual})
    state = Game.setup(State.new(1, @grid, terrain(), Rules.new(move_rate: nil)), spec, :generate)
    assert state.game.layer == %{key({4, 1}) => {:tree, 1}, key({6, 2}) => :basket}

    assert [{Stumbling, :cell, :error, %RuntimeError{message: "no orchard here"}, _stack}] =
             state.game.failures
  end

  # The orchard, but for the flowers, whose every cell/3 throws.
  defmodule Wilting do
    @moduledoc false
    use Grove.Test.GameLike, of: Grove.Games.Orchard, keep: [:actions, :init, :act, :show]

    @impl true
    def cell(_cell, :flowers, _config), do: throw(:wilted)
    def cell(cell, ground, config), do: Grove.Games.Orchard.cell(cell, ground, config)
  end

  test "a zone's layer is cell/3's value at each of its cells that has one, on any ground (property)" do
    kinds = Map.new(Terrain.kinds(), fn {kind, code} -> {code, kind} end)

    property =
      forall(
        {:proper_types.vector(64, :proper_types.range(0, 4)), :proper_types.range(0, 3),
         :proper_types.boolean()},
        fn {codes, index, wilting?} ->
          module = if wilting?, do: Wilting, else: Grove.Games.Orchard
          spec = Spec.new!({module, fruit: 2, baskets: 3, tick: :manual})
          terrain = %Terrain{width: 8, height: 8, cells: :erlang.list_to_binary(codes)}

          state =
            Game.setup(
              State.new(index, @grid, terrain, Rules.new(move_rate: nil)),
              spec,
              :generate
            )

          {x0, y0, x1, y1} = Grid.zone_bounds(@grid, index)

          cells =
            for y <- y0..(y1 - 1), x <- x0..(x1 - 1) do
              {{x, y}, Map.fetch!(kinds, Enum.at(codes, y * 8 + x))}
            end

          expected =
            for {cell, kind} <- cells,
                not (wilting? and kind == :flowers),
                value = Grove.Games.Orchard.cell(cell, kind, spec.config),
                into: %{},
                do: {key(cell), value}

          assert state.game.layer == expected
          failed = wilting? and Enum.any?(cells, &match?({_, :flowers}, &1))
          assert length(state.game.failures) == if(failed, do: 1, else: 0)
        end
      )

    check(property, numtests: 200)
  end

  test "join/3 sets an entity's attributes from what its client said" do
    {entity, state} = join(zone(0), 1, {0, 0})
    assert entity.attrs == %{carrying: 0, score: 0, account: 7}
    assert state.entities[1].attrs == entity.attrs
    {%{entities: [%Entity{id: 1}]}, _state} = Game.take_output(state)
  end

  test "an action toward a cell of the zone applies its effects and answers the game's data" do
    {_entity, state} = join(zone(0), 1, {0, 0})
    {_output, state} = Game.take_output(state)
    state = State.watch(state, true)

    assert {:acted, {:ok, %{carrying: 1}}, state} = act(state, 1, :pick, :se)
    assert state.game.layer[key({1, 1})] == {:tree, 0}
    assert state.entities[1].attrs.carrying == 1
    assert state.entities[1].look == 1

    {output, state} = Game.take_output(state)
    assert output.cells == [{key({1, 1}), {:tree, 0}, 0, true}]
    assert [%Entity{id: 1, look: 1}] = output.entities

    # What viewers see: the tree bare, the picker with an apple, and the event.
    {extra, _state} = State.flush_extra(state, [])

    assert extra == %{
             names: [],
             cells: [{1, 1, 0}],
             looks: [{1, 1}],
             events: [{1, 1, 1, :picked, %{left: 0}}]
           }
  end

  test "the game's refusal changes nothing" do
    {_entity, state} = join(zone(0), 1, {0, 0})
    {_output, state} = Game.take_output(state)

    assert {:acted, {:refused, :not_a_tree}, after_state} = act(state, 1, :pick, :e)
    assert after_state == state
    assert {:acted, {:ok, _}, state} = act(state, 1, :pick, {1, 1})
    assert {:acted, {:refused, :no_apples}, _} = act(state, 1, :pick, {1, 1})
  end

  test "a crashing or malformed action is answered interrupted and leaves the state as it was" do
    {_entity, state} = join(zone(0), 1, {0, 0})
    {_output, state} = Game.take_output(state)

    assert {:acted, {:rejected, :interrupted}, crashed} = act(state, 1, :crash, :here)
    assert %{crashed | game: %{crashed.game | failures: []}} == state

    assert {%{failures: [{AppleGame, :act, :error, %RuntimeError{}, _stack}]}, _} =
             Game.take_output(crashed)

    assert {:acted, {:rejected, :interrupted}, bad} = act(state, 1, :bad, :here)
    assert %{bad | game: %{bad.game | failures: []}} == state

    assert {%{failures: [{AppleGame, :effects, :error, {:cell_outside_zone, {-5, -5}}, []}]}, _} =
             Game.take_output(bad)
  end

  test "a target must be the actor's cell or next to it, and in the world" do
    {_entity, state} = join(zone(0), 1, {0, 0})
    assert {:acted, {:rejected, :out_of_reach}, _} = act(state, 1, :pick, {2, 2})
    assert {:acted, {:rejected, :out_of_bounds}, _} = act(state, 1, :pick, :n)

    assert {:acted, {:rejected, :not_owner}, _} =
             Game.act(state, 1, {:pick, :e, %{}}, spawn(fn -> :ok end), :t, 0, 0, fn _ -> nil end)

    assert {:acted, {:rejected, :unknown_entity}, _} = act(state, 99, :pick, :e)
  end

  test "the layer blocks and frees cells for moves and joins" do
    {_entity, state} = join(zone(0), 1, {1, 3})
    # Water to the east; a bridge frees it.
    assert {:rejected, :blocked, state} = State.apply_move(state, 1, :e, self(), :m, 0)
    assert {:acted, {:ok, %{}}, state} = act(state, 1, :bridge, :e)

    assert {:moved, %Entity{x: 2, y: 3}, {1, 3}, state} =
             State.apply_move(state, 1, :e, self(), :m, 0)

    # A wall to the north blocks.
    assert {:acted, {:ok, %{}}, state} = act(state, 1, :build, :nw)
    assert {:rejected, :blocked, _} = State.apply_move(state, 1, :nw, self(), :m, 0)
    assert {:rejected, :blocked, _} = State.place(state, %Entity{id: 2, owner: self()}, [{1, 2}])
    # And the basket blocks from the start.
    assert {:rejected, :blocked, _} = State.place(state, %Entity{id: 2, owner: self()}, [{2, 2}])
  end

  test "an entity that leaves drops what it carries, and whoever steps there picks it up" do
    {_entity, state} = join(zone(0), 1, {0, 1})
    {:acted, {:ok, _}, state} = act(state, 1, :pick, :e)
    {_entity, state} = join(state, 2, {0, 3})

    {%Entity{id: 1}, state} = State.drop(state, 1)
    assert state.game.layer[key({0, 1})] == {:apples, 1}

    {:moved, _, _, state} = State.apply_move(state, 2, :n, self(), :m, 0)
    {:moved, picker, _, state} = State.apply_move(state, 2, :n, self(), :m, 0)
    assert picker.attrs.carrying == 1
    assert picker.look == 1
    refute Map.has_key?(state.game.layer, key({0, 1}))
  end

  test "delivering into a basket scores and tallies for the account" do
    {_entity, state} = join(zone(0), 1, {1, 2}, %{account: 42})
    {:acted, {:ok, _}, state} = act(state, 1, :pick, :n)
    {_output, state} = Game.take_output(state)

    assert {:acted, {:ok, %{score: 1}}, state} = act(state, 1, :deliver, :e)
    assert state.entities[1].attrs == %{carrying: 0, score: 1, account: 42}
    assert {%{tallies: [{:apples, 42, 1}]}, _} = Game.take_output(state)
    assert {:acted, {:refused, :nothing_to_deliver}, _} = act(state, 1, :deliver, :e)
  end

  defp lazy_zone(catch_up) do
    options = [baskets: [{2, 2}], tick: 1000, catch_up: catch_up, most: 1_000_000]
    state = State.new(0, @grid, terrain(), Rules.new(move_rate: nil))
    Game.setup(state, Spec.new!({Grove.LazyApples, options}), :generate)
  end

  test "a zone nobody watches counts the ticks that fell due on its clock, and asks to be woken at :catch_up" do
    state = lazy_zone(10) |> Game.due(100, 0)
    assert Game.owed(state) == 0
    assert Game.next_tick(state, 100) == 110

    state = Game.due(state, 104, 0)
    assert Game.owed(state) == 4
    assert state.game.layer[key({1, 1})] == {:tree, 1}
    assert Game.next_tick(state, 104) == 110

    # Counted once: the same tick again owes nothing more.
    assert state |> Game.due(104, 0) |> Game.owed() == 4

    # Its timer goes off at 110: ten ticks owed, run at once.
    state = Game.tick_at(state, 110, 0)
    assert Game.owed(state) == 0
    assert state.game.layer[key({1, 1})] == {:tree, 11}

    # Watched, a timer at each tick; a tick already run is not run again.
    state = State.watch(state, true)
    assert Game.next_tick(state, 110) == 111
    state = state |> Game.tick_at(111, 0) |> Game.tick_at(111, 0)
    assert state.game.layer[key({1, 1})] == {:tree, 12}
  end

  test "ticks owed on the clock and caught up give what the same ticks run one by one give" do
    # Steps: the clock moves on some ticks, the timers going off at each
    # (or late, only at the last); the zone is watched or not any more;
    # someone looks or acts (the ticks owed are run).
    step =
      :proper_types.oneof([
        {:clock, :proper_types.range(0, 25), :proper_types.boolean()},
        {:watch, :proper_types.boolean()},
        :look
      ])

    property =
      forall({:proper_types.range(1, 12), :proper_types.list(step)}, fn {catch_up, steps} ->
        start = 1_000
        zone = lazy_zone(catch_up) |> Game.due(start, 0)

        {zone, index} =
          Enum.reduce(steps, {zone, start}, fn
            {:clock, ticks, late}, {zone, index} ->
              zone =
                Enum.reduce((index + 1)..(index + ticks)//1, zone, fn at, zone ->
                  timer_at = Game.next_tick(zone, at - 1)

                  cond do
                    late and at < index + ticks -> zone
                    zone.watched or at >= timer_at -> Game.tick_at(zone, at, 0)
                    true -> zone
                  end
                end)

              {zone, index + ticks}

            {:watch, watched}, {zone, index} ->
              {State.watch(zone, watched), index}

            :look, {zone, index} ->
              {zone |> Game.due(index, 0) |> Game.settle(), index}
          end)

        # At the end, what is owed is run, and a watched zone's timer of
        # the last tick has gone off.
        caught_up = zone |> Game.due(index, 0) |> Game.tick_at(index, 0) |> Game.settle()
        watched = State.watch(lazy_zone(1), true)
        one_by_one = Enum.reduce(1..(index - start)//1, watched, &Game.tick(&2, &1))
        assert caught_up.game.layer == one_by_one.game.layer
        assert Game.owed(caught_up) == 0
      end)

    check(property, numtests: 300)
  end

  test "tick/2 regrows the trees" do
    {_entity, state} = join(zone(0), 1, {0, 1})
    {:acted, {:ok, _}, state} = act(state, 1, :pick, :e)
    state = Game.tick(state, 0)
    assert state.game.layer[key({1, 1})] == {:tree, 1}
    state = state |> Game.tick(0) |> Game.tick(0) |> Game.tick(0)
    assert state.game.layer[key({1, 1})] == {:tree, 3}
  end

  test "a snapshot lists the visible cells and every look" do
    {_entity, state} = join(zone(0), 1, {0, 1})
    {:acted, {:ok, _}, state} = act(state, 1, :pick, :e)
    assert %{cells: [{2, 2, 2}], looks: [{1, 1}], events: []} = State.snapshot_extra(state)
  end

  test "players' names travel with the game's cells and looks, in snapshots and deltas" do
    state = State.watch(zone(0), true)
    placed = %Entity{id: 1, owner: self(), label: {"Ada", "🦊"}}
    {:ok, _entity, state} = State.place(state, placed, [{0, 1}], %{account: 7})

    assert %{names: [{1, "Ada", "🦊"}], cells: [_ | _], looks: []} = State.snapshot_extra(state)

    {_changes, [], labels, state} = State.flush(state)
    assert {%{names: [{1, "Ada", "🦊"}]}, state} = State.flush_extra(state, labels)

    # A pick: no name again, the tree's cell and the picker's look.
    {:acted, {:ok, _}, state} = act(state, 1, :pick, :e)
    {_changes, [], [], state} = State.flush(state)

    assert {%{names: [], cells: [{1, 1, 0}], looks: [{1, 1}]}, _state} =
             State.flush_extra(state, [])
  end

  test "an action aimed across the border runs in the target's zone, and the actor waits for it" do
    locate = fn _ -> nil end
    env = %{locate: locate, now: 0, busy: false}
    {_entity, west} = join(zone(0), 1, {3, 1})
    east = zone(1)
    {:ok, :pick, args} = Grove.Game.check(AppleGame, :pick, %{})

    assert {:pending, effects, west} =
             Game.act(west, 1, {:pick, :e, args}, self(), :tag, 0, 0, locate)

    assert [{:count, :acts_across}, {:send, 1, {:act_at, act, 0, owner, :tag} = _message}] =
             effects

    assert State.away?(west, 1)

    # A move meanwhile waits for the answer, like one behind a handoff.
    assert {:pending, [], west} = Handoff.move(west, 1, :s, self(), :m, 0, 0, locate)

    {[{:send, 0, {:act_done, 1, :tag, ^owner, outcome, attrs}}], east} =
      Game.act_at(east, act, 0, owner, :tag)

    assert outcome == {:ok, %{carrying: 1}}
    assert east.game.layer[key({4, 1})] == {:tree, 0}
    refute Map.has_key?(east.entities, 1)

    {effects, west} = Game.act_done(west, 1, :tag, owner, outcome, attrs, env)

    assert [
             {:acted, _owner, 1, :tag, {:ok, %{carrying: 1}}},
             {:moved, _, _},
             {:reply, _, 1, :m, {:ok, {3, 2}}}
           ] = effects

    refute State.away?(west, 1)
    assert west.entities[1].attrs.carrying == 1
    assert west.entities[1].look == 1
  end

  test "an action elsewhere that never gets its answer is interrupted, and what waited goes on" do
    locate = fn _ -> nil end
    env = %{locate: locate, now: 0, busy: false}
    {_entity, west} = join(zone(0), 1, {3, 1})
    {:pending, _effects, west} = Game.act(west, 1, {:pick, :e, %{}}, self(), :tag, 0, 0, locate)
    {:pending, [], west} = Handoff.move(west, 1, :s, self(), :m, 0, 0, locate)

    assert {[], ^west} = Game.expire(west, -1, %{}, env)
    {effects, west} = Game.expire(west, 1, %{}, env)

    assert [
             {:count, :acts_expired},
             {:acted, _, 1, :tag, {:rejected, :interrupted}},
             {:moved, _, _},
             {:reply, _, 1, :m, {:ok, _}}
           ] = effects

    # The answer that comes too late changes nothing.
    assert {[{:count, :acts_late}], ^west} =
             Game.act_done(west, 1, :tag, self(), {:ok, %{}}, %{carrying: 9}, env)
  end

  test "an action sent to a zone's run that was lost is interrupted; one sent to its new run is not" do
    locate = fn _ -> nil end
    env = %{locate: locate, now: 0, busy: false}
    {_entity, west} = join(zone(0), 1, {3, 1})
    {_entity, west} = join(west, 2, {3, 2})
    {:pending, _effects, west} = Game.act(west, 1, {:pick, :e, %{}}, self(), :old, 0, 0, locate)
    {:pending, _effects, west} = Game.act(west, 2, {:pick, :e, %{}}, self(), :new, 0, 0, locate)
    west = west |> State.acting_at(1, 1) |> State.acting_at(2, 2)

    # Zone 1 runs again at epoch 2: only the action sent to epoch 1 is lost.
    {effects, west} = Game.expire(west, nil, %{1 => 2}, env)
    assert [{:count, :acts_expired}, {:acted, _, 1, :old, {:rejected, :interrupted}}] = effects
    refute State.away?(west, 1)
    assert State.away?(west, 2)
  end

  test "a failing hook changes nothing" do
    defmodule FailingJoin do
      @behaviour Grove.Game
      def actions, do: %{}
      def act(_act, _area), do: {:error, :never}
      def join(_entity, _info, _area), do: raise("no")
    end

    state =
      Game.setup(State.new(0, @grid, terrain(), Rules.new()), Spec.new!(FailingJoin), :generate)

    {:ok, entity, state} = State.place(state, %Entity{id: 1, owner: self()}, [{0, 0}])
    assert entity.attrs == nil

    assert {%{failures: [{FailingJoin, :join, :error, %RuntimeError{}, _}]}, _} =
             Game.take_output(state)
  end

  defmodule CountingEnters do
    @behaviour Grove.Game
    def init(options), do: Map.new(options)
    def actions, do: %{}
    def act(_act, _area), do: {:error, :never}
    # A mark on every cell of column 2, nothing elsewhere.
    def cell({2, _y}, _ground, _config), do: :mark
    def cell(_cell, _ground, _config), do: nil
    def join(entity, _info, _area), do: [{:attrs, entity.id, 0}]
    def enter(entity, _area), do: [{:attrs, entity.id, entity.attrs + 1}]
    def enter_cells, do: Process.get(:enter_cells, :all)
  end

  defp enters(enter_cells) do
    Process.put(:enter_cells, enter_cells)
    spec = Spec.new!(CountingEnters)
    state = Game.setup(State.new(0, @grid, terrain(), Rules.new(move_rate: nil)), spec, :generate)
    {:ok, _entity, state} = State.place(state, %Entity{id: 1, owner: self()}, [{0, 0}])

    # East along row 0: {1, 0}, then the mark at {2, 0}, then {3, 0}.
    Enum.reduce(1..3, state, fn _, state ->
      {:moved, _entity, _from, state} = State.apply_move(state, 1, :e, self(), :m, 0)
      state
    end).entities[1]
  end

  test "enter/2 runs at every step, or only on cells whose layer holds a value when the game says :layer" do
    assert %Entity{x: 3, attrs: 3} = enters(:all)
    assert %Entity{x: 3, attrs: 1} = enters(:layer)

    assert_raise ArgumentError, ~r/enter_cells\/0 must answer :all or :layer/, fn ->
      Process.put(:enter_cells, :some)
      Spec.new!(CountingEnters)
    end
  end
end
