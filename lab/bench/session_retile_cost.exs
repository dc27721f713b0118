# What a player's session costs to fit its view tiles to its viewport as
# it walks, alone: a session of the peers bench's shape (a world of 1000 x
# 1000 cells in zones of 50 cut into view tiles of 10, a viewport of
# radius 8, JSON of version 7) subscribed to the four zones around the
# corner at (50, 50), walking at random within 10 cells of it, reading
# its views after each step as its connection does at each write (the
# feed holds nothing: what is measured is the fitting). Prints the CPU
# time and the reductions a step over three rounds of 20,000 steps, and
# how many steps changed the tiles' spans. Run it in each checkout:
#
#   cd lab && ELIXIR_ERL_OPTIONS="+S 1:1" taskset -c 1 mix run --no-start bench/session_retile_cost.exs
alias Grove.Gateway.Session
alias Grove.{Protocol, World}

name = :retile_bench

{:ok, _sup} =
  World.start_link(
    name: name,
    width: 1000,
    height: 1000,
    zone_size: 50,
    view_tile: 10,
    seed: 1,
    tick: :manual,
    terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
    rules: [move_rate: nil]
  )

session = Session.new(name, :json, Grove.SessionConfig.loose(), 0)
join = Protocol.encode(%{type: :join, protocol: 7, view_radius: 8}, :json)
{session, _} = Session.handle_frame(session, :text, IO.iodata_to_binary(join), 0)

session =
  Enum.reduce([0, 1, 20, 21], %{session | cell: {50, 50}}, fn zone, session ->
    {session, _} = Session.handle_info(session, {:grove_view, zone, :subscribed, 0})
    session
  end)

flush = fn flush ->
  receive do
    _ -> flush.(flush)
  after
    0 -> :ok
  end
end

:rand.seed(:exsss, {1, 2, 3})
steps = 20_000

cells =
  Enum.scan(1..steps, {50, 50}, fn _, {x, y} ->
    {min(max(x + :rand.uniform(3) - 2, 40), 60), min(max(y + :rand.uniform(3) - 2, 40), 60)}
  end)

for _ <- 1..3 do
  flush.(flush)
  {r0, _} = :erlang.statistics(:exact_reductions)
  {c0, _} = :erlang.statistics(:runtime)

  {_session, fitted} =
    Enum.reduce(cells, {session, 0}, fn cell, {session, fitted} ->
      before = elem(session.tiled, 1)
      {session, _frames} = Session.views(%{session | cell: cell})
      {session, if(elem(session.tiled, 1) == before, do: fitted, else: fitted + 1)}
    end)

  {c1, _} = :erlang.statistics(:runtime)
  {r1, _} = :erlang.statistics(:exact_reductions)

  IO.puts(
    "a step's fitting and read: cpu #{Float.round((c1 - c0) * 1000 / steps, 2)} us, " <>
      "#{div(r1 - r0, steps)} reductions (#{fitted} of the steps changed the spans)"
  )
end
