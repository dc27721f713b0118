# What a roaming walker costs the server without the network: run in the
# server's VM as `roam_probe.sh` starts it (a world a million cells a side
# in zones of 50 on demand, asleep after 20 s idle, the orchard, no actors;
# one scheduler pinned to core 0), it plays WALKERS players there, each a
# process that does what a player's connection does with its session
# (`Grove.Gateway.Session`) but has no socket: a move's frame, masked as
# a client's, parsed (`WebSocket.parse/3`) and handled
# (`Session.handle_frame/4`) every 200 ms along a straight walk that turns
# where a step is refused (as `Grove.Load.Walk`); its outcome handled
# (`Session.handle_info/2`) and written as the connection writes it
# (`Session.views/2` with the snapshots held since; the bytes counted, not
# sent); the snapshots that come while a move waits held for that write,
# the rest handled as they come. Once they have joined (20 a second) and
# walked 20 s, the VM's CPU time over 30 s (all its threads, as the kernel
# counts them: `:erlang.statistics(:runtime)` counts more than the one
# core it runs on) a walker-second, and the part of it in the walkers' own
# turns (their handlers, timed), the rest being their zones', the wakes'
# and the runtime's; with `roam_msacc.exs` required too, the scheduler's
# states over those 30 s, and the zones woken and the handoffs a
# walker-second meanwhile; with `roam_turns.exs` required too, the turns
# and messages a move by kind of process, traced after the measured 30 s.
# `roam_split.sh` runs it beside the same walkers over WebSockets. With
# `ROAM_PACE=N` each walker turns round every N steps and paces where it
# joined, waking no zone past its first few; with
# the server's `GROVE_GAME=off`, the world has no game: what a walker's
# crossing of zones costs, and what the game's, are the differences. From
# the repository's root:
#
#   GROVE_ACTORS=0 GROVE_WIDTH=1000000 GROVE_HEIGHT=1000000 GROVE_ZONES=on_demand \
#     GROVE_ZONE_IDLE_MS=20000 GROVE_PORT=0 ELIXIR_ERL_OPTIONS="+S 1:1 +sbwt none" \
#     taskset -c 0 mix run -r lab/bench/roam_msacc.exs lab/bench/roam_inproc.exs [WALKERS]

alias Grove.Gateway.{Session, WebSocket}

