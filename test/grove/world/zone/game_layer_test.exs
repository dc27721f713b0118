defmodule Grove.World.Zone.GameLayerTest do
  @moduledoc """
  A zone's layer laid anew (`Zone.Game.setup/3` with `:generate`) is the
  layer its values give laid one at a time, as a zone lays the rows of
  its table or its save: the same values, codes, walls, ticking cells and
  failures, cell for cell, on any ground and with games whose hooks
  answer what they may and what they may not.
  """
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.World.Game.Spec
  alias Grove.World.{Grid, Rules, Terrain}
  alias Grove.World.Zone.{Game, State}

  # The orchard, with walls that free the ground and hooks that fail on
  # some of its values: `show/1` raises on baskets of some cells,
  # `blocks/1` answers what it may not on some trees, and `ticks?/1`
  # throws on others.
  defmodule Quirky do
    @moduledoc false
    @behaviour Grove.Game
    alias Grove.Games.Orchard

    @impl true
    defdelegate actions(), to: Orchard
    @impl true
    defdelegate init(options), to: Orchard
    @impl true
    defdelegate act(act, area), to: Orchard

    @impl true
    def cell({x, y}, :water, _config), do: if(rem(x + y, 5) == 0, do: {:bridge, x})
    def cell(cell, ground, config), do: Orchard.cell(cell, ground, config)

    @impl true
    def show({:bridge, x}), do: rem(x, 3)
    def show(:basket), do: raise("a basket nobody sees")
    def show(value), do: Orchard.show(value)

    @impl true
    def blocks({:bridge, _x}), do: false
    def blocks({:tree, 2}), do: :maybe
    def blocks(value), do: Orchard.blocks(value)

    @impl true
    def ticks?({:tree, 1}), do: throw(:unsure)
    def ticks?({:bridge, x}), do: rem(x, 2) == 0
    def ticks?(value), do: Orchard.ticks?(value)
  end

  # A game with `cell/3` alone: no codes, walls or ticking cells of its own.
  defmodule Plain do
    @moduledoc false
    @behaviour Grove.Game
    @impl true
    def actions, do: %{}
    @impl true
    def act(_act, _area), do: {:error, :nothing}
    @impl true
    def cell({x, y}, :meadow, _config), do: if(rem(x * 7 + y, 11) == 0, do: :stone)
    def cell(_cell, _ground, _config), do: nil
  end

  @grid Grid.new(24, 24, 8)

  # What the zone's cells give laid one value at a time: `cell/3` at each
  # of its cells, the values handed to `setup/3` as a table's rows, last
  # cell first (the order a zone has always laid them in, which orders
  # its failures).
  defp one_by_one(state, spec) do
    {x0, y0, x1, y1} = state.bounds

    rows =
      for y <- y0..(y1 - 1),
          x <- x0..(x1 - 1),
          value = spec.module.cell({x, y}, Terrain.at(state.terrain, x, y), spec.config),
          do: {Grid.cell_key(state.grid, x, y), value}

    Game.setup(state, spec, Enum.reverse(rows))
  end

  # A failure without its stack: the two ways lay from different places.
  defp same_layer!(laid, expected) do
    assert laid.game.layer == expected.game.layer
    assert laid.game.codes == expected.game.codes
    assert laid.game.walk == expected.game.walk
    assert laid.game.ticking == expected.game.ticking

    assert Enum.map(laid.game.failures, &Tuple.delete_at(&1, 4)) ==
             Enum.map(expected.game.failures, &Tuple.delete_at(&1, 4))

    assert %{laid.game | failures: []} == %{expected.game | failures: []}
  end

  test "a layer laid anew is its values laid one at a time, on any ground, with any hooks (property)" do
    property =
      forall(
        {:proper_types.vector(24 * 24, :proper_types.range(0, 4)),
         :proper_types.range(0, Grid.zone_count(@grid) - 1),
         :proper_types.elements([Grove.Games.Orchard, Quirky, Plain]), :proper_types.range(1, 4),
         :proper_types.range(1, 12)},
        fn {codes, index, module, fruit, baskets} ->
          options = if module == Plain, do: [], else: [fruit: fruit, baskets: baskets]
          spec = Spec.new!({module, [tick: :manual] ++ options})
          terrain = %Terrain{width: 24, height: 24, cells: :erlang.list_to_binary(codes)}
          state = State.new(index, @grid, terrain, Rules.new(move_rate: nil))

          same_layer!(Game.setup(state, spec, :generate), one_by_one(state, spec))
        end
      )

    check(property, numtests: 300)
  end

  test "the orchard on the default ground of a large world lays the layer its values give, zone for zone" do
    grid = Grid.new(1_000_000, 1_000_000, 50)
    terrain = Terrain.for_world(1_000_000, 1_000_000, 50, seed: 1)
    spec = Spec.new!({Grove.Games.Orchard, tick: :manual})

    for _ <- 1..25 do
      index = :rand.uniform(Grid.zone_count(grid)) - 1
      {x0, y0, _x1, _y1} = Grid.zone_bounds(grid, index)
      state = State.new(index, grid, Terrain.area_of(terrain, x0, y0), Rules.new())
      laid = Game.setup(state, spec, :generate)
      assert map_size(laid.game.layer) > 0
      same_layer!(laid, one_by_one(state, spec))
    end
  end
end
