defmodule Grove.RuntimeConfigTest do
  # Reads config/runtime.exs under environment variables of its own, which
  # are the VM's: not async.
  use ExUnit.Case, async: false

  defp read(env) do
    saved = for {name, _} <- env, do: {name, System.get_env(name)}
    Enum.each(env, fn {name, value} -> System.put_env(name, value) end)

    try do
      Config.Reader.read!("config/runtime.exs", env: :dev)
    after
      for {name, value} <- saved,
          do: if(value, do: System.put_env(name, value), else: System.delete_env(name))
    end
  end

  defp actors(config), do: config |> Keyword.fetch!(:grove) |> Keyword.fetch!(:actors)
  defp world(config), do: config |> Keyword.fetch!(:grove) |> Keyword.fetch!(:world)

  test "GROVE_SPAWN starts the actors in a blob, or over the whole world" do
    assert actors(read([{"GROVE_SPAWN", "blob:500,480,20"}]))[:spawn] == {:blob, {500, 480}, 20}
    assert actors(read([{"GROVE_SPAWN", "uniform"}]))[:spawn] == :uniform
    assert actors(read([]))[:spawn] == nil

    for bad <- ["blob", "blob:1,2", "blob:a,2,3", "blob:1,2,0", "everywhere"] do
      assert_raise ArgumentError, ~r/GROVE_SPAWN must be uniform or blob:X,Y,SPREAD/, fn ->
        read([{"GROVE_SPAWN", bad}])
      end
    end
  end

  test "GROVE_PLAYER_SPAWN puts new players in a rectangle, or anywhere" do
    gateway = fn env -> read(env) |> Keyword.fetch!(:grove) |> Keyword.fetch!(:gateway) end
    assert gateway.([{"GROVE_PLAYER_SPAWN", "400,410,600,620"}])[:spawn] == {400, 410, 600, 620}
    assert gateway.([])[:spawn] == nil

    assert_raise ArgumentError, ~r/GROVE_PLAYER_SPAWN must be X0,Y0,X1,Y1/, fn ->
      gateway.([{"GROVE_PLAYER_SPAWN", "400,410,600"}])
    end
  end

  test "GROVE_TICK_MAX_MS is the most the zones' ticks stretch to under load" do
    assert world(read([{"GROVE_TICK_MAX_MS", "400"}]))[:tick_max] == 400
    refute Keyword.has_key?(world(read([])), :tick_max)

    assert world(read([{"GROVE_TICK_MAX_MS", "100"}]))[:tick_max] == 100

    # Below the tick, or not a number: the variable is named with what it was given.
    for bad <- ["99", "0", "-250", "250ms", "fast"] do
      message =
        ~s/GROVE_TICK_MAX_MS must be an integer of at least the zones' tick (100 ms), got: "#{bad}"/

      assert_raise ArgumentError, message, fn -> read([{"GROVE_TICK_MAX_MS", bad}]) end
    end
  end

  test "GROVE_ACTOR_KINDS and GROVE_ACTORS choose the kinds and their total" do
    config = read([{"GROVE_ACTOR_KINDS", "walker:3,sheep:1"}, {"GROVE_ACTORS", "8"}])

    assert actors(config)[:kinds] == [
             {Grove.Actors.Walker, 6, []},
             {Grove.Actors.Sheep, 2, []}
           ]
  end

  test "GROVE_GAME picks the game, or none, and without it the orchard's kinds walk as their cousins" do
    assert world(read([{"GROVE_GAME", "orchard"}]))[:game] == {Grove.Games.Orchard, []}
    assert world(read([{"GROVE_GAME", "MyGame.Tag"}]))[:game] == {MyGame.Tag, []}
    # Without it, config/config.exs's game stays.
    refute Keyword.has_key?(world(read([])), :game)

    config = read([{"GROVE_GAME", "off"}, {"GROVE_ACTOR_KINDS", "picker:5,grazer:3,walker:2"}])
    assert world(config)[:game] == false

    assert actors(config)[:kinds] == [
             {Grove.Actors.Wanderer, 5, []},
             {Grove.Actors.Sheep, 3, []},
             {Grove.Actors.Walker, 2, []}
           ]

    # The pickers join the wanderers already there, as one kind.
    config = read([{"GROVE_GAME", "off"}, {"GROVE_ACTOR_KINDS", "wanderer:4,picker:5"}])
    assert actors(config)[:kinds] == [{Grove.Actors.Wanderer, 9, []}]

    assert_raise ArgumentError, ~r/GROVE_GAME must be orchard, off or a module's name/, fn ->
      read([{"GROVE_GAME", "tag!"}])
    end
  end

  test "GROVE_ZONES starts zones on demand, without bacteria unless asked (in a cluster too), idle for GROVE_ZONE_IDLE_MS" do
    on_demand = world(read([{"GROVE_ZONES", "on_demand"}, {"GROVE_ZONE_IDLE_MS", "5000"}]))
    assert on_demand[:zones] == :on_demand
    assert on_demand[:zone_idle] == 5000
    assert on_demand[:life] == false

    assert world(read([{"GROVE_ZONES", "always"}]))[:zones] == :always

    # Alone or in a cluster, the same: bacteria span a cluster's nodes.
    peers = {"GROVE_PEERS", "grove2@127.0.0.1"}
    assert world(read([{"GROVE_ZONES", "on_demand"}, peers]))[:life] == false

    assert world(read([{"GROVE_LIFE", "on"}, {"GROVE_ZONES", "on_demand"}, peers]))[:life] !=
             false

    assert world(read([peers]))[:life] != false
    assert world(read([{"GROVE_LIFE", "off"}, peers]))[:life] == false
    assert world(read([]))[:zones] == nil

    assert_raise ArgumentError, ~r/GROVE_ZONES must be always or on_demand/, fn ->
      read([{"GROVE_ZONES", "lazy"}])
    end
  end

  test "GROVE_RESIDENT walks the walkers in their zones, on GROVE_RESIDENT_BEAT_MS beats in GROVE_RESIDENT_PHASES phases" do
    config =
      read([
        {"GROVE_RESIDENT", "on"},
        {"GROVE_RESIDENT_BEAT_MS", "1000"},
        {"GROVE_RESIDENT_PHASES", "2"}
      ])

    assert actors(config)[:resident] == true
    assert world(config)[:resident_beat] == 1000
    assert world(config)[:resident_phases] == 2
    assert actors(read([{"GROVE_RESIDENT", "off"}]))[:resident] == false

    # Unset: the defaults of Grove.Actors and Grove.World, residents off.
    refute Keyword.has_key?(actors(read([])), :resident)
    refute Keyword.has_key?(world(read([])), :resident_beat)

    assert_raise ArgumentError, ~r/GROVE_RESIDENT must be on or off/, fn ->
      read([{"GROVE_RESIDENT", "maybe"}])
    end

    assert_raise ArgumentError, ~r/GROVE_RESIDENT_BEAT_MS must be a positive integer/, fn ->
      read([{"GROVE_RESIDENT_BEAT_MS", "0"}])
    end

    assert_raise ArgumentError, ~r/GROVE_RESIDENT_PHASES must be an integer/, fn ->
      read([{"GROVE_RESIDENT_PHASES", "four"}])
    end
  end

  test "GROVE_VIEW_TILE sets the side of the view tiles" do
    assert world(read([{"GROVE_VIEW_TILE", "5"}]))[:view_tile] == 5
    assert world(read([]))[:view_tile] == nil
  end
end
