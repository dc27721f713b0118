defmodule Grove.PostgresServer do
  @moduledoc """
  A throwaway PostgreSQL server for the tests, started on first use and
  shared by every test of the run; each test takes a fresh database on it
  (`create_database/0`).

  It needs nothing but the binaries of Debian's `postgresql` package (found
  under `/usr/lib/postgresql/*/bin`, or wherever `GROVE_PG_BIN` says): no
  cluster, no systemd, no running service.

    1. `initdb` makes a cluster in a new directory under the system's temp
       directory, with trust authentication, UTF-8 and the C locale; run as
       root, every server binary runs as the `postgres` user (`runuser`),
       which owns that directory;
    2. `postgres` listens on 127.0.0.1 on a free port (and on a Unix socket
       in that directory only), with fsync off: the data is thrown away;
    3. the server runs under a small shell watchdog that reads our end of a
       pipe: when the VM closes it, at the end of the run or because it
       died, the watchdog stops the server and deletes the directory. No
       server outlives the VM, however the VM ends.

  The port and directory are in `info/0`, the server's log in `log` there.
  """

  use GenServer

  require Logger

  @username "grove"
  @ready_timeout 60_000

  # The watchdog: starts the server in the background, waits for standard
  # input to close, then stops the server (fast shutdown) and cleans up.
  @watchdog ~S"""
  bin="$1"; dir="$2"; port="$3"
  "$bin/postgres" -D "$dir/data" -h 127.0.0.1 -p "$port" -k "$dir" \
    -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
    -c max_connections=300 >>"$dir/log" 2>&1 &
  server=$!
  echo "started $server"
  while read -r _; do :; done
  kill -INT "$server" 2>/dev/null
  wait "$server"
  rm -rf "$dir"
  """

  @type info :: %{
          host: String.t(),
          port: :inet.port_number(),
          username: String.t(),
          dir: Path.t()
        }

  @doc "Starts the server unless it runs already; returns where it listens."
  @spec info() :: info()
  def info do
    pid =
      case GenServer.start(__MODULE__, [], name: __MODULE__) do
        {:ok, pid} -> pid
        {:error, {:already_started, pid}} -> pid
        {:error, reason} -> raise "cannot start the test PostgreSQL server: #{format(reason)}"
      end

    GenServer.call(pid, :info, @ready_timeout)
  end

  @doc "Creates a new, empty database on the server and returns its name."
  @spec create_database() :: String.t()
  def create_database do
    info()
    GenServer.call(__MODULE__, :create_database, 30_000)
  end

  @doc "A store's options for a new, empty database on the server, with `extra` options of its own."
  @spec store(keyword()) :: keyword()
  def store(extra \\ []) do
    server = info()

    [
      adapter: :postgres,
      host: server.host,
      port: server.port,
      username: server.username,
      database: create_database()
    ] ++ extra
  end

  @doc "Stops the server and deletes its directory (also done when the VM exits)."
  @spec stop() :: :ok
  def stop do
    case Process.whereis(__MODULE__) do
      nil -> :ok
      pid -> GenServer.stop(pid, :normal, 30_000)
    end
  end

  # Callbacks

  @impl true
  def init([]) do
    Process.flag(:trap_exit, true)
    bin = bin_dir!()
    as_postgres = as_postgres()
    dir = make_dir!(as_postgres)

    try do
      start!(bin, as_postgres, dir)
    rescue
      error in RuntimeError ->
        File.rm_rf(dir)
        {:stop, error.message}
    end
  rescue
    error in RuntimeError -> {:stop, error.message}
  end

  defp start!(bin, as_postgres, dir) do
    run!(as_postgres, Path.join(bin, "initdb"), [
      "-D",
      Path.join(dir, "data"),
      "-U",
      @username,
      "--auth=trust",
      "-E",
      "UTF8",
      "--no-locale",
      "--no-sync"
    ])

    port = Grove.Ports.free()
    sh = System.find_executable("sh")

    {executable, args} =
      command(as_postgres, sh, ["-c", @watchdog, "grove-pg", bin, dir, "#{port}"])

    watchdog =
      Port.open({:spawn_executable, executable}, [
        :binary,
        :exit_status,
        :stderr_to_stdout,
        args: args
      ])

    info = %{host: "127.0.0.1", port: port, username: @username, dir: dir}
    admin = await_ready!(info, watchdog)
    # Stop it when the suite is over rather than when the VM goes.
    ExUnit.after_suite(fn _ -> stop() end)
    {:ok, %{info: info, watchdog: watchdog, admin: admin, databases: 0}}
  end

  @impl true
  def handle_call(:info, _from, state), do: {:reply, state.info, state}

  def handle_call(:create_database, _from, state) do
    databases = state.databases + 1
    name = "grove_test_#{databases}"
    # A name we made from digits; identifiers cannot be parameters.
    {:ok, ["CREATE DATABASE"]} = :pgsql.squery(state.admin, "CREATE DATABASE #{name}")
    {:reply, name, %{state | databases: databases}}
  end

  @impl true
  def handle_info({port, {:exit_status, status}}, %{watchdog: port} = state) do
    Logger.error("the test PostgreSQL server stopped (#{status}); see #{state.info.dir}/log")
    {:stop, :server_stopped, state}
  end

  def handle_info(_message, state), do: {:noreply, state}

  @impl true
  def terminate(_reason, %{watchdog: watchdog, info: info, admin: admin}) do
    # Hang up first: the driver complains loudly when the server does it.
    Process.exit(admin, :kill)
    # Closing our end of the pipe is what tells the watchdog to clean up.
    Port.close(watchdog)
    await_removed(info.dir, 100)
  catch
    _, _ -> :ok
  end

  def terminate(_reason, _state), do: :ok

  ## Helpers

  defp bin_dir! do
    candidates =
      case System.get_env("GROVE_PG_BIN") do
        nil ->
          "/usr/lib/postgresql/*/bin"
          |> Path.wildcard()
          |> Enum.sort_by(&version/1, :desc)

        dir ->
          [dir]
      end

    Enum.find(candidates, &File.exists?(Path.join(&1, "initdb"))) ||
      raise "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin: " <>
              "install them with `apt-get install postgresql` (scripts/setup test), " <>
              "set GROVE_PG_BIN, or leave these tests out with `mix test --exclude postgres`"
  end

  defp version(dir) do
    case Integer.parse(dir |> Path.dirname() |> Path.basename()) do
      {version, _} -> version
      :error -> 0
    end
  end

  # initdb and postgres refuse to run as root: as root, run them as the
  # `postgres` user that the package creates.
  defp as_postgres do
    if root?() do
      runuser = System.find_executable("runuser") || raise "running as root needs runuser"

      match?({_, 0}, System.cmd("id", ["-u", "postgres"], stderr_to_stdout: true)) ||
        raise "running as root needs a `postgres` user (Debian's postgresql package makes it)"

      [runuser, "-u", "postgres", "--"]
    else
      []
    end
  end

  defp root?, do: match?({"0\n", 0}, System.cmd("id", ["-u"]))

  defp make_dir!(as_postgres) do
    dir =
      Path.join(
        System.tmp_dir!(),
        "grove-pg-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    File.mkdir_p!(dir)
    File.chmod!(dir, 0o700)
    if as_postgres != [], do: {_, 0} = System.cmd("chown", ["postgres:", dir])
    dir
  end

  defp command([], program, args), do: {program, args}
  defp command([runuser | options], program, args), do: {runuser, options ++ [program | args]}

  defp run!(as_postgres, program, args) do
    {executable, args} = command(as_postgres, program, args)

    case System.cmd(executable, args, stderr_to_stdout: true) do
      {_, 0} -> :ok
      {output, status} -> raise "#{Path.basename(program)} failed (#{status}):\n#{output}"
    end
  end

  # Connects until the server answers, or gives up with its log.
  defp await_ready!(info, watchdog) do
    deadline = System.monotonic_time(:millisecond) + @ready_timeout
    await_ready!(info, watchdog, deadline)
  end

  defp await_ready!(info, watchdog, deadline) do
    options = [
      host: String.to_charlist(info.host),
      port: info.port,
      database: "postgres",
      user: info.username,
      as_binary: true
    ]

    receive do
      {^watchdog, {:exit_status, status}} ->
        raise "postgres exited (#{status}):\n#{read_log(info.dir)}"
    after
      0 -> :ok
    end

    case :pgsql.connect(options) do
      {:ok, conn} ->
        conn

      {:error, _} when is_integer(deadline) ->
        if System.monotonic_time(:millisecond) > deadline do
          raise "postgres did not answer on port #{info.port}:\n#{read_log(info.dir)}"
        end

        receive do
        after
          50 -> await_ready!(info, watchdog, deadline)
        end
    end
  end

  defp read_log(dir) do
    case File.read(Path.join(dir, "log")) do
      {:ok, log} -> log
      {:error, reason} -> "(no log: #{:file.format_error(reason)})"
    end
  end

  defp await_removed(_dir, 0), do: :ok

  defp await_removed(dir, tries) do
    if File.exists?(dir) do
      receive do
      after
        50 -> await_removed(dir, tries - 1)
      end
    else
      :ok
    end
  end

  defp format(%{message: message}), do: message
  defp format(reason), do: inspect(reason)
end
