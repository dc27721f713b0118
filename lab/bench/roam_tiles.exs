# How much of a woken zone its roaming walkers see: required with
# `roam_inproc.exs` (before it), it waits `ROAM_TILES_AFTER` seconds
# (default 50: the walkers joined and walking), then, for
# `ROAM_TILES_SECONDS` (default 15), counts the zones woken, and traces
# every call of a zone's snapshot of view tiles
# (`Grove.World.Zone.Views.snapshot_tiles/5`, the tiles a viewer asks for
# as its viewport comes over them) until `ROAM_TILES_TAIL` seconds
# (default 10) after that, so that a zone woken late in the window is
# shown what it is shown soon after its wake. The tiles are counted by
# the run of the zone they were shown to (a wake starts a zone's process,
# so its set starts empty at each wake), for the runs woken in the window
# alone: a zone awake before it was shown tiles before it too. Prints, as
# lines that start with `TILES`, the zones woken, the distinct tiles
# shown them, and the tiles shown a zone woken, of the tiles a zone has:
# the share of a zone's cells a viewer ever sees while it is awake (a
# ground and a layer made only where seen would make that share of
# them); a zone woken in the window's last seconds and shown more after
# its tail is counted short.
#
# A count, not a time: the trace's match sends the tracer the zone's
# index and the tiles asked for, nothing of the zone's state, but every
# zone pays for the trace while it runs, and with the defaults that is
# inside `roam_inproc.exs`' measured 30 s, so that run's `INPROC` and
# `MSACC` figures are not the bench's and must not be quoted. From the
# repository's root:
#
#   GROVE_ACTORS=0 ... taskset -c 0 mix run -r lab/bench/roam_tiles.exs lab/bench/roam_inproc.exs 500
defmodule Bench.RoamTiles do
  @moduledoc false

  @snapshot {Grove.World.Zone.Views, :snapshot_tiles, 5}

  def run(after_s, seconds, tail) do
    Process.sleep(after_s * 1000)
    world = Grove.World.fetch!(Grove.Gateway.config().world)
    grid = world.grid
    me = self()
    tracer = spawn(fn -> collect(me, grid, %{}) end)
    # The views' index and the tiles wanted, the zone's state left out.
    match = [{[%{index: :"$1"}, :_, :_, :_, :"$2"], [], [{:message, {{:"$1", :"$2"}}}]}]
    :erlang.trace_pattern(@snapshot, match, [:local])
    before = awake(world)
    wakes0 = Grove.World.Stats.get(world.stats, :zone_wakes)
    :erlang.trace(:all, true, [:call, :arity, {:tracer, tracer}])
    Process.sleep(seconds * 1000)
    wakes = Grove.World.Stats.get(world.stats, :zone_wakes) - wakes0
    send(tracer, {:seen, me})

    seen =
      receive do
        {:seen, seen} -> seen
      end

    woken = MapSet.difference(MapSet.union(awake(world), seen), before)
    Process.sleep(tail * 1000)
    :erlang.trace(:all, false, [:call])
    :erlang.trace_pattern(@snapshot, false, [:local])
    send(tracer, {:done, me})

    by_run =
      receive do
        {:tiles, by_run} -> by_run
      end

    per_zone = div(grid.zone_size, grid.tile_size) * div(grid.zone_size, grid.tile_size)
    shown = woken |> Enum.map(&MapSet.size(Map.get(by_run, &1, MapSet.new()))) |> Enum.sum()
    runs = max(MapSet.size(woken), 1)

    IO.puts(
      "TILES #{seconds} s (+#{tail}): #{MapSet.size(woken)} zones woken (#{wakes} counted), " <>
        "#{shown} tiles shown them; #{Float.round(shown / runs, 1)} tiles shown a zone woken " <>
        "of #{per_zone} (#{Float.round(100 * shown / runs / per_zone, 1)} %)"
    )
  end

  defp awake(world) do
    Grove.World.Supervisor.awake_supervisor(world.name)
    |> DynamicSupervisor.which_children()
    |> Enum.flat_map(fn {_, pid, _, _} -> if is_pid(pid), do: [pid], else: [] end)
    |> MapSet.new()
  end

  defp collect(parent, grid, by_run) do
    receive do
      {:trace, zone, :call, _mfa, {index, wanted}} ->
        mine = for tile <- wanted, Grove.World.Grid.tile_zone(grid, tile) == index, do: tile
        tiles = Enum.into(mine, Map.get(by_run, zone, MapSet.new()))
        collect(parent, grid, Map.put(by_run, zone, tiles))

      {:seen, ^parent} ->
        send(parent, {:seen, MapSet.new(Map.keys(by_run))})
        collect(parent, grid, by_run)

      {:done, ^parent} ->
        send(parent, {:tiles, by_run})
    end
  end
end

spawn(fn ->
  Bench.RoamTiles.run(
    String.to_integer(System.get_env("ROAM_TILES_AFTER", "50")),
    String.to_integer(System.get_env("ROAM_TILES_SECONDS", "15")),
    String.to_integer(System.get_env("ROAM_TILES_TAIL", "10"))
  )
end)
