defmodule Mix.Tasks.Grove.Bench.Failover do
  @shortdoc "Kills one node of three under load and measures how soon its zones serve again"

  @moduledoc """
  Starts a cluster of three nodes on this machine (OTP's `:peer`: three OS
  processes, each with a world and a gateway on a free port, no store),
  `--actors` actors in all (the cluster's total, each node its share),
  and the load lab's WebSocket players (`Grove.Load.WsRun`, its oracle
  checking every outcome) spread over the first two nodes' URLs. Once the
  world is steady it sends `kill -9` to the third node's OS process and
  measures, from the kill:

    * detection: the survivors no longer count the node as a member;
    * placed: every zone it ran is placed on a survivor, whose zone
      process is alive there;
    * serving: a join into each of those zones, from a survivor, gets its
      answer (the probe's entity leaves again at once);
    * restored: the survivors' gateways have welcomed again every player
      whose entity was in those zones (`grove_players_restored_total`);
    * actors: the cluster is back to `--actors` actors, the lost node's
      share started again on the survivors.

  The bytes the three nodes send each other are measured over the steady
  window before the kill (`Grove.Cluster.traffic/0`), in all and per
  player (with `--actors 0`, what the players alone cost between nodes).

  Then, with the survivors' actors paused and their moves answered, and
  the players still connected, `Grove.World.audit/1` on a
  survivor (every entity in one zone, none twice) and the entity counts:
  every player of the load lab in the world once, the actors all back.
  The load lab's report follows (with moves answered, errors and the
  players it saw welcomed again), then one table of the figures. Every
  node is stopped at the end.

      mix grove.bench.failover
      mix grove.bench.failover --actors 20000 --players 300 --steady 20 --observe 40

  Options:

    * `--actors N` - actors in the whole cluster (default 20000)
    * `--players N` - WebSocket players, alternately on the first two
      nodes (default 300)
    * `--ramp N` - players connected per second (default 100)
    * `--steady S` - seconds of steady load before the kill (default 15)
    * `--observe S` - seconds the load goes on after the kill (default 40);
      the audit and the counts are taken within it
    * `--width N`, `--height N`, `--zone-size N` - the world (default the
      default world, 1000 x 1000 in zones of 50)
    * `--check-views N` - players that also check their views (default 100)

  This node becomes distributed under a name of its own (epmd must run or
  be startable); it runs the load and drives the nodes, and is no member
  of the cluster. The cookie is written to a folder of the bench's own,
  the nodes' HOME, never on a command line, and removed with it.
  """

  use Mix.Task

  alias Grove.Load.WsRun
  alias Grove.World

  @switches [
    actors: :integer,
    players: :integer,
    ramp: :integer,
    steady: :integer,
    observe: :integer,
    width: :integer,
    height: :integer,
    zone_size: :integer,
    check_views: :integer
  ]
  @instance BenchFailover
  # Kind code of the probe's entities: neither a player (1) nor an actor
  # (0, or 3 and up for the kinds of `GROVE_ACTOR_KINDS`).
  @probe_kind 255

  @impl true
  def run(args) do
    opts = Mix.Grove.parse!(args, @switches, "grove.bench.failover")

    Application.put_env(:grove, :start, false)
    Mix.Task.run("app.start")
    {:ok, _} = Application.ensure_all_started(:inets)
    Logger.configure(level: :warning)

    actors = Keyword.get(opts, :actors, 20_000)
    players = Keyword.get(opts, :players, 300)
    world_opts = Keyword.take(opts, [:width, :height, :zone_size])

    home =
      Path.join(
        System.tmp_dir!(),
        "grove-bench-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    distributed = Node.alive?()
    File.mkdir_p!(home)

    try do
      started = System.monotonic_time(:millisecond)
      peers = start_nodes!(home, distributed)
      [a, b, c] = nodes = Enum.map(peers, &elem(&1, 1))
      phase("three nodes up: #{Enum.join(nodes, ", ")}", started)

      for node <- nodes, do: start_instance!(node, nodes, actors, world_opts)
      world = Grove.world(@instance)
      zones = await_steady!(world, nodes, actors, 600)
      phase("world steady: #{tuple_size(zones)} zones placed, #{actors} actors", started)

      urls =
        for node <- [a, b], do: "http://127.0.0.1:#{:erpc.call(node, Grove.Gateway, :port, [])}"

      figures = measure(world, {a, b, c}, zones, urls, actors, players, opts, started)
      report(figures, actors, players)
    after
      stop_nodes(home, distributed)
    end
  end

  ## Nodes

  defp start_nodes!(home, distributed) do
    cookie = Base.url_encode64(:crypto.strong_rand_bytes(18))
    File.write!(Path.join(home, ".erlang.cookie"), cookie)
    File.chmod!(Path.join(home, ".erlang.cookie"), 0o400)

    unless distributed do
      Grove.Cluster.ensure_epmd()

      case Node.start(
             :"grove_bench_#{System.pid()}_#{System.unique_integer([:positive])}",
             :shortnames
           ) do
        {:ok, _} ->
          :ok

        {:error, reason} ->
          Mix.raise("cannot become distributed (is epmd running?): #{inspect(reason)}")
      end
    end

    Node.set_cookie(String.to_atom(cookie))
    paths = Enum.flat_map(:code.get_path(), &[~c"-pa", &1])
    [_, host] = node() |> Atom.to_string() |> String.split("@")

    peers =
      Enum.map_reduce(1..3, [Grove.Cluster.id_slot(node())], fn n, taken ->
        {name, slot} = unique_name("grove_failover#{n}", host, taken)

        # A node's output goes to the group leader of whoever starts it:
        # the terminal's, even when this task's output is captured.
        leader = Process.group_leader()
        Process.group_leader(self(), Process.whereis(:user))

        {:ok, peer, node} =
          try do
            :peer.start(%{name: name, env: [{~c"HOME", String.to_charlist(home)}], args: paths})
          after
            Process.group_leader(self(), leader)
          end

        Process.put(:grove_bench_peers, [peer | Process.get(:grove_bench_peers, [])])
        :ok = :erpc.call(node, Application, :load, [:grove])
        :ok = :erpc.call(node, Application, :put_env, [:grove, :start, false])
        {:ok, _} = :erpc.call(node, Application, :ensure_all_started, [:grove])
        :ok = :erpc.call(node, Logger, :configure, [[level: :error]])
        {{peer, node}, [slot | taken]}
      end)
      |> elem(0)

    peers
  end

  # Two nodes whose names give them one range of entity ids refuse each other.
  defp unique_name(base, host, taken) do
    name = :"#{base}_#{System.pid()}_#{System.unique_integer([:positive])}"
    slot = Grove.Cluster.id_slot(:"#{name}@#{host}")
    if slot in taken, do: unique_name(base, host, taken), else: {name, slot}
  end

  defp start_instance!(node, nodes, actors, world_opts) do
    instance = [
      name: @instance,
      world: world_opts,
      actors: [count: actors],
      gateway: [port: 0],
      status_interval: false,
      cluster: [peers: nodes, connect_interval: 100]
    ]

    {:ok, _} =
      :erpc.call(node, Supervisor, :start_child, [
        Grove.Application.Supervisor,
        Supervisor.child_spec({Grove, instance}, id: @instance)
      ])
  end

  defp stop_nodes(home, distributed) do
    for peer <- Process.get(:grove_bench_peers, []), Process.alive?(peer) do
      try do
        :peer.stop(peer)
      catch
        :exit, _ -> :ok
      end
    end

    unless distributed, do: Node.stop()
    File.rm_rf!(home)
  end

  # Every node agrees where every zone runs, each zone runs there, and the
  # actors are all in; returns the zones' nodes.
  defp await_steady!(_world, _nodes, _actors, 0), do: Mix.raise("the cluster did not settle")

  defp await_steady!(world, nodes, actors, tries) do
    owners = Grove.Cluster.Placement.owners(zone_count(world, hd(nodes)), Enum.sort(nodes))

    steady =
      Enum.all?(nodes, fn node ->
        :erpc.call(node, Grove.Cluster, :members, [@instance]) == Enum.sort(nodes) and
          :erpc.call(node, World, :ready?, [world]) and
          Enum.all?(Enum.with_index(Tuple.to_list(owners)), fn {owner, index} ->
            zone_node(node, world, index) == owner
          end)
      end) and counts(world, nodes).actors == actors

    if steady do
      owners
    else
      Process.sleep(500)
      await_steady!(world, nodes, actors, tries - 1)
    end
  catch
    # A node whose world is still starting.
    kind, _ when kind in [:exit, :error] ->
      Process.sleep(500)
      await_steady!(world, nodes, actors, tries - 1)
  end

  defp zone_count(world, node),
    do: tuple_size(:erpc.call(node, World, :fetch!, [world]).zones)

  defp zone_node(node, world, index),
    do: elem(:erpc.call(node, __MODULE__, :zone_nodes, [world]), index)

  @doc false
  # On a node: where it believes each zone runs.
  def zone_nodes(world) do
    w = World.fetch!(world)
    List.to_tuple(for index <- 0..(tuple_size(w.zones) - 1), do: World.zone_node(w, index))
  end

  # Entities in the zones that `nodes` run, by kind.
  defp counts(world, nodes) do
    Enum.reduce(nodes, %{actors: 0, players: 0}, fn node, acc ->
      here = :erpc.call(node, __MODULE__, :local_counts, [world])
      %{actors: acc.actors + here.actors, players: acc.players + here.players}
    end)
  end

  @doc false
  # On a node: the actors and players in the zones it runs, read from their tables.
  def local_counts(world) do
    w = World.fetch!(world)

    kinds =
      for index <- 0..(tuple_size(w.zones) - 1),
          World.zone_node(w, index) == node(),
          reduce: %{} do
        acc ->
          :ets.foldl(
            fn row, acc -> Map.update(acc, elem(row, 4), 1, &(&1 + 1)) end,
            acc,
            elem(w.tables, index)
          )
      end

    players = Map.get(kinds, 1, 0)
    probes = Map.get(kinds, @probe_kind, 0)
    %{actors: Enum.sum(Map.values(kinds)) - players - probes, players: players}
  end

  ## The run

  defp measure(world, {a, b, c}, owners, urls, actors, players, opts, started) do
    steady = Keyword.get(opts, :steady, 15)
    observe = Keyword.get(opts, :observe, 40)
    ramp = Keyword.get(opts, :ramp, 100)
    lost = for {owner, index} <- Enum.with_index(Tuple.to_list(owners)), owner == c, do: index

    load_started = System.monotonic_time(:millisecond)

    load =
      Task.async(fn ->
        WsRun.run(
          url: urls,
          players: players,
          ramp: ramp,
          duration: steady + observe,
          every: 1,
          check_views: Keyword.get(opts, :check_views, 100),
          # Progress lines every second are in the report's table: only the rest is shown.
          out: fn line -> unless String.starts_with?(line, "load "), do: IO.puts(line) end
        )
      end)

    await_players!(world, [a, b, c], players, System.monotonic_time(:millisecond) + 60_000)
    phase("#{players} players in the world, on #{Enum.join(urls, " and ")}", started)
    sent_before = sent_between([a, b, c])
    steady_from = System.monotonic_time(:millisecond)
    Process.sleep(steady * 1000)
    seconds = (System.monotonic_time(:millisecond) - steady_from) / 1000
    between = round((sent_between([a, b, c]) - sent_before) / seconds)

    before = counts(world, [c])
    os_pid = :erpc.call(c, :os, :getpid, [])
    restored_before = restored([a, b])

    phase(
      "steady #{steady} s; killing #{c} (OS pid #{os_pid}) with #{length(lost)} zones, " <>
        "#{before.players} players and #{before.actors} actors in them",
      started
    )

    killed = System.monotonic_time(:millisecond)
    {_, 0} = System.cmd("kill", ["-9", to_string(os_pid)])
    killed_at_s = (killed - load_started) / 1000

    times =
      watch(
        world,
        [a, b],
        c,
        lost,
        actors,
        before.players,
        restored_before,
        killed,
        %{},
        killed + observe * 1000
      )

    for {key, ms} <- Enum.sort_by(times, &elem(&1, 1)),
        do: phase("#{key} #{ms} ms after the kill", started)

    # All zones, not only the lost ones: each serves on a survivor.
    all_zones = Enum.to_list(0..(tuple_size(owners) - 1))
    unserved = all_zones -- :erpc.call(a, __MODULE__, :probe, [world, all_zones, [a, b]])

    # The actors stop and their last moves are answered first: an audit
    # that reads the zones one after another while entities cross between
    # them sees some in two (or in none), which says nothing of the world.
    quiesce([a, b], started)
    {audit, settled, residents, audits} = audit(world, [a, b], started, 1)
    report = Task.await(load, :infinity)

    %{
      times: times,
      lost_zones: length(lost),
      zones: tuple_size(owners),
      unserved: unserved,
      before: before,
      restored: restored([a, b]) - restored_before,
      settled: settled,
      residents: length(residents),
      duplicates: length(residents) - length(Enum.uniq(residents)),
      audit: audit,
      audits: audits,
      load: report,
      around: around(report.windows, killed_at_s),
      between: between
    }
  end

  # Bytes the nodes sent each other (each byte counted once, by its sender),
  # leaving out what they sent this node, which drives them.
  defp sent_between(nodes) do
    Enum.sum(
      for node <- nodes,
          {peer, %{sent: sent}} <- :erpc.call(node, Grove.Cluster, :traffic, []),
          peer in nodes,
          do: sent
    )
  end

  defp quiesce(survivors, started) do
    actors = Grove.actors(@instance)
    for node <- survivors, do: :erpc.call(node, Grove.Actors, :pause, [actors])
    await_answered(survivors, actors, 100)
    phase("actors paused on the survivors, their moves answered", started)
  end

  defp await_answered(_survivors, _actors, 0), do: :ok

  defp await_answered(survivors, actors, tries) do
    in_flight =
      for node <- survivors do
        stats = :erpc.call(node, Grove.Actors, :stats, [actors])
        :erpc.call(node, Grove.Actors.Stats, :read, [stats]).counts.in_flight
      end

    if Enum.sum(in_flight) > 0 do
      Process.sleep(100)
      await_answered(survivors, actors, tries - 1)
    end
  end

  # The players still move: one crossing between two zones as they are
  # asked may be seen in both. So what the audit finds is asked again, 2 s
  # later, up to three times: what persists is real.
  defp audit(world, [a | _] = survivors, started, round) do
    settled = counts(world, survivors)
    audit = :erpc.call(a, World, :audit, [world, 60_000])
    residents = :erpc.call(a, World.Audit, :residents, [:erpc.call(a, World, :fetch!, [world])])

    phase(
      "audit #{round}: #{inspect(audit, limit: 5)}; #{settled.players} players, " <>
        "#{settled.actors} actors, #{length(residents)} residents",
      started
    )

    if audit == :ok or round == 3 do
      {audit, settled, residents, round}
    else
      Process.sleep(2000)
      audit(world, survivors, started, round + 1)
    end
  end

  defp await_players!(world, nodes, players, deadline) do
    cond do
      counts(world, nodes).players >= players ->
        :ok

      System.monotonic_time(:millisecond) > deadline ->
        Mix.raise("only #{counts(world, nodes).players} of #{players} players joined in time")

      true ->
        Process.sleep(200)
        await_players!(world, nodes, players, deadline)
    end
  end

  defp restored(nodes),
    do: Enum.sum(for node <- nodes, do: :erpc.call(node, Grove.Gateway, :stats, []).restored)

  # Polls the survivors every 20 ms until each milestone is reached (or the
  # deadline passes); returns the ms from the kill to each.
  defp watch(world, survivors, gone, lost, actors, players, restored_before, killed, times, until) do
    now = System.monotonic_time(:millisecond)
    done = map_size(times) == 5

    if done or now > until do
      times
    else
      [a | _] = survivors

      at = fn key, reached? ->
        if not is_map_key(times, key) and reached?.(), do: %{key => now - killed}, else: %{}
      end

      times =
        times
        |> Map.merge(
          at.(:detected, fn -> gone not in :erpc.call(a, Grove.Cluster, :members, [@instance]) end)
        )
        |> Map.merge(at.(:placed, fn -> placed?(world, survivors, lost) end))
        |> Map.merge(
          at.(:serving, fn ->
            is_map_key(times, :placed) and
              :erpc.call(a, __MODULE__, :probe, [world, lost, survivors]) == lost
          end)
        )
        |> Map.merge(at.(:restored, fn -> restored(survivors) - restored_before >= players end))
        |> Map.merge(at.(:actors_back, fn -> counts(world, survivors).actors >= actors end))

      Process.sleep(20)
      watch(world, survivors, gone, lost, actors, players, restored_before, killed, times, until)
    end
  end

  # Every survivor places each lost zone on a survivor, where it runs.
  defp placed?(world, survivors, lost) do
    Enum.all?(survivors, fn node ->
      where = :erpc.call(node, __MODULE__, :zone_nodes, [world])

      Enum.all?(lost, fn index ->
        owner = elem(where, index)
        owner in survivors and :erpc.call(owner, World, :zone_pid, [world, index]) != nil
      end)
    end)
  end

  @doc false
  # On a survivor: the zones among `indexes` that answer a join, from a
  # process of this node's, within 1 s each (the probe's entity leaves at once).
  def probe(world, indexes, survivors) do
    w = World.fetch!(world)

    indexes
    |> Task.async_stream(&probe_zone(w, &1, survivors),
      max_concurrency: 16,
      timeout: 5000,
      on_timeout: :kill_task
    )
    |> Enum.flat_map(fn
      {:ok, index} when is_integer(index) -> [index]
      _ -> []
    end)
  end

  defp probe_zone(w, index, survivors) do
    if World.zone_node(w, index) in survivors do
      opts = [at: {:within, World.Grid.zone_bounds(w.grid, index)}, kind: @probe_kind]

      case World.join(w, opts ++ [updates: :none, timeout: 1000]) do
        {:ok, id, _cell} ->
          World.leave(w, id)
          index

        _ ->
          nil
      end
    end
  catch
    # A zone on a node that is gone, or not started yet.
    _, _ -> nil
  end

  # The load lab's windows (one a second) before and after the kill.
  defp around(windows, killed_at_s) do
    {before, later} = Enum.split_with(windows, &(&1.t <= killed_at_s))
    steady = Enum.take(before, -5)
    after_kill = Enum.take(later, 10)

    %{
      moves_before: average(steady, :moves_per_s),
      p99_before: Enum.max([0 | Enum.map(steady, &(&1.p99_ms || 0))]),
      min_moves_after:
        Enum.min([nil | Enum.map(after_kill, & &1.moves_per_s)] |> Enum.reject(&is_nil/1), fn ->
          nil
        end),
      p99_after: Enum.max([0 | Enum.map(after_kill, &(&1.p99_ms || 0))]),
      errors_after: Enum.sum(Enum.map(later, & &1.errors)),
      windows_after: length(later)
    }
  end

  defp average([], _key), do: 0

  defp average(list, key),
    do: round(Enum.sum(Enum.map(list, &Map.fetch!(&1, key))) / length(list))

  ## Report

  defp report(f, actors, players) do
    t = fn key -> if ms = f.times[key], do: "#{ms} ms", else: "not within the run" end
    load = f.load
    lost_players = players - f.settled.players

    rows = [
      {"zones of the killed node", "#{f.lost_zones} of #{f.zones}"},
      {"detected (members without it)", t.(:detected)},
      {"its zones placed and running on survivors", t.(:placed)},
      {"its zones serving (a join into each answered)", t.(:serving)},
      {"zones not serving after the run", "#{length(f.unserved)}"},
      {"players in its zones at the kill", "#{f.before.players}"},
      {"players welcomed again (gateways)", "#{f.restored}, all by #{t.(:restored)}"},
      {"players restored (load lab's oracle)", "#{load.restored}"},
      {"actors back to #{actors}", t.(:actors_back)},
      {"bytes/s between the nodes, steady, before the kill", "#{f.between}"},
      {"the same, divided by the players",
       "#{if players > 0, do: round(f.between / players), else: "-"}"},
      {"moves answered/s, 5 s before the kill", "#{f.around.moves_before}"},
      {"fewest moves answered/s, 10 s after", "#{f.around.min_moves_after}"},
      {"p99 round trip before / after, ms", "#{f.around.p99_before} / #{f.around.p99_after}"},
      {"errors after the kill (load lab)", "#{f.around.errors_after}"},
      {"errors, whole run (timeouts, disconnects)",
       "#{load.errors} (#{load.timeouts}, #{load.disconnects.total})"},
      {"correctness failures (oracle)", "#{load.correctness_failures.total}"},
      {"players in the world after / connected",
       "#{f.settled.players} / #{players} (#{lost_players} lost)"},
      {"actors in the world after", "#{f.settled.actors}"},
      {"entities resident twice", "#{f.duplicates}"},
      {"audit (asked again while it finds something, 3 at most)",
       "#{if f.audit == :ok, do: "ok", else: inspect(f.audit, limit: 5)} (#{f.audits} asked)"}
    ]

    Mix.shell().info("""

    | node lost under load | |
    |---|---:|
    #{Enum.map_join(rows, "\n", fn {k, v} -> "| #{k} | #{v} |" end)}
    """)
  end

  defp phase(text, started) do
    s = (System.monotonic_time(:millisecond) - started) / 1000
    Mix.shell().info("[#{:erlang.float_to_binary(s, decimals: 1)} s] #{text}")
  end
end
