# How old the game's state is that a server killed with `kill -9` comes
# back with: the default world (`make run`'s, the orchard played by its
# 20,000 actors, the game saved to SQLite every 5 s) runs in an OS process
# of its own for a random 20 to 30 s (`--seconds` and up to 10 more), then
# gets SIGKILL; the save in the
# store (read after the kill with `Grove.Store`) is that much older than
# the kill: what changed after it is what was lost. The same data folder
# is then started again and the zones that came back from their saves are
# read from its `/metrics` (`grove_game_zones_loaded_total`: a world's
# start returns with its zones recovered). Rounds in a row:
#
#   cd lab && flock -x /work/.machine.lock mix run --no-start bench/save_age.exs [--rounds 5]
#
# A zone lost with one node of a cluster comes back on a survivor the same
# way (its last save, from the shared store): this measures that age
# without a cluster.

{opts, _, _} = OptionParser.parse(System.argv(), strict: [rounds: :integer, seconds: :integer])
rounds = Keyword.get(opts, :rounds, 5)
seconds = Keyword.get(opts, :seconds, 20)
# This VM only reads the store the servers wrote: no instance of its own.
Application.put_env(:grove, :start, false)
{:ok, _} = Application.ensure_all_started(:grove)

alias Grove.Load.Server

defmodule SaveAge do
  # What the server prints, until it answers, and the zones it restored.
  def start(data, port) do
    env = [
      {"GROVE_PORT", to_string(port)},
      {"GROVE_DATA", data},
      {"MIX_ENV", to_string(Mix.env())}
    ]

    server = Server.start(env: env, label: "server")
    Server.await(server, port, fn _ -> :ok end)
    server
  end

  # The zones the server started from their saves, from its metrics.
  def restored(port) do
    body = Grove.Load.Soak.scrape("http://127.0.0.1:#{port}/metrics", nil) || ""

    case Regex.run(~r/^grove_game_zones_loaded_total (\d+)/m, body) do
      [_, count] -> String.to_integer(count)
      nil -> 0
    end
  end

  def drain(server) do
    receive do
      {port, {:data, _}} when port == server.port -> drain(server)
    after
      0 -> :ok
    end
  end

  # The newest save of any zone, from the store the server wrote.
  def newest_save(data) do
    store = :"save_age_store_#{System.unique_integer([:positive])}"

    {:ok, sup} =
      Supervisor.start_link([{Grove.Store, name: store, path: Path.join(data, "grove.db")}],
        strategy: :one_for_one
      )

    scope = "game/Grove.Games.Orchard/1000x1000/50/1"
    {:ok, entries} = Grove.Store.list_state(store, scope)
    Supervisor.stop(sup)

    # A zone's save is a base and, after it, the cells changed since
    # (`KEY` and `KEY/changes`): the zones are the keys before the slash.
    saved = for {key, value} <- entries, do: {key, :erlang.binary_to_term(value).saved_at}
    zones = saved |> Enum.map(fn {key, _} -> key |> String.split("/") |> hd() end) |> Enum.uniq()
    times = Enum.map(saved, &elem(&1, 1))
    {length(zones), length(saved), Enum.max(times, fn -> nil end), batches(times)}
  end

  # The saver's last batches: the saves' times grouped where more than a
  # second apart (a batch's zones are encoded within it), newest first.
  def batches(times) do
    times
    |> Enum.sort(:desc)
    |> Enum.chunk_while(
      [],
      fn
        time, [] -> {:cont, [time]}
        time, [last | _] = batch when last - time <= 1000 -> {:cont, [time | batch]}
        time, batch -> {:cont, Enum.max(batch), [time]}
      end,
      fn
        [] -> {:cont, []}
        batch -> {:cont, Enum.max(batch), []}
      end
    )
  end
end

ages =
  for round <- 1..rounds do
    data = Path.join(System.tmp_dir!(), "grove-save-age-#{System.unique_integer([:positive])}")
    port = Grove.Ports.free()
    server = SaveAge.start(data, port)
    Process.sleep(seconds * 1000 + :rand.uniform(10_000))
    pid = Server.os_pid(server)
    System.cmd("kill", ["-KILL", to_string(pid)])
    killed_at = System.system_time(:millisecond)
    SaveAge.drain(server)
    {zones, entries, newest, batches} = SaveAge.newest_save(data)
    age = killed_at - newest

    gaps =
      batches
      |> Enum.take(4)
      |> Enum.chunk_every(2, 1, :discard)
      |> Enum.map(fn [a, b] -> a - b end)

    # Started again on what the killed one left: its zones come back.
    again_port = Grove.Ports.free()
    again = SaveAge.start(data, again_port)
    restored = SaveAge.restored(again_port)
    Server.stop(again)
    File.rm_rf!(data)

    IO.puts(
      "round #{round}: killed; the newest save, of #{zones} zones saved (#{entries} bases and changes), " <>
        "#{age} ms older than the kill; the last batches #{Enum.join(gaps, ", ")} ms apart; " <>
        "started again: #{restored} zones restored from their saves"
    )

    age
  end

sorted = Enum.sort(ages)

IO.puts(
  "save age at the kill over #{rounds} rounds: min #{hd(sorted)} ms, " <>
    "median #{Enum.at(sorted, div(rounds, 2))} ms, max #{List.last(sorted)} ms"
)
