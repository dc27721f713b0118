defmodule Grove.World.Zone.BacteriaTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.LifeReference
  alias Grove.World.{Entity, Grid, Life, Rules, Terrain}
  alias Grove.World.Life.Board
  alias Grove.World.Zone.{Bacteria, State}

  # A 12 x 12 meadow cut into nine 4 x 4 zones; zone 4 is the middle one.
  @grid Grid.new(12, 12, 4)
  @zones Grid.zone_count(@grid)
  @life Life.new!(interval: :manual, soup: 0.0)
  @meadow %Terrain{width: 12, height: 12, cells: :binary.copy(<<0>>, 144)}

  defp core(index), do: State.new(index, @grid, @meadow, Rules.new(move_rate: nil))

  defp row(index, generation, cells, previous \\ nil) do
    board = Board.put(Board.new(Grid.zone_bounds(@grid, index)), cells)
    {index, generation, board.bits, Board.edges(board), previous}
  end

  # Zone `index` at generation 0 with `cells`, its neighbours' rows in `rows`.
  defp zone(index, cells, life \\ @life) do
    {[], core, bacteria} = Bacteria.recover(life, 0, 1, core(index), row(index, 0, cells))
    {core, bacteria}
  end

  defp quiet_neighbours(index, generation) do
    rows = for i <- 0..(@zones - 1), i != index, into: %{}, do: {i, row(i, generation, [])}
    &Map.get(rows, &1)
  end

  defp live(core), do: core.bacteria |> Board.cells() |> Enum.sort()

  describe "recovering" do
    test "a zone with no row lays a soup where nothing stands, and publishes it as generation 0" do
      life = Life.new!(interval: :manual, soup: 1.0, soup_density: 0.5)
      core = core(4)
      {:ok, _, core} = State.place(core, %Entity{id: 1, owner: self()}, [{5, 5}])

      {[{:row, {4, 0, bits, _edges, nil}}, {:cells, cells, []}], core, bacteria} =
        Bacteria.recover(life, 0, 7, core, nil)

      assert cells != []
      refute {5, 5} in cells
      assert live(core) == Enum.sort(cells)
      assert core.bacteria.bits == bits
      assert bacteria.live == length(cells) and bacteria.generation == 0
    end

    test "a zone with a row carries on from it, with nothing to write" do
      {[], core, bacteria} = Bacteria.recover(@life, 0, 7, core(4), row(4, 12, [{5, 5}]))
      assert live(core) == [{5, 5}]
      assert bacteria.generation == 12 and bacteria.live == 1
    end
  end

  describe "zones on demand" do
    test "a zone that wakes resumes at the world's generation with the board it slept with" do
      {[{:row, {4, 20, bits, edges, edges}}], core, bacteria} =
        Bacteria.recover(@life, 0, 7, core(4), row(4, 12, [{5, 5}]), 20)

      assert live(core) == [{5, 5}]
      assert core.bacteria.bits == bits
      assert bacteria.generation == 20 and bacteria.live == 1
    end

    test "a neighbour that sleeps is read by its borders as they stand, at any generation" do
      # A blinker in zone 4 whose west end is in zone 3, asleep at generation 2.
      {core, bacteria} = zone(4, [{4, 5}, {5, 5}])
      sleeping = row(3, 2, [{3, 5}])

      read_row = fn
        3 -> {:frozen, elem(sleeping, 3)}
        index -> quiet_neighbours(4, 0).(index)
      end

      {_effects, core, bacteria} = Bacteria.advance(bacteria, core, 1, read_row)
      assert bacteria.generation == 1
      assert live(core) == [{4, 4}, {4, 5}, {4, 6}]
    end

    test "a neighbour that never ran has no cells; one that woke further ahead gives its borders before" do
      {core, bacteria} = zone(4, [{4, 5}, {5, 5}, {6, 5}])
      woke = row(3, 9, [{3, 4}], elem(row(3, 9, []), 3))

      read_row = fn
        1 -> {:frozen, nil}
        3 -> woke
        index -> quiet_neighbours(4, 0).(index)
      end

      {_effects, core, bacteria} = Bacteria.advance(bacteria, core, 1, read_row)
      assert bacteria.generation == 1
      # The blinker turns, as with an empty west.
      assert live(core) == [{5, 4}, {5, 5}, {5, 6}]
    end
  end

  describe "advancing" do
    test "a blinker turns, and the zone publishes its row with the borders it had" do
      {core, bacteria} = zone(4, [{4, 5}, {5, 5}, {6, 5}])
      {_, _, _, before, nil} = row(4, 0, [{4, 5}, {5, 5}, {6, 5}])
      {effects, core, bacteria} = Bacteria.advance(bacteria, core, 1, quiet_neighbours(4, 0))

      assert [
               {:row, {4, 1, _bits, _edges, ^before}},
               {:cells, born, died},
               {:generation, 1, 2, 2, 3}
             ] = effects

      assert Enum.sort(born) == [{5, 4}, {5, 6}]
      assert Enum.sort(died) == [{4, 5}, {6, 5}]
      assert live(core) == [{5, 4}, {5, 5}, {5, 6}]
      assert bacteria.generation == 1
    end

    test "a zone owed several generations computes one and asks to be woken at once" do
      {core, bacteria} = zone(4, [])

      assert {[_row, _cells, _generation, {:wake, :now}], _core, %Bacteria{generation: 1}} =
               Bacteria.advance(bacteria, core, 3, quiet_neighbours(4, 0))
    end

    test "a zone waits for a neighbour that lags, and takes the borders of one that is ahead" do
      {core, bacteria} = zone(4, [{4, 5}, {5, 5}, {6, 5}])
      behind = fn _ -> nil end

      assert {[{:count, :life_waits}, {:wake, {:after, _}}], ^core, ^bacteria} =
               Bacteria.advance(bacteria, core, 1, behind)

      # The western neighbour is at generation 1 already, its row keeping
      # the borders of 0: a cell of it on the border counts.
      rows = quiet_neighbours(4, 0)
      {_, _, _, west_before, _} = row(3, 0, [{3, 4}])

      ahead = fn
        3 -> row(3, 1, [], west_before)
        index -> rows.(index)
      end

      {_effects, core, _} = Bacteria.advance(bacteria, core, 1, ahead)
      # {4, 4} had three neighbours: {3, 4} across the border, {4, 5}, {5, 5}.
      assert {4, 4} in live(core)
    end

    test "a zone at the generation due is woken when the next is due, by the clock" do
      life = Life.new!(interval: 100, soup: 0.0)
      {core, bacteria} = zone(4, [], life)
      bacteria = %{bacteria | epoch: 1_000}
      assert Bacteria.target(bacteria, 1_250) == 2
      assert Bacteria.target(bacteria, 900) == 0
      assert {[{:wake, {:at, 1_100}}], _, _} = Bacteria.advance(bacteria, core, 0, & &1)
      # Stepped by hand: whoever steps it wakes it.
      {core, bacteria} = zone(4, [])
      assert {[], _, _} = Bacteria.advance(bacteria, core, 0, & &1)
    end

    test "nothing is born under an entity" do
      {core, bacteria} = zone(4, [{4, 5}, {5, 5}, {6, 5}])
      {:ok, _, core} = State.place(core, %Entity{id: 1, owner: self()}, [{5, 4}])
      {_effects, core, _} = Bacteria.advance(bacteria, core, 1, quiet_neighbours(4, 0))
      assert live(core) == [{5, 5}, {5, 6}]
    end
  end

  describe "seeding" do
    setup do
      {core, bacteria} = zone(4, [])
      {:ok, _, core} = State.place(core, %Entity{id: 1, owner: self()}, [{5, 5}])
      %{core: core, bacteria: bacteria}
    end

    test "a pattern seeded comes alive at the next generation", %{core: core, bacteria: bacteria} do
      me = self()
      request = {1, :block, :e, me, :t, 0}

      assert {[{:count, :seeds}, {:seeded, ^me, 1, :t, :ok}], bacteria} =
               Bacteria.seed(bacteria, core, request, fn _ -> nil end, false)

      assert {[{:count, :seeds_refused}, {:seeded, ^me, 1, :t, {:rejected, :occupied}}], _} =
               Bacteria.seed(bacteria, core, request, fn _ -> nil end, false)

      {_effects, core, bacteria} = Bacteria.advance(bacteria, core, 1, quiet_neighbours(4, 0))
      assert live(core) != []
      assert bacteria.seeds == []
    end

    test "a pattern is refused by a busy zone, across its edge, or for another's entity",
         %{core: core, bacteria: bacteria} do
      me = self()
      locate = fn _ -> nil end

      assert {[_, {:seeded, ^me, 1, :t, {:rejected, :busy}}], _} =
               Bacteria.seed(bacteria, core, {1, :block, :e, me, :t, 0}, locate, true)

      assert {[_, {:seeded, ^me, 1, :t, {:rejected, :zone_edge}}], _} =
               Bacteria.seed(bacteria, core, {1, :block, :n, me, :t, 0}, locate, false)

      other = spawn(fn -> :ok end)

      assert {[{:seeded, ^other, 1, :t, {:rejected, :not_owner}}], _} =
               Bacteria.seed(bacteria, core, {1, :block, :e, other, :t, 0}, locate, false)
    end

    test "a pattern of an entity elsewhere follows it", %{core: core, bacteria: bacteria} do
      me = self()

      assert {[{:send, 5, {:seed, 9, :block, :e, ^me, :t, 1}}], ^bacteria} =
               Bacteria.seed(bacteria, core, {9, :block, :e, me, :t, 0}, fn 9 -> 5 end, false)

      assert {[{:seeded, ^me, 9, :t, {:rejected, :unknown_entity}}], _} =
               Bacteria.seed(bacteria, core, {9, :block, :e, me, :t, 0}, fn _ -> nil end, false)
    end
  end

  ## The property

  @generations 4

  test "zones stepping in any order compute the world's automaton, never more than one generation apart" do
    cells = :proper_types.list({:proper_types.integer(0, 11), :proper_types.integer(0, 11)})
    order = :proper_types.list(:proper_types.integer(0, @zones - 1))

    check(
      forall({cells, order}, fn {cells, order} ->
        live = MapSet.new(cells)
        expected = LifeReference.run(live, @life.rule, 12, 12, @generations)

        zones =
          Map.new(0..(@zones - 1), fn index ->
            mine = for {x, y} = cell <- live, Grid.zone_of(@grid, x, y) == index, do: cell
            {index, zone(index, mine)}
          end)

        table = Map.new(zones, fn {index, {core, _}} -> {index, row(index, 0, live(core))} end)
        seen = for {index, {core, _}} <- zones, into: %{}, do: {{index, 0}, live(core)}
        sim = %{zones: zones, table: table, seen: seen}

        # Zones wake in the order given, then each in turn until all are done.
        sim = Enum.reduce(order, sim, &wake(&2, &1))
        sim = finish(sim, @generations * @zones * 2)

        for g <- 0..@generations do
          world =
            for index <- 0..(@zones - 1),
                cell <- sim.seen[{index, g}],
                into: MapSet.new(),
                do: cell

          assert world == Enum.at(expected, g), "generation #{g} differs"
        end

        true
      end),
      numtests: 200
    )
  end

  defp wake(sim, index) do
    {core, bacteria} = sim.zones[index]

    {effects, core, bacteria} =
      Bacteria.advance(bacteria, core, @generations, &Map.get(sim.table, &1))

    sim =
      Enum.reduce(effects, sim, fn
        {:row, row}, sim -> %{sim | table: Map.put(sim.table, index, row)}
        _effect, sim -> sim
      end)

    before = live(elem(sim.zones[index], 0))

    for {:cells, born, died} <- effects,
        do: assert(Enum.sort((before -- died) ++ born) == live(core))

    assert bacteria.live == length(live(core))

    # Neighbours are never more than one generation apart.
    for {_direction, neighbour} <- bacteria.neighbours, neighbour != nil do
      {_, theirs} = sim.zones[neighbour]
      assert abs(bacteria.generation - theirs.generation) <= 1
    end

    %{
      sim
      | zones: Map.put(sim.zones, index, {core, bacteria}),
        seen: Map.put(sim.seen, {index, bacteria.generation}, live(core))
    }
  end

  defp finish(sim, rounds_left) do
    if Enum.all?(sim.zones, fn {_, {_, bacteria}} -> bacteria.generation == @generations end) do
      sim
    else
      assert rounds_left > 0, "the zones stopped making progress"

      sim
      |> then(&Enum.reduce(0..(@zones - 1), &1, fn index, sim -> wake(sim, index) end))
      |> finish(rounds_left - 1)
    end
  end
end
