# What one roaming walker's move costs in Erlang alone, warm, one player:
# a world a million cells a side in zones of 50 on demand (the orchard,
# asleep after 20 s idle, no store), one session (`Grove.Gateway.Session`,
# driven by hand as a connection drives it, with no socket) walking
# 9,000 steps east, south-east, east, north-east by turns, one move at a
# time: the wall time of the move's frame handled (`handle_frame/4`: the
# decode, the rate limit, the zone looked up, the cast), of the zone's
# round trip (its move, its delta published, the outcome back), and of
# the outcome handled and the write's views read (`handle_info/2`, the
# snapshots that came, `views/1`); then each lookup of a move's path on
# its own, 200,000 times. Run it with one scheduler, on a quiet core:
#
#   cd lab && taskset -c 1 elixir --erl "+S 1:1" -S mix run --no-start bench/roam_move_parts.exs
alias Grove.Gateway.Session

name = :bench_roam_move

{:ok, _sup} =
  Grove.World.start_link(
    Grove.MillionWorld.options(name, game: {Grove.Games.Orchard, []}, zone_idle: 20_000)
  )

config = %{Grove.SessionConfig.loose() | move_rate: 100_000_000, move_burst: 100_000_000}
now = fn -> :erlang.monotonic_time(:millisecond) end
encode = fn message -> IO.iodata_to_binary(Grove.Protocol.encode(message, :binary)) end
session = Session.new(name, :binary, config, now.())
join = encode.(%{type: :join, protocol: Grove.Protocol.version(), view_radius: 8})
{session, _} = Session.handle_frame(session, :binary, join, now.())

# What came meanwhile handled (snapshots, subscriptions), up to a move's outcome.
drain = fn drain, session ->
  receive do
    {:grove_move, _, _, _} = outcome ->
      {session, outcome}

    message ->
      case Session.handle_info(session, message) do
        {session, _actions} -> drain.(drain, session)
        :unknown -> drain.(drain, session)
      end
  after
    0 -> {session, nil}
  end
end

Process.sleep(300)
{session, _} = drain.(drain, session)
{session, _} = Session.views(session)
turns = {:e, :se, :e, :ne}

walk = fn session, from, n ->
  Enum.reduce(from..(from + n - 1), {session, {0, 0, 0}}, fn seq, {session, {a, b, c}} ->
    move = encode.(%{type: :move, seq: seq, dir: elem(turns, rem(div(seq, 50), 4))})
    t0 = :erlang.monotonic_time(:nanosecond)
    {session, []} = Session.handle_frame(session, :binary, move, now.())
    t1 = :erlang.monotonic_time(:nanosecond)
    outcome = receive do: ({:grove_move, _, _, _} = outcome -> outcome)
    t2 = :erlang.monotonic_time(:nanosecond)
    {session, _} = Session.handle_info(session, outcome)
    {session, _} = drain.(drain, session)
    {session, views} = Session.views(session)
    _ = IO.iodata_length(views)
    t3 = :erlang.monotonic_time(:nanosecond)
    {session, {a + t1 - t0, b + t2 - t1, c + t3 - t2}}
  end)
end

{session, _} = walk.(session, 1, 3000)

Enum.reduce(1..3, session, fn round, session ->
  {session, {a, b, c}} = walk.(session, round * 3000 + 1, 2000)

  IO.puts(
    "a move, us: its frame handled #{Float.round(a / 2.0e6, 2)}, the zone's round trip " <>
      "#{Float.round(b / 2.0e6, 2)}, its outcome and the views #{Float.round(c / 2.0e6, 2)}"
  )

  session
end)

id = session.id
world = Grove.World.fetch!(name)
index = Grove.World.Directory.lookup(name, id)
move = encode.(%{type: :move, seq: 1, dir: :e})
n = 200_000

each = fn label, fun ->
  {r0, _} = :erlang.statistics(:exact_reductions)
  t0 = :erlang.monotonic_time(:nanosecond)
  for _ <- 1..n, do: fun.()
  t1 = :erlang.monotonic_time(:nanosecond)
  {r1, _} = :erlang.statistics(:exact_reductions)
  IO.puts("#{label}: #{div(t1 - t0, n)} ns, #{div(r1 - r0, n)} reductions")
end

each.("Protocol.decode/2 of a move", fn -> Grove.Protocol.decode(move, :binary) end)
each.("World.zone_of/2", fn -> Grove.World.zone_of(name, id) end)
each.("Directory.lookup/2", fn -> Grove.World.Directory.lookup(name, id) end)
each.("World.zone_pid/2", fn -> Grove.World.zone_pid(name, index) end)
each.("Slots.load/2", fn -> Grove.World.Slots.load(world, index) end)
each.("Frames.outcome/6", fn -> Grove.Gateway.Frames.outcome(:binary, 7, 12_345, :ok, 7, 7) end)
each.("Session.views/1 with nothing new", fn -> Session.views(session) end)
