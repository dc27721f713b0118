defmodule Grove.Store.SQLite do
  @moduledoc """
  The embedded adapter: SQLite through Debian's `erlang-p1-sqlite3` (the
  `:sqlite3` application), in one file, in WAL mode.

  ## Options

    * `:path` - the database file (required); missing directories are created
    * `:busy_timeout` - milliseconds a statement waits for a lock that another
      process holds (a backup, the `sqlite3` shell) before it fails
      (default `5000`)
    * `:synchronous` - `:full` to sync the WAL on every commit, so that what
      the store acknowledged survives a power cut, or `:normal` to sync only at
      checkpoints: faster, and still safe against a crash of the VM, which
      loses nothing the operating system received (default `:full`)

  ## How the driver runs

  The driver runs every statement on the VM's async thread pool (one thread
  unless `erl +A` says otherwise), the same thread for every connection to
  one file. SQLite work is therefore serial: a pool of more than one
  connection adds no parallelism, so a store's default is one. A statement
  waiting for a lock waits on that thread, holding up every other SQLite
  statement in the VM for up to `:busy_timeout`; the queue's deadlines keep
  callers from waiting that long.

  Writes run in batches, one transaction each (`BEGIN IMMEDIATE` ...
  `COMMIT`: the group commit of `Grove.Store`), which holds the file's
  write lock across its statements. With one shared thread, a second
  connection of the same VM waiting for that lock would wait on the very
  thread that has to release it, so a SQLite store has exactly one
  connection (`:pool_size` 1; more is refused). A statement refused for a
  constraint (a taken name) undoes only itself, so it fails nobody else in
  its batch. Migrations run before the store's worker connects, one store
  at a time per file in the VM, and take the write lock only when there
  is something to apply, so a store can start next to another that is
  busy on the same file (SQLite 3.35 or newer, for `RETURNING`).
  """

  @behaviour Grove.Store

  alias Grove.Store.{Account, Migrations}

  require Logger

  # SQLite's result codes that the store tells apart.
  @constraint 19
  @busy 5
  @locked 6

  @account_columns "id, name, device_id, password_hash, password_salt, avatar, created_at, updated_at"

  @insert_account """
  INSERT INTO accounts (name, device_id, password_hash, password_salt, avatar, created_at, updated_at)
  VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
  RETURNING #{@account_columns}
  """

  @account_by %{
    id: "SELECT #{@account_columns} FROM accounts WHERE id = ?1",
    name: "SELECT #{@account_columns} FROM accounts WHERE name = ?1",
    device: "SELECT #{@account_columns} FROM accounts WHERE device_id = ?1"
  }

  # A change left out is NULL here, and keeps the old value.
  @update_account """
  UPDATE accounts
  SET name = coalesce(?2, name),
      avatar = coalesce(?3, avatar),
      password_hash = coalesce(?4, password_hash),
      password_salt = coalesce(?5, password_salt),
      updated_at = ?6
  WHERE id = ?1
  RETURNING #{@account_columns}
  """

  @insert_token """
  INSERT INTO tokens (id, account_id, expires_at, revoked, created_at)
  VALUES (?1, ?2, ?3, 0, ?4)
  """

  @select_token "SELECT account_id, expires_at, revoked FROM tokens WHERE id = ?1"

  @revoke_token "UPDATE tokens SET revoked = 1 WHERE id = ?1 RETURNING account_id"

  # The whole batch is one JSON parameter, unpacked by json_each, so a batch
  # of any size is one statement with two parameters. `WHERE true` tells
  # SQLite's parser that ON CONFLICT belongs to the INSERT.
  @upsert_positions """
  INSERT INTO positions (account_id, x, y, updated_at)
  SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), ?2
  FROM json_each(?1) WHERE true
  ON CONFLICT (account_id) DO UPDATE
  SET x = excluded.x, y = excluded.y, updated_at = excluded.updated_at
  """

  @select_position "SELECT x, y FROM positions WHERE account_id = ?1"

  # Rows of one upsert of the game's state: 2 parameters each, well under
  # SQLite's 32,766.
  @rows_per_upsert 500

  @delete_state "DELETE FROM game_state WHERE scope = ?1 AND key = ?2"

  @select_state "SELECT value FROM game_state WHERE scope = ?1 AND key = ?2"

  @list_state "SELECT key, value FROM game_state WHERE scope = ?1 ORDER BY key"

  @list_keys "SELECT key FROM game_state WHERE scope = ?1"

  @record_migration "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)"

  ## Connections

  @impl true
  def config!(opts) do
    opts = Keyword.validate!(opts, path: nil, busy_timeout: 5000, synchronous: :full)
    path = opts[:path]

    unless is_binary(path) and path != "" do
      raise ArgumentError, "a SQLite store needs a :path to its file, got: #{inspect(path)}"
    end

    unless is_integer(opts[:busy_timeout]) and opts[:busy_timeout] >= 0 do
      raise ArgumentError,
            ":busy_timeout must be a non-negative integer, got: #{inspect(opts[:busy_timeout])}"
    end

    unless opts[:synchronous] in [:full, :normal] do
      raise ArgumentError,
            ":synchronous must be :full or :normal, got: #{inspect(opts[:synchronous])}"
    end

    %{
      # Absolute, so that the file does not depend on the working directory.
      path: Path.expand(path),
      busy_timeout: opts[:busy_timeout],
      synchronous: opts[:synchronous]
    }
  end

  @impl true
  def default_pool_size, do: 1

  @impl true
  def connect(%{path: path} = config) do
    with :ok <- mkdir(Path.dirname(path)),
         {:ok, db} <- :sqlite3.open(:anonymous, file: String.to_charlist(path)) do
      case setup(db, config) do
        :ok ->
          {:ok, db}

        {:error, _} = error ->
          disconnect(db)
          error
      end
    end
  end

  defp mkdir(dir) do
    case File.mkdir_p(dir) do
      :ok -> :ok
      {:error, reason} -> {:error, {:mkdir, dir, reason}}
    end
  end

  # Pragmas take no parameters; the only values put in are validated
  # integers and atoms.
  defp setup(db, %{busy_timeout: busy_timeout, synchronous: synchronous}) do
    with {:ok, _} <- query(db, "PRAGMA busy_timeout = #{busy_timeout}", []),
         {:ok, [{"wal"}]} <- query(db, "PRAGMA journal_mode = WAL", []),
         {:ok, _} <- query(db, "PRAGMA synchronous = #{String.upcase("#{synchronous}")}", []),
         {:ok, _} <- query(db, "PRAGMA foreign_keys = ON", []) do
      :ok
    else
      {:ok, rows} -> {:error, {:journal_mode, rows}}
      {:error, code, message} -> {:error, {code, message}}
    end
  end

  @impl true
  def disconnect(db) do
    # An exit signal closes the port at once (and with it the database),
    # even while the driver is busy, where a call would wait.
    Process.unlink(db)
    Process.exit(db, :shutdown)
    :ok
  end

  @impl true
  def migrate(%{path: path} = config) do
    # One store at a time per file in this VM: while one holds the write
    # lock across its statements, another's statement would wait for it on
    # the driver's one thread, which its own next statement needs.
    :global.trans({{__MODULE__, path}, self()}, fn -> migrate_file(config) end, [node()])
  end

  defp migrate_file(config) do
    with {:ok, db} <- connect(config) do
      try do
        # Looking first, without a lock, lets a store start next to another
        # that is busy writing, as long as there is nothing to migrate.
        case applied_versions(db) do
          {:ok, applied} when applied != [] ->
            if Migrations.pending(:sqlite, applied) == [],
              do: {:ok, []},
              else: run_migrations(db)

          _none_or_no_table ->
            run_migrations(db)
        end
      after
        disconnect(db)
      end
    end
  end

  defp applied_versions(db) do
    with {:ok, rows} <- query(db, "SELECT version FROM schema_migrations", []),
         do: {:ok, for({version} <- rows, do: version)}
  end

  defp run_migrations(db) do
    # IMMEDIATE takes the write lock at once: two stores (two VMs) starting
    # on one file take turns instead of both reading "nothing applied".
    with {:ok, _} <- query(db, "BEGIN IMMEDIATE", []),
         {:ok, _} <- query(db, Migrations.table(:sqlite), []),
         {:ok, applied} <- applied_versions(db),
         {:ok, done} <- apply_migrations(db, Migrations.pending(:sqlite, applied)),
         {:ok, _} <- query(db, "COMMIT", []) do
      {:ok, done}
    else
      {:error, code, message} ->
        _ = query(db, "ROLLBACK", [])
        {:error, {code, message}}
    end
  end

  defp apply_migrations(db, migrations) do
    Migrations.apply_each(
      migrations,
      fn statement -> with {:ok, _} <- query(db, statement, []), do: :ok end,
      fn version, name ->
        with {:ok, _} <- query(db, @record_migration, [version, name, now()]), do: :ok
      end
    )
  end

  ## Writes, in one transaction

  @impl true
  def write(db, operations) do
    case query(db, "BEGIN IMMEDIATE", []) do
      {:ok, _} ->
        results = Enum.map(operations, fn {fun, args} -> apply(__MODULE__, fun, [db | args]) end)

        with false <- {:error, :unavailable} in results,
             {:ok, _} <- query(db, "COMMIT", []) do
          {:ok, results}
        else
          failed ->
            if failed != true, do: unavailable(:commit, failed)
            _ = query(db, "ROLLBACK", [])
            {:error, :unavailable}
        end

      error ->
        unavailable(:begin, error)
    end
  end

  ## Accounts

  @impl true
  def create_account(db, %{token: %{id: id, expires_at: expires_at}} = attrs) do
    with {:ok, account} <- create_account(db, %{attrs | token: nil}) do
      case create_token(db, %{id: id, account_id: account.id, expires_at: expires_at}) do
        :ok -> {:ok, account}
        # Sixteen random bytes that collide: the caller tries again.
        {:error, _} -> {:error, :unavailable}
      end
    end
  end

  def create_account(db, attrs) do
    params = [
      text(attrs.name),
      blob(attrs.device_id),
      blob(attrs.password_hash),
      blob(attrs.password_salt),
      attrs.avatar,
      now()
    ]

    case query(db, @insert_account, params) do
      {:ok, [row]} ->
        {:ok, account(row)}

      {:error, @constraint, "UNIQUE constraint failed: accounts.name"} ->
        {:error, :name_taken}

      {:error, @constraint, "UNIQUE constraint failed: accounts.device_id"} ->
        {:error, :device_taken}

      error ->
        unavailable(:create_account, error)
    end
  end

  @impl true
  def fetch_account(db, {by, value}) do
    param = if by == :device, do: blob(value), else: value

    case query(db, Map.fetch!(@account_by, by), [param]) do
      {:ok, [row]} -> {:ok, account(row)}
      {:ok, []} -> {:error, :not_found}
      error -> unavailable(:fetch_account, error)
    end
  end

  @impl true
  def update_account(db, id, changes) do
    params = [
      id,
      text(changes[:name]),
      text(changes[:avatar]),
      blob(changes[:password_hash]),
      blob(changes[:password_salt]),
      now()
    ]

    case query(db, @update_account, params) do
      {:ok, [row]} -> {:ok, account(row)}
      {:ok, []} -> {:error, :not_found}
      {:error, @constraint, "UNIQUE constraint failed: accounts.name"} -> {:error, :name_taken}
      error -> unavailable(:update_account, error)
    end
  end

  defp account(
         {id, name, device_id, password_hash, password_salt, avatar, created_at, updated_at}
       ) do
    %Account{
      id: id,
      name: value(name),
      device_id: value(device_id),
      password_hash: value(password_hash),
      password_salt: value(password_salt),
      avatar: avatar,
      created_at: created_at,
      updated_at: updated_at
    }
  end

  ## Tokens

  @impl true
  def create_token(db, %{id: id, account_id: account_id, expires_at: expires_at}) do
    case query(db, @insert_token, [blob(id), account_id, expires_at, now()]) do
      {:ok, _} -> :ok
      {:error, @constraint, "FOREIGN KEY constraint failed"} -> {:error, :not_found}
      {:error, @constraint, "UNIQUE constraint failed: tokens.id"} -> {:error, :token_taken}
      error -> unavailable(:create_token, error)
    end
  end

  @impl true
  def fetch_token(db, token_id) do
    case query(db, @select_token, [blob(token_id)]) do
      {:ok, [{account_id, expires_at, revoked}]} ->
        {:ok, %{account_id: account_id, expires_at: expires_at, revoked: revoked != 0}}

      {:ok, []} ->
        {:error, :not_found}

      error ->
        unavailable(:fetch_token, error)
    end
  end

  @impl true
  def revoke_token(db, token_id) do
    case query(db, @revoke_token, [blob(token_id)]) do
      {:ok, [_]} -> :ok
      {:ok, []} -> {:error, :not_found}
      error -> unavailable(:revoke_token, error)
    end
  end

  ## Positions

  @impl true
  def save_positions(db, positions) do
    # Only integers go into the JSON, so building it by hand is safe.
    json = [
      ?[,
      Enum.map_intersperse(positions, ?,, fn %{account_id: id, x: x, y: y} ->
        [?[, Integer.to_string(id), ?,, Integer.to_string(x), ?,, Integer.to_string(y), ?]]
      end),
      ?]
    ]

    case query(db, @upsert_positions, [IO.iodata_to_binary(json), now()]) do
      {:ok, _} -> :ok
      error -> unavailable(:save_positions, error)
    end
  end

  @impl true
  def fetch_position(db, account_id) do
    case query(db, @select_position, [account_id]) do
      {:ok, [{x, y}]} -> {:ok, {x, y}}
      {:ok, []} -> {:error, :not_found}
      error -> unavailable(:fetch_position, error)
    end
  end

  ## The game's state

  # Entries in order: each run of values written in statements of up to
  # `@rows_per_upsert` rows, each deletion on its own. A statement per
  # value cost a call to the driver's thread and a statement compiled
  # each: the game's saver writes every zone's changes every few seconds
  # (docs/benchmarks.md, "The world alone").
  @impl true
  def save_state(db, scope, entries) do
    save_runs(db, scope, entries, now())
  end

  defp save_runs(_db, _scope, [], _now), do: :ok

  defp save_runs(db, scope, [{key, nil} | rest], now) do
    case query(db, @delete_state, [scope, key]) do
      {:ok, _} -> save_runs(db, scope, rest, now)
      error -> unavailable(:save_state, error)
    end
  end

  defp save_runs(db, scope, entries, now) do
    {run, rest} = upsert_run(entries, @rows_per_upsert, [])

    case query(db, upsert_rows(length(run)), [scope, now | run]) do
      {:ok, _} -> save_runs(db, scope, rest, now)
      error -> unavailable(:save_state, error)
    end
  end

  # Up to `left` values from the head of `entries`, as the statement's
  # parameters after the scope and the time: key, value, key, value, ...
  defp upsert_run([{key, value} | rest], left, run) when value != nil and left > 0,
    do: upsert_run(rest, left - 1, [{:blob, value}, key | run])

  defp upsert_run(rest, _left, run), do: {Enum.reverse(run), rest}

  # An upsert of `params` / 2 rows: ?1 the scope, ?2 the time, then each
  # row's key and value. Rows of one statement are written in order, so
  # a key given twice keeps its last value, as one statement each did.
  # The rows of a full statement are written out once, here; one of fewer
  # rows takes the first of them, up to where its last one ends.
  @upsert_rows for row <- 0..(@rows_per_upsert - 1),
                   do: "(?1, ?#{3 + 2 * row}, ?#{4 + 2 * row}, ?2)"
  @upsert_values Enum.join(@upsert_rows, ", ")
  @upsert_ends @upsert_rows
               |> Enum.scan(-2, &(&2 + 2 + byte_size(&1)))
               |> List.to_tuple()

  defp upsert_rows(params) do
    "INSERT INTO game_state (scope, key, value, updated_at) VALUES " <>
      binary_part(@upsert_values, 0, elem(@upsert_ends, div(params, 2) - 1)) <>
      " ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at"
  end

  @impl true
  def fetch_state(db, scope, key) do
    case query(db, @select_state, [scope, key]) do
      {:ok, [{value}]} -> {:ok, value(value)}
      {:ok, []} -> {:error, :not_found}
      error -> unavailable(:fetch_state, error)
    end
  end

  @impl true
  def list_state(db, scope) do
    case query(db, @list_state, [scope]) do
      {:ok, rows} -> {:ok, for({key, value} <- rows, do: {key, value(value)})}
      error -> unavailable(:list_state, error)
    end
  end

  @impl true
  def list_keys(db, scope) do
    case query(db, @list_keys, [scope]) do
      {:ok, rows} -> {:ok, for({key} <- rows, do: key)}
      error -> unavailable(:list_keys, error)
    end
  end

  ## Helpers

  # The driver's answers, made uniform: rows (none for a statement without
  # result columns) or a result code and message.
  defp query(db, sql, params) do
    case :sqlite3.sql_exec_timeout(db, sql, params, :infinity) do
      [{:columns, _}, {:rows, rows}] -> {:ok, rows}
      [{:columns, _}, {:rows, _}, {:error, code, message}] -> {:error, code, to_string(message)}
      {:error, code, message} -> {:error, code, to_string(message)}
      {:error, reason} -> {:error, :driver, inspect(reason)}
      :ok -> {:ok, []}
      {:rowid, _} -> {:ok, []}
    end
  end

  defp unavailable(operation, {:error, code, message}) do
    if code in [@busy, @locked] do
      Logger.warning("sqlite store: #{operation}: database busy: #{message}")
    else
      Logger.error("sqlite store: #{operation} failed: #{inspect(code)} #{message}")
    end

    {:error, :unavailable}
  end

  # Text goes as text; anything opaque as a BLOB, so any bytes round-trip.
  defp text(nil), do: :null
  defp text(text), do: text

  defp blob(nil), do: :null
  defp blob(bytes), do: {:blob, bytes}

  defp value(:null), do: nil
  defp value({:blob, bytes}), do: bytes
  defp value(value), do: value

  defp now, do: System.os_time(:second)
end
