# What a zone's ground costs the core as the zone wakes, made two ways
# side by side in one VM: on the zone's own heap (`Terrain.area/2` called
# in a fresh process of the default heap size, then the collection a
# zone does once it has woken), as zones made it before, and through
# `Terrain.area_of/3` (a process of its own, its heap sized for it), then
# the same collection. 400 areas of a zone of 50 with its border, spread
# over a world of a million cells a side, seed 1; each way five times,
# alternating; the VM's CPU time (`:erlang.statistics(:runtime)`) per
# area, so run it with one scheduler:
#
#     elixir --erl "+S 1:1" -S mix run --no-start lab/bench/zone_wake_ground.exs

alias Grove.World.Terrain

terrain_options = [seed: 1]
places = for k <- 0..399, do: {1000 + rem(k * 2_467, 19_000) * 50, 500_000 + rem(k * 7, 400) * 50}

wake = fn make ->
  parent = self()

  for {x, y} <- places do
    spawn(fn ->
      area = make.(x, y)
      :erlang.garbage_collect()
      send(parent, {:made, area.cells})
    end)

    receive do
      {:made, cells} -> cells
    end
  end
end

world = Terrain.for_world(1_000_000, 1_000_000, 50, terrain_options)

on_heap = fn ->
  fn x, y -> Terrain.area(world, {x - 1, y - 1, x + 51, y + 51}) end
end

own_process = fn ->
  # A cache of its own each pass, so that every area is made.
  terrain = %{world | areas: :ets.new(:areas, [:set, :public])}
  fn x, y -> Terrain.area_of(terrain, x, y) end
end

IO.puts("same bytes, both ways: #{wake.(on_heap.()) == wake.(own_process.())}")

times =
  for _pass <- 1..5, {label, way} <- [on_heap: on_heap, own_process: own_process] do
    make = way.()
    {_, _} = :erlang.statistics(:runtime)
    wake.(make)
    {_, ms} = :erlang.statistics(:runtime)
    {label, ms * 1000 / length(places)}
  end

for label <- [:on_heap, :own_process] do
  us = for {^label, t} <- times, do: t

  IO.puts(
    "#{label}: CPU us per zone's ground (52 x 52 cells), 5 passes of #{length(places)}: " <>
      "median #{Enum.at(Enum.sort(us), 2)}, each #{inspect(us)}"
  )
end
