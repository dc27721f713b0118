defmodule Grove.World.LifeTest do
  use Grove.WorldCase, async: true

  alias Grove.LifeReference
  alias Grove.World
  alias Grove.World.{Life, Terrain}
  alias Grove.World.Life.Rule

  @manual [rule: "B3/S23", interval: :manual, soup: 0.0]

  defp live(world) do
    world |> World.bacteria() |> Map.values() |> Enum.flat_map(&elem(&1, 1)) |> MapSet.new()
  end

  # Steps the world (by one generation at a time) until it reaches `generation`.
  defp step_to(world, generation) do
    for _ <- (World.generation(world) + 1)..generation//1 do
      World.step_life(world)
    end

    eventually(fn -> assert World.generation(world) == generation end)
  end

  describe "the zones' automaton" do
    @tag world: [
           width: 33,
           height: 27,
           zone_size: 7,
           seed: 5,
           terrain: [tree_density: 0.1, water_density: 0.0, rock_density: 0.02],
           life: [interval: :manual, soup: 0.5, soup_density: 0.4],
           density_block: 3
         ]
    test "computes every generation a single grid computes, around the terrain", %{world: world} do
      eventually(fn -> assert World.generation(world) == 0 end)
      start = live(world)
      assert MapSet.size(start) > 50
      terrain = World.terrain(world)

      barren =
        for x <- 0..32,
            y <- 0..26,
            Terrain.blocked?(terrain, x, y),
            into: MapSet.new(),
            do: {x, y}

      assert MapSet.disjoint?(start, barren)
      expected = LifeReference.run(start, Rule.conway(), 33, 27, 12, barren)

      for {generation, n} <- Enum.with_index(tl(expected), 1) do
        step_to(world, n)
        assert live(world) == generation, "generation #{n}"
      end

      assert World.stats(world).bacteria == MapSet.size(List.last(expected))
      assert World.stats(world).generations == 12 * 20

      # The minimap's layer of bacteria counts them block by block (of 3
      # cells a side, so that runs of a row's cells cross blocks and zones).
      %{counts: counts} = World.Minimap.sums(world, nil, :bacteria)
      by_block = Enum.frequencies_by(List.last(expected), fn {x, y} -> {div(x, 3), div(y, 3)} end)
      assert counts == for(row <- 0..8, col <- 0..10, do: Map.get(by_block, {col, row}, 0))
    end

    @tag world: [
           width: 30,
           height: 30,
           zone_size: 10,
           life: [interval: :manual, soup: 0.6]
         ]
    test "a zone that restarts carries on from where it was", %{world: world} do
      eventually(fn -> assert World.generation(world) == 0 end)
      expected = LifeReference.run(live(world), Rule.conway(), 30, 30, 6)
      step_to(world, 2)
      ref = Process.monitor(World.zone_pid(world, 4))
      Process.exit(World.zone_pid(world, 4), :kill)
      assert_receive {:DOWN, ^ref, :process, _, :killed}

      for n <- 3..6 do
        step_to(world, n)
        assert live(world) == Enum.at(expected, n)
      end
    end

    @tag world: [width: 20, height: 20, zone_size: 10, life: [interval: 20, soup: 0.5]]
    test "generations follow the clock when the interval is timed", %{world: world} do
      eventually(fn -> assert (World.generation(world) || 0) >= 3 end)
      assert World.life_times(world).count >= 3 * 4
    end

    test "options are validated with the option's name" do
      for {life, message} <- [
            {[rule: "B3/S99"], ~r/life :rule: a neighbour count is a digit/},
            {[rule: "B0/S23"], ~r/has B0/},
            {[interval: 0], ~r/life :interval must be a positive integer/},
            {[soup: 2], ~r/life :soup must be a number in 0..1/},
            {[pace: 1], ~r/unknown keys \[:pace\]/},
            {true, ~r/:life must be false or a keyword list/}
          ] do
        assert_raise ArgumentError, message, fn -> World.new!(name: :w, life: life) end
      end
    end
  end

  describe "bacteria and entities" do
    @tag world: [width: 30, height: 30, zone_size: 15, life: @manual]
    test "a walker cannot enter a live cell, nor join on one", %{world: world} do
      {:ok, id, {10, 10}} = World.join(world, at: {10, 10})
      :ok = World.seed(world, id, :block, :e, :s1)
      assert_receive {:grove_seed, ^id, :s1, :ok}
      step_to(world, 1)
      # The block stands just ahead, across the player's row.
      assert live(world) == MapSet.new([{11, 9}, {12, 9}, {11, 10}, {12, 10}])

      :ok = World.move(world, id, :e, 1)
      assert assert_outcome(id, 1) == {:rejected, :occupied}
      :ok = World.move(world, id, :ne, 2)
      assert assert_outcome(id, 2) == {:rejected, :occupied}
      :ok = World.move(world, id, :se, 3)
      assert assert_outcome(id, 3) == {:ok, {11, 11}}
      :ok = World.move(world, id, :n, 4)
      assert assert_outcome(id, 4) == {:rejected, :occupied}

      assert World.join(world, at: {12, 10}) == {:error, :occupied}
      assert World.audit(world) == :ok
    end

    @tag world: [width: 30, height: 30, zone_size: 15, life: @manual]
    test "a birth never lands under an entity", %{world: world} do
      {:ok, id, _} = World.join(world, at: {10, 10})
      {:ok, _other, _} = World.join(world, at: {12, 9})
      :ok = World.seed(world, id, :blinker, :e, :s)
      assert_receive {:grove_seed, ^id, :s, :ok}
      step_to(world, 1)
      assert live(world) == MapSet.new([{11, 10}, {12, 10}, {13, 10}])
      # The blinker turns upright, but the cell north of its middle holds an entity.
      step_to(world, 2)
      assert live(world) == MapSet.new([{12, 10}, {12, 11}])
      assert World.stats(world).births == 3 + 1
      assert World.audit(world) == :ok
    end

    @tag world: [width: 30, height: 30, zone_size: 15, life: @manual]
    test "a pattern is refused with a reason where it would not fit", %{world: world} do
      {:ok, id, _} = World.join(world, at: {10, 10})
      {:ok, _, _} = World.join(world, at: {12, 10})

      :ok = World.seed(world, id, :block, :e, :taken)
      assert_receive {:grove_seed, ^id, :taken, {:rejected, :occupied}}

      :ok = World.seed(world, id, :r_pentomino, :n, :ok)
      assert_receive {:grove_seed, ^id, :ok, :ok}
      :ok = World.seed(world, id, :r_pentomino, :n, :twice)
      assert_receive {:grove_seed, ^id, :twice, {:rejected, :occupied}}

      {:ok, edge, _} = World.join(world, at: {13, 3})
      :ok = World.seed(world, edge, :glider, :se, :edge)
      assert_receive {:grove_seed, ^edge, :edge, {:rejected, :zone_edge}}

      {:ok, corner, _} = World.join(world, at: {1, 1})
      :ok = World.seed(world, corner, :glider, :nw, :off)
      assert_receive {:grove_seed, ^corner, :off, {:rejected, :out_of_bounds}}

      assert World.stats(world).seeds == 1
      assert World.stats(world).seeds_refused == 4
    end

    @tag world: [width: 30, height: 30, zone_size: 15]
    test "a pattern is refused in a world without bacteria", %{world: world} do
      {:ok, id, _} = World.join(world, at: {10, 10})
      :ok = World.seed(world, id, :glider, :e, :none)
      assert_receive {:grove_seed, ^id, :none, {:rejected, :disabled}}
    end

    @tag world: [
           width: 30,
           height: 30,
           zone_size: 15,
           terrain: [tree_density: 0.5, water_density: 0.0, rock_density: 0.0],
           life: @manual
         ]
    test "a pattern is refused on ground that blocks", %{world: world} do
      terrain = World.terrain(world)

      {x, y} =
        Enum.find(for(x <- 2..12, y <- 2..12, do: {x, y}), fn {x, y} ->
          not Terrain.blocked?(terrain, x, y) and
            Enum.any?(Life.pattern_cells(:block, {x, y}, :e), fn {bx, by} ->
              Terrain.blocked?(terrain, bx, by)
            end)
        end)

      {:ok, id, _} = World.join(world, at: {x, y})
      :ok = World.seed(world, id, :block, :e, :tree)
      assert_receive {:grove_seed, ^id, :tree, {:rejected, :blocked}}
    end
  end

  describe "views" do
    @tag world: [width: 30, height: 30, zone_size: 10, life: @manual]
    test "show bacteria as entities of their kind, born and gone with the generations",
         %{world: world} do
      alias Grove.World.View
      {:ok, id, {10, 10}} = World.join(world, at: {10, 10}, updates: :view)
      :ok = World.seed(world, id, :blinker, :e, :s)
      assert_receive {:grove_seed, ^id, :s, :ok}

      view = View.new({10, 10}, 8, id)
      view = receive_snapshots(view)
      step_to(world, 1)
      World.tick(world)

      flat = [{11, 10}, {12, 10}, {13, 10}]
      upright = [{12, 9}, {12, 10}, {12, 11}]

      view =
        eventually_view(world, view, fn visible ->
          bacteria(visible) == MapSet.new(flat)
        end)

      for {x, y} <- flat,
          do:
            assert(View.visible(view)[Life.bacterium_id(World.grid(world), {x, y})] == {x, y, 2})

      step_to(world, 2)
      World.tick(world)
      view = eventually_view(world, view, &(bacteria(&1) == MapSet.new(upright)))

      # A viewer that arrives now gets them in its snapshot.
      {:ok, _late, _} = World.join(world, at: {20, 5}, updates: :view)
      assert_receive {:grove_view, 1, :snapshot, _, entries}
      assert {Life.bacterium_id(World.grid(world), {12, 9}), 12, 9, 2} in decode(entries)
      assert map_size(View.visible(view)) == 4
    end
  end

  defp bacteria(visible), do: for({_id, {x, y, 2}} <- visible, into: MapSet.new(), do: {x, y})

  defp decode(binary), do: for(<<id::32, x::16, y::16, kind::8 <- binary>>, do: {id, x, y, kind})

  defp receive_snapshots(view) do
    receive do
      {:grove_view, _, :snapshot, _, _} = message ->
        receive_snapshots(Grove.World.View.apply_message(view, message))
    after
      0 -> view
    end
  end

  defp eventually_view(world, view, check) do
    ref = make_ref()
    Process.put(ref, view)

    eventually(fn ->
      view = Process.get(ref) |> receive_snapshots() |> Grove.World.View.catch_up(world)
      Process.put(ref, view)
      assert check.(Grove.World.View.visible(view))
    end)

    Process.get(ref)
  end
end
