defmodule Mix.Tasks.Grove.Bench.Zones do
  @shortdoc "Zones on demand: start time, memory per zone awake and asleep, moves into sleeping zones"

  @moduledoc """
  What zones on demand (`zones: :on_demand`) cost and save, in one run:

    1. **Start.** Worlds of every zone running and of zones on demand, at
       each size: the time `Grove.World.start_link/1` takes and the memory
       the VM holds once it has.
    2. **Memory per zone.** In a world of zones on demand, the memory
       `--wake` zones take awake (started, empty), and what is left once
       they have been put to sleep and have stopped.
    3. **Moves into sleeping zones.** Walkers walk straight east, a step
       every `--step-ms`, across a world whose every other column of zones
       was woken beforehand: each move is timed from `Grove.World.move/4`
       to its outcome, and counted as a move inside a zone, a move across
       into a zone awake, or a move across into a zone asleep (which the
       move wakes), all in the same run, interleaved.

      mix grove.bench.zones --walkers 500 --seconds 40

  Options: `--walkers N` (default 500), `--seconds S` of walking (default
  40), `--step-ms MS` (default 200: five steps a second), `--wake N`
  (default 10000). Walkers and world share the VM: run it alone on the
  machine, and read the moves across zones side by side, as a ratio.
  """

  use Mix.Task

  alias Grove.World
  alias Grove.World.Grid

  @switches [walkers: :integer, seconds: :integer, step_ms: :integer, wake: :integer]
  @meadow [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]

  @impl true
  def run(args) do
    opts = Mix.Grove.parse!(args, @switches, "grove.bench.zones")
    Application.put_env(:grove, :start, false)
    Mix.Task.run("app.start")
    Logger.configure(level: :warning)

    starts()
    memory_per_zone(Keyword.get(opts, :wake, 10_000))

    moves(
      Keyword.get(opts, :walkers, 500),
      Keyword.get(opts, :seconds, 40),
      Keyword.get(opts, :step_ms, 200)
    )
  end

  ## 1. Start

  defp starts do
    Mix.shell().info("\n## Start: time and memory once started")
    Mix.shell().info("| world | zones | running at start | start | memory after start |")
    Mix.shell().info("| --- | --- | --- | --- | --- |")

    for {w, h, zone_size} <- [{1000, 1000, 50}, {15_000, 15_000, 50}, {100_000, 100_000, 400}],
        mode <- [:always, :on_demand],
        not (mode == :always and w > 1000) do
      :erlang.garbage_collect()
      before = :erlang.memory(:total)
      started = System.monotonic_time(:millisecond)
      {:ok, sup, name} = start_world(w, h, zone_size, mode, 60_000)
      took = System.monotonic_time(:millisecond) - started
      awake = length(World.awake_zones(name))
      :erlang.garbage_collect()
      memory = :erlang.memory(:total) - before
      zones = Grid.zone_count(World.grid(name))
      Supervisor.stop(sup)

      Mix.shell().info(
        "| #{w} x #{h}, zones of #{zone_size}, #{mode} | #{zones} | #{awake} | #{took} ms | #{mb(memory)} |"
      )
    end
  end

  ## 2. Memory per zone, awake and asleep

  defp memory_per_zone(count) do
    {:ok, sup, name} = start_world(15_000, 15_000, 50, :on_demand, :manual, handoff_timeout: 200)
    world = World.fetch!(name)
    zones = Enum.take_every(0..(Grid.zone_count(world.grid) - 1), 9) |> Enum.take(count)

    base = settled_memory()
    for index <- zones, do: World.zone_address(world, index)
    awake = settled_memory()

    processes =
      Enum.sum(for index <- zones, pid = World.zone_pid(world, index), do: process_memory(pid))

    slept = World.sleep_idle(name, 60_000)
    # Each lingers for `handoff_timeout`, then stops.
    wait_until(fn -> World.awake_zones(name) == [] end)
    asleep = settled_memory()
    zone_count = Grid.zone_count(world.grid)
    Supervisor.stop(sup)

    Mix.shell().info("\n## Memory per zone (15000 x 15000 in zones of 50, on demand)")

    Mix.shell().info(
      "#{length(zones)} zones woken: #{per(awake - base, length(zones))} more memory each " <>
        "(#{per(processes, length(zones))} of it the zone's process); " <>
        "#{length(slept)} put to sleep: #{per(asleep - base, length(zones))} each more than " <>
        "before they woke; every zone of the #{zone_count}, awake or not, holds an ETS table " <>
        "and its counters from the start"
    )
  end

  defp process_memory(pid) do
    case Process.info(pid, :memory) do
      {:memory, bytes} -> bytes
      nil -> 0
    end
  end

  ## 3. Moves across into zones awake and asleep

  defp moves(walkers, seconds, step_ms) do
    zone_size = 20
    width = 20_000
    rows = walkers * 2
    {:ok, sup, name} = start_world(width, rows, zone_size, :on_demand, :manual)
    world = World.fetch!(name)
    columns = div(width, zone_size)

    # Every other column of zones along the walkers' rows runs already.
    for row <- 0..(div(rows, zone_size) - 1),
        column <- 0..(columns - 1)//2,
        do: World.zone_address(world, row * columns + column)

    Mix.shell().info(
      "\n## Moves (#{walkers} walkers east at one step per #{step_ms} ms for #{seconds} s, " <>
        "#{width} x #{rows} in zones of #{zone_size}, every other column woken first)"
    )

    parent = self()
    deadline = System.monotonic_time(:millisecond) + seconds * 1000

    pids =
      for n <- 0..(walkers - 1) do
        spawn_link(fn ->
          {:ok, id, _} = World.join(world, at: {1, n * 2}, updates: :none)
          send(parent, {:times, walk(world, id, {1, n * 2}, step_ms, deadline, [])})
        end)
      end

    times =
      Enum.flat_map(pids, fn _ ->
        receive do
          {:times, times} -> times
        end
      end)

    stats = World.stats(name)
    Supervisor.stop(sup)

    Mix.shell().info("| move | count | p50 | p99 | max |")
    Mix.shell().info("| --- | --- | --- | --- | --- |")

    for kind <- [:inside, :into_awake, :into_asleep] do
      us = for {^kind, t} <- times, do: t

      Mix.shell().info(
        "| #{kind} | #{length(us)} | #{ms(us, 50)} | #{ms(us, 99)} | #{ms(us, 100)} |"
      )
    end

    errors = for {{:error, _} = kind, _} <- times, do: kind
    Mix.shell().info("refused or lost: #{length(errors)}; zones woken: #{stats.zone_wakes}")
  end

  defp walk(world, id, {x, y}, step_ms, deadline, times) do
    now = System.monotonic_time(:millisecond)

    if now >= deadline do
      times
    else
      grid = world.grid
      from = Grid.zone_of(grid, x, y)
      to = Grid.zone_of(grid, x + 1, y)

      kind =
        cond do
          from == to -> :inside
          World.zone_pid(world, to) != nil -> :into_awake
          true -> :into_asleep
        end

      started = System.monotonic_time(:microsecond)
      :ok = World.move(world, id, :e, x)

      {kind, cell} =
        receive do
          {:grove_move, ^id, ^x, {:ok, cell}} -> {kind, cell}
          {:grove_move, ^id, ^x, {:rejected, reason}} -> {{:error, reason}, {x, y}}
        after
          10_000 -> {{:error, :lost}, {x, y}}
        end

      took = System.monotonic_time(:microsecond) - started
      wait = step_ms - div(took, 1000)

      if wait > 0 do
        receive do
        after
          wait -> :ok
        end
      end

      walk(world, id, cell, step_ms, deadline, [{kind, took} | times])
    end
  end

  ## Helpers

  defp start_world(w, h, zone_size, mode, idle, extra \\ []) do
    name = :"bench_zones_#{System.unique_integer([:positive])}"

    {:ok, sup} =
      World.start_link(
        [
          name: name,
          width: w,
          height: h,
          zone_size: zone_size,
          zones: mode,
          zone_idle: idle,
          terrain: @meadow,
          rules: [move_rate: nil]
        ] ++ extra
      )

    {:ok, sup, name}
  end

  defp settled_memory do
    for pid <- Process.list(), do: :erlang.garbage_collect(pid)
    :erlang.memory(:total)
  end

  defp wait_until(check) do
    unless check.() do
      receive do
      after
        100 -> wait_until(check)
      end
    end
  end

  defp mb(bytes), do: "#{Float.round(bytes / 1_048_576, 1)} MB"
  defp per(bytes, n), do: "#{Float.round(bytes / n / 1024, 2)} KiB"

  defp ms([], _), do: "-"

  defp ms(us, percentile) do
    sorted = Enum.sort(us)
    index = min(length(sorted) - 1, max(0, ceil(length(sorted) * percentile / 100) - 1))
    "#{Float.round(Enum.at(sorted, index) / 1000, 2)} ms"
  end
end
