defmodule Grove.Games.OrchardWorldTest do
  @moduledoc "The orchard in a running world, played by its own kinds of actors."
  use Grove.WorldCase, async: true

  alias Grove.Actors
  alias Grove.Games.Orchard.{Grazer, Picker}
  alias Grove.World

  # Trees and baskets thick on the ground, so that pickers find both at once.
  @tag world: [
         width: 60,
         height: 60,
         zone_size: 20,
         terrain: [tree_density: 0.15, water_density: 0.0, rock_density: 0.0, flower_density: 0.2],
         game: {Grove.Games.Orchard, fruit: 1, baskets: 20, tick: :manual}
       ]
  test "pickers pick and deliver, grazers graze, through the client API", %{world: world} do
    name = :"orchard_actors_#{System.unique_integer([:positive])}"

    start_supervised!(
      {Actors,
       name: name,
       world: world,
       interval: 100,
       resolution: 10,
       kinds: [{Picker, 30}, {Grazer, 20}]},
      id: name
    )

    eventually(fn ->
      picker = Enum.find(Actors.by_kind(name), &(&1.name == "picker"))
      grazer = Enum.find(Actors.by_kind(name), &(&1.name == "grazer"))
      assert picker.counts.acted > 0
      assert grazer.counts.acted > 0
      # Every apple delivered was picked: points came from trees.
      assert World.stats(world).acts_ok > 0
      scored = for id <- 1..50, {%{score: s}, _} <- [World.attrs(world, id)], do: s
      assert Enum.sum(scored) > 0
    end)

    # The audit asks one zone after the other: an actor still walking could
    # be counted in the zone it left and in the one it reached. Held, the
    # actors send nothing more, and once the moves in flight are done the
    # world must be whole.
    _herds = Actors.hold(name)
    eventually(fn -> assert :ok = World.audit(world) end)
  end

  # The same, the actors living in their zones: each zone senses the layer
  # and the entities for them, and runs their actions, with no message
  # from or to their herds.
  @tag world: [
         width: 60,
         height: 60,
         zone_size: 20,
         terrain: [tree_density: 0.15, water_density: 0.0, rock_density: 0.0, flower_density: 0.2],
         game: {Grove.Games.Orchard, fruit: 1, baskets: 20, tick: :manual},
         senses: Grove.Actor.Senses
       ]
  test "resident pickers pick and deliver, resident grazers graze, their zones acting for them",
       %{world: world} do
    name = :"orchard_residents_#{System.unique_integer([:positive])}"

    start_supervised!(
      {Actors,
       name: name,
       world: world,
       interval: 1000,
       resident: true,
       kinds: [{Picker, 30}, {Grazer, 20}]},
      id: name
    )

    eventually(fn -> assert World.entity_count(world) == 50 end)

    # The world ticks by hand: each round, every zone steps its residents
    # once, until apples were delivered (picked first) and flowers grazed.
    walked =
      Enum.reduce_while(1..400, 0, fn round, _ ->
        :ok = World.walk(world)
        eventually(fn -> assert :ok = World.audit(world) end)
        scored = for id <- 1..50, {%{score: s}, _} <- [World.attrs(world, id)], do: s
        grazed = for x <- 0..59, y <- 0..59, World.cell(world, {x, y}) == {:grazed, 3}, do: {x, y}

        if Enum.sum(scored) > 0 and grazed != [],
          do: {:halt, round},
          else: {:cont, round}
      end)

    assert walked < 400
    assert World.stats(world).acts_ok > 0
    assert World.entity_count(world) == 50
    refute_received {:grove_act, _id, _tag, _outcome}
    refute_received {:grove_acts, _outcomes}
  end
end
