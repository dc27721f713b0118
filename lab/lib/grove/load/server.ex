defmodule Grove.Load.Server do
  @moduledoc false
  # A Grove server in an OS process of its own, started as `make run` starts
  # it (`mix run --no-halt` in Grove's own directory, configured by GROVE_*
  # variables), for the benches and the chaos lab: pinned to a core with
  # `taskset` or not, optionally a distributed node the caller can reach,
  # stopped with SIGTERM (a graceful stop: sessions drained, positions
  # flushed).
  #
  # A distributed server is named `name@localhost`-style (short names) and
  # given its cookie through a `.erlang.cookie` in a HOME of its own, so
  # that the cookie is on no command line and in no log.

  defstruct [:port, :label, :node, :http_port]

  # Grove's own directory, where the lab is (lab/lib/grove/load/server.ex).
  @grove_dir Path.expand("../../../..", __DIR__)

  @type t :: %__MODULE__{}

  @doc """
  Starts a server. Options: `:env` (`[{name, value}]`, added to this
  process's environment), `:core` (pin to it with `taskset`), `:command`
  (default `["mix", "run", "--no-halt"]`), `:cd` (where it runs; default
  Grove's own directory, as `make run`), `:label`, and `:node` with
  `:cookie` and `:home` to make it a distributed node.
  """
  @spec start(keyword()) :: t()
  def start(opts) do
    command = Keyword.get(opts, :command, ["mix", "run", "--no-halt"])
    label = Keyword.get(opts, :label, "server")
    env = Keyword.get(opts, :env, [])

    {command, env} =
      case opts[:node] do
        nil ->
          {command, env}

        node ->
          home = Keyword.fetch!(opts, :home)
          File.mkdir_p!(home)
          cookie_file = Path.join(home, ".erlang.cookie")
          File.write!(cookie_file, Keyword.fetch!(opts, :cookie))
          File.chmod!(cookie_file, 0o400)
          [short | _] = String.split(to_string(node), "@")
          {["elixir", "--sname", short, "-S" | command], [{"HOME", home} | env]}
      end

    # Raises the open-file limit as far as it goes (a socket per player);
    # the shell and taskset exec, so the port's OS process is the BEAM itself.
    script = ~S[ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$@"]

    {executable, args} =
      case opts[:core] do
        nil ->
          {System.find_executable("sh"), ["-c", script, label | command]}

        core ->
          taskset = System.find_executable("taskset") || raise "needs taskset (util-linux)"
          {taskset, ["-c", to_string(core), "sh", "-c", script, label | command]}
      end

    port =
      Port.open({:spawn_executable, executable}, [
        :binary,
        :exit_status,
        :stderr_to_stdout,
        {:line, 4096},
        cd: Keyword.get(opts, :cd, @grove_dir),
        env: Enum.map(env, fn {k, v} -> {to_charlist(k), to_charlist(v)} end),
        args: args
      ])

    %__MODULE__{port: port, label: label, node: opts[:node]}
  end

  @doc """
  Waits until the server answers on `http_port` (up to `tries` tenths of a
  second) and returns its OS pid; `on_line` sees what it prints meanwhile.
  Raises if it stops first.
  """
  @spec await(t(), :inet.port_number(), (String.t() -> any()), non_neg_integer()) ::
          pos_integer()
  def await(%__MODULE__{port: port} = server, http_port, on_line, tries \\ 600) do
    receive do
      {^port, {:data, {_eol, line}}} ->
        on_line.(line)
        await(server, http_port, on_line, tries)

      {^port, {:exit_status, status}} ->
        raise "the #{server.label} stopped before it answered (exit status #{status})"
    after
      100 ->
        cond do
          answers?(http_port) -> os_pid(server)
          tries > 0 -> await(server, http_port, on_line, tries - 1)
          true -> raise "the #{server.label} did not answer on port #{http_port} within a minute"
        end
    end
  end

  @doc """
  Erlang flags for a server measured on one core: one scheduler, and no
  scheduler spinning while idle, so its CPU is the work it does.
  """
  @spec one_core_erl_options() :: String.t()
  def one_core_erl_options, do: "+S 1:1 +sbwt none +sbwtdcpu none +sbwtdio none"

  @doc "The server's OS pid, or `nil` once it has exited."
  @spec os_pid(t()) :: pos_integer() | nil
  def os_pid(%__MODULE__{port: port}) do
    case Port.info(port, :os_pid) do
      {:os_pid, pid} -> pid
      nil -> nil
    end
  end

  @doc """
  Stops the server with SIGTERM and waits for it to exit (up to `timeout`
  ms, then it is killed); returns its exit status, or `:killed`.
  `on_line` sees what it prints meanwhile.
  """
  @spec stop(t(), timeout(), (String.t() -> any())) :: non_neg_integer() | :killed | :gone
  def stop(%__MODULE__{} = server, timeout \\ 15_000, on_line \\ fn _ -> :ok end) do
    case os_pid(server) do
      nil ->
        :gone

      pid ->
        System.cmd("kill", ["-TERM", to_string(pid)], stderr_to_stdout: true)
        await_exit(server, pid, System.monotonic_time(:millisecond) + timeout, on_line)
    end
  end

  defp await_exit(%__MODULE__{port: port} = server, pid, deadline, on_line) do
    wait = max(deadline - System.monotonic_time(:millisecond), 0)

    receive do
      {^port, {:exit_status, status}} ->
        status

      {^port, {:data, {_eol, line}}} ->
        on_line.(line)
        await_exit(server, pid, deadline, on_line)
    after
      wait ->
        System.cmd("kill", ["-KILL", to_string(pid)], stderr_to_stdout: true)
        Port.close(port)
        :killed
    end
  end

  defp answers?(http_port) do
    case :gen_tcp.connect(~c"127.0.0.1", http_port, [], 200) do
      {:ok, socket} -> :gen_tcp.close(socket) == :ok
      {:error, _} -> false
    end
  end
end
