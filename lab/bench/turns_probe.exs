# What a player costs the server in turns, messages and writes, by kind
# of process: loaded into the server (as `knee_probe.sh` loads
# `knee_probe.exs`, `PROBE=lab/bench/turns_probe.exs`), it waits
# `KNEE_PROBE_AFTER` seconds, then traces every process but itself for
# `TURNS_PROBE_MS` (default 3,000) and counts, by kind of process
# (`process_kind.exs`), its turns on the scheduler, the messages it took by
# kind and its garbage collections, and the gateway's writes and frames
# read over the same time; each a player-second of the connections
# running then. Counts, not times: a trace slows what it watches, but
# each move is still read, answered and written once, so a load the
# server keeps up with (below its knee) gives the same counts as at it.
# Lines start with `PROBE`.
Code.require_file("process_kind.exs", __DIR__)
Code.require_file("probe.exs", __DIR__)

spawn(fn ->
  Process.sleep(String.to_integer(System.get_env("KNEE_PROBE_AFTER", "60")) * 1000)
  Process.flag(:priority, :high)
  ms = String.to_integer(System.get_env("TURNS_PROBE_MS", "3000"))

  me = self()
  kinds = Map.new(Process.list() -- [me], &{&1, Grove.Bench.ProcessKind.of(&1)})

  connections = Enum.count(kinds, fn {_, k} -> k == {Grove.Gateway.Connection, :init, 1} end)

  # Zones by one name, whatever their index.
  kind_of = fn
    "Elixir.Grove.World.zone.N" -> :zone
    {Grove.Gateway.Connection, :init, 1} -> :connection
    {Grove.Actors.Herd, :init, 1} -> :herd
    other -> other
  end

  message = fn
    {:"$gen_cast", m} when is_tuple(m) -> {:cast, elem(m, 0)}
    {:"$gen_cast", m} -> {:cast, m}
    {:"$gen_call", _from, m} when is_tuple(m) -> {:call, elem(m, 0)}
    {:"$gen_call", _from, m} -> {:call, m}
    {:grove_view, _zone, what, _seq, _data} -> {:grove_view, what}
    {:grove_view, _zone, what, _seq} -> {:grove_view, what}
    {:grove_view, _zone, what} -> {:grove_view, what}
    m when is_atom(m) -> m
    m when is_tuple(m) and is_atom(elem(m, 0)) -> elem(m, 0)
    _other -> :other
  end

  stats = Grove.Gateway.config().stats
  before = Grove.Gateway.Stats.read(stats)

  for p <- Map.keys(kinds) do
    try do
      :erlang.trace(p, true, [:receive, :running, :garbage_collection, {:tracer, me}])
    rescue
      ArgumentError -> :gone
    end
  end

  until = System.monotonic_time(:millisecond) + ms

  fold = fn fold, acc ->
    receive do
      {:trace, p, tag, what} ->
        k = kind_of.(Map.get(kinds, p, :new))

        key =
          case tag do
            :in -> {k, :turns}
            :receive -> {k, :msg, message.(what)}
            :gc_minor_start -> {k, :gc}
            :gc_major_start -> {k, :gc}
            _ -> nil
          end

        acc = if key, do: Map.update(acc, key, 1, &(&1 + 1)), else: acc
        fold.(fold, acc)

      _other ->
        fold.(fold, acc)
    after
      max(until - System.monotonic_time(:millisecond), 0) -> acc
    end
  end

  counted = fold.(fold, %{})

  for p <- Map.keys(kinds),
      do:
        (try do
           :erlang.trace(p, false, [:all])
         rescue
           ArgumentError -> :gone
         end)

  later = Grove.Gateway.Stats.read(stats)
  # Drain what the trace still had in flight.
  drain = fn drain ->
    receive do
      {:trace, _, _, _} -> drain.(drain)
    after
      200 -> :ok
    end
  end

  drain.(drain)

  per = max(connections, 1) * ms / 1000
  IO.puts("PROBE players (connections) #{connections}, over #{ms} ms")

  for key <- [:writes_json, :writes_binary, :frames_in, :bytes_out_json, :bytes_out_binary],
      do:
        IO.puts(
          "PROBE gateway #{key}: #{Float.round((later[key] - before[key]) / per, 3)} a player-second"
        )

  counted
  |> Enum.sort_by(fn {_, n} -> -n end)
  |> Enum.take(60)
  |> Enum.each(fn {key, n} ->
    IO.puts("PROBE #{inspect(key)}: #{Float.round(n / per, 3)} a player-second")
  end)

  IO.puts("PROBE done")
end)
