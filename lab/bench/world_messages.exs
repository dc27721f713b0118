# What the processes of a world alone receive and how often they run: loaded
# into a server (`mix run --no-halt -r`), it waits WARM seconds (the actors
# join and settle), traces every process for SECS seconds (the messages
# received, the turns on the scheduler) and prints, a second, the messages
# by kind of process and kind of message (a cast's or call's own first
# element, a tuple's first element, or the atom) and the turns by kind of
# process, then stops the server. A probe, not a benchmark: tracing slows
# what it watches. Run from the repository as world_alone.sh runs a world:
#
#   GROVE_PORT=0 taskset -c 0 elixir --erl "+S 1:1 +sbwt none +sbwtdcpu none +sbwtdio none" \
#     -S mix run --no-halt -r lab/bench/world_messages.exs
Code.require_file("process_kind.exs", __DIR__)

warm = String.to_integer(System.get_env("WARM", "25"))
secs = String.to_integer(System.get_env("SECS", "5"))

spawn(fn ->
  Process.sleep(warm * 1000)
  me = self()
  pids = Process.list() -- [me]
  labels = Map.new(pids, &{&1, Grove.Bench.ProcessKind.of(&1)})

  kind = fn
    {:"$gen_cast", message} when is_tuple(message) -> {:cast, elem(message, 0)}
    {:"$gen_cast", message} -> {:cast, message}
    {:"$gen_call", _from, message} when is_tuple(message) -> {:call, elem(message, 0)}
    {:"$gen_call", _from, message} -> {:call, message}
    message when is_tuple(message) and tuple_size(message) > 0 -> elem(message, 0)
    message -> message
  end

  label = fn
    {Grove.Actors.Herd, _, _} -> :herd
    name when is_binary(name) -> if name =~ ~r/Zone/, do: :zone, else: name
    other -> other
  end

  for p <- pids do
    try do
      :erlang.trace(p, true, [:receive, :running, {:tracer, me}])
    rescue
      ArgumentError -> :gone
    end
  end

  until = System.monotonic_time(:millisecond) + secs * 1000

  fold = fn fold, acc ->
    receive do
      {:trace, p, :receive, message} ->
        key = {:msg, label.(Map.get(labels, p, :new)), kind.(message)}
        fold.(fold, Map.update(acc, key, 1, &(&1 + 1)))

      {:trace, p, :in, _mfa} ->
        key = {:turns, label.(Map.get(labels, p, :new))}
        fold.(fold, Map.update(acc, key, 1, &(&1 + 1)))

      _ ->
        fold.(fold, acc)
    after
      max(until - System.monotonic_time(:millisecond), 0) -> acc
    end
  end

  counts = fold.(fold, %{})

  for p <- pids do
    try do
      :erlang.trace(p, false, [:all])
    rescue
      ArgumentError -> :gone
    end
  end

  for {key, n} <- counts |> Enum.sort_by(&(-elem(&1, 1))) |> Enum.take(30),
      do: IO.puts("MESSAGES #{inspect(key)} #{Float.round(n / secs, 1)}/s")

  herds = Enum.count(labels, fn {_, l} -> label.(l) == :herd end)
  IO.puts("MESSAGES herds #{herds}")
  System.halt(0)
end)
