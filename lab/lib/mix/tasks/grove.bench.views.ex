defmodule Mix.Tasks.Grove.Bench.Views do
  @shortdoc "Measures the bytes between two nodes per tick for a zone watched from the other"

  @moduledoc """
  Starts a second node on this machine (OTP's `:peer`), one world across
  both, and walkers on the second node in one of its zones, each stepping
  at every tick. Viewers join that zone from this node, and the bytes the
  other node sends this one over distributed Erlang are counted
  (`Grove.Cluster.traffic/0`) for a while with no viewer, one, then many:
  with the zone's deltas sent once per watching node, the many cost what
  the one does.

      mix grove.bench.views --walkers 20 --viewers 50 --seconds 10

  Options: `--walkers N` (default 20, at most 55), `--viewers N` (default 50),
  `--seconds S` per phase (default 10), `--tick MS` (default 100).

  This node becomes distributed under a name of its own; epmd must be
  running (`epmd -daemon`). The cookie is written to a folder of the
  bench's own, never on a command line, and removed with it.
  """

  use Mix.Task

  alias Grove.World

  @switches [walkers: :integer, viewers: :integer, seconds: :integer, tick: :integer]
  @instance BenchViews

  @impl true
  def run(args) do
    opts = Mix.Grove.parse!(args, @switches, "grove.bench.views")

    Application.put_env(:grove, :start, false)
    Mix.Task.run("app.start")
    Logger.configure(level: :warning)

    walkers = Keyword.get(opts, :walkers, 20)
    viewers = Keyword.get(opts, :viewers, 50)
    seconds = Keyword.get(opts, :seconds, 10)
    tick = Keyword.get(opts, :tick, 100)

    home =
      Path.join(
        System.tmp_dir!(),
        "grove-bench-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    try do
      {peer, other} = start_nodes!(home)
      nodes = Enum.sort([node(), other])

      world_opts = [
        width: 100,
        height: 100,
        zone_size: 25,
        tick: tick,
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
        rules: [move_rate: nil]
      ]

      instance = [
        name: @instance,
        world: world_opts,
        actors: [count: 0],
        gateway: false,
        status_interval: false,
        cluster: [peers: nodes, connect_interval: 100]
      ]

      {:ok, _} = :erpc.call(other, __MODULE__, :start_instance, [instance])
      {:ok, _} = Grove.start_link(instance)
      world = Grove.world(@instance)
      zone = await_zone(world, nodes, 300)
      {x0, y0, _, _} = World.Grid.zone_bounds(World.grid(world), zone)

      for n <- 0..(walkers - 1) do
        # Two cells apart, so that no walker blocks another.
        cell = {x0 + 2 + 2 * rem(n, 11), y0 + 2 + 2 * div(n, 11)}
        :ok = :erpc.call(other, __MODULE__, :start_walker, [world, cell, tick])
      end

      Mix.shell().info(
        "#{walkers} walkers on #{other} in its zone #{zone}, a step each per #{tick} ms tick; " <>
          "#{seconds} s per phase"
      )

      rows =
        for count <- [0, 1, viewers] do
          held =
            for n <- 1..count//1, do: start_viewer(world, {x0 + rem(n, 25), y0 + 8 + div(n, 25)})

          row = measure(world, other, count, seconds, tick)
          for pid <- held, do: Process.exit(pid, :kill)
          row
        end

      report(rows, walkers, tick)
      :peer.stop(peer)
    after
      File.rm_rf!(home)
    end
  end

  defp start_nodes!(home) do
    File.mkdir_p!(home)
    cookie = Base.url_encode64(:crypto.strong_rand_bytes(18))
    File.write!(Path.join(home, ".erlang.cookie"), cookie)
    File.chmod!(Path.join(home, ".erlang.cookie"), 0o400)

    case Node.start(:"grove_bench_#{System.unique_integer([:positive])}", :shortnames) do
      {:ok, _} ->
        :ok

      {:error, reason} ->
        Mix.raise("cannot become distributed (is epmd running?): #{inspect(reason)}")
    end

    Node.set_cookie(String.to_atom(cookie))
    paths = Enum.flat_map(:code.get_path(), &[~c"-pa", &1])

    {:ok, peer, other} =
      :peer.start(%{
        name: :"grove_bench_peer_#{System.unique_integer([:positive])}",
        env: [{~c"HOME", String.to_charlist(home)}],
        args: paths
      })

    :ok = :erpc.call(other, Application, :load, [:grove])
    :ok = :erpc.call(other, Application, :put_env, [:grove, :start, false])
    {:ok, _} = :erpc.call(other, Application, :ensure_all_started, [:grove])
    :ok = :erpc.call(other, Logger, :configure, [[level: :warning]])
    {peer, other}
  end

  @doc false
  # On the other node: the instance under its application's supervisor.
  def start_instance(opts) do
    Supervisor.start_child(
      Grove.Application.Supervisor,
      Supervisor.child_spec({Grove, opts}, id: @instance)
    )
  end

  @doc false
  # On the other node: an entity stepping east and west, one step a tick.
  def start_walker(world, cell, tick) do
    parent = self()

    spawn(fn ->
      {:ok, id, _} = World.join(world, at: cell)
      send(parent, :joined)
      walk(world, id, :e, tick)
    end)

    receive do
      :joined -> :ok
    after
      10_000 -> raise "a walker could not join"
    end
  end

  defp walk(world, id, direction, tick) do
    :ok = World.move(world, id, direction, nil)

    receive do
      {:grove_move, ^id, _tag, _outcome} -> :ok
    end

    Process.sleep(tick)
    walk(world, id, if(direction == :e, do: :w, else: :e), tick)
  end

  defp start_viewer(world, cell) do
    parent = self()

    pid =
      spawn(fn ->
        {:ok, _id, _} = World.join(world, at: cell, updates: :view)
        send(parent, {:viewing, self()})
        view(world, World.View.new(cell, 8))
      end)

    receive do
      {:viewing, ^pid} -> pid
    after
      10_000 -> Mix.raise("a viewer could not join")
    end
  end

  # A viewer reads its node's feed every tick, as a session would.
  defp view(world, view) do
    receive do
      {:grove_view, _, _, _, _} = message -> view(world, World.View.apply_message(view, message))
      {:grove_view, _, :closed} = message -> view(world, World.View.apply_message(view, message))
    after
      100 -> view(world, World.View.catch_up(view, world))
    end
  end

  # A zone of the other node's, once both nodes agree that every zone runs
  # where the placement puts it (a node may start the world alone, then
  # hand zones over).
  defp await_zone(_world, _nodes, 0), do: Mix.raise("the world did not settle on both nodes")

  defp await_zone(world, nodes, tries) do
    owners = Grove.Cluster.Placement.owners(tuple_size(World.fetch!(world).zones), nodes)

    settled =
      Enum.all?(nodes, fn node ->
        :erpc.call(node, Grove.Cluster, :members, [@instance]) == nodes and
          :erpc.call(node, World, :ready?, [world]) and
          Enum.all?(0..(tuple_size(owners) - 1), fn zone ->
            w = :erpc.call(node, World, :fetch!, [world])

            :erpc.call(node, World, :zone_node, [w, zone]) == elem(owners, zone) and
              :erpc.call(elem(owners, zone), World, :zone_pid, [world, zone]) != nil
          end)
      end)

    other = hd(nodes -- [node()])

    case settled && Enum.find(0..(tuple_size(owners) - 1), &(elem(owners, &1) == other)) do
      zone when is_integer(zone) ->
        zone

      _ ->
        Process.sleep(100)
        await_zone(world, nodes, tries - 1)
    end
  end

  defp measure(world, other, viewers, seconds, tick) do
    # Let the viewers' snapshots pass before counting.
    Process.sleep(1000)
    stats = fn -> :erpc.call(other, World, :stats, [world]) end
    {traffic, before} = {Grove.Cluster.traffic()[other], stats.()}
    Process.sleep(seconds * 1000)
    {traffic_after, later} = {Grove.Cluster.traffic()[other], stats.()}

    row = %{
      viewers: viewers,
      received: traffic_after.received - traffic.received,
      sent: traffic_after.sent - traffic.sent,
      relayed: later.deltas_relayed - before.deltas_relayed,
      dropped: later.deltas_dropped - before.deltas_dropped,
      ticks: div(seconds * 1000, tick)
    }

    Mix.shell().info(
      "#{viewers} viewers: #{row.received} bytes in, #{row.sent} out, " <>
        "#{row.relayed} deltas relayed in #{seconds} s"
    )

    row
  end

  defp report(rows, walkers, tick) do
    Mix.shell().info("""

    | viewers here | bytes in / tick | bytes out / tick | deltas relayed / tick | dropped |
    |---:|---:|---:|---:|---:|
    #{Enum.map_join(rows, "\n", &line/1)}

    (#{walkers} walkers stepping every #{tick} ms in one zone of the other node; \
    bytes counted on the distribution socket between the two nodes)
    """)

    [none, one, many] = rows
    extra = fn row -> (row.received - none.received) / max(row.ticks, 1) end

    if extra.(one) > 0 do
      Mix.shell().info(
        "#{many.viewers} viewers cost #{Float.round(extra.(many) / extra.(one), 2)}x the bytes " <>
          "of one, over the idle link (a delta per viewer would be #{many.viewers}x)"
      )
    end
  end

  defp line(row) do
    per = fn bytes -> Float.round(bytes / max(row.ticks, 1), 1) end

    "| #{row.viewers} | #{per.(row.received)} | #{per.(row.sent)} | " <>
      "#{per.(row.relayed)} | #{row.dropped} |"
  end
end
