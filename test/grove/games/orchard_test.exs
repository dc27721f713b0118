defmodule Grove.Games.OrchardTest do
  @moduledoc "The orchard's rules, on a zone's pure core, and its kinds, as pure functions."
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.Actor
  alias Grove.Actor.Senses
  alias Grove.World.Game.Spec
  alias Grove.Games.Orchard
  alias Grove.Games.Orchard.{Grazer, Picker}
  alias Grove.World.{Entity, Grid, Rules, Terrain}
  alias Grove.World.Zone.{Game, State}

  # 10 x 10, one zone: a tree at {2, 2}, flowers at {5, 5}, meadow elsewhere.
  @grid Grid.new(10, 10, 10)

  defp terrain do
    cells =
      for y <- 0..9, x <- 0..9, into: <<>> do
        case {x, y} do
          {2, 2} -> <<1>>
          {5, 5} -> <<4>>
          _ -> <<0>>
        end
      end

    %Terrain{width: 10, height: 10, cells: cells}
  end

  # A zone whose layer is the test's own: `layer` is {cell, value}.
  defp zone(layer, options \\ []) do
    spec = Spec.new!({Orchard, [tick: :manual] ++ options})
    rows = for {{x, y}, value} <- layer, do: {Grid.cell_key(@grid, x, y), value}
    Game.setup(State.new(0, @grid, terrain(), Rules.new(move_rate: nil)), spec, rows)
  end

  defp join(state, id, cell, account \\ 7) do
    {:ok, _entity, state} =
      State.place(state, %Entity{id: id, owner: self()}, [cell], %{account: account})

    state
  end

  defp act(state, id, name, target) do
    Game.act(state, id, {name, target, %{}}, self(), :tag, 0, 0, fn _ -> nil end)
  end

  defp value(state, {x, y}), do: state.game.layer[Grid.cell_key(@grid, x, y)]

  test "one tree in four bears, a basket stands on one meadow cell in 250, the same everywhere" do
    config = Orchard.init([])
    trees = for x <- 0..199, y <- 0..199, do: Orchard.cell({x, y}, :tree, config)
    bearing = Enum.count(trees, &match?({:tree, _}, &1))
    assert bearing > 9000 and bearing < 11_000
    assert Enum.all?(trees, &(&1 == nil or match?({:tree, n} when n in 0..3, &1)))

    baskets =
      Enum.count(
        for(x <- 0..199, y <- 0..199, do: Orchard.cell({x, y}, :meadow, config)),
        &(&1 == :basket)
      )

    assert baskets > 100 and baskets < 220
    assert Orchard.cell({3, 4}, :tree, config) == Orchard.cell({3, 4}, :tree, config)
    assert Orchard.cell({3, 4}, :water, config) == nil

    assert_raise ArgumentError, ~r/:grow must be a positive integer/, fn ->
      Orchard.init(grow: 0)
    end
  end

  test "pick, carry three at most, deliver into a basket for points on the player and the board" do
    state = zone([{{2, 2}, {:tree, 3}}, {{4, 2}, :basket}]) |> join(1, {3, 2})

    assert {:acted, {:ok, %{carrying: 1}}, state} = act(state, 1, :pick, :w)
    assert {:acted, {:ok, %{carrying: 2}}, state} = act(state, 1, :pick, :w)
    assert {:acted, {:ok, %{carrying: 3}}, state} = act(state, 1, :pick, :w)
    assert {:acted, {:refused, :no_apples}, state} = act(state, 1, :pick, :w)
    assert state.entities[1].look == 3
    {_output, state} = Game.take_output(state)

    assert {:acted, {:ok, %{score: 3, points: 3}}, state} = act(state, 1, :deliver, :e)
    assert state.entities[1].attrs == %{carrying: 0, score: 3, account: 7}
    assert {%{tallies: [{:orchard, 7, 3}]}, _} = Game.take_output(state)
    assert {:acted, {:refused, :empty_hands}, _} = act(state, 1, :deliver, :e)
    assert {:acted, {:refused, :not_a_basket}, _} = act(state, 1, :deliver, :s)
    assert {:acted, {:refused, :not_an_apple_tree}, _} = act(state, 1, :pick, :s)
  end

  test "a guest scores on itself, not on the board" do
    state = zone([{{2, 2}, {:tree, 1}}, {{4, 2}, :basket}]) |> join(1, {3, 2}, nil)
    {:acted, {:ok, _}, state} = act(state, 1, :pick, :w)
    {_output, state} = Game.take_output(state)
    assert {:acted, {:ok, %{score: 1}}, state} = act(state, 1, :deliver, :e)
    assert {%{tallies: []}, _} = Game.take_output(state)
  end

  test "hands full, the tree is left alone" do
    state = zone([{{2, 2}, {:tree, 3}}]) |> join(1, {3, 2})

    state = %{
      state
      | entities: Map.update!(state.entities, 1, &%{&1 | attrs: %{&1.attrs | carrying: 3}})
    }

    assert {:acted, {:refused, :hands_full}, _} = act(state, 1, :pick, :w)
  end

  test "sheep graze flowers down, and flowers and trees grow back at ticks" do
    state = zone([{{2, 2}, {:tree, 0}}]) |> join(1, {5, 4})
    assert {:acted, {:ok, %{}}, state} = act(state, 1, :graze, :s)
    assert value(state, {5, 5}) == :grazed
    assert {:acted, {:refused, :no_flowers}, state} = act(state, 1, :graze, :s)

    # Enough ticks, and both come back.
    state = Enum.reduce(1..2000, state, fn roll, state -> Game.tick(state, roll) end)
    assert value(state, {5, 5}) == nil
    assert value(state, {2, 2}) == {:tree, 3}
  end

  test "a tick is given the trees short of apples and the grazed flowers alone, as the layer changes" do
    value =
      :proper_types.oneof([
        {:tree, :proper_types.integer(0, 3)},
        :basket,
        :grazed,
        {:apples, :proper_types.integer(1, 5)}
      ])

    cell = {:proper_types.integer(0, 9), :proper_types.integer(0, 9)}
    # Ticks grow trees to three and bring flowers back; a picker beside
    # the tree at {2, 2} takes its apples, a sheep beside the flowers at
    # {5, 5} grazes them; the code reloaded lists the cells anew.
    change = :proper_types.elements([:tick, :tick, :pick, :graze, :renew])

    check(
      forall(
        {:proper_types.list({cell, value}), {:tree, :proper_types.integer(0, 3)},
         :proper_types.list(change)},
        fn {layer, tree, changes} ->
          around = [{2, 2}, {2, 3}, {5, 4}, {5, 5}]
          layer = [{{2, 2}, tree} | Enum.reject(layer, fn {cell, _} -> cell in around end)]
          state = zone(layer) |> join(1, {2, 3}) |> join(2, {5, 4})

          state =
            changes
            |> Enum.with_index()
            |> Enum.reduce(state, fn
              {:tick, roll}, state ->
                Game.tick(state, roll * 7919)

              {:pick, _}, state ->
                state |> act(1, :pick, :n) |> elem(2)

              {:graze, _}, state ->
                state |> act(2, :graze, :s) |> elem(2)

              {:renew, _}, state ->
                {:ok, state} = Game.renew(state, state.game.spec)
                state
            end)

          expected =
            for {cell, value} <- Grove.Game.Area.cells(state),
                Orchard.ticks?(value),
                do: {cell, value}

          assert Enum.sort(Grove.Game.Area.ticking(state)) == Enum.sort(expected)
          true
        end
      ),
      numtests: 300
    )
  end

  # Every cell of the 10 x 10 zone holds `value`, with the game's options.
  defp zone_of(value, options),
    do: zone(for(x <- 0..9, y <- 0..9, do: {{x, y}, value}), options)

  # How often each value comes out over the cells of `runs` zones.
  defp outcomes(runs, run) do
    counts =
      Enum.reduce(1..runs, %{}, fn seed, acc ->
        state = run.(seed)
        Enum.reduce(Map.values(state.game.layer), acc, &Map.update(&2, &1, 1, fn n -> n + 1 end))
      end)

    total = Enum.sum(Map.values(counts))
    Map.new(counts, fn {value, n} -> {value, n / total} end)
  end

  test "catching up n ticks at once gives what n ticks give, in law" do
    options = [grow: 300, regrow: 150]

    for {value, ticks} <- [{{:tree, 0}, 4}, {{:tree, 1}, 7}, {:grazed, 5}, {{:tree, 2}, 1}] do
      # Ticks one by one, each with a roll of its own, in a zone that owes none.
      one_by_one =
        outcomes(200, fn seed ->
          state = zone_of(value, [catch_up: 1] ++ options)
          Enum.reduce(1..ticks, state, &Game.tick(&2, seed * 1000 + &1))
        end)

      # The same ticks owed by a zone nobody watches, run together.
      at_once =
        outcomes(200, fn seed ->
          state = zone_of(value, [catch_up: ticks] ++ options)
          Enum.reduce(1..ticks, state, &Game.tick(&2, seed * 1000 + &1))
        end)

      for key <- Enum.uniq(Map.keys(one_by_one) ++ Map.keys(at_once)) do
        assert_in_delta Map.get(one_by_one, key, 0),
                        Map.get(at_once, key, 0),
                        0.02,
                        "#{inspect(value)} after #{ticks} ticks: #{inspect(key)} " <>
                          "#{inspect(one_by_one)} against #{inspect(at_once)}"
      end
    end
  end

  test "a zone nobody watches owes its ticks, and runs them before an action on it" do
    # Trees that grow an apple at every tick; ticks owed up to 10 at a time.
    state = zone([{{2, 2}, {:tree, 0}}], grow: 1000) |> join(1, {3, 2})
    state = state |> Game.tick(1) |> Game.tick(2)
    assert Game.owed(state) == 2
    assert value(state, {2, 2}) == {:tree, 0}

    # Two ticks of certain growth: two apples, one picked.
    assert {:acted, {:ok, %{carrying: 1}}, state} = act(state, 1, :pick, :w)
    assert Game.owed(state) == 0
    assert value(state, {2, 2}) == {:tree, 1}

    # Watched, it ticks when the tick falls due.
    state = state |> State.watch(true) |> Game.tick(3)
    assert Game.owed(state) == 0
    assert value(state, {2, 2}) == {:tree, 2}
  end

  test "a player who leaves drops its apples where it stood, and whoever steps there takes them" do
    state = zone([{{2, 2}, {:tree, 2}}]) |> join(1, {3, 2}) |> join(2, {3, 4})
    {:acted, {:ok, _}, state} = act(state, 1, :pick, :w)
    {:acted, {:ok, _}, state} = act(state, 1, :pick, :w)
    {%Entity{}, state} = State.drop(state, 1)
    assert value(state, {3, 2}) == {:apples, 2}

    {:moved, _, _, state} = State.apply_move(state, 2, :n, self(), :m, 0)
    {:moved, picker, _, state} = State.apply_move(state, 2, :n, self(), :m, 0)
    assert picker.attrs.carrying == 2
    assert value(state, {3, 2}) == nil
  end

  test "baskets block; what players see of each value" do
    state = zone([{{4, 2}, :basket}])
    assert State.blocked?(state, 4, 2)
    assert Orchard.show({:tree, 2}) == 1 and Orchard.show({:tree, 0}) == 0

    assert Orchard.show(:basket) == 2 and Orchard.show(:grazed) == 3 and
             Orchard.show({:apples, 1}) == 4

    assert Spec.describe(Spec.new!(Orchard))["actions"]["pick"]["key"] == "F"
  end

  ## The kinds

  defp senses(opts),
    do: Senses.new(Keyword.merge([terrain: terrain(), radius: 5], opts))

  test "a picker picks the tree next to it, delivers to the basket next to it, and heads for what it needs" do
    trees = %{{2, 2} => {:tree, 2}}
    baskets = %{{8, 8} => :basket}

    assert {{:act, :pick, :w}, _} =
             Picker.step(0, senses(at: {3, 2}, cells: trees, attrs: %{carrying: 0}), 0)

    assert {{:act, :deliver, :se}, _} =
             Picker.step(0, senses(at: {7, 7}, cells: baskets, attrs: %{carrying: 1}), 0)

    # Hands full: to the basket, not the tree.
    all = Map.merge(trees, baskets)
    assert {:se, _} = Picker.step(0, senses(at: {4, 4}, cells: all, attrs: %{carrying: 3}), 0)
    assert {:nw, _} = Picker.step(0, senses(at: {4, 4}, cells: all, attrs: %{carrying: 0}), 0)
  end

  test "a grazer grazes flowers next to it now and then, and flocks otherwise" do
    rolls =
      for roll <- 0..95,
          do: elem(Grazer.step(0, senses(at: {5, 4}, cells: %{}, entities: []), roll), 0)

    assert {:act, :graze, :s} in rolls
    assert Enum.any?(rolls, &(&1 in Grid.directions()))

    grazed = %{{5, 5} => :grazed}

    rolls =
      for roll <- 0..95,
          do: elem(Grazer.step(0, senses(at: {5, 4}, cells: grazed, entities: []), roll), 0)

    refute Enum.any?(rolls, &match?({:act, _, _}, &1))
  end

  # A situation: where the actor stands, what it carries, trees with
  # apples, baskets and grazed flowers about, a random integer.
  defp situation do
    cell = {:proper_types.integer(0, 9), :proper_types.integer(0, 9)}

    {cell, :proper_types.integer(0, 3), :proper_types.list(cell), :proper_types.list(cell),
     :proper_types.integer(0, Actor.roll_max()), :proper_types.integer(0, 7)}
  end

  for kind <- [Picker, Grazer] do
    @kind kind
    test "#{inspect(kind)} asks only for free cells, and acts only toward what the action needs" do
      check(
        forall(situation(), fn {at, carrying, trees, baskets, roll, heading} ->
          cells =
            Map.merge(
              Map.new(Enum.reject(trees, &(&1 == at)), &{&1, {:tree, rem(elem(&1, 0), 3) + 1}}),
              Map.new(Enum.reject(baskets, &(&1 == at)), &{&1, :basket})
            )

          walk = for {cell, :basket} <- cells, into: %{}, do: {cell, true}

          senses =
            senses(
              at: at,
              radius: Actor.describe!(@kind).senses.radius,
              cells: cells,
              walk: walk,
              entities: [],
              attrs: %{carrying: carrying, score: 0, account: nil}
            )

          {decision, next} = @kind.step(heading, senses, roll)
          assert next in 0..7

          case decision do
            :stay ->
              :ok

            {:act, :pick, direction} ->
              assert carrying < 3 and
                       match?(
                         {:tree, n} when n > 0,
                         Senses.cell(senses, Grid.step(at, direction))
                       )

            {:act, :deliver, direction} ->
              assert carrying > 0 and Senses.cell(senses, Grid.step(at, direction)) == :basket

            {:act, :graze, direction} ->
              target = Grid.step(at, direction)

              assert Senses.ground(senses, target) == :flowers and
                       Senses.cell(senses, target) == nil

            direction ->
              assert Senses.free?(senses, Grid.step(at, direction))
          end

          true
        end),
        numtests: 500
      )
    end
  end
end
