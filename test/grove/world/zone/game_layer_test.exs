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
    use Grove.Test.GameLike, of: Grove.Games.Orchard, keep: [:actions, :init, :act]
    alias Grove.Games.Orchard

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

  # What the layer holds by the game's hooks alone, worked out here from
  # what a game promises, not by `Zone.Game`: the values of `cell/3`
  # taken last cell first (the order of the failures), each with its code
  # (`show/1`, 0 to 255), wall (`blocks/1`, a boolean, or nil for the
  # ground's) and ticking (`ticks?/1`, a boolean), in that order; a value
  # one of them fails for is left out, with the first failure.
  defp by_hooks(state, spec) do
    module = Code.ensure_loaded!(spec.module)
    {x0, y0, x1, y1} = state.bounds

    values =
      for y <- (y1 - 1)..y0//-1,
          x <- (x1 - 1)..x0//-1,
          value = module.cell({x, y}, Terrain.at(state.terrain, x, y), spec.config),
          do: {Grid.cell_key(state.grid, x, y), value}

    empty = %{layer: %{}, codes: %{}, walk: %{}, ticking: %{}, failures: []}

    Enum.reduce(values, empty, fn {key, value}, laid ->
      try do
        {hook(module, :show, value, 0, &(is_integer(&1) and &1 in 0..255)),
         hook(module, :blocks, value, nil, &(is_boolean(&1) or &1 == nil)),
         hook(module, :ticks?, value, false, &is_boolean/1)}
      catch
        {:answered, callback, answer} ->
          failure = {module, :show, :error, {:"bad_#{callback}", answer}}
          %{laid | failures: [failure | laid.failures]}

        kind, reason ->
          %{laid | failures: [{module, :show, kind, reason} | laid.failures]}
      else
        {code, blocks, ticks?} ->
          %{
            laid
            | layer: Map.put(laid.layer, key, value),
              codes: if(code == 0, do: laid.codes, else: Map.put(laid.codes, key, code)),
              walk: if(blocks == nil, do: laid.walk, else: Map.put(laid.walk, key, blocks)),
              ticking: if(ticks?, do: Map.put(laid.ticking, key, true), else: laid.ticking)
          }
      end
    end)
  end

  # A hook's answer when the game has it and answers what it may, else
  # what its absence means.
  defp hook(module, callback, value, absent, valid?) do
    if function_exported?(module, callback, 1) do
      answer = apply(module, callback, [value])
      if valid?.(answer), do: answer, else: throw({:answered, callback, answer})
    else
      absent
    end
  end

  defp hooks_give!(laid, expected) do
    assert laid.game.layer == expected.layer
    assert laid.game.codes == expected.codes
    assert laid.game.walk == expected.walk
    assert laid.game.ticking == expected.ticking
    assert Enum.map(laid.game.failures, &Tuple.delete_at(&1, 4)) == expected.failures
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

          laid = Game.setup(state, spec, :generate)
          same_layer!(laid, one_by_one(state, spec))
          hooks_give!(laid, by_hooks(state, spec))
        end
      )

    check(property, numtests: 300)
  end

  test "the orchard on the default ground of a large world lays the layer its values give, zone for zone" do
    grid = Grid.new(1_000_000, 1_000_000, 50)
    terrain = Terrain.for_world(1_000_000, 1_000_000, 50, seed: 1)
    spec = Spec.new!({Grove.Games.Orchard, tick: :manual})

    # A zone may be all but a lake, with nothing for the orchard to lay
    # (a CI drew one): the zones drawn lay something together.
    laid =
      for _ <- 1..25 do
        index = :rand.uniform(Grid.zone_count(grid)) - 1

        in_zone!(index, fn ->
          {x0, y0, _x1, _y1} = Grid.zone_bounds(grid, index)
          state = State.new(index, grid, Terrain.area_of(terrain, x0, y0), Rules.new())
          laid = Game.setup(state, spec, :generate)
          same_layer!(laid, one_by_one(state, spec))
          hooks_give!(laid, by_hooks(state, spec))
          map_size(laid.game.layer)
        end)
      end

    assert Enum.sum(laid) > 0
  end

  # The checks of a zone drawn at random, a failure among them naming it.
  defp in_zone!(index, checks) do
    checks.()
  rescue
    error in ExUnit.AssertionError ->
      reraise %{error | message: "zone #{index}: #{error.message}"}, __STACKTRACE__
  end
end
