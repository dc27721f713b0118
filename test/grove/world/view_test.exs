defmodule Grove.World.ViewTest do
  use ExUnit.Case, async: true

  alias Grove.World.View

  defp entries(list),
    do: for({id, x, y, k} <- list, into: <<>>, do: <<id::32, x::16, y::16, k::8>>)

  defp ids(list), do: for(id <- list, into: <<>>, do: <<id::32>>)

  test "the first changes are the full view, clipped to the viewport" do
    view =
      View.new({10, 10}, 2)
      |> View.apply_message(
        {:grove_view, 0, :snapshot, 0, entries([{1, 9, 9, 0}, {2, 20, 20, 0}])}
      )
      |> View.apply_message({:grove_view, 1, :snapshot, 0, entries([{3, 12, 11, 1}])})

    {%{shown: shown, gone: []}, view} = View.take_changes(view)
    assert Enum.sort(shown) == [{1, 9, 9, 0}, {3, 12, 11, 1}]
    assert {:none, _} = View.take_changes(view)
  end

  test "deltas show what moved in, moved within and left" do
    view =
      View.new({10, 10}, 2)
      |> View.apply_message(
        {:grove_view, 0, :snapshot, 0, entries([{1, 9, 9, 0}, {2, 20, 20, 0}])}
      )

    {_, view} = View.take_changes(view)

    view =
      View.apply_message(
        view,
        {:grove_view, 0, :delta, entries([{1, 8, 8, 0}, {2, 11, 11, 0}]), <<>>}
      )

    {%{shown: shown, gone: []}, view} = View.take_changes(view)
    assert Enum.sort(shown) == [{1, 8, 8, 0}, {2, 11, 11, 0}]

    view = View.apply_message(view, {:grove_view, 0, :delta, entries([{1, 7, 8, 0}]), ids([2])})
    assert {%{shown: [], gone: gone}, _} = View.take_changes(view)
    assert Enum.sort(gone) == [1, 2]
  end

  test "an entity crossing zones is shown once, wherever its deltas arrive first" do
    base =
      View.new({10, 10}, 3)
      |> View.apply_message({:grove_view, 0, :snapshot, 0, entries([{1, 9, 10, 0}])})
      |> View.apply_message({:grove_view, 1, :snapshot, 0, <<>>})

    {_, base} = View.take_changes(base)

    # The new zone reports the arrival before the old zone reports the departure...
    arrival_first =
      base
      |> View.apply_message({:grove_view, 1, :delta, entries([{1, 10, 10, 0}]), <<>>})
      |> View.apply_message({:grove_view, 0, :delta, <<>>, ids([1])})

    # ...or after it.
    departure_first =
      base
      |> View.apply_message({:grove_view, 0, :delta, <<>>, ids([1])})
      |> View.apply_message({:grove_view, 1, :delta, entries([{1, 10, 10, 0}]), <<>>})

    for view <- [arrival_first, departure_first] do
      assert View.visible(view) == %{1 => {10, 10, 0}}
      assert {%{shown: [{1, 10, 10, 0}], gone: []}, _} = View.take_changes(view)
    end
  end

  test "recentering shows what comes into view and drops what leaves" do
    view =
      View.new({10, 10}, 1)
      |> View.apply_message(
        {:grove_view, 0, :snapshot, 0, entries([{1, 9, 9, 0}, {2, 12, 10, 0}])}
      )

    {%{shown: [{1, 9, 9, 0}]}, view} = View.take_changes(view)
    view = View.recenter(view, {11, 10})
    assert {%{shown: [{2, 12, 10, 0}], gone: [1]}, _} = View.take_changes(view)
  end

  test "only the first take and the first after a resync are full views" do
    view =
      View.new({10, 10}, 2)
      |> View.apply_message({:grove_view, 0, :snapshot, 0, entries([{1, 9, 9, 0}])})

    assert {%{full: true, shown: [{1, 9, 9, 0}]}, view} = View.take_changes(view)

    view = View.apply_message(view, {:grove_view, 1, :snapshot, 0, entries([{2, 11, 11, 0}])})
    assert {%{full: false, shown: [{2, 11, 11, 0}]}, view} = View.take_changes(view)

    view = View.recenter(view, {11, 10})
    assert {:none, view} = View.take_changes(view)

    view = View.resync(view)
    assert {%{full: true, shown: shown, gone: []}, _} = View.take_changes(view)
    assert Enum.sort(shown) == [{1, 9, 9, 0}, {2, 11, 11, 0}]
  end

  test "a closed zone's entities are gone, and deltas before a snapshot are ignored" do
    view =
      View.new({10, 10}, 2)
      |> View.apply_message({:grove_view, 3, :delta, entries([{7, 10, 10, 0}]), <<>>})
      |> View.apply_message({:grove_view, 0, :snapshot, 0, entries([{1, 9, 9, 0}])})

    {%{shown: [{1, 9, 9, 0}]}, view} = View.take_changes(view)
    view = View.apply_message(view, {:grove_view, 0, :closed})
    assert {%{shown: [], gone: [1]}, _} = View.take_changes(view)
  end

  test "areas applied directly assemble like the messages do" do
    view =
      View.new({10, 10}, 2)
      |> View.put_area(0, [{1, 9, 9, 0}, {2, 20, 20, 0}])
      |> View.update_area(0, [{2, 11, 11, 0}], [1])
      |> View.update_area(5, [{9, 10, 10, 0}], [])

    assert View.known(view) == %{2 => {11, 11, 0}}
    assert View.known(View.drop_area(view, 0)) == %{}
  end

  test "the raw format encodes what apply_message decodes" do
    snapshot = View.encode_view(:raw, :snapshot, 0, [{1, 9, 9, 0}], [])
    {moved, gone} = View.encode_view(:raw, :delta, 0, [{1, 8, 9, 0}], [4])

    view =
      View.new({10, 10}, 2)
      |> View.apply_message({:grove_view, 0, :snapshot, 0, snapshot})
      |> View.apply_message({:grove_view, 0, :delta, moved, gone})

    assert View.known(view) == %{1 => {8, 9, 0}}
  end

  test "a full view shows the client's own entity at its acknowledged cell, even between zones" do
    view =
      View.new({10, 10}, 2, 5)
      |> View.apply_message(
        {:grove_view, 0, :snapshot, 0, entries([{5, 10, 10, 1}, {1, 9, 9, 0}])}
      )
      |> View.apply_message({:grove_view, 1, :snapshot, 0, <<>>})

    {%{full: true, shown: shown}, view} = View.take_changes(view)
    assert Enum.sort(shown) == [{1, 9, 9, 0}, {5, 10, 10, 1}]

    # The move's outcome came first; the old zone has let go, the new one not yet spoken.
    view =
      view
      |> View.recenter({11, 10})
      |> View.apply_message({:grove_view, 0, :delta, <<>>, ids([5])})
      |> View.resync()

    assert {%{full: true, shown: shown}, _} = View.take_changes(view)
    assert Enum.sort(shown) == [{1, 9, 9, 0}, {5, 11, 10, 1}]
  end
end
