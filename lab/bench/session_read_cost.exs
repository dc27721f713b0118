# What a player's session costs to read its zones' feed, alone: a viewer
# holding 16 view tiles over 4 zones (4 tiles of each zone's 25), each zone
# 10 deltas ahead of it (a second of ticks), each delta with 5 of the
# zone's tiles changed, in the JSON format of version 7. Prints the wall
# and CPU time and the reductions of `Grove.Gateway.Session.views/1` (the
# read a connection makes at each write), over three rounds of 50,000.
# Run it in each checkout to compare builds:
#
#   cd lab && ELIXIR_ERL_OPTIONS="+S 1:1" taskset -c 1 mix run --no-start bench/session_read_cost.exs
alias Grove.Gateway.Session
alias Grove.World.Feed

defmodule Bench.SessionReadCost do
  # Wall and CPU time (µs) and reductions of `fun` run `n` times, each.
  def each(n, fun) do
    {r0, _} = :erlang.statistics(:exact_reductions)
    t0 = :erlang.monotonic_time(:microsecond)
    {c0, _} = :erlang.statistics(:runtime)
    Enum.each(1..n, fn i -> fun.(i) end)
    {c1, _} = :erlang.statistics(:runtime)
    t1 = :erlang.monotonic_time(:microsecond)
    {r1, _} = :erlang.statistics(:exact_reductions)
    {(t1 - t0) / n, (c1 - c0) * 1000 / n, div(r1 - r0, n)}
  end
end

:rand.seed(:exsss, {1, 2, 3})
feed = Feed.new(400, 32)
format = {Grove.Gateway.Frames, {:json, 7, {10, 1000}}}
zones = [10, 11, 30, 31]

for zone <- zones, seq <- 1..10 do
  row =
    for tile <- Enum.take_random(0..24, 5),
        do: {zone * 25 + tile, :binary.copy("x", 30 + :rand.uniform(60))}

  Feed.publish(feed, zone, seq, [{format, row}])
end

areas = Map.new(zones, fn zone -> {zone, Map.new([0, 1, 5, 6], &{zone * 25 + &1, 0})} end)
session = %Session{feed: feed, format: format, encoding: :json, version: 7, areas: areas}
{_session, frames} = Session.views(session)
IO.puts("a read: #{IO.iodata_length(frames)} bytes")

for _ <- 1..3 do
  {wall, cpu, reductions} = Bench.SessionReadCost.each(50_000, fn _ -> Session.views(session) end)

  IO.puts(
    "a read of 4 zones x 10 deltas: wall #{Float.round(wall, 2)} us, " <>
      "cpu #{Float.round(cpu, 2)} us, #{reductions} reductions"
  )
end
