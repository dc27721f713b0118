defmodule Grove.World.FeedTest do
  use ExUnit.Case, async: true

  alias Grove.World.Feed

  @json {Grove.Gateway.Frames, :json}
  @binary {Grove.Gateway.Frames, :binary}

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
end
