defmodule Grove.StoreCase do
  @moduledoc """
  Shared setup for the tests of `Grove.Store`: a private store per test, on
  the engine the test module names, so that one suite runs on both.

      use Grove.StoreCase, adapter: :postgres, async: true

      @tag store: [queue_limit: 2]
      test "...", %{store: store} do ...

  A SQLite store gets a file in a temp directory of its own (in a
  subdirectory that does not exist yet); a PostgreSQL store gets a fresh
  database on the throwaway server of `Grove.PostgresServer`. Tag a test
  `store: false` to start the store yourself: its options are in the
  context as `store_opts` either way.

  Modules are tagged with their engine (`:sqlite` or `:postgres`), so
  `mix test --exclude postgres` leaves the server out.
  """

  use ExUnit.CaseTemplate

  import ExUnit.Assertions

  alias Grove.Store

  using opts do
    adapter = Keyword.fetch!(opts, :adapter)

    quote do
      import Grove.StoreCase
      alias Grove.Store
      @moduletag adapter: unquote(adapter)
      @moduletag unquote(adapter)
    end
  end

  setup context do
    name = :"store_#{System.unique_integer([:positive])}"

    opts =
      [name: name, adapter: context.adapter, pool_size: 2, timeout: 10_000]
      |> Keyword.merge(engine_options(context.adapter))
      |> Keyword.merge(if is_list(context[:store]), do: context[:store], else: [])

    if context[:store] != false, do: start_supervised!({Store, opts}, id: name)
    %{store: name, store_opts: opts}
  end

  defp engine_options(:sqlite) do
    dir =
      Path.join(
        System.tmp_dir!(),
        "grove-store-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    ExUnit.Callbacks.on_exit(fn -> File.rm_rf(dir) end)
    # One connection, the store's default, is what SQLite runs best with.
    [path: Path.join([dir, "not", "yet", "grove.db"]), pool_size: 1]
  end

  defp engine_options(:postgres) do
    server = Grove.PostgresServer.info()

    [
      host: server.host,
      port: server.port,
      username: server.username,
      database: Grove.PostgresServer.create_database()
    ]
  end

  @doc """
  Takes the write lock of the store's database from outside the store and
  returns a function that releases it. Until then every write of the store
  waits: a database stalled for real, not a mock.

  On PostgreSQL the lock is a transaction that locks the tables. On SQLite
  it is an exclusive transaction in another OS process (a peer VM): in this
  VM it would wait behind the store on the driver's one thread.
  """
  def hold_write_lock(%{adapter: :postgres, store_opts: opts}) do
    conn = connect_postgres(opts)

    {:ok, ["BEGIN", "LOCK TABLE"]} =
      :pgsql.squery(conn, "BEGIN; LOCK TABLE accounts, tokens, positions IN EXCLUSIVE MODE")

    once(fn ->
      :pgsql.squery(conn, "ROLLBACK")
      Process.exit(conn, :shutdown)
    end)
  end

  def hold_write_lock(%{adapter: :sqlite, store_opts: opts}) do
    peer = start_peer([])
    file = opts[:path] |> Path.expand() |> String.to_charlist()
    {:ok, _} = :peer.call(peer, :sqlite3, :open, [:lock_holder, [file: file]])
    :ok = :peer.call(peer, :sqlite3, :sql_exec, [:lock_holder, "BEGIN EXCLUSIVE"])

    once(fn ->
      :ok = :peer.call(peer, :sqlite3, :sql_exec, [:lock_holder, "ROLLBACK"])
      :peer.stop(peer)
    end)
  end

  # A release function that may be called again (the test, then on_exit).
  defp once(release) do
    done = :atomics.new(1, [])
    release = fn -> if :atomics.exchange(done, 1, 1) == 0, do: release.() end
    ExUnit.Callbacks.on_exit(release)
    release
  end

  @doc """
  Starts a peer VM (another OS process) with this VM's code path, unlinked
  and monitored; `args` go to `:peer.start/1`.
  """
  def start_peer(args) do
    code_path = Enum.flat_map(:code.get_path(), &[~c"-pa", &1])
    {:ok, peer, _node} = :peer.start(%{connection: :standard_io, args: code_path ++ args})
    Process.monitor(peer)
    ExUnit.Callbacks.on_exit(fn -> if Process.alive?(peer), do: :peer.stop(peer) end)
    peer
  end

  @doc """
  Starts a store in the calling VM under a process of its own that lives on
  after the caller; meant to be called in a peer through `:peer.call/4`.
  """
  def start_detached(opts) do
    {:ok, _} = Application.ensure_all_started(:logger)
    Logger.configure(level: :warning)
    caller = self()

    owner =
      spawn(fn ->
        send(caller, {:started, self(), Store.start_link(opts)})

        receive do
          :never -> :ok
        end
      end)

    receive do
      {:started, ^owner, result} -> result
    end
  end

  @doc """
  Starts `writers` processes in the calling VM (a peer, through
  `:peer.call/4`) that create accounts with new device ids in `store`
  until the VM dies, each appending `DEVICE_ID ACCOUNT_ID` to a file of
  its own in `dir` as soon as the store has acknowledged the account.
  """
  def start_storm(store, writers, dir) do
    File.mkdir_p!(dir)
    acks = :atomics.new(1, [])
    :persistent_term.put({__MODULE__, :storm}, acks)

    for writer <- 1..writers do
      spawn(fn ->
        # Raw files: each line is a write(2) of its own, in the OS once written.
        {:ok, file} = :file.open(Path.join(dir, "#{writer}.acks"), [:append, :raw, :binary])
        storm_writer(store, writer, file, acks, 1)
      end)
    end

    :ok
  end

  defp storm_writer(store, writer, file, acks, n) do
    device_id = "storm-#{writer}-#{n}"

    case Store.create_account(store, %{device_id: device_id}, timeout: 30_000) do
      {:ok, account} ->
        :ok = :file.write(file, "#{device_id} #{account.id}\n")
        :atomics.add(acks, 1, 1)

      {:error, _} ->
        :ok
    end

    storm_writer(store, writer, file, acks, n + 1)
  end

  @doc """
  Waits in the storm's VM until at least `count` writes were acknowledged,
  writes the store's counters to `stats` in `dir`, and kills the VM with
  SIGKILL from inside, while the writers write on; meant to be cast to a
  peer (`:peer.cast/4`), which never answers. Nothing stands between the
  count and the kill: the test's own calls to a VM this busy (the
  counters, its OS pid) and the `kill` it ran took 1.4 s on a loaded
  machine, in which 10,000 more writes were acknowledged, for the test to
  read back one by one.
  """
  def kill_at(store, count, dir) do
    acks = :persistent_term.get({__MODULE__, :storm})
    await(acks, count)
    File.write!(Path.join(dir, "stats"), :erlang.term_to_binary(Store.stats(store)))
    :os.cmd(~c"kill -KILL #{:os.getpid()}")
  end

  defp await(acks, count) do
    if :atomics.get(acks, 1) < count do
      # The writers make progress on their own; this only looks again.
      receive do
      after
        5 -> await(acks, count)
      end
    end
  end

  @doc "The store's counters as `kill_at/3` wrote them before the kill."
  def storm_stats(dir), do: :erlang.binary_to_term(File.read!(Path.join(dir, "stats")))

  @doc "What a storm's writers noted as acknowledged: device id to account id."
  def storm_acks(dir) do
    for path <- Path.wildcard(Path.join(dir, "*.acks")),
        line <- String.split(File.read!(path), "\n", trim: true),
        into: %{} do
      [device_id, id] = String.split(line, " ")
      {device_id, String.to_integer(id)}
    end
  end

  @doc "The schema versions the store's database has recorded, read over a connection of the test's own."
  def schema_versions(%{adapter: :sqlite, store_opts: opts}) do
    {:ok, db} = :sqlite3.open(:anonymous, file: String.to_charlist(Path.expand(opts[:path])))

    try do
      [columns: _, rows: rows] = :sqlite3.sql_exec(db, "SELECT version FROM schema_migrations")
      Enum.map(rows, fn {version} -> version end)
    after
      :sqlite3.close(db)
    end
  end

  def schema_versions(%{adapter: :postgres, store_opts: opts}) do
    conn = connect_postgres(opts)

    try do
      {:ok, [{_, _, rows}]} = :pgsql.squery(conn, "SELECT version FROM schema_migrations")
      Enum.map(rows, fn [version] -> String.to_integer(version) end)
    after
      Process.exit(conn, :shutdown)
    end
  end

  @doc """
  Runs SQL on the PostgreSQL server as its superuser, connected to the
  `postgres` database (so that the store's own can be altered); returns the
  rows of the last statement.
  """
  def admin_sql(%{adapter: :postgres, store_opts: opts}, sql) do
    conn = connect_postgres(Keyword.put(opts, :database, "postgres"))

    try do
      {:ok, results} = :pgsql.squery(conn, sql)
      refute Enum.any?(results, &match?({:error, _}, &1)), inspect(results)

      case List.last(results) do
        {_command, _columns, rows} -> rows
        _command -> []
      end
    after
      Process.exit(conn, :shutdown)
    end
  end

  @doc "Closes every connection to the store's PostgreSQL database, from the server's side."
  def drop_connections(%{store_opts: opts} = context) do
    # The name is the test's own, made of letters, digits and underscores.
    admin_sql(
      context,
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '#{opts[:database]}'"
    )
    |> length()
  end

  defp connect_postgres(opts) do
    {:ok, conn} =
      :pgsql.connect(
        host: String.to_charlist(opts[:host]),
        port: opts[:port],
        database: opts[:database],
        user: opts[:username],
        as_binary: true
      )

    conn
  end

  @doc """
  Kills the store's supervisor with `:kill` and waits until every process of
  the store is gone, so that it can start again under the same name.
  """
  def kill_store(store) do
    pid = Process.whereis(store)
    refs = Enum.map([pid | descendants(pid)], &Process.monitor/1)
    Process.unlink(pid)
    Process.exit(pid, :kill)
    for ref <- refs, do: receive(do: ({:DOWN, ^ref, _, _, _} -> :ok))
    :ok
  end

  defp descendants(supervisor) do
    for {_, child, type, _} <- Supervisor.which_children(supervisor), is_pid(child) do
      if type == :supervisor, do: [child | descendants(child)], else: [child]
    end
    |> List.flatten()
  end

  @doc """
  Retries `check` (which asserts) until it passes or about five seconds have
  gone: for effects the store brings about on its own time.
  """
  def eventually(check, tries \\ 500), do: Grove.WorldCase.eventually(check, tries)
end
