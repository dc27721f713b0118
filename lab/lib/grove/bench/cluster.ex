defmodule Grove.Bench.Cluster do
  @moduledoc """
  The cost of distribution, side by side in one run (`mix grove.bench.cluster`):
  the actor bench (`Grove.Bench.Actors`) with the same actors and the same
  world, first on one node, then on two nodes that share the world.

  Both phases run in fresh nodes this one starts with OTP's `:peer`, on
  the same cores, so that neither inherits the other's garbage or the
  build tool's VM: phase one is a node with a scheduler per core (pinned
  with `taskset` to `:cores`); phase two is two nodes each pinned to one
  of those cores with one scheduler (the flags of
  `Grove.Load.Server.one_core_erl_options/0`), the first running the
  bench and half the actors, the second the other half; the cluster puts
  about half the zones on each. So both phases have the same CPU; what
  the second adds is the distribution between the nodes.

  This node only starts the nodes, relays their lines and prints the
  comparison. It becomes distributed for the run, with a cookie made for
  the run and handed to the nodes in a `.erlang.cookie` of a private HOME
  (never on a command line); epmd is started if it was not running, and
  stopped at the end only then. Every node is stopped at the end, whatever
  happens.

  ## Options

    * `:cores` - the two cores, `{first, second}` (default `{0, 1}`)
    * `:out` - where lines go (default `&IO.puts/1`)

  and those of `Grove.Bench.Actors` (`:actors`, `:duration`, `:warmup`,
  `:every`, the world's size, the herds' settings ...).
  """

  import Grove.Load.Report, only: [figure: 1]

  alias Grove.Bench.Actors, as: Bench
  alias Grove.Load.Server

  @doc "Runs both phases and returns `%{one: report, two: report, ratios: map}`."
  @spec run(keyword()) :: map()
  def run(opts) do
    {cores, opts} = Keyword.pop(opts, :cores, {0, 1})
    opts = Keyword.merge(Bench.defaults(), opts)
    out = opts[:out]
    taskset = System.find_executable("taskset") || raise "needs taskset (util-linux)"

    with_distribution(fn home ->
      {first, second} = cores

      out.(
        "[cluster] phase 1/2: #{opts[:actors]} actors on one node, " <>
          "2 schedulers on cores #{first},#{second}"
      )

      one =
        with_nodes(home, taskset, [{"one", "#{first},#{second}", 2}], fn [node] ->
          :erpc.call(node, Bench, :run, [:grove, opts], :infinity)
        end)

      out.(
        "[cluster] phase 2/2: #{opts[:actors]} actors on two nodes, " <>
          "one scheduler each, on core #{first} and core #{second}"
      )

      two =
        with_nodes(
          home,
          taskset,
          [{"two_a", "#{first}", 1}, {"two_b", "#{second}", 1}],
          fn [a, b] ->
            :erpc.call(a, Bench, :run, [:grove, Keyword.put(opts, :peers, [b])], :infinity)
          end
        )

      report = %{one: one, two: two, ratios: ratios(one, two)}
      print(report, out)
      report
    end)
  end

  defp ratios(one, two) do
    %{
      moves_per_s: ratio(two.moves_per_s, one.moves_per_s),
      p50_ms: ratio(two.p50_ms, one.p50_ms),
      p99_ms: ratio(two.p99_ms, one.p99_ms)
    }
  end

  defp ratio(a, b) when is_number(a) and is_number(b) and b > 0, do: Float.round(a / b, 2)
  defp ratio(_a, _b), do: nil

  ## Nodes

  defp with_distribution(fun) do
    epmd_before =
      case Grove.Cluster.ensure_epmd() do
        {:ok, how} -> how == :running
        {:error, :no_epmd} -> raise "epmd did not start"
      end

    home =
      Path.join(
        System.tmp_dir!(),
        "grove-bench-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    File.mkdir_p!(home)
    cookie = Base.url_encode64(:crypto.strong_rand_bytes(18))
    File.write!(Path.join(home, ".erlang.cookie"), cookie)
    File.chmod!(Path.join(home, ".erlang.cookie"), 0o400)
    started = not Node.alive?()
    cookie_before = Node.get_cookie()

    try do
      if started do
        {:ok, _} = Node.start(:"grove_bench_#{System.unique_integer([:positive])}", :shortnames)
      end

      Node.set_cookie(String.to_atom(cookie))
      fun.(home)
    after
      if started, do: Node.stop(), else: Node.set_cookie(cookie_before)
      File.rm_rf!(home)
      unless epmd_before, do: System.cmd("epmd", ["-kill"], stderr_to_stdout: true)
    end
  end

  # Starts a node per `{name, cores, schedulers}`, runs `fun` with their
  # names, and stops them all whatever happens.
  defp with_nodes(home, taskset, specs, fun) do
    peers =
      Enum.reduce(specs, [], fn spec, started ->
        try do
          [start_node(home, taskset, spec) | started]
        rescue
          error ->
            stop_nodes(started)
            reraise error, __STACKTRACE__
        end
      end)
      |> Enum.reverse()

    try do
      fun.(Enum.map(peers, &elem(&1, 1)))
    after
      stop_nodes(peers)
    end
  end

  defp start_node(home, taskset, {name, cores, schedulers}) do
    erl = System.find_executable("erl") || raise "needs erl on the PATH"
    paths = Enum.flat_map(:code.get_path(), &[~c"-pa", &1])

    flags =
      Server.one_core_erl_options()
      |> String.replace("+S 1:1", "+S #{schedulers}:#{schedulers}")
      |> String.split()
      |> Enum.map(&String.to_charlist/1)

    # A peer's output goes where the output of the process that starts it
    # goes, and its applications set options there that whatever captures
    # the bench's lines may not support: it is started from a process
    # whose output is this node's terminal. (`:peer.start/1` does not
    # link the node to that process.) A failure comes back as an answer,
    # so that the caller's cleanup runs, and stops the node it started.
    parent = self()
    ref = make_ref()

    spawn(fn ->
      Process.group_leader(self(), Process.whereis(:user))

      result =
        try do
          {:ok, peer, node} =
            :peer.start(%{
              name: :"grove_bench_#{name}_#{System.unique_integer([:positive])}",
              exec:
                {String.to_charlist(taskset),
                 [~c"-c", String.to_charlist(cores), String.to_charlist(erl)]},
              env: [{~c"HOME", String.to_charlist(home)}],
              args: flags ++ paths
            })

          try do
            {:ok, _} = :erpc.call(node, __MODULE__, :start_application, [])
            {:ok, {peer, node}}
          catch
            kind, reason ->
              :peer.stop(peer)
              {:error, {kind, reason}}
          end
        catch
          kind, reason -> {:error, {kind, reason}}
        end

      send(parent, {ref, result})
    end)

    receive do
      {^ref, {:ok, started}} -> started
      {^ref, {:error, reason}} -> raise "node #{name} did not start: #{inspect(reason)}"
    end
  end

  @doc false
  # On a node of the bench: the application without its default instance
  # (the bench starts its own).
  @spec start_application() :: {:ok, [atom()]}
  def start_application do
    :ok = Application.load(:grove)
    :ok = Application.put_env(:grove, :start, false)
    {:ok, started} = Application.ensure_all_started(:grove)
    :ok = Logger.configure(level: :warning)
    {:ok, started}
  end

  defp stop_nodes(peers) do
    for {peer, _node} <- peers do
      try do
        :peer.stop(peer)
      catch
        # Gone already.
        :exit, _ -> :ok
      end
    end
  end

  ## The comparison

  defp print(%{one: one, two: two, ratios: ratios}, out) do
    out.("")
    out.("== the cost of distribution: #{one.actors} actors, one node vs two ==")
    out.("| | one node | two nodes | two / one |")
    out.("| --- | ---: | ---: | ---: |")
    row(out, "moves/s", one.moves_per_s, two.moves_per_s, ratios.moves_per_s)
    row(out, "round trip p50 ms", figure(one.p50_ms), figure(two.p50_ms), ratios.p50_ms)
    row(out, "round trip p99 ms", figure(one.p99_ms), figure(two.p99_ms), ratios.p99_ms)

    row(
      out,
      "moves sent to a zone on the other node",
      "#{one.sent_remote_percent} %",
      "#{two.sent_remote_percent} %",
      nil
    )

    row(out, "bytes/s between the nodes", "-", two.network_bytes_per_s, nil)

    row(out, "bytes between the nodes per move sent to the other", "-", per_remote_move(two), nil)
    row(out, "schedulers busy", busy(one), busy(two), nil)
    row(out, "skipped moves", skipped(one), skipped(two), nil)
    row(out, "errors", one.errors, two.errors, nil)
    row(out, "audit", audit(one.audit), audit(two.audit), nil)
  end

  defp row(out, label, one, two, ratio),
    do: out.("| #{label} | #{one} | #{two} | #{if ratio, do: "#{ratio}x", else: ""} |")

  defp busy(report) do
    report.node_utilization
    |> Enum.sort()
    |> Enum.map_join(" / ", fn {_node, u} -> "#{figure(u * 100)} %" end)
  end

  defp per_remote_move(%{network_bytes_per_s: bytes, moves_per_s: moves, sent_remote_percent: p})
       when moves > 0 and p > 0,
       do: round(bytes / (moves * p / 100))

  defp per_remote_move(_report), do: "-"

  defp skipped(report), do: report.skipped |> Map.values() |> Enum.sum()

  defp audit(:ok), do: "ok"
  defp audit(problems), do: "#{length(problems)} problems"
end
