defmodule Grove.Actors.KindsTest do
  # The kinds shipped with Grove, as pure functions: no world, no herd.
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.Actor
  alias Grove.Actor.Senses
  alias Grove.Actors.{Sheep, Walker, Wanderer}
  alias Grove.World.{Grid, Terrain}

  @open Terrain.generate(20, 20,
          tree_density: 0.0,
          water_density: 0.0,
          rock_density: 0.0,
          flower_density: 0.0
        )

  # A terrain with trees where `trees` says, meadow elsewhere.
  defp terrain(width, height, trees) do
    cells =
      for y <- 0..(height - 1), x <- 0..(width - 1), into: <<>> do
        if MapSet.member?(trees, {x, y}), do: <<1>>, else: <<0>>
      end

    %Terrain{width: width, height: height, cells: cells}
  end

  defp senses(opts), do: Senses.new(Keyword.merge([terrain: @open, radius: 1], opts))

  describe "walker" do
    test "steps in the direction its random integer names, sensing nothing" do
      steps = for roll <- 0..7, do: elem(Walker.step(nil, nil, roll), 0)
      assert steps == Grid.directions()
      assert Actor.describe!(Walker).senses == nil
    end
  end

  describe "wanderer" do
    # Rolls whose veer bits say "keep straight" (not a multiple of 12 after the side bit).
    @straight 2

    test "keeps its heading on open ground" do
      assert Wanderer.step(2, senses(at: {5, 5}), @straight) == {:e, 2}
    end

    test "turns at a tree, the edge of the world and another entity" do
      trees = terrain(10, 10, MapSet.new([{6, 5}]))
      {direction, heading} = Wanderer.step(2, senses(terrain: trees, at: {5, 5}), @straight)
      assert direction in [:ne, :se]
      assert heading == Actor.heading(direction)

      {direction, _} = Wanderer.step(2, senses(at: {19, 5}), @straight)
      assert direction in [:n, :s]

      {direction, _} = Wanderer.step(2, senses(at: {5, 5}, entities: [{9, 6, 5, 0}]), @straight)
      assert direction in [:ne, :se]
    end

    test "boxed in, stays and turns round" do
      around = for direction <- Grid.directions(), do: Grid.step({5, 5}, direction)
      boxed = terrain(10, 10, MapSet.new(around))
      assert Wanderer.step(2, senses(terrain: boxed, at: {5, 5}), @straight) == {:stay, 6}
    end

    test "veers now and then on open ground" do
      rolls = for roll <- 0..255, do: elem(Wanderer.step(0, senses(at: {5, 5}), roll), 0)
      assert :n in rolls
      assert :ne in rolls and :nw in rolls
    end
  end

  describe "sheep" do
    test "drift toward the sheep they see, not toward other kinds" do
      flock = [{2, 9, 5, 4}, {3, 9, 6, 4}]
      at = senses(at: {5, 5}, radius: 4, kind: 4, entities: flock)
      {direction, _} = Sheep.step(0, at, 2)
      assert direction in [:e, :ne, :se]

      strangers = senses(at: {5, 5}, radius: 4, kind: 4, entities: [{2, 9, 5, 0}])
      # Alone (the other is no sheep), it wanders on its heading: north.
      assert Sheep.step(0, strangers, 2) == {:n, 0}
    end

    test "graze, mostly standing still, next to another sheep" do
      at = senses(at: {5, 5}, radius: 4, kind: 4, entities: [{2, 6, 5, 4}])
      steps = for roll <- 0..63, do: elem(Sheep.step(0, at, roll), 0)
      stays = Enum.count(steps, &(&1 == :stay))
      assert stays > 32 and stays < 64
    end
  end

  # What is generated: a small terrain's size and trees, entities about,
  # a cell, a random integer and a heading; `situation/3` makes senses of it.
  defp situation do
    {:proper_types.integer(3, 12), :proper_types.integer(3, 12),
     :proper_types.list({:proper_types.integer(0, 11), :proper_types.integer(0, 11)}),
     :proper_types.list(
       {:proper_types.integer(0, 11), :proper_types.integer(0, 11), :proper_types.integer(3, 5)}
     ), :proper_types.integer(0, 11), :proper_types.integer(0, 11),
     :proper_types.integer(0, Actor.roll_max()), :proper_types.integer(0, 7)}
  end

  defp situation({w, h, trees, others, x, y, _roll, _heading}, radius, entities?) do
    at = {rem(x, w), rem(y, h)}

    entities =
      if entities?,
        do: for({ex, ey, kind} <- others, {ex, ey} != at, do: {ex * 12 + ey + 1, ex, ey, kind})

    Senses.new(
      terrain: terrain(w, h, MapSet.new(trees)),
      at: at,
      radius: radius,
      kind: 4,
      entities: entities
    )
  end

  for kind <- [Walker, Wanderer, Sheep] do
    @kind kind
    test "#{inspect(kind)}'s decisions keep its state well-formed and, if it senses, only ask for cells it sees free" do
      description = Actor.describe!(@kind)
      %{radius: radius, entities: entities?} = description.senses || %{radius: 1, entities: false}

      check(
        forall(situation(), fn {_, _, _, _, _, _, roll, heading} = generated ->
          senses = situation(generated, radius, entities?)
          state = if @kind == Walker, do: @kind.init([], roll), else: heading
          given = if description.senses, do: senses, else: nil
          {decision, next} = @kind.step(state, given, roll)

          assert decision == :stay or decision in Grid.directions()

          if @kind == Walker,
            do: assert(next == nil),
            else: assert(next in 0..7)

          if description.senses != nil and decision != :stay,
            do: assert(Senses.free?(senses, Grid.step(senses.at, decision)))

          true
        end),
        numtests: 300
      )
    end
  end
end
