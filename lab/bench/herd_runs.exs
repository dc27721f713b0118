# How a herd's slots hold its kinds: loaded into a server (`mix run
# --no-halt -r`), it waits WARM seconds (the actors join and walk), then
# reads every herd's wheel and prints, over the herds of several kinds,
# the actors on the wheel, the slots and the runs of one kind in them
# (a slot's actors as the herd takes them), then stops the server. A
# probe, not a benchmark. Run from the repository as world_alone.sh runs
# the default world:
#
#   GROVE_PORT=0 taskset -c 0 elixir --erl "+S 1:1 +sbwt none +sbwtdcpu none +sbwtdio none" \
#     -S mix run --no-halt -r lab/bench/herd_runs.exs
warm = String.to_integer(System.get_env("WARM", "60"))

spawn(fn ->
  Process.sleep(warm * 1000)

  herds =
    for pid <- Process.list(),
        {:dictionary, dictionary} <- [Process.info(pid, :dictionary)],
        Keyword.get(dictionary, :"$initial_call") == {Grove.Actors.Herd, :init, 1},
        %Grove.Actors.Herd{} = herd <- [:sys.get_state(pid)],
        tuple_size(herd.kinds) > 1,
        do: herd

  slots =
    for %Grove.Actors.Herd{wheel: wheel} <- herds, slot <- Map.keys(wheel.slots) do
      # A group of a zone's resting actors counts its members, each an
      # actor, in the run of their kind.
      {due, _wheel} = Grove.Actors.Herd.Wheel.pop(wheel, slot)
      actors = Enum.flat_map(due, &Grove.Actors.Herd.Wheel.members/1)
      runs = actors |> Enum.chunk_by(&Bitwise.band(elem(&1, 1), 255)) |> length()
      {length(actors), runs}
    end

  actors = slots |> Enum.map(&elem(&1, 0)) |> Enum.sum()
  runs = slots |> Enum.map(&elem(&1, 1)) |> Enum.sum()
  most = slots |> Enum.map(&elem(&1, 1)) |> Enum.max(fn -> 0 end)

  IO.puts(
    "HERD_RUNS herds #{length(herds)} actors #{actors} slots #{length(slots)} runs #{runs} " <>
      "(#{Float.round(runs / max(actors, 1), 3)} a turn, at most #{most} in a slot)"
  )

  System.halt(0)
end)
