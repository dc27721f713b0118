# What making a zone's ground costs: `Grove.World.Terrains.Woodland.cells/2`
# on 40 areas of 52 x 52 cells (a zone of 50 with its border) spread over a
# world of a million cells a side, seed 1, timed five times over. With
# GROUND_OLD=path, the generator of that file (an older version of
# lib/grove/world/terrains/woodland.ex) is loaded beside it under another
# name, timed in the same run, one pass of each after the other, and the
# bytes of both compared.
#
#     mix run --no-start lab/bench/zone_ground.exs
#     git show COMMIT:lib/grove/world/terrains/woodland.ex > /tmp/woodland_old.ex
#     GROUND_OLD=/tmp/woodland_old.ex mix run --no-start lab/bench/zone_ground.exs

alias Grove.World.Terrains.Woodland

generators =
  case System.get_env("GROUND_OLD") do
    nil ->
      [new: Woodland]

    path ->
      source =
        path
        |> File.read!()
        |> String.replace(
          "defmodule Grove.World.Terrains.Woodland do",
          "defmodule OldWoodland do"
        )

      Code.compile_string(source)
      [old: OldWoodland, new: Woodland]
  end

rects =
  for k <- 0..39 do
    x = 1000 + k * 12_347
    y = 500_000 + k * 350
    {x - 1, y - 1, x + 51, y + 51}
  end

made =
  for {label, module} <- generators do
    params = module.init(1_000_000, 1_000_000, seed: 1)
    {label, module, params, Enum.map(rects, &module.cells(params, &1))}
  end

case made do
  [{_, _, _, old}, {_, _, _, new}] -> IO.puts("same bytes, old and new: #{old == new}")
  _one -> :ok
end

times =
  for _pass <- 1..5, {label, module, params, _} <- made do
    {us, _} = :timer.tc(fn -> Enum.each(rects, &module.cells(params, &1)) end)
    {label, us / length(rects) / 1000}
  end

for {label, _, _, _} <- made do
  ms = for {^label, t} <- times, do: t
  sorted = Enum.sort(ms)

  IO.puts(
    "#{label}: ms per zone's ground (52 x 52 cells), 5 passes of 40: median #{Float.round(Enum.at(sorted, 2), 3)}, " <>
      "each #{inspect(Enum.map(ms, &Float.round(&1, 3)))}"
  )
end
