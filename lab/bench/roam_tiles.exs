# How much of a woken zone its roaming walkers see: required with
# `roam_inproc.exs` (before it), it waits `ROAM_TILES_AFTER` seconds
# (default 50: the walkers joined and walking), then, for
# `ROAM_TILES_SECONDS` (default 15), traces every call of a zone's
# snapshot of view tiles (`Grove.World.Zone.Views.snapshot_tiles/5`, the
# tiles a viewer asks for as its viewport comes over them) and counts the
# zones woken meanwhile; and prints, as lines that start with `TILES`,
# the distinct tiles shown, the zones they lie in, the zones woken, and
# the tiles shown a zone woken, of the tiles a zone has: in steady walking
# each woken zone is shown once what it is shown, so that ratio is the
# share of a zone's cells a viewer ever sees while it is awake (a ground
# and a layer made only where seen would make that share of them). From
# the repository's root:
#
#   GROVE_ACTORS=0 ... taskset -c 0 mix run -r lab/bench/roam_tiles.exs lab/bench/roam_inproc.exs 500
defmodule Bench.RoamTiles do
  @moduledoc false

  def run(after_s, seconds) do
    Process.sleep(after_s * 1000)
    world = Grove.World.fetch!(Grove.Gateway.config().world)
    grid = world.grid
    me = self()
    tracer = spawn(fn -> collect(me, MapSet.new()) end)
    :erlang.trace_pattern({Grove.World.Zone.Views, :snapshot_tiles, 5}, true, [:local])
    wakes0 = Grove.World.Stats.get(world.stats, :zone_wakes)
    :erlang.trace(:all, true, [:call, {:tracer, tracer}])
    Process.sleep(seconds * 1000)
    :erlang.trace(:all, false, [:call])
    wakes = Grove.World.Stats.get(world.stats, :zone_wakes) - wakes0
    :erlang.trace_pattern({Grove.World.Zone.Views, :snapshot_tiles, 5}, false, [:local])
    send(tracer, {:done, me})

    tiles =
      receive do
        {:tiles, tiles} -> tiles
      end

    zones = tiles |> Enum.map(&Grove.World.Grid.tile_zone(grid, &1)) |> Enum.uniq() |> length()
    per_zone = div(grid.zone_size, grid.tile_size) * div(grid.zone_size, grid.tile_size)
    shown = MapSet.size(tiles)

    IO.puts(
      "TILES #{seconds} s: #{shown} tiles shown in #{zones} zones, #{wakes} zones woken; " <>
        "#{Float.round(shown / max(wakes, 1), 1)} tiles shown a zone woken of #{per_zone} " <>
        "(#{Float.round(100 * shown / max(wakes, 1) / per_zone, 1)} %), " <>
        "#{Float.round(shown / max(zones, 1), 1)} a zone shown"
    )
  end

  defp collect(parent, tiles) do
    receive do
      {:trace, _zone, :call, {_module, :snapshot_tiles, [views, _core, _viewer, _format, wanted]}} ->
        mine =
          for tile <- wanted,
              Grove.World.Grid.tile_zone(views.grid, tile) == views.index,
              do: tile

        collect(parent, Enum.into(mine, tiles))

      {:done, ^parent} ->
        send(parent, {:tiles, tiles})
    end
  end
end

spawn(fn ->
  Bench.RoamTiles.run(
    String.to_integer(System.get_env("ROAM_TILES_AFTER", "50")),
    String.to_integer(System.get_env("ROAM_TILES_SECONDS", "15"))
  )
end)