defmodule Bench.RoamInproc do
  # The turn, in eighths, tried after 0, 1, 2... refusals in a row (as
  # `Grove.Load.Walk`).
  @side_steps {0, 1, -1, 2, -2, 3, -3}
  @dirs {:n, :ne, :e, :se, :s, :sw, :w, :nw}

  def walker(parent, config, size, every) do
    now = :erlang.monotonic_time(:millisecond)
    session = Session.new(config.world, :binary, config.session, now)

    join =
      Grove.Protocol.encode(
        %{type: :join, protocol: Grove.Protocol.version(), view_radius: 8},
        :binary
      )

    state = %{
      session: session,
      parser: WebSocket.parser(),
      max_frame: config.session.max_frame,
      held: [],
      closings: [],
      seq: 0,
      pending: false,
      walk: {:rand.uniform(8) - 1, nil, nil, 0},
      size: size,
      every: every,
      pace: config.pace,
      busy: 0,
      moves: 0,
      bytes: 0,
      parent: parent
    }

    state = frame(state, masked(IO.iodata_to_binary(join)))
    Process.send_after(self(), :step, :rand.uniform(every))
    loop(state)
  end

  defp loop(state) do
    receive do
      :step ->
        Process.send_after(self(), :step, state.every)
        loop(timed(state, &step/1))

      {:report, from} ->
        send(from, {:report, self(), state.busy, state.moves, state.bytes})
        loop(%{state | busy: 0, moves: 0, bytes: 0})

      :stop ->
        Session.ended(state.session)

      message ->
        loop(timed(state, &info(&1, message)))
    end
  end

  defp timed(state, fun) do
    t0 = :erlang.monotonic_time(:microsecond)
    state = fun.(state)
    %{state | busy: state.busy + :erlang.monotonic_time(:microsecond) - t0}
  end

  defp step(%{session: %Session{joined: true}, pending: false} = state) do
    {heading, last, sent, refused} = state.walk
    cell = state.session.cell

    {heading, refused} =
      cond do
        last == cell -> {heading, refused + 1}
        refused > 0 and sent != nil -> {sent, 0}
        true -> {heading, 0}
      end

    {heading, refused} = if refused >= 7, do: {rem(heading + 4, 8), 0}, else: {heading, refused}

    heading =
      if state.pace && rem(state.seq + 1, state.pace) == 0, do: rem(heading + 4, 8), else: heading

    heading = bounce(heading, cell, state.size)
    sent = Integer.mod(heading + elem(@side_steps, refused), 8)
    seq = state.seq + 1

    move =
      IO.iodata_to_binary(
        Grove.Protocol.encode(%{type: :move, seq: seq, dir: elem(@dirs, sent)}, :binary)
      )

    state = %{state | walk: {heading, cell, sent, refused}, seq: seq, pending: true}
    frame(state, masked(move))
  end

  defp step(state), do: state

  defp bounce(heading, {x, y} = cell, {w, h}) do
    {nx, ny} = Grove.World.Grid.step(cell, elem(@dirs, heading))
    dx = if nx < 0 or nx >= w, do: x - nx, else: nx - x
    dy = if ny < 0 or ny >= h, do: y - ny, else: ny - y

    Enum.find_index(Tuple.to_list(@dirs), &(Grove.World.Grid.step(cell, &1) == {x + dx, y + dy})) ||
      heading
  end

  defp masked(payload) do
    mask = <<1, 2, 3, 4>>
    size = byte_size(payload)
    data = :crypto.exor(payload, :binary.copy(mask, div(size, 4) + 1) |> binary_part(0, size))
    <<1::1, 0::3, 2::4, 1::1, size::7, mask::binary, data::binary>>
  end

  defp frame(state, data) do
    {:ok, frames, parser} = WebSocket.parse(state.parser, data, state.max_frame)
    now = :erlang.monotonic_time(:millisecond)

    {session, actions} =
      Enum.reduce(frames, {state.session, []}, fn {kind, payload}, {session, acc} ->
        {session, new} = Session.handle_frame(session, kind, payload, now)
        {session, acc ++ new}
      end)

    act(%{state | parser: parser, session: session}, actions)
  end

  defp info(state, {:grove_view, _zone, :tiles, _seq, _data} = message) when state.pending,
    do: %{state | held: [message | state.held]}

  defp info(state, {:grove_view, _zone, :closed} = message) when state.pending do
    {session, actions} = Session.handle_info(state.session, message)
    %{state | session: session, closings: [state.closings | for({:send, f} <- actions, do: f)]}
  end

  defp info(state, {:grove_move, _, _, _} = message) do
    {session, actions} = Session.handle_info(state.session, message)
    act(%{state | session: session, pending: false, moves: state.moves + 1}, actions)
  end

  defp info(state, message) do
    case Session.handle_info(state.session, message) do
      {session, actions} -> act(%{state | session: session}, actions)
      :unknown -> state
    end
  end

  defp act(state, []), do: state

  defp act(state, actions) do
    frames = for {:send, frame} <- actions, do: frame
    {session, views} = Session.views(state.session, Enum.reverse(state.held))
    bytes = IO.iodata_length([state.closings, frames, views])
    %{state | session: session, held: [], closings: [], bytes: state.bytes + bytes}
  end
end

walkers = String.to_integer(List.first(System.argv()) || "500")
gateway = Grove.Gateway.config()
world = Grove.World.fetch!(gateway.world)
grid = world.grid

session =
  Map.take(gateway, [
    :max_frame,
    :move_rate,
    :move_burst,
    :seed_rate,
    :seed_burst,
    :act_rate,
    :act_burst,
    :say_rate,
    :say_burst,
    :say_max,
    :max_errors,
    :max_view_radius,
    :spawn,
    :tick_ms,
    :stats,
    :move_time,
    :accounts,
    :instance
  ])
  |> Map.put(:view_ms, gateway.view_ms_max)

