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
      actors: [kinds: [{Grove.Actors.Walker, 15}, {Grove.Actors.Wanderer, 10}]],
      gateway: false,
      status_interval: false
    })

    eventually(fn -> assert Grove.World.entity_count(Grove.world(name)) == 25 end)
    # The actors walk meanwhile, and the audit asks the zones one after the
    # other: an entity crossing from a zone not asked yet to one asked
    # already is in none of them at that instant. Asked again, it holds.
    eventually(fn -> assert Grove.World.audit(Grove.world(name)) == :ok end)

    {line, _reading} = Grove.Status.line(name)
    assert line =~ "25 entities (25 actors joined)"
    # Every kind, with how many of it are in the world.
    assert line =~ ~r/walker 15: \d+ moves\/s/
    assert line =~ ~r/wanderer 10: \d+ moves\/s/
    assert line =~ "zone mailbox max"
  end

  test "an instance's resident actors walk in their zones, and its status says so" do
    name = :"grove_#{System.unique_integer([:positive])}"

    start_supervised!({
      Grove,
      name: name,
      world: [width: 60, height: 60, zone_size: 20, tick: :manual],
      actors: [resident: true, kinds: [{Grove.Actors.Walker, 15}, {Grove.Actors.Wanderer, 10}]],
      gateway: false,
      status_interval: false
    })

    world = Grove.world(name)
    eventually(fn -> assert Grove.World.entity_count(world) == 25 end)
    {_line, since} = Grove.Status.line(name)

    # The world ticks by hand: its zones step their residents, the
    # wanderers too (the instance's world makes their senses).
    :ok = Grove.World.walk(world)
    eventually(fn -> assert Grove.World.stats(world).moves_ok > 0 end)

    {line, _reading} = Grove.Status.line(name, since)
    assert line =~ "walker 15: in their zones"
    assert line =~ "wanderer 10: in their zones"
    assert line =~ ~r/residents' steps late p50 [\d.]+ ms p99/
  end

  test "a crash of the metrics restarts them alone, not what comes after them" do
    name = :"grove_#{System.unique_integer([:positive])}"

    sup =
      start_supervised!(
        {Grove,
         name: name,
         world: [width: 40, height: 40, zone_size: 20, tick: :manual],
         actors: [count: 0],
         gateway: false,
         status_interval: 60_000}
      )

    status = child(sup, Grove.Status)
    collector = Process.whereis(:"#{name}.Metrics.Collector")
    ref = Process.monitor(collector)
    Process.exit(collector, :kill)
    assert_receive {:DOWN, ^ref, :process, _, :killed}

    eventually(fn ->
      assert is_pid(Process.whereis(:"#{name}.Metrics.Collector"))
    end)

    assert child(sup, Grove.Status) == status
  end

  defp child(sup, id) do
    Enum.find_value(Supervisor.which_children(sup), fn
      {^id, pid, _, _} -> pid
      _ -> nil
    end)
  end

  test "bad options name the culprit" do
    assert_raise ArgumentError, ~r/:width/, fn -> Grove.Config.new(world: [width: -5]) end

    assert_raise ArgumentError, ~r/:status_interval/, fn ->
      Grove.Config.new(status_interval: :often)
    end

    assert_raise ArgumentError, ~r/unknown keys/, fn -> Grove.Config.new(wrold: []) end
  end
end
