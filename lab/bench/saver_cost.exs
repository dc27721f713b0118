# What the game's saver costs a running world, measured from inside the
# server like `world_alone.exs`: loaded into it (`mix run --no-halt -r`),
# it waits WARM seconds, then over SECS seconds (defaults 20 and 30)
# counts the reductions of the saver and of the store's processes (its
# worker and the SQLite connection; SQLite's own C is not counted in
# reductions), the zones the saver wrote and how many of them whole, and
# then times one more save pass by hand (`Saver.save_now/1`, the store's
# commit included). Prints one line and stops the server. For the default
# world on one pinned core, in each checkout:
#
#   GROVE_PORT=0 taskset -c 0 elixir --erl "+S 1:1 +sbwt none" -S mix run --no-halt -r lab/bench/saver_cost.exs
warm = String.to_integer(System.get_env("WARM", "20"))
secs = String.to_integer(System.get_env("SECS", "30"))

spawn(fn ->
  Process.sleep(warm * 1000)
  world = Grove.World.fetch!(Grove.World)

  initial = fn pid ->
    case Process.info(pid, :dictionary) do
      {:dictionary, d} -> Keyword.get(d, :"$initial_call")
      nil -> nil
    end
  end

  kinds = %{
    {Grove.World.Game.Saver, :init, 1} => :saver,
    {Grove.Store.Worker, :init, 1} => :store,
    {:sqlite3, :init, 1} => :store
  }

  reductions = fn ->
    Enum.reduce(Process.list(), %{saver: 0, store: 0}, fn pid, acc ->
      with kind when kind != nil <- Map.get(kinds, initial.(pid)),
           {:reductions, r} <- Process.info(pid, :reductions) do
        Map.update!(acc, kind, &(&1 + r))
      else
        _ -> acc
      end
    end)
  end

  saver = Enum.find(Process.list(), &(initial.(&1) == {Grove.World.Game.Saver, :init, 1}))

  # A build from before bases and changes wrote every zone whole.
  stats = fn ->
    counts = Grove.World.Stats.read(world.stats)
    {counts.game_zones_saved, Map.get(counts, :game_bases_saved, counts.game_zones_saved)}
  end

  {r0, s0} = {reductions.(), stats.()}
  Process.sleep(secs * 1000)
  {r1, s1} = {reductions.(), stats.()}
  {took, :ok} = :timer.tc(fn -> Grove.World.Game.Saver.save_now(saver) end)

  IO.puts(
    "SAVER_COST reductions/s saver #{div(r1.saver - r0.saver, secs)} store #{div(r1.store - r0.store, secs)} " <>
      "zones saved/s #{Float.round((elem(s1, 0) - elem(s0, 0)) / secs, 1)} " <>
      "of them whole #{Float.round((elem(s1, 1) - elem(s0, 1)) / secs, 1)} " <>
      "a pass by hand #{Float.round(took / 1000, 1)} ms"
  )

  System.halt(0)
end)
