defmodule Grove.ReleaseTest do
  # Builds the release (MIX_ENV=prod) once and runs it as its own OS process.
  use ExUnit.Case, async: false

  import Grove.WorldCase, only: [eventually: 2]

  alias Grove.WsClient
  alias Grove.Protocol

  @moduletag :release
  @moduletag timeout: 900_000

  # Everything a release must not need: Elixir, Mix and Erlang's own tools.
  @hidden ~w(elixir elixirc iex mix erl erlc escript epmd run_erl to_erl ct_run dialyzer typer)

  setup_all do
    build =
      Path.join(
        System.tmp_dir!(),
        "grove-release-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    release = Path.join(build, "grove")

    {output, status} =
      System.cmd("mix", ["release", "--overwrite", "--quiet", "--path", release],
        env: [{"MIX_ENV", "prod"}],
        stderr_to_stdout: true,
        cd: File.cwd!()
      )

    on_exit(fn -> File.rm_rf!(build) end)
    assert status == 0, output
    %{bin: Path.join(release, "bin/grove"), release: release}
  end

  setup %{release: release} do
    root =
      Path.join(
        System.tmp_dir!(),
        "grove-release-run-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    File.mkdir_p!(Path.join(root, "tmp"))
    # The release's epmd on a port of its own: the other suites' nodes,
    # running beside this test, start and stop the machine's epmd as they
    # go, so whether one ran before could not say who started the one
    # that was running after (and one was left behind).
    epmd_port = Grove.Ports.free()

    on_exit(fn ->
      # Whatever happened, nothing of the release may outlive the test.
      for pid_file <- [Path.join(root, "os_pid")], File.exists?(pid_file) do
        System.cmd("kill", ["-KILL", File.read!(pid_file)], stderr_to_stdout: true)
      end

      for epmd <- Path.wildcard(Path.join(release, "erts-*/bin/epmd")) do
        System.cmd(epmd, ["-port", "#{epmd_port}", "-kill"], stderr_to_stdout: true)
      end

      File.rm_rf!(root)
    end)

    %{root: root, env: env(root, Grove.Ports.free(), epmd_port)}
  end

  test "a release starts without Elixir on the PATH and without an error, plays a move, reports and stops cleanly",
       %{bin: bin, release: release, root: root, env: env} do
    # The product alone: the lab's load, bench, chaos and fuzz code is a
    # project of its own (lab/), in no release.
    modules = release_modules(release)
    assert Grove.World in modules and Grove.Gateway in modules
    assert Enum.filter(modules, &lab_module?/1) == []

    port = String.to_integer(env["GROVE_PORT"])

    assert {"grove: applied migrations [1, 2]\n", 0} =
             System.cmd(bin, ["migrate"], env: env, cd: root)

    server = start(bin, root, env)

    eventually(fn -> assert {200, %{"ready" => true}} = get(port, "/readyz") end, 6000)

    # What Yaws writes when it starts is in a folder of this node's own.
    assert [scratch] = Path.wildcard(Path.join([root, "tmp", "grove-yaws-*"]))
    assert %File.Stat{access: :read_write, mode: mode} = File.stat!(scratch)
    assert Bitwise.band(mode, 0o077) == 0

    # A player joins and moves.
    {:ok, client} = WsClient.connect("127.0.0.1", port, "/ws")

    send_json(client, %{
      type: :join,
      protocol: Protocol.version(),
      view_radius: 8,
      name: "",
      token: ""
    })

    {welcome, client} = receive_type(client, :welcome)
    direction = if welcome.x < 30, do: :e, else: :w
    send_json(client, %{type: :move, seq: 1, dir: direction})
    {outcome, _client} = receive_type(client, :outcome)
    assert outcome.seq == 1

    {status_text, 0} = System.cmd(bin, ["status"], env: env, cd: root)
    assert status_text =~ "entities"
    assert status_text =~ "ready: world ok, store ok, gateway ok; 1 sessions"

    # The VM runs with the release's flags (rel/vm.args.eex): a process's
    # heap up to 16 MB is carved from the heap allocator's kept carriers.
    sbct = ~S"""
    [{:instance, 0, i} | _] = :erlang.system_info({:allocator, :eheap_alloc})
    IO.puts(i[:options][:sbct])
    """

    assert {"16777216\n", 0} = System.cmd(bin, ["rpc", sbct], env: env, cd: root)

    # A graceful stop: /readyz answers 503 while the port is still open,
    # the player is told goodbye, the node exits with 0.
    assert {_, 0} = System.cmd(bin, ["stop"], env: env, cd: root)
    assert Enum.drop_while(readiness_until_closed(port), &(&1 == 200)) == [503, :closed]
    assert {0, output} = exit_status(server, fn -> processes(bin, env, root) end)
    File.rm!(Path.join(root, "os_pid"))

    # A clean start and stop logs no error, and leaves no folder behind.
    refute output =~ "[error]", output
    assert Path.wildcard(Path.join([root, "tmp", "grove-yaws-*"])) == []
  end

  test "a release on a port another program holds says so in one line and stops, starting nothing",
       %{bin: bin, root: root, env: env} do
    {:ok, taken} = :gen_tcp.listen(0, ip: {127, 0, 0, 1})
    {:ok, port} = :inet.port(taken)
    env = Map.put(env, "GROVE_PORT", Integer.to_string(port))

    try do
      server = start(bin, root, env)
      {status, output} = exit_status(server)
      File.rm!(Path.join(root, "os_pid"))

      assert status == 1
      assert [line] = String.split(output, "\n", trim: true)
      assert line =~ "port #{port} on 127.0.0.1 is in use by another program"
      assert line =~ "GROVE_PORT"
      # No crash dump, and nothing was started: no store file either.
      assert Path.wildcard(Path.join(root, "**/erl_crash.dump")) == []
      refute File.exists?(Path.join([root, "data", "grove.db"]))
    after
      :gen_tcp.close(taken)
    end
  end

  # As an operator starts it: none of this test runner's VM flags (`make`
  # gives the benches a process table of five million, with which a VM
  # takes a minute to stop).
  defp env(root, port, epmd_port) do
    %{
      "ERL_AFLAGS" => nil,
      "ERL_ZFLAGS" => nil,
      "ELIXIR_ERL_OPTIONS" => nil,
      "PATH" => scrubbed_path(root),
      "TMPDIR" => Path.join(root, "tmp"),
      "GROVE_DATA" => Path.join(root, "data"),
      "GROVE_PORT" => Integer.to_string(port),
      "ERL_EPMD_PORT" => Integer.to_string(epmd_port),
      "GROVE_ACTORS" => "50",
      "GROVE_WIDTH" => "60",
      "GROVE_HEIGHT" => "60",
      # Long enough that a poll every 50 ms sees it on a busy machine.
      "GROVE_UNREADY_MS" => "3000",
      "RELEASE_NODE" => "grove_release_test_#{System.unique_integer([:positive])}",
      "RELEASE_COOKIE" => Base.encode16(:crypto.strong_rand_bytes(16))
    }
  end

  defp start(bin, root, env) do
    server =
      Port.open({:spawn_executable, bin}, [
        :binary,
        :exit_status,
        :stderr_to_stdout,
        args: ["start"],
        cd: root,
        env:
          for(
            {key, value} <- env,
            do: {to_charlist(key), if(value, do: to_charlist(value), else: false)}
          )
      ])

    {:os_pid, os_pid} = Port.info(server, :os_pid)
    File.write!(Path.join(root, "os_pid"), Integer.to_string(os_pid))
    server
  end

  # The node's exit status and everything it wrote; a node that does not
  # exit is asked, while it still answers, what its processes are doing.
  defp exit_status(server, dump \\ fn -> "" end, output \\ []) do
    receive do
      {^server, {:data, data}} -> exit_status(server, dump, [output | data])
      {^server, {:exit_status, status}} -> {status, IO.iodata_to_binary(output)}
    after
      60_000 -> flunk("the node did not exit; it wrote:\n#{output}\nIts processes:\n#{dump.()}")
    end
  end

  # What a stop may wait on: the processes linked to Yaws's server (which
  # waits up to a minute for them), and any process with mail.
  defp processes(bin, env, root) do
    script = ~S"""
    for pid <- Process.list(),
        info = Process.info(pid, [:registered_name, :current_stacktrace, :trap_exit, :message_queue_len, :messages, :links]),
        info != nil,
        info[:message_queue_len] > 0 or Enum.any?(info[:current_stacktrace], &(elem(&1, 0) == :yaws_server)),
        do: IO.inspect({pid, info}, limit: 20, printable_limit: 200)
    """

    {text, _status} = System.cmd(bin, ["rpc", script], env: env, cd: root, stderr_to_stdout: true)
    text
  end

  # What /readyz answers, polled every 50 ms from now until the port
  # closes, each answer once in a row.
  defp readiness_until_closed(port, seen \\ []) do
    answer =
      case get(port, "/readyz") do
        {:error, {:failed_connect, _}} -> :closed
        {:error, _dropped} -> nil
        {status, _body} -> status
      end

    seen = if answer in [nil | Enum.take(seen, -1)], do: seen, else: seen ++ [answer]

    if answer == :closed do
      seen
    else
      receive do
      after
        50 -> readiness_until_closed(port, seen)
      end
    end
  end

  # Every module of every application in the release.
  defp release_modules(release) do
    for beam <- Path.wildcard(Path.join(release, "lib/*/ebin/*.beam")),
        do: beam |> Path.basename(".beam") |> String.to_atom()
  end

  # Grove.Load.*, Grove.Bench.*, Grove.Chaos, their Mix tasks and Mix.Grove.
  defp lab_module?(module) do
    case module |> Atom.to_string() |> String.split(".") do
      ["Elixir", "Grove" | parts] -> Enum.any?(parts, &(&1 in ~w(Load Bench Chaos)))
      ["Elixir", "Mix", "Tasks", "Grove", area | _] -> area in ~w(Load Bench Chaos)
      ["Elixir", "Mix", "Grove"] -> true
      _ -> false
    end
  end

  defp scrubbed_path(root) do
    dir = Path.join(root, "path")
    File.mkdir_p!(dir)

    for source <- Path.wildcard("/usr/bin/*") ++ Path.wildcard("/bin/*"),
        name = Path.basename(source),
        name not in @hidden,
        link = Path.join(dir, name),
        not File.exists?(link),
        do: File.ln_s!(source, link)

    dir
  end

  # A fresh connection each time: the answer of the moment, not a kept-alive one's.
  defp get(port, path) do
    request = {~c"http://127.0.0.1:#{port}#{path}", [{~c"connection", ~c"close"}]}

    case :httpc.request(:get, request, [timeout: 5000], body_format: :binary) do
      {:ok, {{_, status, _}, _, body}} -> {status, :jiffy.decode(body, [:return_maps])}
      {:error, reason} -> {:error, reason}
    end
  end

  defp send_json(client, message) do
    :ok =
      WsClient.send_frame(client, {:text, IO.iodata_to_binary(Protocol.encode(message, :json))})
  end

  defp receive_type(client, type) do
    {:ok, {:text, data}, client} = WsClient.recv(client, 10_000)
    {:ok, message} = Protocol.decode(data, :json)
    if message.type == type, do: {message, client}, else: receive_type(client, type)
  end
end