# `ROAM_PACE=N`: each walker turns round every N steps, pacing where it
# joined (no zone woken past its first few), rather than walking straight.
pace = if p = System.get_env("ROAM_PACE"), do: String.to_integer(p)
config = %{world: gateway.world, session: session, pace: pace}
size = {grid.width, grid.height}
parent = self()
heap = gateway.connection_heap

pids =
  for k <- 1..walkers do
    pid =
      :proc_lib.spawn_opt(
        fn ->
          try do
            Bench.RoamInproc.walker(parent, config, size, 200)
          catch
            kind, reason ->
              IO.puts("INPROC walker failed: " <> Exception.format(kind, reason, __STACKTRACE__))
          end
        end,
        fullsweep_after: 0,
        min_heap_size: heap
      )

    if rem(k, 20) == 0, do: Process.sleep(1000)
    pid
  end

Process.sleep(20_000)

report = fn ->
  for pid <- pids, do: send(pid, {:report, self()})

  Enum.reduce(pids, {0, 0, 0}, fn pid, {busy, moves, bytes} ->
    receive do
      {:report, ^pid, b, m, y} -> {busy + b, moves + m, bytes + y}
    end
  end)
end

# The VM's CPU time (all its threads), in ms, from the kernel's count.
os_cpu = fn ->
  stat = File.read!("/proc/#{System.pid()}/stat")
  [_, rest] = String.split(stat, ") ", parts: 2)
  fields = String.split(rest, " ")

  (String.to_integer(Enum.at(fields, 11)) + String.to_integer(Enum.at(fields, 12))) * 1000 /
    :erlang.list_to_integer(
      String.to_charlist(String.trim(elem(System.cmd("getconf", ["CLK_TCK"]), 0)))
    )
end

IO.puts("INPROC " <> String.trim(elem(System.cmd("taskset", ["-p", System.pid()]), 0)))
_ = report.()

counts = fn ->
  {Grove.World.Stats.get(world.stats, :zone_wakes), Grove.World.Stats.get(world.stats, :handoffs)}
end

{wakes0, handoffs0} = counts.()
c0 = os_cpu.()
t0 = :erlang.monotonic_time(:microsecond)
accounting = Task.async(fn -> :msacc.start(30_000) && :msacc.stats() end)
stats = Task.await(accounting, 60_000)
cpu_ms = os_cpu.() - c0
{wakes1, handoffs1} = counts.()
t1 = :erlang.monotonic_time(:microsecond)
{busy, moves, bytes} = report.()
seconds = (t1 - t0) / 1.0e6
ws = walkers * seconds

IO.puts(
  "INPROC #{walkers} walkers#{if pace, do: " pacing #{pace} steps", else: ""}, #{Float.round(seconds, 1)} s: #{round(moves / seconds)} moves/s " <>
    "(#{Float.round(moves / ws, 2)} a walker-second), #{round(bytes / ws)} B out a walker-second"
)

IO.puts(
  "INPROC the VM's CPU #{round(cpu_ms * 1000 / ws)} us a walker-second " <>
    "(#{Float.round(cpu_ms / 10 / seconds, 1)} % of a core), #{round(cpu_ms * 1000 / max(moves, 1))} us a move; " <>
    "in the walkers' own turns #{round(busy / ws)} us a walker-second (#{round(busy / max(moves, 1))} us a move)"
)

if Code.ensure_loaded?(Bench.RoamMsacc), do: Bench.RoamMsacc.print(stats, "in process")

IO.puts(
  "INPROC zones woken #{Float.round((wakes1 - wakes0) / ws, 3)} a walker-second, " <>
    "handoffs #{Float.round((handoffs1 - handoffs0) / ws, 3)}"
)

# With `roam_turns.exs` required too, the turns and messages a move, traced
# after the measured 30 s.
if Code.ensure_loaded?(Bench.RoamTurns),
  do: Bench.RoamTurns.count(pids, String.to_integer(System.get_env("ROAM_TURNS_MS", "5000")))

for pid <- pids, do: send(pid, :stop)
System.halt(0)
