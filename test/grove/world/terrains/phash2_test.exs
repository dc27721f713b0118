defmodule Grove.World.Terrains.Phash2Test do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.World.Terrains.{Phash2, Woodland}

  @small 134_217_728

  # A tuple's draw worked out step by step, element after element.
  defp stepped(elements, range) do
    elements
    |> Enum.reduce(Phash2.tuple(length(elements)), fn
      n, state when is_integer(n) -> Phash2.int(state, n)
      atom, state -> Phash2.atom(state, atom)
    end)
    |> Phash2.range(range)
  end

  test "a tuple of small integers and atoms draws what :erlang.phash2/2 draws (property)" do
    element =
      :proper_types.oneof([
        :proper_types.integer(-@small, @small - 1),
        :proper_types.integer(-3, 3),
        :proper_types.elements([-@small, @small - 1, 0]),
        :proper_types.elements([:tree, :rock, :flowers, :fruit, nil, true, :""])
      ])

    range =
      :proper_types.oneof([
        :proper_types.integer(1, 0xFFFFFFFF),
        :proper_types.elements([1, 4, 250, 65_536, 0x100000000])
      ])

    property =
      forall({:proper_types.list(element), range}, fn {elements, range} ->
        assert stepped(elements, range) == :erlang.phash2(List.to_tuple(elements), range)
      end)

    check(property, numtests: 2000, deep_numtests: 50_000)
  end

  test "only integers within 2^27 either side are small" do
    assert Phash2.small?(0) and Phash2.small?(-@small) and Phash2.small?(@small - 1)
    refute Phash2.small?(@small) or Phash2.small?(-@small - 1) or Phash2.small?(:tree)
  end

  test "a world wider than 2^27 cells draws its far columns with the built-in, the same ground" do
    width = @small + 40
    params = Woodland.init(width, 3, seed: 5, tree_density: 0.5)
    reference = Grove.WoodlandReference.init(width, 3, seed: 5, tree_density: 0.5)

    for rect <- [
          {@small - 30, 0, @small - 1, 3},
          {@small - 4, 0, @small + 4, 3},
          {@small, 1, width, 3}
        ] do
      assert Woodland.cells(params, rect) == Grove.WoodlandReference.cells(reference, rect)
    end
  end
end
