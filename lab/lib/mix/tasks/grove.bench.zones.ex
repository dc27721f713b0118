defmodule Mix.Tasks.Grove.Bench.Zones do
  @shortdoc "Zones on demand: start time, memory per zone awake and asleep, moves into sleeping zones"

  @moduledoc """
  What zones on demand (`zones: :on_demand`) cost and save, in one run:

    1. **Start.** Worlds of every zone running and of zones on demand, at
       1,000, 100,000 and 1,000,000 cells a side: the time
       `Grove.World.start_link/1` takes, the memory the world holds once
       it has, and the memory of the whole VM then (the world's idle
       figure: no zone runs).
    2. **Memory per zone.** In a world of a million cells a side in zones
       of 50, `--wake` zones (100,000 unless told) woken at once: the
       memory each takes awake (started, empty), what is left once they
       have been put to sleep and have stopped, and, for `--held` zones
       (10,000) that sleep holding an actor each (no store: their tables
       stay), what each of those keeps.
    3. **Moves into sleeping zones.** Walkers walk straight east, a step
       every `--step-ms`, across a world whose every other column of zones
       was woken beforehand: each move is timed from `Grove.World.move/4`
       to its outcome, and counted as a move inside a zone, a move across
       into a zone awake from the start, or a move across into a zone
       asleep when the walk began. The walkers of every other row of
       zones start one zone further east, so that each time the walkers
       cross a border together, half of them cross into an awake zone and
       half into a sleeping one: the two kinds share every burst of
       crossings, the first one (the tightest, while the world settles)
       included. Of the moves into sleeping zones, those that found the
       zone not yet running (woken by the move itself) are counted apart.
       Twice: zones woken only by what is sent to them (`wake_ahead: 0`),
       then woken ahead of the walkers (`wake_ahead: 4`, the default).

      mix grove.bench.zones --walkers 500 --seconds 40

  Options: `--walkers N` (default 500), `--seconds S` of walking (default
  40), `--step-ms MS` (default 200: five steps a second), `--wake N`
  (default 100000), `--held N` (default 10000), `--only start,memory,moves`
  (default all three). Walkers and world share the VM: run it alone on the
  machine, and read the moves across zones side by side, as a ratio.
  """

  use Mix.Task

  alias Grove.World
  alias Grove.World.Grid

  @switches [
    walkers: :integer,
    seconds: :integer,
    step_ms: :integer,
    wake: :integer,
    held: :integer,
    only: :string
  ]
  @meadow [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]

  @impl true
  def run(args) do
    opts = Mix.Grove.parse!(args, @switches, "grove.bench.zones")
    Application.put_env(:grove, :start, false)
    Mix.Task.run("app.start")
    Logger.configure(level: :warning)

    parts = String.split(Keyword.get(opts, :only, "start,memory,moves"), ",")

    if "start" in parts, do: starts()

    if "memory" in parts,
      do: memory_per_zone(Keyword.get(opts, :wake, 100_000), Keyword.get(opts, :held, 10_000))

    for ahead <- [0, 4], "moves" in parts do
      moves(
        Keyword.get(opts, :walkers, 500),
        Keyword.get(opts, :seconds, 40),
        Keyword.get(opts, :step_ms, 200),
        ahead
      )
    end
  end

  ## 1. Start

  defp starts do
    Mix.shell().info("\n## Start: time and memory once started")

    Mix.shell().info(
      "| world | zones | running at start | start | memory after start | VM memory, idle |"
    )

    Mix.shell().info("| --- | --- | --- | --- | --- | --- |")

    for {w, h, zone_size} <- [
          {1000, 1000, 50},
          {100_000, 100_000, 50},
          {1_000_000, 1_000_000, 50}
        ],
        mode <- [:always, :on_demand],
        not (mode == :always and w > 1000) do
      :erlang.garbage_collect()
      before = :erlang.memory(:total)
      started = System.monotonic_time(:millisecond)
      {:ok, sup, name} = start_world(w, h, zone_size, mode, 60_000)
      took = System.monotonic_time(:millisecond) - started
      awake = length(World.awake_zones(name))
      total = settled_memory()
      memory = total - before
      zones = Grid.zone_count(World.grid(name))
      Supervisor.stop(sup)

      Mix.shell().info(
        "| #{w} x #{h}, zones of #{zone_size}, #{mode} | #{zones} | #{awake} | #{took} ms | " <>
          "#{mb(memory)} | #{mb(total)} |"
      )
    end
  end

  ## 2. Memory per zone, awake and asleep

  defp memory_per_zone(count, held) do
    # Ground all meadow, made at once: the zones' cost, not their ground's.
    {:ok, sup, name} =
      start_world(1_000_000, 1_000_000, 50, :on_demand, :manual,
        handoff_timeout: 200,
        terrain: [generator: Grove.Bench.Meadow]
      )

    world = World.fetch!(name)
    grid = world.grid
    # Zones a few apart, on rows across the world.
    zones = Enum.map(0..(count - 1)//1, &(div(&1, 1000) * 37 * grid.zones_x + rem(&1, 1000) * 19))

    base = settled_memory()
    started = System.monotonic_time(:millisecond)
    wake_all(world, zones)
    took = System.monotonic_time(:millisecond) - started
    awake_count = length(World.awake_zones(name))
    awake = settled_memory()

    processes =
      Enum.sum(for index <- zones, pid = World.zone_pid(world, index), do: process_memory(pid))

    slept = World.sleep_idle(name, 600_000)
    # Each lingers for `handoff_timeout`, then stops.
    wait_until(fn -> World.awake_zones(name) == [] end)
    asleep = settled_memory()
    known = Grove.World.Slots.count(world)

    # Zones that sleep holding an actor each, in a world without a store:
    # their tables (and counters) stay.
    cells = for index <- Enum.take(zones, held), do: zone_origin(grid, index + 3)
    before_held = settled_memory()
    for cell <- cells, do: {:ok, _id, _} = World.join(name, at: cell, updates: :none)
    World.sleep_idle(name, 600_000)
    wait_until(fn -> World.awake_zones(name) == [] end)
    held_memory = settled_memory() - before_held
    Supervisor.stop(sup)

    Mix.shell().info(
      "\n## Memory per zone (1000000 x 1000000 in zones of 50, on demand, 400000000 zones)"
    )

    Mix.shell().info(
      "#{awake_count} zones awake at once (woken in #{took} ms): " <>
        "#{per(awake - base, count)} more memory each " <>
        "(#{per(processes, count)} of it the zone's process); " <>
        "#{length(slept)} put to sleep, holding nothing: #{per(asleep - base, count)} each " <>
        "more than before they woke, #{known} of them still known; " <>
        "#{length(cells)} asleep holding an actor each (no store, so their tables stay): " <>
        "#{per(held_memory, length(cells))} each"
    )
  end

  # From several processes at once, as players' moves would: each wake
  # goes through the one supervisor of zones on demand.
  defp wake_all(world, zones) do
    zones
    |> Enum.chunk_every(max(div(length(zones), 8), 1))
    |> Enum.map(fn chunk ->
      Task.async(fn -> for index <- chunk, do: World.zone_address(world, index) end)
    end)
    |> Task.await_many(:infinity)
  end

  defp zone_origin(grid, index) do
    {x0, y0, _x1, _y1} = Grid.zone_bounds(grid, index)
    {x0 + 1, y0 + 1}
  end

  defp process_memory(pid) do
    case Process.info(pid, :memory) do
      {:memory, bytes} -> bytes
      nil -> 0
    end
  end

  ## 3. Moves across into zones awake and asleep

  defp moves(walkers, seconds, step_ms, ahead) do
    zone_size = 20
    width = 20_000
    rows = walkers * 2

    {:ok, sup, name} = start_world(width, rows, zone_size, :on_demand, :manual, wake_ahead: ahead)

    world = World.fetch!(name)
    columns = div(width, zone_size)

    # Every other column of zones along the walkers' rows runs already.
    for row <- 0..(div(rows, zone_size) - 1),
        column <- 0..(columns - 1)//2,
        do: World.zone_address(world, row * columns + column)

    Mix.shell().info(
      "\n## Moves, wake_ahead: #{ahead} (#{walkers} walkers east at one step per #{step_ms} ms " <>
        "for #{seconds} s, #{width} x #{rows} in zones of #{zone_size}, every other column " <>
        "woken first)"
    )

    parent = self()
    deadline = System.monotonic_time(:millisecond) + seconds * 1000

    # In the same steps, walkers of even rows of zones cross into sleeping
    # columns as those of odd rows cross into awake ones, and the other
    # way round: had they all started in the same column, the moves into
    # sleeping zones would have had the first crossing, the slowest for
    # both kinds, to themselves.
    pids =
      for n <- 0..(walkers - 1) do
        start = {1 + rem(div(n * 2, zone_size), 2) * zone_size, n * 2}

        spawn_link(fn ->
          {:ok, id, _} = World.join(world, at: start, updates: :none)
          send(parent, {:times, walk(world, id, start, step_ms, deadline, 1, [])})
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

    # A move into a zone asleep when the walk began, whether or not it was
    # woken before the move came; then those that woke it themselves.
    for {label, kinds} <- [
          inside: [:inside],
          into_awake: [:into_awake],
          into_asleep: [:into_asleep, :into_asleep_cold],
          of_which_woken_by_the_move: [:into_asleep_cold]
        ] do
      us = for {kind, t, _step} <- times, kind in kinds, do: t

      Mix.shell().info(
        "| #{label} | #{length(us)} | #{ms(us, 50)} | #{ms(us, 99)} | #{ms(us, 100)} |"
      )
    end

    # Walkers cross borders together: a kind's p99 is its slowest
    # crossing's, so each crossing's is shown for both kinds.
    crossings =
      for {step, moves} <- Enum.group_by(times, &elem(&1, 2), &Tuple.delete_at(&1, 2)),
          into_awake = for({:into_awake, t} <- moves, do: t),
          into_asleep = for({kind, t} <- moves, kind in [:into_asleep, :into_asleep_cold], do: t),
          into_awake != [] or into_asleep != [],
          do: {step, "step #{step}: #{ms(into_awake, 99)} / #{ms(into_asleep, 99)}"}

    Mix.shell().info(
      "p99 by crossing, into_awake / into_asleep: " <>
        Enum.map_join(Enum.sort(crossings), "; ", &elem(&1, 1))
    )

    errors = for {{:error, _} = kind, _, _} <- times, do: kind

    Mix.shell().info(
      "refused or lost: #{length(errors)}; zones woken: #{stats.zone_wakes}, " <>
        "of them ahead of a walker: #{stats.zone_wakes_ahead}"
    )
  end

  defp walk(world, id, {x, y}, step_ms, deadline, step, times) do
    now = System.monotonic_time(:millisecond)

    if now >= deadline do
      times
    else
      grid = world.grid
      from = Grid.zone_of(grid, x, y)
      to = Grid.zone_of(grid, x + 1, y)

      # Even columns were woken before the walk; odd ones slept then, and
      # may have been woken since, ahead of the walkers.
      kind =
        cond do
          from == to -> :inside
          rem(rem(to, grid.zones_x), 2) == 0 -> :into_awake
          World.zone_pid(world, to) != nil -> :into_asleep
          true -> :into_asleep_cold
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

      walk(world, id, cell, step_ms, deadline, step + 1, [{kind, took, step} | times])
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
          rules: [move_rate: nil]
        ] ++ Keyword.put_new(extra, :terrain, @meadow)
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
