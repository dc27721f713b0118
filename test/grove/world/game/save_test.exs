defmodule Grove.World.Game.SaveTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.World.Game.Save

  defp same(value, _from), do: value

  test "a base alone loads as its layer; changes of it apply, in key order" do
    base = Save.encode_base(1, [{7, {:tree, 2}}, {3, :basket}], 42)
    assert {:ok, [{3, :basket}, {7, {:tree, 2}}], [], _at} = Save.decode(base, nil, 1, &same/2)

    changes = Save.encode_changes(1, [{7, nil}, {9, :grazed}], 42)

    assert {:ok, [{3, :basket}, {9, :grazed}], [7, 9], _at} =
             Save.decode(base, changes, 1, &same/2)
  end

  test "changes of another base are not applied: the base alone is a whole layer" do
    base = Save.encode_base(1, [{3, :basket}], 42)
    stale = Save.encode_changes(1, [{3, nil}], 41)
    assert {:ok, [{3, :basket}], [], _at} = Save.decode(base, stale, 1, &same/2)
    # A save from before changes existed has no id: no changes are its.
    old = :erlang.term_to_binary(%{version: 1, saved_at: 0, rows: [{3, :basket}]}, [:compressed])
    assert {:ok, [{3, :basket}], [], 0} = Save.decode(old, stale, 1, &same/2)
  end

  test "base and changes of an older version go through the upgrade, each from its own" do
    base = Save.encode_base(0, [{1, {:tree, 1}}, {2, {:tree, 2}}], 5)
    changes = Save.encode_changes(1, [{2, {:tree, 3, :v1}}, {1, nil}], 5)
    upgrade = fn {:tree, n}, 0 -> {:tree, n, :v1} end

    assert {:ok, [{2, {:tree, 3, :v1}}], _, _} = Save.decode(base, changes, 1, upgrade)
  end

  test "what is not a save is an error, not a crash" do
    assert {:error, _} = Save.decode("nonsense", nil, 1, &same/2)
    assert {:error, _} = Save.decode(:erlang.term_to_binary(%{rows: 1}), nil, 1, &same/2)
    base = Save.encode_base(1, [], 1)
    assert {:error, _} = Save.decode(base, :erlang.term_to_binary(:x), 1, &same/2)
  end

  # A zone's layer changing between saves as the saver sees it: marks of
  # the changed cells, a base when the changes are worth one (or at
  # random, as a new run of the zone would take one), the changes of the
  # last base otherwise. Whatever the changes, every save loads as the
  # layer was when it was written.
  test "saves of a layer changing at random load as the layer was" do
    key = :proper_types.integer(0, 80)
    value = :proper_types.oneof([:basket, :grazed, {:tree, :proper_types.integer(0, 3)}])

    op =
      :proper_types.oneof([
        {:set, key, value},
        {:delete, key},
        :save,
        :base
      ])

    check(
      forall({:proper_types.list({key, value}), :proper_types.list(op)}, fn {rows, ops} ->
        layer = Map.new(rows)
        store = base(layer)

        {layer, _marks, store} =
          Enum.reduce(ops ++ [:save], {layer, MapSet.new(), store}, fn
            {:set, key, value}, {layer, marks, store} ->
              {Map.put(layer, key, value), MapSet.put(marks, key), store}

            {:delete, key}, {layer, marks, store} ->
              {Map.delete(layer, key), MapSet.put(marks, key), store}

            :base, {layer, _marks, _store} ->
              {layer, MapSet.new(), loads(base(layer), layer)}

            :save, {layer, marks, {base, _changes, id, size}} ->
              store =
                if Save.compact?(MapSet.size(marks), size) do
                  base(layer)
                else
                  cells = for key <- marks, do: {key, Map.get(layer, key)}
                  {base, Save.encode_changes(1, cells, id), id, size}
                end

              loads(store, layer)
              marks = if elem(store, 0) == base, do: marks, else: MapSet.new()
              {layer, marks, store}
          end)

        loads(store, layer)
      end),
      numtests: 300
    )
  end

  defp base(layer) do
    id = Save.new_id()
    {Save.encode_base(1, Map.to_list(layer), id), nil, id, map_size(layer)}
  end

  defp loads({base, changes, _id, _size} = store, layer) do
    assert {:ok, rows, _changed, _at} = Save.decode(base, changes, 1, &same/2)
    assert rows == layer |> Map.to_list() |> List.keysort(0)
    store
  end
end
