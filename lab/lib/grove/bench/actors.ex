defmodule Grove.Bench.Actors do
  @moduledoc """
  The in-VM actor bench behind `mix grove.bench.actors`: N actors walking a
  world through the public client API, measured from the client side.

  A run starts a fresh world, a probe client that moves every 50 ms with
  `move/4` as a player would (to show whether the world keeps answering
  players while the actors join and all through the run), then the actors.
  Once all have joined it waits a few seconds, measures for `:duration`
  seconds, stops the actors, waits for the outcomes in flight and checks the
  world for lost or duplicated entities.

  From the moment the actors start joining (t = 0), a line every `:every`
  seconds gives the curve: actors joined, moves answered and skipped a
  second, the round trip's p50 and p99, errors, the probe's longest round
  trip, moves in flight, memory,
  the run queue, the longest zone and herd mailboxes, how busy the
  schedulers were, how much of the machine's cores other OS processes
  took (`Grove.Load.Cpu`: on a shared machine, what bends a figure from
  outside), and whether the hog ran. The report ends with the same
  lines as a Markdown table.

  With `:hog` (a number of OS processes that spin, `Grove.Load.Hog`), the
  hogs run from `:hog_from` seconds for `:hog_for` seconds (to the end
  without it), on the same clock, so a run shows the world before, under
  and after the pressure. They are stopped at the end of the run whatever
  happens, and with the VM if it dies.

  `ramp/1` instead raises the number of actors stage by stage until the p99
  round trip passes `:limit_ms` or errors appear, and reports the knee: the
  last stage that passed.

  The design `:act` is Grove with a game whose one action is as cheap as
  an action gets (`Grove.Bench.Actors.Poke`: one attribute added to),
  walked by actors that act instead of moving, each step a `poke` where
  they stand: beside `:grove`, what an action costs next to a move. Its
  answers are counted as moves are (`acted`, or the game's refusals).

  Both can run a design side by side with Grove: `:baseline` is
  `Grove.Bench.Baseline`, the whole world in one GenServer with a
  synchronous call per move, walked by one process per actor as in the blog
  it models.

  With `:peers` (nodes already connected that run the `:grove`
  application, as `Grove.Bench.Cluster` starts them), the world runs on
  this node and the peers, clustered: a Grove instance on each (no
  gateway, store or status line), the zones placed by the cluster, and
  every node walking its share of the actors from its own herds. The
  counts are every node's added up; the report adds the share of the
  moves sent to a zone on another node, the bytes a second on the
  distribution connections to the peers, and how busy each node's
  schedulers were. The probe, the mailboxes sampled and the curve's
  memory and run queue are this node's.

  Errors are every outcome other than a move or a rule's rejection (blocked,
  occupied, out of bounds): busy, rate limited, not owner, unknown entity,
  timeouts (no outcome within 5 s), outcomes that never came, and joins that
  failed.
  """

  import Grove.Load.Report, only: [figure: 1]
  import Grove.Metrics.Histogram, only: [to_ms: 1]

  alias Grove.{Actors, World}
  alias Grove.Actors.Stats
  alias Grove.Bench.Baseline
  alias Grove.Load.{Cpu, Hog}
  alias Grove.Metrics.Histogram

  @timeout_us 5_000_000
  @rule_rejections [:blocked, :occupied, :out_of_bounds]
  @error_outcomes [:busy, :rate_limited, :not_owner, :unknown_entity, :timeout] ++
                    [:interrupted, :unknown_action, :bad_args, :out_of_reach, :disabled]

  @defaults [
    actors: 250_000,
    duration: 60,
    warmup: 5,
    ramp_warmup: 3,
    every: 5,
    width: 1000,
    height: 1000,
    zone_size: 50,
    seed: 1,
    interval: 1000,
    per_herd: 500,
    batch: true,
    limit_ms: 100,
    start: 25_000,
    step: 25_000,
    stage: 10,
    max: 2_000_000,
    join_timeout: 120,
    max_in_flight: nil,
    target_ms: nil,
    late_ms: nil,
    resolution: nil,
    zone_min_heap: nil,
    herd_min_heap: nil,
    hog: 0,
    hog_from: 0,
    hog_for: nil,
    life: false,
    act: false,
    resident: false,
    peers: [],
    out: &IO.puts/1
  ]

  @doc "Options with their defaults; see `mix help grove.bench.actors`."
  @spec defaults() :: keyword()
  def defaults, do: @defaults

  @doc "One measured run of a design (`:grove`, `:act` or `:baseline`); returns its report."
  @spec run(:grove | :act | :baseline, keyword()) :: map()
  def run(design, opts) do
    opts = Keyword.validate!(opts, @defaults)

    with_design(design, opts, fn bench ->
      probe = start_probe(bench)
      ticker = start_ticker(bench, probe, opts)

      hog =
        if opts[:hog] > 0,
          do: Hog.plan(opts[:hog], from: opts[:hog_from], for: opts[:hog_for])

      try do
        startup = populate(bench, opts[:actors], opts, ticker, probe)
        phase(ticker, :warmup)
        settle(opts[:warmup])
        phase(ticker, :measure)
        life_first = life_reading(bench, probe)
        window = measure(bench, opts[:duration], opts)
        life = life_report(bench, life_first, life_reading(bench, probe))
        windows = stop_ticker(ticker)
        if hog, do: Hog.cancel(hog)
        stop_probe(probe)

        finish(bench, window, startup, opts[:actors], Keyword.put(opts, :life_report, life))
        |> Map.merge(%{windows: windows, hog: hog_report(opts), life: life})
        |> tap(&print_windows(&1, opts))
      after
        if hog, do: Hog.cancel(hog)
      end
    end)
  end

  defp hog_report(opts) do
    if opts[:hog] > 0,
      do: %{processes: opts[:hog], from_s: opts[:hog_from], for_s: opts[:hog_for]}
  end

  @doc """
  Raises the number of actors stage by stage and reports the knee. Each stage
  is a fresh world with all its actors started at once, so a stage at N
  actors measures the same thing as a run with N actors.
  """
  @spec ramp(:grove | :act | :baseline, keyword()) :: map()
  def ramp(design, opts) do
    opts = Keyword.validate!(opts, @defaults)

    if opts[:hog] > 0,
      do: raise(ArgumentError, "a ramp runs without a hog; give a number of actors instead")

    stages = ramp_stages(design, opts, opts[:start], [])
    passed = Enum.filter(stages, & &1.passed)
    knee = if passed == [], do: 0, else: List.last(passed).actors
    opts[:out].("[#{design}] knee: #{knee} actors (p99 limit #{opts[:limit_ms]} ms, no errors)")

    # The knee's own figures at the top, so a ramp report reads like a run's.
    at_knee = if passed == [], do: List.first(stages), else: List.last(passed)

    at_knee
    |> Map.drop([:passed])
    |> Map.merge(%{design: design, knee: knee, limit_ms: opts[:limit_ms], stages: stages})
  end

  defp ramp_stages(design, opts, actors, stages) do
    if actors > opts[:max] do
      Enum.reverse(stages)
    else
      stage = ramp_stage(design, opts, actors)

      if stage.passed,
        do: ramp_stages(design, opts, actors + opts[:step], [stage | stages]),
        else: Enum.reverse([stage | stages])
    end
  end

  defp ramp_stage(design, opts, actors) do
    with_design(design, opts, fn bench ->
      probe = start_probe(bench)
      ticker = start_ticker(bench, probe, opts)
      startup = populate(bench, actors, opts, ticker, probe)
      phase(ticker, :warmup)
      settle(opts[:ramp_warmup])
      phase(ticker, :measure)
      window = measure(bench, opts[:stage], opts)
      stop_ticker(ticker)
      stop_probe(probe)
      stage = bench |> summarize(window, actors, opts) |> Map.put(:startup_ms, startup.ms)

      passed =
        stage.p99_ms != nil and stage.p99_ms <= opts[:limit_ms] and stage.errors == 0 and
          startup.failed == 0 and stage.moves_per_s >= 0.9 * stage.target_moves_per_s

      opts[:out].(
        "[#{design}] stage #{actors} actors: #{stage.moves_per_s} moves/s, " <>
          "p99 #{figure(stage.p99_ms)} ms, errors #{stage.errors} -> #{if passed, do: "pass", else: "past the knee"}"
      )

      Map.put(stage, :passed, passed)
    end)
  end

  ## A design under test

  defp with_design(design, opts, fun) do
    memory_before = :erlang.memory(:total)
    name = :"Grove.Bench.#{design}.#{System.unique_integer([:positive])}"
    started = System.monotonic_time(:millisecond)
    {:ok, sup} = Supervisor.start_link([], strategy: :one_for_one)

    try do
      bench = start_design(design, name, sup, opts)
      ready_ms = System.monotonic_time(:millisecond) - started
      opts[:out].("[#{design}] world #{opts[:width]}x#{opts[:height]} ready in #{ready_ms} ms")
      bench = %{bench | memory_before: memory_before}
      fun.(bench)
    after
      Supervisor.stop(sup, :normal, :infinity)
      if design == :baseline, do: :persistent_term.erase({Baseline, name})
      stop_peer_instances(opts[:peers], name)
    end
  end

  defp start_design(:grove, name, sup, opts) do
    if opts[:peers] == [],
      do: start_world(name, sup, opts),
      else: start_cluster(name, sup, opts)
  end

  defp start_design(:act, name, sup, opts) do
    if opts[:peers] != [],
      do: raise(ArgumentError, "the action bench runs on one node, give no :peers")

    start_world(name, sup, Keyword.put(opts, :act, true))
  end

  defp start_design(:baseline, name, sup, opts) do
    if opts[:peers] != [],
      do:
        raise(ArgumentError, "the baseline is one GenServer: it runs on one node, give no :peers")

    start_baseline(name, sup, opts)
  end

  defp start_world(name, sup, opts) do
    world = :"#{name}.World"

    world_opts =
      [
        name: world,
        width: opts[:width],
        height: opts[:height],
        zone_size: opts[:zone_size],
        seed: opts[:seed],
        life: opts[:life]
      ] ++ process(:zone_process, opts[:zone_min_heap])

    # With `:act`, a game and actors that play it: a poke each step.
    {world_opts, kinds} =
      if opts[:act],
        do:
          {world_opts ++ [game: Grove.Bench.Actors.Poke],
           [kinds: [{Grove.Bench.Actors.Poker, 0}]]},
        else: {world_opts, []}

    {:ok, _} = Supervisor.start_child(sup, {World, world_opts})

    actors = [name: :"#{name}.Actors", world: world] ++ kinds ++ actor_options(opts)
    {:ok, _} = Supervisor.start_child(sup, {Actors, actors})

    # Resident walkers (`Grove.Actors`' `:resident`) are stepped by their
    # zones and answered to no one: their steps are read from the world's
    # counters (the probe's few among them), their skipped steps are those
    # their zones skipped, and the round trip is the probe's, a player's
    # move beside them.
    probe_latency = if opts[:resident], do: Histogram.new()

    read =
      if opts[:resident],
        do: fn -> resident_reading(world, actors[:name], probe_latency) end

    # Residents are stopped by their zones, before the audit.
    pause =
      if opts[:resident],
        do: fn ->
          Actors.pause(actors[:name])
          World.halt_walks(world)
        end

    new_bench(if(opts[:act], do: :act, else: :grove), World, world, actors[:name], sup,
      read: read,
      pause: pause,
      probe_latency: probe_latency,
      queues: fn ->
        for i <- 0..(tuple_size(World.fetch!(world).zones) - 1), do: World.zone_pid(world, i)
      end,
      count: fn -> World.entity_count(world) end,
      audit: fn -> World.audit(world, 60_000) end
    )
  end

  defp start_baseline(name, sup, opts) do
    server_opts = [name: name, width: opts[:width], height: opts[:height], seed: opts[:seed]]
    {:ok, _} = Supervisor.start_child(sup, {Baseline, server_opts})

    # As in the blog: a process per actor, each blocked in its own call.
    actors = [
      name: :"#{name}.Actors",
      world: name,
      api: Baseline,
      interval: opts[:interval],
      per_herd: 1,
      batch: false
    ]

    {:ok, _} = Supervisor.start_child(sup, {Actors, actors})

    new_bench(:baseline, Baseline, name, actors[:name], sup,
      queues: fn -> [Process.whereis(name)] end,
      count: fn -> Baseline.entity_count(name) end,
      audit: fn -> Baseline.audit(name) end
    )
  end

  defp actor_options(opts) do
    # The herds' own defaults unless the run names them.
    named =
      for key <- [:max_in_flight, :target_ms, :late_ms, :resolution],
          opts[key] != nil,
          do: {key, opts[key]}

    [
      interval: opts[:interval],
      per_herd: opts[:per_herd],
      batch: opts[:batch],
      resident: opts[:resident]
    ] ++ named ++ process(:herd_process, opts[:herd_min_heap])
  end

  # The zones' and herds' first heaps, in words, when the run names them
  # (`Grove.World`'s `:zone_process`, `Grove.Actors`' `:herd_process`).
  defp process(_key, nil), do: []
  defp process(key, words), do: [{key, [min_heap_size: words]}]

  # The world on this node and `:peers`, one Grove instance on each
  # (no gateway, store or status line), clustered: zones placed by the
  # cluster, each node's share of the actors walking from its own herds.
  # Everything is measured from here; the actors' counts are read on every
  # node and added up.
  defp start_cluster(name, sup, opts) do
    instance = cluster_instance(name)
    nodes = Enum.sort([node() | opts[:peers]])
    world = Grove.world(instance)
    actors = Grove.actors(instance)

    instance_opts = [
      name: instance,
      world: [
        width: opts[:width],
        height: opts[:height],
        zone_size: opts[:zone_size],
        seed: opts[:seed],
        life: opts[:life]
      ],
      actors: [count: 0] ++ actor_options(opts),
      gateway: false,
      status_interval: false,
      cluster: [peers: nodes, connect_interval: 100]
    ]

    {:ok, _} = Supervisor.start_child(sup, {Grove, instance_opts})

    for peer <- opts[:peers] do
      {:ok, _} =
        :erpc.call(peer, Supervisor, :start_child, [
          Grove.Application.Supervisor,
          Supervisor.child_spec({Grove, instance_opts}, id: instance)
        ])
    end

    await_placement(world, nodes, System.monotonic_time(:millisecond) + 60_000)

    new_bench(:grove, World, world, actors, sup,
      queues: fn ->
        for i <- 0..(tuple_size(World.fetch!(world).zones) - 1), do: World.zone_pid(world, i)
      end,
      count: fn -> length(World.Audit.residents(World.fetch!(world), 60_000)) end,
      audit: fn -> World.audit(world, 60_000) end,
      peers: opts[:peers],
      read: fn ->
        nodes
        |> Enum.map(&:erpc.call(&1, __MODULE__, :read_actors, [actors]))
        |> Enum.reduce(&add_readings/2)
      end,
      add: fn count -> add_everywhere(actors, nodes, count) end,
      pause: fn -> Enum.each(nodes, &:erpc.call(&1, Actors, :pause, [actors])) end
    )
  end

  defp cluster_instance(name), do: :"#{name}.Grove"

  # Two nodes' readings as one: counts (the in-flight gauge too) added up,
  # round trips merged.
  defp add_readings(a, b) do
    %{
      counts: Map.merge(a.counts, b.counts, fn _key, x, y -> x + y end),
      latency: Histogram.merge(a.latency, b.latency)
    }
  end

  @doc false
  # What one node's actors counted, for a bench that adds up every node's.
  @spec read_actors(atom()) :: map()
  def read_actors(actors), do: Stats.read(Actors.stats(actors))

  # Every node's share of the actors, started on it: herds walk from
  # their own node, wherever the zones of their actors run.
  defp add_everywhere(actors, nodes, count) do
    shares = for i <- 0..(length(nodes) - 1), do: div(count + i, length(nodes))

    Enum.zip(nodes, Enum.reverse(shares))
    |> Enum.flat_map(fn
      {node, share} when node == node() ->
        Actors.add(actors, share)

      # Only this node's herds have mailboxes the ticker can read.
      {node, share} ->
        _ = :erpc.call(node, Actors, :add, [actors, share])
        []
    end)
  end

  # Waits until every node runs the world and all agree where each zone runs.
  defp await_placement(world, nodes, deadline) do
    views = Enum.map(nodes, &placement_view(world, &1))

    cond do
      Enum.all?(views, &is_list/1) and length(Enum.uniq(views)) == 1 and
          Enum.sort(Enum.uniq(hd(views))) == nodes ->
        :ok

      System.monotonic_time(:millisecond) > deadline ->
        raise "the nodes #{inspect(nodes)} did not agree where the zones run within 60 s"

      true ->
        receive do
        after
          100 -> await_placement(world, nodes, deadline)
        end
    end
  end

  defp placement_view(world, node) do
    with true <- :erpc.call(node, World, :ready?, [world]),
         locations when is_list(locations) <- World.Placer.locations(world, node) do
      for {at, _epoch} <- locations, do: at
    else
      _ -> :starting
    end
  catch
    :exit, _ -> :starting
  end

  defp stop_peer_instances(peers, name) do
    for peer <- peers do
      try do
        :erpc.call(peer, Supervisor, :terminate_child, [
          Grove.Application.Supervisor,
          cluster_instance(name)
        ])

        :erpc.call(peer, Supervisor, :delete_child, [
          Grove.Application.Supervisor,
          cluster_instance(name)
        ])
      catch
        # A node gone already took its instance with it.
        _, _ -> :ok
      end
    end
  end

  defp new_bench(design, api, world, actors, sup, funs) do
    stats = fn -> Actors.stats(actors) end

    %{
      design: design,
      api: api,
      world: world,
      actors: actors,
      sup: sup,
      queues: funs[:queues],
      count: funs[:count],
      audit: funs[:audit],
      peers: funs[:peers] || [],
      read: funs[:read] || fn -> Stats.read(stats.()) end,
      probe_latency: funs[:probe_latency],
      add: funs[:add] || (&Actors.add(actors, &1)),
      pause: funs[:pause] || fn -> Actors.pause(actors) end,
      memory_before: 0
    }
  end

  # The counts of resident walkers, as the herds' would read: their
  # steps and refusals from the world's counters, those their zones
  # skipped as late, none in flight; the latency is the probe's, and each
  # step's lateness against its beat (its zone's, in microseconds) is
  # read beside it.
  defp resident_reading(world, actors, probe_latency) do
    reading = Stats.read(Actors.stats(actors))
    world_stats = World.stats(world)

    outcomes =
      Map.new(Stats.outcomes(), &{&1, world_stats[if(&1 == :ok, do: :moves_ok, else: &1)]})

    answered = outcomes |> Map.values() |> Enum.sum()

    counts =
      reading.counts
      |> Map.merge(outcomes)
      |> Map.merge(%{
        sent: answered,
        in_flight: 0,
        stayed: world_stats.resident_stayed,
        skipped_late: world_stats.resident_skipped
      })

    %{
      counts: counts,
      latency: Histogram.snapshot(probe_latency),
      lateness: Histogram.snapshot(World.fetch!(world).resident_lateness)
    }
  end

  ## Start-up

  # Adds actors and waits for them to join; the probe client moves
  # meanwhile to show whether the world keeps answering.
  defp populate(bench, count, opts, ticker, probe) do
    check_process_limit!(bench.design, count)
    before = bench.read.().counts
    probe_before = probe_reading(probe)
    started = System.monotonic_time(:millisecond)
    send(ticker, {:herds, bench.add.(count)})
    deadline = started + opts[:join_timeout] * 1000

    wait_joined(bench, before, count, deadline, opts)
    ms = System.monotonic_time(:millisecond) - started
    counts = bench.read.().counts
    probe_report = probe_report(probe_reading(probe), probe_before)
    failed = counts.join_failed - before.join_failed
    retried = Map.get(counts, :join_retried, 0) - Map.get(before, :join_retried, 0)

    opts[:out].(
      "[#{bench.design}] #{counts.joined - before.joined} actors joined in #{ms} ms " <>
        "(#{failed} failed, #{retried} retried later); probe while joining: p99 #{figure(probe_report.p99_ms)} ms, " <>
        "max #{figure(probe_report.max_ms)} ms, #{probe_report.timeouts} timeouts"
    )

    %{ms: ms, failed: failed, retried: retried, probe: probe_report, joined: counts.joined}
  end

  # The ticker's lines show the joins going on.
  defp wait_joined(bench, before, count, deadline, opts) do
    counts = bench.read.().counts
    done = counts.joined - before.joined + (counts.join_failed - before.join_failed)

    cond do
      done >= count ->
        :ok

      System.monotonic_time(:millisecond) > deadline ->
        opts[:out].("[#{bench.design}] gave up waiting: #{done}/#{count} actors joined")

      true ->
        receive do
        after
          100 -> wait_joined(bench, before, count, deadline, opts)
        end
    end
  end

  # A client of its own, like a player: it moves back and forth every 50 ms
  # with `move/4` and records its round trips in a histogram the ticker
  # reads too, so the world's answer to a player can be judged from outside
  # the actors, while they join and all through the run.
  defp start_probe(bench) do
    histogram = bench[:probe_latency] || Histogram.new()
    timeouts = :counters.new(1, [])

    pid =
      spawn_link(fn ->
        case bench.api.join(bench.world, updates: :none) do
          {:ok, id, _cell} -> probe_loop(bench, id, histogram, timeouts, 0)
          {:error, _} -> receive(do: ({:stop, from} -> send(from, :probe_stopped)))
        end
      end)

    %{pid: pid, histogram: histogram, timeouts: timeouts}
  end

  defp probe_loop(bench, id, histogram, timeouts, n) do
    direction = if rem(n, 2) == 0, do: :e, else: :w
    sent = :erlang.monotonic_time(:microsecond)
    bench.api.move(bench.world, id, direction, n)

    receive do
      {:grove_move, ^id, ^n, {:rejected, :timeout}} ->
        :counters.add(timeouts, 1, 1)

      {:grove_move, ^id, ^n, _outcome} ->
        Histogram.record(histogram, :erlang.monotonic_time(:microsecond) - sent)
    after
      div(@timeout_us, 1000) -> :counters.add(timeouts, 1, 1)
    end

    receive do
      {:stop, from} ->
        bench.api.leave(bench.world, id)
        send(from, :probe_stopped)
    after
      50 -> probe_loop(bench, id, histogram, timeouts, n + 1)
    end
  end

  defp probe_reading(probe),
    do: %{
      latency: Histogram.snapshot(probe.histogram),
      timeouts: :counters.get(probe.timeouts, 1)
    }

  # What the probe saw between two readings.
  defp probe_report(later, earlier) do
    latency = Histogram.diff(later.latency, earlier.latency)

    %{
      p99_ms: to_ms(Histogram.percentile(latency, 99)),
      max_ms: to_ms(Histogram.max(latency)),
      timeouts: later.timeouts - earlier.timeouts
    }
  end

  defp stop_probe(probe) do
    send(probe.pid, {:stop, self()})

    receive do
      :probe_stopped -> :ok
    after
      15_000 -> :ok
    end
  end

  ## Measuring

  defp measure(bench, seconds, _opts) do
    sampler = start_sampler(bench)
    :erlang.system_flag(:scheduler_wall_time, true)
    first = bench.read.()
    scheduler_first = :scheduler.sample()
    cpu_first = Cpu.sample()
    peers_busy = start_peer_utilization(bench, max(seconds, 1))
    network_first = network_bytes(bench)
    memory = :erlang.memory(:total)
    started = System.monotonic_time(:millisecond)

    # The ticker prints the progress; this is the measured window as a whole.
    receive do
    after
      max(seconds, 1) * 1000 -> :ok
    end

    last = bench.read.()
    network_last = network_bytes(bench)
    seconds_measured = (System.monotonic_time(:millisecond) - started) / 1000

    scheduler = :scheduler.utilization(scheduler_first)
    others_percent = Cpu.others_percent(cpu_first, Cpu.sample())
    mailbox_max = stop_sampler(sampler)

    %{
      diff: Stats.diff(last, first),
      # Residents' steps: how late each came against its beat.
      lateness: if(last[:lateness], do: Histogram.diff(last.lateness, first.lateness)),
      seconds: seconds_measured,
      utilization: normal_utilization(scheduler),
      node_utilization:
        Map.put(await_peer_utilization(peers_busy), node(), normal_utilization(scheduler)),
      network_bytes_per_s:
        if(network_first, do: round((network_last - network_first) / seconds_measured)),
      mailbox_max: mailbox_max,
      others_percent: others_percent,
      memory: memory
    }
  end

  # Bytes both ways on the distribution connections to the bench's peers
  # (counted by the ports that carry them), or nil with none.
  defp network_bytes(%{peers: []}), do: nil

  defp network_bytes(%{peers: peers}) do
    for {peer, port} <- :erlang.system_info(:dist_ctrl), peer in peers, reduce: 0 do
      bytes ->
        case :inet.getstat(port, [:send_oct, :recv_oct]) do
          {:ok, stats} -> bytes + stats[:send_oct] + stats[:recv_oct]
          {:error, _} -> bytes
        end
    end
  end

  # How busy the peers' schedulers are over the window, measured on each
  # (`:scheduler.utilization/1` keeps the flag on for as long as it runs).
  defp start_peer_utilization(bench, seconds) do
    for peer <- bench.peers,
        do: {peer, Task.async(fn -> :erpc.call(peer, :scheduler, :utilization, [seconds]) end)}
  end

  defp await_peer_utilization(tasks) do
    Map.new(tasks, fn {peer, task} ->
      {peer, normal_utilization(Task.await(task, :infinity))}
    end)
  end

  ## The curve: a line every few seconds from the first join on

  # A process of high priority, so that its lines come on time when the
  # machine is overloaded, which is when they matter.
  defp start_ticker(bench, probe, opts) do
    parent = self()
    :erlang.system_flag(:scheduler_wall_time, true)

    spawn_link(fn ->
      Process.flag(:priority, :high)
      started = System.monotonic_time(:millisecond)

      state = %{
        bench: bench,
        opts: opts,
        started: started,
        last: bench.read.(),
        last_at: started,
        probe: probe,
        probe_last: probe_reading(probe),
        scheduler: :scheduler.sample(),
        cpu: Cpu.sample(),
        phase: :joining,
        herds: [],
        windows: [],
        parent: parent
      }

      Process.send_after(self(), :tick, opts[:every] * 1000)
      ticker_loop(state)
    end)
  end

  defp ticker_loop(state) do
    receive do
      {:herds, herds} ->
        ticker_loop(%{state | herds: herds})

      {:phase, phase} ->
        ticker_loop(%{state | phase: phase})

      :tick ->
        state = tick(state)
        next = state.started + (length(state.windows) + 1) * state.opts[:every] * 1000
        Process.send_after(self(), :tick, next, abs: true)
        ticker_loop(state)

      {:stop, from} ->
        send(from, {:windows, Enum.reverse(state.windows)})
    end
  end

  defp tick(state) do
    now_ms = System.monotonic_time(:millisecond)
    reading = state.bench.read.()
    scheduler = :scheduler.sample()
    diff = Stats.diff(reading, state.last)
    seconds = max((now_ms - state.last_at) / 1000, 0.001)
    counts = diff.counts
    probe_now = probe_reading(state.probe)
    probe = probe_report(probe_now, state.probe_last)
    cpu = Cpu.sample()

    window = %{
      t: round((now_ms - state.started) / 1000),
      phase: state.phase,
      hog:
        hog_on?(
          state.opts,
          (state.last_at - state.started) / 1000,
          (now_ms - state.started) / 1000
        ),
      joined: reading.counts.joined,
      moves_per_s: round(outcome_total(counts) / seconds),
      skipped_per_s:
        round(Map.get(counts, :skipped_unanswered, 0) / seconds) +
          round(Map.get(counts, :skipped_full, 0) / seconds) +
          round(Map.get(counts, :skipped_late, 0) / seconds),
      p50_ms: to_ms(Histogram.percentile(diff.latency, 50)),
      p99_ms: to_ms(Histogram.percentile(diff.latency, 99)),
      errors: errors(diff),
      probe_max_ms: probe.max_ms,
      probe_timeouts: probe.timeouts,
      in_flight: Map.get(counts, :in_flight, reading.counts.sent - outcome_total(reading.counts)),
      memory_mb: div(:erlang.memory(:total), 1_000_000),
      run_queue: :erlang.statistics(:total_run_queue_lengths),
      zone_queue_max: queue_max(state.bench.queues.()),
      herd_queue_max: queue_max(state.herds),
      scheduler_utilization:
        normal_utilization(:scheduler.utilization(state.scheduler, scheduler)),
      others_percent: Cpu.others_percent(state.cpu, cpu),
      bacteria: bacteria(state.bench)
    }

    state.opts[:out].(window_line(state.bench.design, window))

    %{
      state
      | last: reading,
        last_at: now_ms,
        probe_last: probe_now,
        scheduler: scheduler,
        cpu: cpu,
        windows: [window | state.windows]
    }
  end

  # Whether the hog ran at any time between `from` and `to` seconds: from the
  # plan, so that a line says what the plan was, not what a process got round to.
  # Live bacteria and the world's generation, in a world that has them.
  defp bacteria(%{design: :grove, world: world}) do
    if World.fetch!(world).life,
      do: %{live: World.stats(world).bacteria, generation: World.generation(world)}
  end

  defp bacteria(_bench), do: nil

  defp hog_on?(opts, from, to) do
    opts[:hog] > 0 and to > opts[:hog_from] and
      (opts[:hog_for] == nil or from < opts[:hog_from] + opts[:hog_for])
  end

  defp queue_max(pids) do
    Enum.reduce(pids, 0, fn
      pid, longest when is_pid(pid) ->
        case Process.info(pid, :message_queue_len) do
          {:message_queue_len, n} -> max(n, longest)
          nil -> longest
        end

      _, longest ->
        longest
    end)
  end

  defp window_line(design, w) do
    "[#{design}] #{pad(w.t, 4)} s #{pad(w.phase, 8)} #{pad(w.joined, 8)} joined " <>
      "#{pad(w.moves_per_s, 7)} moves/s #{pad(w.skipped_per_s, 7)} skipped/s  " <>
      "p50 #{pad(figure(w.p50_ms), 8)} p99 #{pad(figure(w.p99_ms), 8)} ms  errors #{pad(w.errors, 7)}  " <>
      "probe max #{pad(figure(w.probe_max_ms), 7)} ms  " <>
      "in flight #{pad(w.in_flight, 7)}  #{pad(w.memory_mb, 5)} MB  run queue #{pad(w.run_queue, 5)}  " <>
      "mailboxes zone #{pad(w.zone_queue_max, 6)} herd #{pad(w.herd_queue_max, 6)}  " <>
      "busy #{pad(round(w.scheduler_utilization * 100), 3)} %  " <>
      "others #{pad(figure(w.others_percent), 5)} %#{if w.hog, do: "  HOG", else: ""}" <>
      bacteria_text(w.bacteria)
  end

  defp bacteria_text(nil), do: ""

  defp bacteria_text(%{live: live, generation: generation}),
    do: "  bacteria #{live} (generation #{generation})"

  defp phase(ticker, phase), do: send(ticker, {:phase, phase})

  defp stop_ticker(ticker) do
    send(ticker, {:stop, self()})

    receive do
      {:windows, windows} -> windows
    end
  end

  defp print_windows(report, opts) do
    out = opts[:out]
    out.("")

    out.(
      "| t s | phase | hog | joined | moves/s | skipped/s | p50 ms | p99 ms | errors | probe max ms | in flight | MB | run queue | zone mailbox | herd mailbox | schedulers busy | other processes % |" <>
        if(report[:life], do: " bacteria (generation) |", else: "")
    )

    out.(
      "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" <>
        if(report[:life], do: " ---: |", else: "")
    )

    for w <- report.windows do
      out.(
        "| #{w.t} | #{w.phase} | #{if w.hog, do: "on", else: ""} | #{w.joined} | #{w.moves_per_s} | " <>
          "#{w.skipped_per_s} | #{figure(w.p50_ms)} | #{figure(w.p99_ms)} | #{w.errors} | " <>
          "#{figure(w.probe_max_ms)}#{if w.probe_timeouts > 0, do: " (#{w.probe_timeouts} timeouts)", else: ""} | #{w.in_flight} | " <>
          "#{w.memory_mb} | #{w.run_queue} | #{w.zone_queue_max} | #{w.herd_queue_max} | " <>
          "#{round(w.scheduler_utilization * 100)} % | #{figure(w.others_percent)} |" <>
          case(w.bacteria,
            do:
              (
                nil -> ""
                %{live: live, generation: generation} -> " #{live} (#{generation}) |"
              )
          )
      )
    end
  end

  # Samples the longest mailbox among the design's serving processes every
  # 100 ms; of high priority, as the ticker, so that it answers when the
  # machine is overloaded (it once did not within 5 s, and the report
  # gave no figure).
  defp start_sampler(bench) do
    parent = self()

    spawn_link(fn ->
      Process.flag(:priority, :high)
      sampler_loop(bench, 0, parent)
    end)
  end

  defp sampler_loop(bench, max_seen, parent) do
    seen =
      bench.queues.()
      |> Enum.map(fn
        pid when is_pid(pid) ->
          case Process.info(pid, :message_queue_len) do
            {:message_queue_len, n} -> n
            nil -> 0
          end

        _ ->
          0
      end)
      |> Enum.max(fn -> 0 end)

    receive do
      {:stop, from} -> send(from, {:mailbox_max, max(seen, max_seen)})
    after
      100 -> sampler_loop(bench, max(seen, max_seen), parent)
    end
  end

  defp stop_sampler(sampler) do
    send(sampler, {:stop, self()})

    receive do
      {:mailbox_max, n} -> n
    after
      5000 -> nil
    end
  end

  ## Reports

  defp finish(bench, window, startup, actors, opts) do
    summary = summarize(bench, window, actors, opts)
    bench.pause.()
    drained = drain(bench)
    lost = drained.sent - outcome_total(drained) - drained.timeout
    {audit, entities} = check_entities(bench)
    joined = drained.joined

    lost_entities = if entities, do: max(joined - entities, 0)
    extra_entities = if entities, do: max(entities - joined, 0)

    report =
      Map.merge(summary, %{
        startup_ms: startup.ms,
        join_failures: startup.failed,
        join_retries: startup.retried,
        startup_probe: startup.probe,
        outcomes_lost: max(lost, 0),
        entities: entities,
        entities_lost: lost_entities,
        entities_extra: extra_entities,
        audit: audit,
        memory_mb: round(window.memory / 1_000_000),
        memory_per_actor_bytes: round((window.memory - bench.memory_before) / max(actors, 1))
      })

    errors = report.errors + report.outcomes_lost + report.join_failures
    report = %{report | errors: errors}
    print_report(report, opts)
    report
  end

  defp summarize(bench, window, actors, opts) do
    %{diff: diff, seconds: seconds} = window
    latency = diff.latency
    timeouts = count_above(latency, @timeout_us) + diff.counts.timeout

    %{
      design: bench.design,
      actors: actors,
      duration_s: Float.round(seconds, 1),
      target_moves_per_s: round(actors * 1000 / opts[:interval]),
      moves_per_s: round(outcome_total(diff.counts) / seconds),
      p50_ms: to_ms(Histogram.percentile(latency, 50)),
      p95_ms: to_ms(Histogram.percentile(latency, 95)),
      p99_ms: to_ms(Histogram.percentile(latency, 99)),
      max_ms: to_ms(Histogram.max(latency)),
      outcomes:
        Map.take(diff.counts, [:ok, :acted, :refused | @rule_rejections ++ @error_outcomes]),
      skipped:
        Map.new([:unanswered, :full, :late], &{&1, Map.get(diff.counts, :"skipped_#{&1}", 0)}),
      timeouts: timeouts,
      errors: errors(diff),
      scheduler_utilization: window.utilization,
      node_utilization: window.node_utilization,
      sent_remote_percent: percent(Map.get(diff.counts, :sent_remote, 0), diff.counts.sent),
      network_bytes_per_s: window.network_bytes_per_s,
      mailbox_max: window.mailbox_max,
      others_percent: window.others_percent,
      resident_lateness_p99_ms:
        if(window[:lateness], do: to_ms(Histogram.percentile(window.lateness, 99))),
      resident_lateness_max_ms: if(window[:lateness], do: to_ms(Histogram.max(window.lateness)))
    }
  end

  # Waits until every move sent has an outcome, or 10 s.
  defp drain(bench, tries \\ 100) do
    counts = bench.read.().counts

    if counts.sent <= outcome_total(counts) or tries == 0 do
      counts
    else
      receive do
      after
        100 -> drain(bench, tries - 1)
      end
    end
  end

  # A world still working through a backlog may not answer in time; that
  # is a finding, not a reason to lose the report.
  # The audit's verdict as the report keeps it (and JSON can carry): `:ok`,
  # or its findings.
  defp check_entities(bench) do
    audit =
      case bench.audit.() do
        :ok -> :ok
        {:error, problems} -> problems
      end

    {audit, bench.count.()}
  catch
    :exit, _reason -> {["the world did not answer the audit in time"], nil}
  end

  ## Bacteria (`:life`)

  defp life_reading(%{design: :grove, world: world}, probe) do
    described = World.fetch!(world)

    if described.life do
      stats = World.stats(world)

      %{
        at: System.monotonic_time(:millisecond),
        generation: World.generation(world) || 0,
        zone_generations: stats.generations,
        births: stats.births,
        deaths: stats.deaths,
        bacteria: stats.bacteria,
        times: Histogram.snapshot(described.life_time),
        probe: probe_reading(probe),
        cells_per_zone:
          described.grid.width * described.grid.height /
            World.Grid.zone_count(described.grid)
      }
    end
  end

  defp life_reading(_bench, _probe), do: nil

  # Generations, cells and times between two readings, and the probe's
  # moves meanwhile.
  defp life_report(_bench, nil, _last), do: nil
  defp life_report(_bench, _first, nil), do: nil

  defp life_report(_bench, first, last) do
    seconds = max((last.at - first.at) / 1000, 0.001)
    times = Histogram.diff(last.times, first.times)
    zone_generations = last.zone_generations - first.zone_generations
    probe = probe_report(last.probe, first.probe)

    %{
      generations_per_s: Float.round((last.generation - first.generation) / seconds, 2),
      zone_generations_per_s: round(zone_generations / seconds),
      cells_per_s: round(zone_generations * first.cells_per_zone / seconds),
      births_per_s: round((last.births - first.births) / seconds),
      deaths_per_s: round((last.deaths - first.deaths) / seconds),
      bacteria_first: first.bacteria,
      bacteria_last: last.bacteria,
      generation_first: first.generation,
      generation_last: last.generation,
      zone_generation_p50_us: Histogram.percentile(times, 50),
      zone_generation_p99_us: Histogram.percentile(times, 99),
      zone_generation_max_us: Histogram.max(times),
      probe_p99_ms: probe.p99_ms,
      probe_max_ms: probe.max_ms
    }
  end

  defp print_life(nil, _out), do: :ok

  defp print_life(life, out) do
    out.(
      "bacteria       #{life.bacteria_first} live at generation #{life.generation_first}, " <>
        "#{life.bacteria_last} at #{life.generation_last}; #{life.births_per_s} births/s, #{life.deaths_per_s} deaths/s"
    )

    out.(
      "generations    #{life.generations_per_s}/s (#{life.zone_generations_per_s} zone generations/s), " <>
        "#{life.cells_per_s} cells updated/s"
    )

    out.(
      "a zone's generation us  p50 #{life.zone_generation_p50_us}  p99 #{life.zone_generation_p99_us}  " <>
        "max #{life.zone_generation_max_us}"
    )

    out.(
      "probe (a player) meanwhile  p99 #{figure(life.probe_p99_ms)} ms, max #{figure(life.probe_max_ms)} ms"
    )
  end

  defp print_report(r, opts) do
    out = opts[:out]
    out.("")
    out.("== #{r.design}: #{r.actors} actors, #{r.duration_s} s measured ==")
    out.("moves/s        target #{r.target_moves_per_s}, achieved #{r.moves_per_s}")

    out.(
      "round trip ms  p50 #{figure(r.p50_ms)}  p95 #{figure(r.p95_ms)}  p99 #{figure(r.p99_ms)}  max #{figure(r.max_ms)}"
    )

    if r.resident_lateness_p99_ms,
      do:
        out.(
          "resident steps late ms (beat due to step taken)  p99 #{figure(r.resident_lateness_p99_ms)}  " <>
            "max #{figure(r.resident_lateness_max_ms)}; the round trip above is the probe's"
        )

    out.("outcomes       #{Enum.map_join(r.outcomes, ", ", fn {k, v} -> "#{k} #{v}" end)}")

    out.(
      "skipped        #{Enum.map_join(r.skipped, ", ", fn {k, v} -> "#{k} #{v}" end)} " <>
        "(#{skipped_share(r)} % of the moves due)"
    )

    out.(
      "timeouts       #{r.timeouts}; outcomes never received #{r.outcomes_lost}; errors #{r.errors}"
    )

    out.(
      "start-up       #{r.startup_ms} ms for #{r.actors} actors, #{r.join_failures} failed joins, " <>
        "#{r.join_retries} retried later; probe p99 #{figure(r.startup_probe.p99_ms)} ms, max #{figure(r.startup_probe.max_ms)} ms, #{r.startup_probe.timeouts} timeouts"
    )

    out.("memory         #{r.memory_mb} MB total, #{r.memory_per_actor_bytes} bytes per actor")
    print_life(opts[:life_report], out)

    out.(
      "schedulers     #{figure(r.scheduler_utilization * 100)} % busy; largest mailbox seen #{r.mailbox_max}"
    )

    if r.others_percent,
      do:
        out.(
          "machine        other processes kept #{figure(r.others_percent)} % of the cores busy while measured " <>
            "(a figure of this VM's only while that stays near 0)"
        )

    if r.network_bytes_per_s do
      busy = Enum.map_join(r.node_utilization, ", ", fn {n, u} -> "#{n} #{figure(u * 100)} %" end)

      out.(
        "cluster        #{r.sent_remote_percent} % of the moves sent to a zone on another node; " <>
          "#{r.network_bytes_per_s} bytes/s between the nodes; schedulers busy: #{busy}"
      )
    end

    out.(
      "entities       #{r.entities} in the world, #{r.entities_lost} lost, #{r.entities_extra} extra; audit #{audit_line(r.audit)}"
    )
  end

  ## Helpers

  defp percent(_part, 0), do: 0.0
  defp percent(part, whole), do: Float.round(part * 100 / whole, 1)

  defp audit_line(:ok), do: "ok"

  defp audit_line(problems),
    do: "#{length(problems)} problems: #{problems |> Enum.take(3) |> Enum.join("; ")}"

  defp skipped_share(r) do
    skipped = r.skipped |> Map.values() |> Enum.sum()
    due = skipped + r.moves_per_s * r.duration_s
    if due > 0, do: figure(Float.round(skipped * 100 / due, 1)), else: "0"
  end

  # Moves' outcomes, and actions' (answered, or refused by the game).
  defp outcome_total(counts) do
    Enum.reduce([:ok, :acted, :refused | @rule_rejections ++ @error_outcomes], 0, fn k, acc ->
      acc + Map.get(counts, k, 0)
    end) -
      Map.get(counts, :timeout, 0)
  end

  defp errors(diff) do
    Enum.reduce(@error_outcomes, 0, fn k, acc -> acc + Map.get(diff.counts, k, 0) end) +
      count_above(diff.latency, @timeout_us)
  end

  defp count_above(snapshot, micros) do
    snapshot
    |> Histogram.buckets()
    |> Enum.filter(fn {edge, _n} -> edge > micros end)
    |> Enum.reduce(0, fn {_edge, n}, acc -> acc + n end)
  end

  defp normal_utilization(samples) do
    normal = for {:normal, _id, util, _} <- samples, do: util
    if normal == [], do: 0.0, else: Float.round(Enum.sum(normal) / length(normal), 3)
  end

  defp settle(seconds) do
    receive do
    after
      seconds * 1000 -> :ok
    end
  end

  # The baseline runs a process per actor; Grove a process per few hundred.
  defp check_process_limit!(design, actors) do
    needed = if design == :baseline, do: actors + 10_000, else: div(actors, 10) + 10_000

    if :erlang.system_info(:process_limit) < needed do
      raise ArgumentError,
            "the VM allows #{:erlang.system_info(:process_limit)} processes, this run needs about #{needed}: " <>
              "run it with ERL_AFLAGS=\"+P 5000000\" (the Makefile sets it)"
    end
  end

  defp pad(value, width), do: String.pad_leading(to_string(value), width)
end
