defmodule Grove.World.FeedTest do
  use ExUnit.Case, async: true

  alias Grove.World.Feed

  @json {Grove.Gateway.Frames, {:json, 3}}
  @binary {Grove.Gateway.Frames, {:binary, 3}}

  test "a reader gets what was published after its number, oldest first, in its format" do
    feed = Feed.new(4, 10)
    assert Feed.latest(feed, 2) == 0
    assert Feed.since(feed, 2, 0, @json) == {[], 0}

    for seq <- 1..3, do: Feed.publish(feed, 2, seq, [{@json, "j#{seq}"}, {@binary, "b#{seq}"}])

    assert Feed.latest(feed, 2) == 3
    assert Feed.since(feed, 2, 0, @json) == {["j1", "j2", "j3"], 3}
    assert Feed.since(feed, 2, 1, @binary) == {["b2", "b3"], 3}
    assert Feed.since(feed, 2, 3, @json) == {[], 3}
    # Other zones are untouched.
    assert Feed.since(feed, 1, 0, @json) == {[], 0}
  end

  test "beyond its history, or in a format nobody published, a reader must take a snapshot" do
    feed = Feed.new(1, 2)
    for seq <- 1..5, do: Feed.publish(feed, 0, seq, [{@json, seq}])

    assert Feed.since(feed, 0, 3, @json) == {[4, 5], 5}
    assert Feed.since(feed, 0, 2, @json) == :gone
    assert Feed.since(feed, 0, 4, @binary) == :gone
    # A number from before the zone restarted with a fresh world.
    assert Feed.since(feed, 0, 9, @json) == :gone
  end

  defp rows(feed, zone),
    do: feed.table |> :ets.match({{zone, :"$1"}, :_}) |> List.flatten() |> Enum.sort()

  test "relayed deltas: numbers only go up, a gap is a snapshot, and no row outlives the history" do
    feed = Feed.new(1, 3)
    for seq <- 1..4, do: Feed.publish(feed, 0, seq, [{@json, seq}])

    # Deltas the relay missed: readers before the gap need a snapshot.
    Feed.publish(feed, 0, 9, [{@json, 9}])
    assert Feed.latest(feed, 0) == 9
    assert Feed.since(feed, 0, 4, @json) == :gone
    assert Feed.since(feed, 0, 7, @json) == :gone
    assert Feed.since(feed, 0, 8, @json) == {[9], 9}
    assert rows(feed, 0) == [9]

    Feed.publish(feed, 0, 10, [{@json, 10}])
    assert Feed.since(feed, 0, 9, @json) == {[10], 10}

    # A delta that comes late does not take the number back.
    Feed.publish(feed, 0, 8, [{@json, 8}])
    assert Feed.latest(feed, 0) == 10
    assert Feed.since(feed, 0, 7, @json) == {[8, 9, 10], 10}
    # One older than the history kept is not kept at all.
    Feed.publish(feed, 0, 5, [{@json, 5}])
    assert rows(feed, 0) == [8, 9, 10]
  end

  test "a reset or a zone carried on from elsewhere leaves no delta of another run to read" do
    feed = Feed.new(1, 4)
    for seq <- 1..6, do: Feed.publish(feed, 0, seq, [{@json, {:old, seq}}])

    # The zone, run again from an earlier number, is watched from here.
    :ok = Feed.reset(feed, 0, 3)
    assert Feed.latest(feed, 0) == 3
    assert rows(feed, 0) == []
    assert Feed.since(feed, 0, 3, @json) == {[], 3}
    assert Feed.since(feed, 0, 5, @json) == :gone
    Feed.publish(feed, 0, 4, [{@json, {:new, 4}}])
    assert Feed.since(feed, 0, 3, @json) == {[{:new, 4}], 4}
    assert Feed.since(feed, 0, 2, @json) == :gone

    # At the number it holds already, nothing is forgotten.
    :ok = Feed.reset(feed, 0, 4)
    assert Feed.since(feed, 0, 3, @json) == {[{:new, 4}], 4}

    # A zone that moves here from a node where it was at 2 carries on from
    # 4, the later number, and what was kept of it goes.
    :ok = Feed.carry_on(feed, 0, 2)
    assert Feed.latest(feed, 0) == 4
    assert Feed.since(feed, 0, 3, @json) == :gone
    :ok = Feed.carry_on(feed, 0, 7)
    assert Feed.latest(feed, 0) == 7
  end
end
