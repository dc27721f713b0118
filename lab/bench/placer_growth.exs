# How the placer's pure rules (`Grove.World.Placer.State`) grow with the
# zones: a world of 1,000, 10,000 and 100,000 zones over three members
# (a, b, c), and for each size the rules a cluster runs as it changes:
#
#   * start   - a, first by name, starts the world: places every zone,
#               starts and announces its third;
#   * restart - a placer started again on a joins the running world: it
#               starts and announces what the placement gives it;
#   * join    - d joins: a hands over what d owns now and introduces
#               what it serves to d;
#   * lost    - c is lost: a starts again, at the next epoch, what c ran
#               and a owns now;
#   * heard   - d hears b announce a new epoch of every zone b runs, in
#               messages of 1,000 zones;
#   * ended   - the handovers of join end, all taken: one rule a zone
#               (`handover_ended/3`, as a placer did a message a zone),
#               and one rule a batch of 100 (`handovers_ended/2`, a
#               message a batch; on a build that has it), side by side,
#               with the ratio of the two in words allocated.
#
# Each rule once per size, in a process of its own, timed (ms of wall
# clock) and counted (reductions, and words allocated, from its garbage
# collections, `test/support/allocation.ex`); the ratio of one size's to the one before is the
# growth: about 10 when linear, about 100 when quadratic. Load the build
# to measure with -pa, the same script for both (the old build first):
#
#   elixir -pa /work/ci-m1/_build/dev/lib/grove/ebin lab/bench/placer_growth.exs
#   elixir -pa _build/dev/lib/grove/ebin lab/bench/placer_growth.exs
#
# A rule that takes longer than LIMIT seconds (default 120) is cut off
# and printed as such; SIZES=2000,20000 measures other sizes.
alias Grove.World.Placer.State

# Words allocated, counted from the garbage collections (the tests' helper).
Code.require_file("../../test/support/allocation.ex", __DIR__)

defmodule Bench.PlacerGrowth do
  @a :a@host
  @b :b@host
  @c :c@host
  @d :d@host

  def cases(zones) do
    start = %{State.new(@a, zones) | members: [@a, @b, @c]}
    {a, _} = State.join_or_start(start, nil)
    locations = Tuple.to_list(a.locations)
    {d, _} = State.join_or_start(%{State.new(@d, zones) | members: [@a, @b, @c, @d]}, locations)

    heard =
      for {{@b, epoch}, index} <- Enum.with_index(locations),
          do: {index, @b, epoch + 1, :handed}

    {handing, effects} = State.members(a, [@a, @b, @c, @d], true, [@b, @c, @d])
    ended = for {:hand_over, index, @d, _epoch} <- effects, do: {index, :normal}

    [
      start: fn -> State.join_or_start(start, nil) end,
      restart: fn -> State.join_or_start(start, locations) end,
      join: fn -> State.members(a, [@a, @b, @c, @d], true, [@b, @c, @d]) end,
      lost: fn -> State.members(a, [@a, @b], true, [@b]) end,
      heard: fn ->
        heard
        |> Enum.chunk_every(1000)
        |> Enum.reduce(d, fn chunk, d ->
          {d, _effects} = State.announced_all(d, chunk, [@a, @b, @c])
          d
        end)
      end,
      ended_each: fn ->
        Enum.reduce(ended, handing, fn {index, reason}, a ->
          {a, _effects} = State.handover_ended(a, index, reason)
          a
        end)
      end
    ] ++
      if function_exported?(State, :handovers_ended, 2),
        do: [
          ended_batched: fn ->
            ended
            |> Enum.chunk_every(100)
            |> Enum.reduce(handing, fn batch, a ->
              {a, _effects} = State.handovers_ended(a, batch)
              a
            end)
          end
        ],
        else: []
  end

  # {ms, reductions, words, effects} of one rule, in a process of its
  # own, or :cut.
  def measure(rule, limit) do
    task =
      Task.async(fn ->
        {words, {us, reductions, result}} =
          Grove.Allocation.words(fn ->
            {:reductions, before} = Process.info(self(), :reductions)
            {us, result} = :timer.tc(rule)
            {:reductions, later} = Process.info(self(), :reductions)
            {us, later - before, result}
          end)

        effects =
          case result do
            {_state, effects} when is_list(effects) -> length(effects)
            _state -> nil
          end

        {us / 1000, reductions, words, effects}
      end)

    case Task.yield(task, limit * 1000) || Task.shutdown(task, :brutal_kill) do
      {:ok, figures} -> figures
      _ -> :cut
    end
  end
end

limit = String.to_integer(System.get_env("LIMIT", "120"))

sizes =
  "SIZES"
  |> System.get_env("1000,10000,100000")
  |> String.split(",")
  |> Enum.map(&String.to_integer/1)

IO.puts("build: #{:code.which(State)}")

results =
  for zones <- sizes, {name, rule} <- Bench.PlacerGrowth.cases(zones), into: %{} do
    figures = Bench.PlacerGrowth.measure(rule, limit)

    case figures do
      :cut ->
        IO.puts("#{name} at #{zones} zones: cut off after #{limit} s")

      {ms, reductions, words, effects} ->
        IO.puts(
          "#{name} at #{zones} zones: #{Float.round(ms, 1)} ms, #{reductions} reductions, " <>
            "#{words} words allocated" <>
            if(effects, do: ", #{effects} effects", else: "")
        )
    end

    {{name, zones}, figures}
  end

IO.puts("\ngrowth, each size against the one before (time, reductions, words allocated):")

for name <- [:start, :restart, :join, :lost, :heard, :ended_each, :ended_batched],
    {small, large} <- Enum.zip(sizes, tl(sizes)) do
  case {results[{name, small}], results[{name, large}]} do
    {{ms_s, red_s, words_s, _}, {ms_l, red_l, words_l, _}} ->
      IO.puts(
        "#{name} #{small} -> #{large}: x#{Float.round(ms_l / max(ms_s, 0.001), 1)} time, " <>
          "x#{Float.round(red_l / max(red_s, 1), 1)} reductions, " <>
          "x#{Float.round(words_l / max(words_s, 1), 1)} words"
      )

    _cut ->
      IO.puts("#{name} #{small} -> #{large}: cut off")
  end
end

IO.puts("\nhandovers ended a zone a rule against a batch of 100 a rule (words allocated):")

for zones <- sizes do
  case {results[{:ended_each, zones}], results[{:ended_batched, zones}]} do
    {{_, _, each, _}, {_, _, batched, _}} ->
      IO.puts(
        "ended at #{zones} zones: x#{Float.round(each / max(batched, 1), 1)} words a zone a rule"
      )

    _none ->
      IO.puts("ended at #{zones} zones: no batched rule in this build, or cut off")
  end
end
