defmodule Grove.ClusterCase do
  @moduledoc """
  Real extra nodes for cluster tests, started with OTP's `:peer` on this
  machine.

  `distribute!/0` (in `setup`) makes the test node distributed, starting
  epmd if it is not running, and undoes both when the test ends; each peer
  gets the test node's code path and its cookie through a `.erlang.cookie`
  in a HOME of its own (never on a command line), and is stopped when the
  test ends, so no node outlives it. `start_instance!/2` starts a Grove
  instance on a node, supervised there, as the application would.
  """

  import ExUnit.Assertions, only: [refute: 1]
  import ExUnit.Callbacks, only: [on_exit: 1]

  @doc "Makes this node distributed for the test; returns the cookie's folder."
  def distribute! do
    home =
      Path.join(
        System.tmp_dir!(),
        "grove-cluster-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    File.mkdir_p!(home)
    cookie = Base.url_encode64(:crypto.strong_rand_bytes(18))
    File.write!(Path.join(home, ".erlang.cookie"), cookie)
    File.chmod!(Path.join(home, ".erlang.cookie"), 0o400)

    epmd = start_node!(3, :running)
    Node.set_cookie(String.to_atom(cookie))

    on_exit(fn ->
      Node.stop()
      if epmd == :started, do: stop_epmd(100)
      File.rm_rf!(home)
    end)

    home
  end

  # Other test runs on this machine name their nodes too: the OS process
  # makes the name unique across them, the integer within this one. Their
  # epmd may be the one found on this run's port (a port found free by
  # two runs before either started its epmd), and gone when the node
  # registers with it: distribution then fails to start, and is tried
  # again with an epmd found or started anew. Returns `:started` if this
  # run started an epmd, for the test's end to stop it.
  defp start_node!(tries, epmd) do
    {:ok, found} = Grove.Cluster.ensure_epmd()
    epmd = if found == :started, do: :started, else: epmd
    name = :"grove_test_#{System.pid()}_#{System.unique_integer([:positive])}"

    case Node.start(name, :shortnames) do
      {:ok, _} -> epmd
      {:error, _} when tries > 1 -> start_node!(tries - 1, epmd)
      {:error, reason} -> raise "distribution did not start: #{inspect(reason)}"
    end
  end

  # epmd refuses to stop while a node is registered with it ("Killing not
  # allowed - living nodes in database."), and a peer stopped a moment ago
  # may still be: ask again until it stops, for ten seconds at most, so
  # that no epmd outlives the tests that started it.
  defp stop_epmd(0), do: :ok

  defp stop_epmd(tries) do
    case System.cmd("epmd", ["-kill"], stderr_to_stdout: true) do
      {_killed, 0} ->
        :ok

      {_refused, _status} ->
        receive do
        after
          100 -> stop_epmd(tries - 1)
        end
    end
  end

  @doc """
  Starts a peer node with this node's code; it is stopped when the test
  ends. With `control: :stdio` the test controls it over its standard
  input and output (`:peer.call/4`), not over distribution, so that it
  outlives a netsplit that cuts it off from the test node. `:args` are
  more arguments for `erl`, as charlists. With `exact_name: true`, `name`
  is used as it is (one from `peer_name/1`, to start a node again under
  the name it had), else a unique name is made from it.
  """
  def start_peer!(home, name, opts \\ []) do
    paths = Enum.flat_map(:code.get_path(), &[~c"-pa", &1])
    control = if opts[:control] == :stdio, do: %{connection: :standard_io}, else: %{}

    {:ok, peer, node} =
      :peer.start(
        Map.merge(control, %{
          name: if(opts[:exact_name], do: name, else: peer_name(name)),
          # Its temporary files (a gateway's) go where the test removes them.
          env: [{~c"HOME", String.to_charlist(home)}, {~c"TMPDIR", String.to_charlist(home)}],
          args: paths ++ Keyword.get(opts, :args, [])
        })
      )

    # A peer whose node was killed ends on its own, perhaps between a look
    # and the stop: either way it is gone.
    on_exit(fn ->
      try do
        :peer.stop(peer)
      catch
        :exit, _ -> :ok
      end
    end)

    # The application without its default instance: tests start their own.
    :ok = :erpc.call(node, Application, :load, [:grove])
    # Its modules in one batch, as this VM's (`Grove.Preload`): loaded one by
    # one on first call, a loaded machine spends seconds of a peer's first
    # join or handoff waiting on its code server.
    _ = :erpc.call(node, Grove.Preload, :load, [])
    :ok = :erpc.call(node, Application, :put_env, [:grove, :start, false])
    {:ok, _} = :erpc.call(node, Application, :ensure_all_started, [:grove])
    :ok = :erpc.call(node, Logger, :configure, [[level: :warning]])
    {peer, node}
  end

  # A name of its own, whose range of entity ids (`Grove.Cluster.id_slot/0`,
  # from the name) is none of this test's other nodes': two that share one
  # refuse each other, which a test would only see as a rare failure.
  @doc """
  A node name (the part before `@`) made unique from `name`, with a range
  of entity ids none of this test's other nodes has, and for which
  `wanted` (given the node it names on this host) is true. Only the name
  kept takes its range: a name turned down by `wanted` takes none, where
  each one drawn took one and, once the 1,023 ranges were all taken, the
  draw went on for ever, filling the atom table.
  """
  def peer_name(name, wanted \\ fn _node -> true end) do
    taken = Process.get(:grove_cluster_slots, [Grove.Cluster.id_slot(node())])
    draw_name(name, wanted, taken, 20_000)
  end

  defp draw_name(name, _wanted, _taken, 0) do
    raise "no name from #{inspect(name)} fits the test's cluster in 20,000 draws"
  end

  defp draw_name(name, wanted, taken, draws) do
    candidate = :"#{name}_#{System.pid()}_#{System.unique_integer([:positive])}"
    node = on_host(candidate)
    slot = Grove.Cluster.id_slot(node)

    if slot not in taken and wanted.(node) do
      Process.put(:grove_cluster_slots, [slot | taken])
      candidate
    else
      draw_name(name, wanted, taken, draws - 1)
    end
  end

  @doc """
  A name as `peer_name/1` makes one, under which the node it names, in a
  cluster with `others`, leaves no member without a zone: placement
  (`Grove.Cluster.Placement`) of a test world's 16 zones over a few nodes
  whose names are drawn at random gives one of them none now and then
  (three nodes: one run in 200; the fourth that joins them: one in 100),
  and a test that waits for a node to run zones, or for actors in every
  node's zones, would wait in vain. `least`: the zones each member owns
  at least (a test whose actors must walk into every node's zones waits
  long for one zone alone: one run in some hundreds drew that).
  """
  def peer_name_with_zones(base, others, zones \\ 16, least \\ 1),
    do: peer_name(base, &zones_for_all?([&1 | others], zones, least))

  defp zones_for_all?(members, zones, least) do
    shares = Grove.Cluster.Placement.shares(Grove.Cluster.Placement.owners(zones, members))

    map_size(shares) == length(Enum.uniq(members)) and
      Enum.all?(Map.values(shares), &(&1 >= least))
  end

  @doc """
  The node a name (as `peer_name/1` makes one) names on this node's host:
  a node to come, named now, to start later (`start_peer_as!/3`).
  """
  def on_host(name) do
    [_, host] = node() |> Atom.to_string() |> String.split("@")
    :"#{name}@#{host}"
  end

  @doc """
  Starts a peer as `node`, named beforehand (`on_host/1`), or named as
  it was when it ran before: `start_peer!/3` under that exact name.
  """
  def start_peer_as!(home, node, opts \\ []) do
    [name, _host] = node |> Atom.to_string() |> String.split("@")
    start_peer!(home, name, Keyword.put(opts, :exact_name, true))
  end

  @doc """
  Starts peers one after the other (`start_peer!/3`), each under a name
  from `peer_name_with_zones/4` that leaves every member, `others` and
  the peers before it, zones of its own (`:least_zones` of them, 1 by
  default). With `:fits`, a function of the peers' nodes in the order of
  `bases`, the last name is one for which it is true as well: what a
  test needs of the placement of a world's 16 zones over its nodes (a
  zone of a node with a neighbour of another), where a name drawn at
  random would fail it now and then. Returns `[{peer, node}]`. The
  other `opts` are `start_peer!/3`'s.
  """
  def start_peers_with_zones!(home, bases, others \\ [], opts \\ []) do
    {least, opts} = Keyword.pop(opts, :least_zones, 1)
    {fits, opts} = Keyword.pop(opts, :fits, fn _nodes -> true end)
    opts = Keyword.put(opts, :exact_name, true)
    last = length(bases) - 1

    bases
    |> Enum.with_index()
    |> Enum.reduce({[], others}, fn {base, index}, {peers, members} ->
      before = peers |> Enum.reverse() |> Enum.map(&elem(&1, 1))

      wanted = fn node ->
        zones_for_all?([node | members], 16, least) and
          (index < last or fits.(before ++ [node]))
      end

      {_, node} = peer = start_peer!(home, peer_name(base, wanted), opts)
      {[peer | peers], [node | members]}
    end)
    |> elem(0)
    |> Enum.reverse()
  end

  @doc """
  True when a zone runs on the node and has not been handed away (a zone
  handed away lingers a while, passing on what comes late); false too when
  it stops as it is asked.
  """
  def serving?(node, world, index) do
    case :erpc.call(node, Grove.World, :zone_pid, [world, index]) do
      nil -> false
      pid -> :erpc.call(node, :sys, :get_state, [pid]).handed_over == nil
    end
  catch
    :error, {:exception, {reason, _}, _} when reason in [:noproc, :shutdown, :normal] -> false
    :exit, {:exception, {reason, _}} when reason in [:noproc, :shutdown, :normal] -> false
  end

  @doc """
  Kills a peer's node as `kill -9` would: no goodbye, its connections
  simply drop. Returns once this node has seen it go.
  """
  def kill!(node) do
    pid = :erpc.call(node, :os, :getpid, [])
    {_, 0} = System.cmd("kill", ["-9", to_string(pid)])
    # Nodes meet and part over real sockets: a busy machine is allowed half a minute.
    Grove.WorldCase.eventually(fn -> refute node in Node.list() end, 3000)
  end

  @doc "Starts an instance on a node under its application's supervisor."
  def start_instance!(node, opts) do
    # Peers end with their node; this node's instance must not outlive the test.
    if node == node() do
      id = Keyword.fetch!(opts, :name)

      on_exit(fn ->
        Supervisor.terminate_child(Grove.Application.Supervisor, id)
        Supervisor.delete_child(Grove.Application.Supervisor, id)
      end)
    end

    supervise_instance!(node, opts)
  end

  @doc """
  Starts instances on several nodes, `[{node, opts}]`, one after another,
  as a cluster whose first node is up when the others start: the first
  starts the world at once, without waiting for peers that are not
  started yet (`boot_wait: 0`, unless its options say otherwise), and
  each of the others joins the world that runs. Returns their pids.
  """
  def start_instances!([{node, opts} | others]) do
    first = Keyword.update(opts, :cluster, [], &Keyword.put_new(&1, :boot_wait, 0))
    for {node, opts} <- [{node, first} | others], do: start_instance!(node, opts)
  end

  defp supervise_instance!(node, opts) do
    {:ok, pid} =
      :erpc.call(node, Supervisor, :start_child, [
        Grove.Application.Supervisor,
        Supervisor.child_spec({Grove, opts}, id: Keyword.fetch!(opts, :name))
      ])

    pid
  end

  @doc "The options of a small instance with no gateway, store or actors."
  def small_instance(name, cluster, world \\ []) do
    [
      name: name,
      world: Keyword.merge([width: 100, height: 100, zone_size: 25, tick: :manual], world),
      actors: [count: 0],
      gateway: false,
      status_interval: false,
      cluster: cluster
    ]
  end

  @doc """
  The options of a small instance (`small_instance/3`) whose zones run
  on demand and sleep only when told, with no limit on moves, saving to
  `store` (a database all nodes share) under one accounts key for the
  whole cluster; `world` as `small_instance/3`'s, more of the world's.
  """
  def on_demand_instance(name, cluster, store, world) do
    on_demand = [zones: :on_demand, zone_idle: :manual, wake_ahead: 0, rules: [move_rate: nil]]

    small_instance(name, cluster, Keyword.merge(on_demand, world))
    |> Keyword.merge(store: store, accounts: [secret: "one key for the whole cluster, in a test"])
  end

  @doc """
  Holds `node`'s placer (`Grove.World.Placer`) of `world` still, as OTP's
  `:sys.suspend/1` does: what it is sent waits, in the order it came,
  until `release_placer!/2`. From then on, until its node stops, word
  that a zone started again on another node (an announcement
  `{:zone_at, index, at, epoch, :restarted}`) is taken only once every
  zone of `node` has recovered: the zones it started again itself have
  sent their rows to the nodes that ran their neighbours as far as it
  knew then. A hook in the placer's process (`:sys.install/2`) that runs
  before it takes a message, so that the order does not depend on which
  process a busy machine runs first.
  """
  def hold_placer!(node, world) do
    placer = Grove.World.Placer.name(world)
    :ok = :erpc.call(node, :sys, :install, [placer, {&__MODULE__.restarts_after_own/3, world}])
    :ok = :erpc.call(node, :sys, :suspend, [placer])
  end

  @doc "Lets a placer held by `hold_placer!/2` take what waits for it."
  def release_placer!(node, world),
    do: :ok = :erpc.call(node, :sys, :resume, [Grove.World.Placer.name(world)])

  @doc "The messages waiting for `node`'s placer of `world`."
  def placer_messages(node, world) do
    pid = :erpc.call(node, Process, :whereis, [Grove.World.Placer.name(world)])
    {:messages, messages} = :erpc.call(node, Process, :info, [pid, :messages])
    messages
  end

  @doc false
  # `hold_placer!/2`'s hook, in the placer's process: before it takes word
  # of a zone started again elsewhere, each zone placed here answers once
  # it has recovered (`Grove.World.Zone.recovered/2`; a zone handed away
  # holds what it is sent, and is not asked).
  def restarts_after_own(world, {:in, {:zone_at, _index, at, _epoch, :restarted}}, _name)
      when at != node(),
      do: await_own_recovered(world)

  def restarts_after_own(world, {:in, {:zones_at, zones}}, _name) do
    if Enum.any?(zones, &match?({_index, at, _epoch, :restarted} when at != node(), &1)),
      do: await_own_recovered(world),
      else: world
  end

  def restarts_after_own(world, _event, _name), do: world

  defp await_own_recovered(world) do
    fetched = Grove.World.fetch!(world)

    for index <- 0..(Grove.World.Grid.zone_count(fetched.grid) - 1),
        Grove.World.zone_node(fetched, index) == node(),
        pid = Grove.World.zone_pid(fetched, index),
        pid != nil do
      try do
        GenServer.call(pid, :recovered, 10_000)
      catch
        # One that stops has nothing more to send.
        :exit, _ -> :ok
      end
    end

    world
  end

  @doc """
  Starts, on `node` (this one or a peer), a client that joins `world` with
  `opts` (`Grove.World.join/2`) and then moves its entity when asked:
  `move!/3` from the test. Returns `{pid, id, cell}`. It stops when the
  test process does (unless started with `link: false`), or with its node.
  """
  def start_mover!(node, world, opts) do
    # Unlinked (`link: false`), it may be killed with its node under a test that goes on.
    {link, opts} = Keyword.pop(opts, :link, true)
    spawn = if link, do: &Node.spawn_link/4, else: &Node.spawn/4
    pid = spawn.(node, __MODULE__, :mover, [self(), world, opts])

    receive do
      {:mover, ^pid, {:ok, id, cell}} -> {pid, id, cell}
      {:mover, ^pid, error} -> raise "the mover on #{node} could not join: #{inspect(error)}"
    after
      10_000 -> raise "the mover on #{node} did not answer"
    end
  end

  @doc "Moves a mover's entity one step and returns the outcome."
  def move!(mover, direction) do
    tag = make_ref()
    send(mover, {:move, direction, tag, self()})

    receive do
      {:moved, ^tag, outcome} -> outcome
    after
      10_000 -> raise "no outcome for a move of #{inspect(mover)}"
    end
  end

  @doc """
  Starts, on `node`, a process that sends the test everything it gets,
  as `{:forwarded, pid, message}`, and answers `{:sync, ref}` with
  `{:synced, ref}` once what came before is forwarded. Returns its pid.
  """
  def start_forwarder!(node), do: Node.spawn_link(node, __MODULE__, :forwarder, [self()])

  @doc false
  def forwarder(test) do
    receive do
      {:sync, ref} -> send(test, {:synced, ref})
      message -> send(test, {:forwarded, self(), message})
    end

    forwarder(test)
  end

  @doc false
  def mover(test, world, opts) do
    result = Grove.World.join(world, opts)
    send(test, {:mover, self(), result})
    {:ok, id, _cell} = result
    mover_loop(test, world, id)
  end

  # Told that its entity was lost with a node, it says so to the test:
  # `{:mover_lost, mover, id}`.
  defp mover_loop(test, world, id) do
    receive do
      {:grove_lost, ^id} ->
        send(test, {:mover_lost, self(), id})
        mover_loop(test, world, id)

      {:move, direction, tag, from} ->
        :ok = Grove.World.move(world, id, direction, tag)

        receive do
          {:grove_move, ^id, ^tag, outcome} -> send(from, {:moved, tag, outcome})
        end

        mover_loop(test, world, id)

      # Views it is sent as a viewer are not read.
      _other ->
        mover_loop(test, world, id)
    end
  end
end
