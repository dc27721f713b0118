defmodule GroveTest do
  use ExUnit.Case, async: true

  import Grove.WorldCase, only: [eventually: 1]

  test "an instance starts a world with actors walking in it, and reports its status" do
    name = :"grove_#{System.unique_integer([:positive])}"

    start_supervised!({
      Grove,
      # No gateway: it would listen on the default port, which another
      # program (or another test) may hold.
      name: name,
      world: [width: 60, height: 60, zone_size: 20, tick: :manual],
      actors: [count: 25],
      gateway: false,
      status_interval: false
    })

    eventually(fn -> assert Grove.World.entity_count(Grove.world(name)) == 25 end)
    assert Grove.World.audit(Grove.world(name)) == :ok

    {line, _reading} = Grove.Status.line(name)
    assert line =~ "25 entities (25 actors joined)"
    assert line =~ "zone mailbox max"
  end

  test "bad options name the culprit" do
    assert_raise ArgumentError, ~r/:width/, fn -> Grove.Config.new(world: [width: -5]) end

    assert_raise ArgumentError, ~r/:status_interval/, fn ->
      Grove.Config.new(status_interval: :often)
    end

    assert_raise ArgumentError, ~r/unknown keys/, fn -> Grove.Config.new(wrold: []) end
  end
end
