defmodule Grove.World.Life.BoardTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.{LifeReference, LifeShards}
  alias Grove.World.Grid
  alias Grove.World.Life.{Board, Rule}

  doctest Grove.World.Life.Board
  doctest Grove.World.Life.Rule
  doctest Grove.World.Life

  @rules ["B3/S23", "B36/S23", "B2/S", "B3/S012345678", "B1357/S1357", "B35678/S5678"]

  describe "the sharded automaton" do
    test "gives every generation a single grid gives, on random worlds cut in random zones" do
      generator =
        :proper_types.bind(
          {:proper_types.integer(1, 22), :proper_types.integer(1, 22)},
          fn {w, h} ->
            {w, h, :proper_types.integer(1, max(w, h)),
             :proper_types.list(
               {:proper_types.integer(0, w - 1), :proper_types.integer(0, h - 1)}
             ),
             :proper_types.list(
               {:proper_types.integer(0, w - 1), :proper_types.integer(0, h - 1)}
             ), :proper_types.elements(@rules)}
          end,
          false
        )

      check(
        forall(generator, fn {w, h, zone_size, live, barren, notation} ->
          rule = Rule.parse!(notation)
          barren = barren |> Enum.take(div(w * h, 8)) |> MapSet.new()
          live = live |> MapSet.new() |> MapSet.difference(barren)
          grid = Grid.new(w, h, zone_size)
          expected = LifeReference.run(live, rule, w, h, 8, barren)

          Enum.reduce(expected, LifeShards.new(grid, rule, live, barren), fn generation, shards ->
            assert LifeShards.live(shards) == generation,
                   "#{w}x#{h} in zones of #{zone_size}, #{notation}"

            LifeShards.step(shards)
          end)

          true
        end),
        numtests: 300
      )
    end

    test "a dense soup on a world of uneven zones stays exact for many generations" do
      {w, h} = {37, 29}
      rule = Rule.conway()

      live =
        for x <- 0..(w - 1),
            y <- 0..(h - 1),
            :erlang.phash2({x, y}, 100) < 40,
            into: MapSet.new(),
            do: {x, y}

      expected = LifeReference.run(live, rule, w, h, 60)

      for zone_size <- [1, 4, 7, 10, 37] do
        Enum.reduce(expected, LifeShards.new(Grid.new(w, h, zone_size), rule, live), fn gen,
                                                                                        shards ->
          assert LifeShards.live(shards) == gen
          LifeShards.step(shards)
        end)
      end
    end
  end

  describe "classic patterns across zone borders" do
    test "a blinker on a corner of four zones blinks as on one grid" do
      grid = Grid.new(20, 20, 10)
      across = MapSet.new([{9, 10}, {10, 10}, {11, 10}])
      upright = MapSet.new([{10, 9}, {10, 10}, {10, 11}])

      shards = LifeShards.new(grid, Rule.conway(), across)
      shards = LifeShards.step(shards)
      assert LifeShards.live(shards) == upright
      assert LifeShards.live(LifeShards.step(shards)) == across
    end

    test "a glider crosses zone after zone and keeps its shape" do
      glider = [{1, 0}, {2, 1}, {0, 2}, {1, 2}, {2, 2}]
      # 40 x 40 in zones of 7: the glider crosses several borders and corners.
      grid = Grid.new(40, 40, 7)
      shards = LifeShards.new(grid, Rule.conway(), MapSet.new(glider))

      Enum.reduce(1..120, shards, fn generation, shards ->
        shards = LifeShards.step(shards)

        if rem(generation, 4) == 0 do
          k = div(generation, 4)
          assert LifeShards.live(shards) == MapSet.new(glider, fn {x, y} -> {x + k, y + k} end)
        end

        shards
      end)
    end

    test "an R-pentomino's population grows as on one grid" do
      r = MapSet.new([{31, 30}, {32, 30}, {30, 31}, {31, 31}, {31, 32}])
      rule = Rule.conway()
      curve = LifeReference.run(r, rule, 64, 64, 40) |> Enum.map(&MapSet.size/1)

      # The start of the R-pentomino's curve on an unbounded plane.
      assert Enum.take(curve, 16) == [5, 6, 7, 9, 8, 9, 12, 11, 18, 11, 11, 10, 13, 16, 19, 19]

      for zone_size <- [5, 8, 13] do
        shards = LifeShards.new(Grid.new(64, 64, zone_size), rule, r)

        sharded =
          Enum.map_reduce(curve, shards, fn _, shards ->
            {MapSet.size(LifeShards.live(shards)), LifeShards.step(shards)}
          end)
          |> elem(0)

        assert sharded == curve
      end
    end
  end

  describe "rules" do
    test "are parsed from B/S notation and refused with a reason" do
      assert {:ok, %Rule{birth: [3, 6], survival: [2, 3], notation: "B36/S23"}} =
               Rule.parse(" b63/s32 ")

      assert {:ok, %Rule{birth: [2], survival: []}} = Rule.parse("B2/S")
      assert {:error, "a rule is written" <> _} = Rule.parse("23/3")
      assert {:error, "\"B0/S23\" has B0" <> _} = Rule.parse("B0/S23")
      assert {:error, "a rule is a string" <> _} = Rule.parse(:conway)
      assert_raise ArgumentError, ~r/digit from 0 to 8/, fn -> Rule.parse!("B3/S29") end
    end
  end

  describe "boards" do
    test "publish their borders and count their cells" do
      board = Board.new({10, 20, 14, 23}) |> Board.put([{10, 20}, {13, 20}, {10, 22}, {12, 21}])
      # 4 wide, 3 high: top row x 10 and 13, bottom row x 10, left column y 20 and 22.
      assert Board.edges(board) == {4, 3, 0b1001, 0b0001, 0b101, 0b001}
      assert Board.count(board) == 4
      assert Board.alive?(board, 12, 21)
      refute Board.alive?(board, 11, 21)
      assert Board.cells(Board.clear(board, [{13, 20}])) == [{10, 20}, {12, 21}, {10, 22}]
    end

    test "the live cells within a rectangle are those of the whole board inside it, in its order" do
      generator =
        :proper_types.bind(
          {:proper_types.integer(1, 20), :proper_types.integer(1, 20)},
          fn {w, h} ->
            cell = {:proper_types.integer(5, 4 + w), :proper_types.integer(7, 6 + h)}
            # Rectangles that overlap the board, lie past it or hold nothing.
            side = :proper_types.integer(0, 30)
            {w, h, :proper_types.list(cell), side, side, side, side}
          end,
          false
        )

      check(
        forall(generator, fn {w, h, live, x0, y0, dx, dy} ->
          board = Board.put(Board.new({5, 7, 5 + w, 7 + h}), live)
          bounds = {x0, y0, x0 + dx, y0 + dy}

          expected =
            for {x, y} <- Board.cells(board),
                x >= x0,
                x < x0 + dx,
                y >= y0,
                y < y0 + dy,
                do: {x, y}

          Board.cells_within(board, bounds) == expected
        end),
        numtests: 500
      )
    end
  end
end
