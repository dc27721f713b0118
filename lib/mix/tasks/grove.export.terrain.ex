defmodule Mix.Tasks.Grove.Export.Terrain do
  @shortdoc "Writes the world's terrain to a file other programs can read"

  @moduledoc """
  Generates the terrain a Grove world of these options has and writes it to
  a file (`Grove.World.Terrain.to_file/1`): a header line
  `grove-terrain 1 WIDTH HEIGHT SEED`, then one byte per cell, row by row
  (`0` meadow, `1` tree, `2` rock, `3` water, `4` flowers), exactly what
  `GET /terrain` serves. The peers' benchmark (`mix grove.bench.peers`)
  builds the same world on another server from it.

      mix grove.export.terrain --out terrain.bin
      mix grove.export.terrain --seed 7 --width 400 --height 300 --out terrain.bin

  Options (defaults from the `:world` configuration, as `make run` uses it):

    * `--out FILE` - where to write (required)
    * `--seed N` - the world's seed (default 1)
    * `--width N`, `--height N` - the world's size (default 1000 x 1000)
  """

  use Mix.Task

  alias Grove.World.Terrain

  @switches [out: :string, seed: :integer, width: :integer, height: :integer]

  @impl true
  def run(args) do
    {opts, rest, invalid} = OptionParser.parse(args, strict: @switches)

    if rest != [] or invalid != [] or opts[:out] == nil,
      do: Mix.raise("usage: mix grove.export.terrain --out FILE [--seed N --width N --height N]")

    Mix.Task.run("loadconfig")
    world = Application.get_env(:grove, :world, [])
    width = opts[:width] || world[:width] || 1000
    height = opts[:height] || world[:height] || 1000
    seed = opts[:seed] || world[:seed] || 1
    terrain_options = Keyword.put(world[:terrain] || [], :seed, seed)

    terrain = Terrain.generate(width, height, terrain_options)
    File.mkdir_p!(Path.dirname(opts[:out]))
    File.write!(opts[:out], Terrain.to_file(terrain))
    Mix.shell().info("terrain: #{width} x #{height}, seed #{seed}, written to #{opts[:out]}")
  end
end
