defmodule Mix.Tasks.Grove.Bench.Names do
  @shortdoc "What a move costs with players named and without, side by side"

  @moduledoc """
  Players' names travel once per player and area (in a `names` frame
  before the `area` that brings them in), never with their moves. This
  bench measures what that costs a move: one world, the same walkers
  walking the same random walks (the same seed), in rounds that alternate
  between walkers without names and walkers with names, while viewers in
  the gateway's formats (binary and JSON frames) watch every zone and read
  every delta. Per move it reports the bytes the viewers were handed (and
  of those, the names), and the VM's CPU time.

      mix grove.bench.names --walkers 400 --seconds 10 --rounds 2

  Options: `--walkers N` (default 400), `--seconds S` per round (default
  10), `--rounds N` of each kind (default 2), `--tick MS` (default 100).
  The world is 200 x 200 in zones of 50 (16 zones); each walker steps once
  a tick, so it crosses from zone to zone now and then, and is named anew
  where it arrives.
  """

  use Mix.Task

  alias Grove.World

  @switches [walkers: :integer, seconds: :integer, rounds: :integer, tick: :integer]
  @instance BenchNames
  @formats [
    Grove.Gateway.Frames.view_format(:binary, 4),
    Grove.Gateway.Frames.view_format(:json, 4)
  ]
  @directions [:n, :ne, :e, :se, :s, :sw, :w, :nw]

  @impl true
  def run(args) do
    opts = Mix.Grove.parse!(args, @switches, "grove.bench.names")

    Application.put_env(:grove, :start, false)
    Mix.Task.run("app.start")
    Logger.configure(level: :warning)

    walkers = Keyword.get(opts, :walkers, 400)
    seconds = Keyword.get(opts, :seconds, 10)
    rounds = Keyword.get(opts, :rounds, 2)
    tick = Keyword.get(opts, :tick, 100)

    {:ok, _} =
      Grove.start_link(
        name: @instance,
        world: [
          width: 200,
          height: 200,
          zone_size: 50,
          # A tile a zone: the viewers below watch whole zones.
          view_tile: 50,
          tick: tick,
          life: false,
          terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
          rules: [move_rate: nil]
        ],
        actors: [count: 0],
        gateway: false,
        status_interval: false
      )

    world = Grove.world(@instance)
    viewers = start_viewers(world)

    Mix.shell().info(
      "#{walkers} walkers, a step each per #{tick} ms tick, on 200 x 200 in 16 zones; " <>
        "#{length(viewers)} viewers read every zone in binary and JSON; " <>
        "#{rounds} rounds of #{seconds} s each, unnamed and named in turn"
    )

    results =
      for round <- 1..rounds, named <- [false, true] do
        result = walk(world, viewers, walkers, named, seconds, tick)
        Mix.shell().info("round #{round}, #{label(named)}: #{summary(result)}")
        Map.put(result, :named, named)
      end

    report(results)
  end

  # One viewer per zone and format, each standing still at its zone's
  # centre with a radius that sees only its own zone.
  defp start_viewers(world) do
    grid = World.grid(world)

    for zone <- 0..(World.Grid.zone_count(grid) - 1), {format, n} <- Enum.with_index(@formats) do
      {x0, y0, _, _} = World.Grid.zone_bounds(grid, zone)

      pid =
        spawn_link(fn ->
          {:ok, _id, _cell} =
            World.join(world,
              at: {x0 + 25 + n, y0 + 25},
              updates: :view,
              view_radius: 8,
              view_format: format,
              kind: :player
            )

          viewer(world, format, %{}, %{bytes: 0, names: 0})
        end)

      pid
    end
  end

  # Keeps each zone's number, reads on from it whenever asked, and counts
  # the bytes of every frame it is handed, names frames apart.
  defp viewer(world, format, seqs, counts) do
    receive do
      # The gateway's formats are read by tile; here a tile is a zone.
      {:grove_view, zone, :subscribed, _seq} ->
        :ok = World.request_tiles(world, zone, format, [zone])
        viewer(world, format, seqs, counts)

      {:grove_view, zone, :tiles, seq, _frames} ->
        viewer(world, format, Map.put(seqs, zone, seq), counts)

      {:grove_view, zone, :closed} ->
        viewer(world, format, Map.delete(seqs, zone), counts)

      :read ->
        {seqs, counts} =
          Enum.reduce(seqs, {seqs, counts}, fn {zone, seq}, {seqs, counts} ->
            case World.view_deltas(world, zone, seq, format) do
              {rows, latest} ->
                frames = for row <- rows, {_tile, frame} <- row, do: frame
                {Map.put(seqs, zone, latest), Enum.reduce(frames, counts, &count/2)}

              :gone ->
                {seqs, counts}
            end
          end)

        viewer(world, format, seqs, counts)

      {:take, from} ->
        send(from, {:counts, counts})
        viewer(world, format, seqs, %{bytes: 0, names: 0})
    end
  end

  # A frame with names is a list: the names frame, then the area frame.
  defp count([names | area], counts) when is_binary(names),
    do: %{
      counts
      | bytes: counts.bytes + byte_size(names) + IO.iodata_length(area),
        names: counts.names + byte_size(names)
    }

  defp count(frame, counts), do: %{counts | bytes: counts.bytes + IO.iodata_length(frame)}

  # Walkers join (named or not) with the same seed every round, step at
  # every tick for `seconds`, then leave.
  defp walk(world, viewers, walkers, named, seconds, tick) do
    :rand.seed(:exsss, {7, 7, 7})
    take(viewers)

    ids =
      for n <- 1..walkers do
        label = if named, do: {"Walker #{n} #{String.duplicate("🌳", rem(n, 3))}", "🦊"}
        {:ok, id, cell} = World.join(world, kind: :player, label: label, updates: :none)
        {id, zone_of(world, cell)}
      end

    {cpu_before, _} = :erlang.statistics(:runtime)
    started = System.monotonic_time(:millisecond)
    deadline = started + seconds * 1000
    {moves, crossings} = steps(world, viewers, Map.new(ids), deadline, tick, {0, 0})
    {cpu_after, _} = :erlang.statistics(:runtime)
    read(viewers)
    counts = take(viewers)
    for {id, _zone} <- ids, do: World.leave(world, id)
    drain()

    %{
      moves: moves,
      crossings: crossings,
      bytes: Enum.sum(Enum.map(counts, & &1.bytes)),
      names: Enum.sum(Enum.map(counts, & &1.names)),
      cpu_ms: cpu_after - cpu_before
    }
  end

  defp zone_of(world, {x, y}), do: World.Grid.zone_of(World.grid(world), x, y)

  # Each walker a step a tick; counts the moves made and those that took
  # a walker into another zone (where it is named anew).
  defp steps(world, viewers, zones, deadline, tick, {moves, crossings}) do
    now = System.monotonic_time(:millisecond)

    if now >= deadline do
      {moves, crossings}
    else
      batch = for {id, _zone} <- zones, do: {id, Enum.random(@directions), :step}
      :ok = World.move_many(world, batch)
      made = await(length(batch), [])

      {zones, crossed} =
        Enum.reduce(made, {zones, 0}, fn {id, cell}, {zones, crossed} ->
          zone = zone_of(world, cell)
          {Map.put(zones, id, zone), crossed + if(zones[id] == zone, do: 0, else: 1)}
        end)

      read(viewers)
      Process.sleep(max(tick - (System.monotonic_time(:millisecond) - now), 0))
      steps(world, viewers, zones, deadline, tick, {moves + length(made), crossings + crossed})
    end
  end

  # Every move's outcome; the cells of the moves that were made.
  defp await(n, made) when n <= 0, do: made

  defp await(n, made) do
    receive do
      {:grove_moves, outcomes} -> await(n - length(outcomes), cells(outcomes, made))
      {:grove_move, id, tag, outcome} -> await(n - 1, cells([{id, tag, outcome}], made))
    after
      5000 -> made
    end
  end

  defp cells(outcomes, made),
    do: for({id, _tag, {:ok, cell}} <- outcomes, reduce: made, do: (acc -> [{id, cell} | acc]))

  defp drain do
    receive do
      {:grove_move, _, _, _} -> drain()
      {:grove_moves, _} -> drain()
    after
      0 -> :ok
    end
  end

  defp read(viewers) do
    for viewer <- viewers, do: send(viewer, :read)
  end

  defp take(viewers) do
    for viewer <- viewers do
      send(viewer, {:take, self()})
      receive(do: ({:counts, counts} -> counts))
    end
  end

  defp label(true), do: "named"
  defp label(false), do: "unnamed"

  defp summary(result) do
    "#{result.moves} moves (#{result.crossings} into another zone), " <>
      "#{per(result.bytes - result.names, result.moves)} bytes of areas a move to the viewers, " <>
      "#{per(result.names, result.crossings)} bytes of names a crossing, " <>
      "#{per(result.cpu_ms * 1000, result.moves)} µs of CPU a move"
  end

  defp per(_value, 0), do: 0
  defp per(value, count), do: Float.round(value / count, 2)

  defp report(results) do
    totals = fn named ->
      results
      |> Enum.filter(&(&1.named == named))
      |> Enum.reduce(%{moves: 0, crossings: 0, bytes: 0, names: 0, cpu_ms: 0}, fn result, acc ->
        Map.new(acc, fn {key, value} -> {key, value + result[key]} end)
      end)
    end

    row = fn label, t ->
      "| #{label} | #{t.moves} | #{t.crossings} | #{per(t.bytes - t.names, t.moves)} | " <>
        "#{per(t.names, t.crossings)} | #{per(t.bytes, t.moves)} | #{per(t.cpu_ms * 1000, t.moves)} |"
    end

    {plain, named} = {totals.(false), totals.(true)}
    ratio = fn f -> Float.round(f.(named) / max(f.(plain), 1.0e-9), 3) end

    Mix.shell().info("""

    | walkers | moves | into another zone | bytes of areas a move | bytes of names a crossing | bytes a move, all | µs of CPU a move |
    | --- | ---: | ---: | ---: | ---: | ---: | ---: |
    #{row.("unnamed", plain)}
    #{row.("named", named)}
    | named / unnamed | | | #{ratio.(&per(&1.bytes - &1.names, &1.moves))} | | #{ratio.(&per(&1.bytes, &1.moves))} | #{ratio.(&per(&1.cpu_ms * 1000, &1.moves))} |
    """)
  end
end
