defmodule Grove.Store.Postgres do
  @moduledoc """
  The adapter for PostgreSQL, through Debian's `erlang-p1-pgsql` (the
  `:p1_pgsql` application).

  ## Options

    * `:host` - the server's host name or address (default `"localhost"`)
    * `:port` - its TCP port (default `5432`)
    * `:database` - the database, which must exist (default `"grove"`)
    * `:username` - the role to log in as (default `"grove"`)
    * `:password` - its password; trust, password, MD5 and SCRAM-SHA-256
      authentication all work (default `""`)
    * `:statement_timeout` - milliseconds the server lets one statement run,
      waiting for locks included, before it cancels it (default `4000`).
      Less than 5000: the driver gives up on any call after five seconds,
      and a connection whose call was given up on has to be dropped.
    * `:connect_timeout` - milliseconds to open a connection (default `5000`)

  ## How it talks to the server

  A connection prepares every statement by name when it opens, all in one
  round trip; a call then sends only the statement's name and the
  parameters (`execute/3`), never SQL built from them. Text and bytes go
  as binary parameters, integers as text.

  Writes run in batches, one transaction each (the group commit of
  `Grove.Store`); a batch of one write is one statement, without a
  transaction around it. PostgreSQL aborts a whole transaction on an
  error, so the writes that may be refused are written not to raise one:
  an insert skips a conflicting row (`ON CONFLICT DO NOTHING`) and a
  second statement then tells the caller why, and a rename checks the name
  is free in the same statement. What races past those checks (two
  batches taking one name at once) fails its transaction, whose writes the
  store then retries one by one. Migrations run on a connection of their
  own at start-up.

  The driver's `pquery/3` is avoided on purpose: it waits forever for the
  answer of a statement that returns no rows.
  """

  @behaviour Grove.Store

  alias Grove.Store.{Account, Migrations}

  require Logger

  @account_columns "id, name, device_id, password_hash, password_salt, avatar, created_at, updated_at"

  @statements [
    insert_account: """
    INSERT INTO accounts (name, device_id, password_hash, password_salt, avatar, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $6)
    ON CONFLICT DO NOTHING
    RETURNING #{@account_columns}
    """,
    # The account and its first token in one statement.
    insert_account_token: """
    WITH account AS (
      INSERT INTO accounts (name, device_id, password_hash, password_salt, avatar, created_at, updated_at)
      VALUES ($1, $2, $3, $4, $5, $6, $6)
      ON CONFLICT DO NOTHING
      RETURNING #{@account_columns}
    ), token AS (
      INSERT INTO tokens (id, account_id, expires_at, revoked, created_at)
      SELECT $7::bytea, id, $8::bigint, FALSE, $6::bigint FROM account
    )
    SELECT #{@account_columns} FROM account
    """,
    name_taken: "SELECT 1 FROM accounts WHERE name = $1",
    account_by_id: "SELECT #{@account_columns} FROM accounts WHERE id = $1",
    account_by_name: "SELECT #{@account_columns} FROM accounts WHERE name = $1",
    account_by_device: "SELECT #{@account_columns} FROM accounts WHERE device_id = $1",
    # A change left out is NULL here, and keeps the old value. A name that
    # another account has changes nothing.
    update_account: """
    UPDATE accounts
    SET name = COALESCE($2, name),
        avatar = COALESCE($3, avatar),
        password_hash = COALESCE($4, password_hash),
        password_salt = COALESCE($5, password_salt),
        updated_at = $6
    WHERE id = $1
      AND NOT EXISTS (SELECT 1 FROM accounts other WHERE other.name = $2 AND other.id <> $1)
    RETURNING #{@account_columns}
    """,
    account_exists: "SELECT 1 FROM accounts WHERE id = $1",
    insert_token: """
    INSERT INTO tokens (id, account_id, expires_at, revoked, created_at)
    SELECT $1::bytea, $2::bigint, $3::bigint, FALSE, $4::bigint
    WHERE EXISTS (SELECT 1 FROM accounts WHERE id = $2::bigint)
    ON CONFLICT DO NOTHING
    """,
    select_token: "SELECT account_id, expires_at, revoked FROM tokens WHERE id = $1",
    revoke_token: "UPDATE tokens SET revoked = TRUE WHERE id = $1",
    # The batch travels as three arrays, zipped back into rows by unnest: a
    # batch of any size is one statement with four parameters.
    upsert_positions: """
    INSERT INTO positions (account_id, x, y, updated_at)
    SELECT p.account_id, p.x, p.y, $4
    FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS p (account_id, x, y)
    ON CONFLICT (account_id) DO UPDATE
    SET x = excluded.x, y = excluded.y, updated_at = excluded.updated_at
    """,
    select_position: "SELECT x, y FROM positions WHERE account_id = $1",
    # A save of any size in one statement: the keys to delete in one array,
    # the keys and values to upsert in two more, zipped back into rows by
    # unnest. The keys of the two parts are distinct, so the deletion and
    # the upsert never touch one row.
    save_state: """
    WITH deleted AS (
      DELETE FROM game_state WHERE scope = $1::text AND key = ANY ($2::text[])
    )
    INSERT INTO game_state (scope, key, value, updated_at)
    SELECT $1::text, s.key, s.value, $5::bigint
    FROM unnest($3::text[], $4::bytea[]) AS s (key, value)
    ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
    """,
    select_state: "SELECT value FROM game_state WHERE scope = $1 AND key = $2",
    list_state: ~S|SELECT key, value FROM game_state WHERE scope = $1 ORDER BY key COLLATE "C"|,
    list_keys: "SELECT key FROM game_state WHERE scope = $1"
  ]

  @names Map.new(@statements, fn {key, _sql} -> {key, "grove_#{key}"} end)

  # Every statement prepared in one round trip. SQL PREPARE names the same
  # statements that the protocol's Bind uses; the driver's own prepare/3
  # costs a round trip and a delayed ACK (some 40 ms) per statement.
  @prepare_all Enum.map_join(@statements, ";\n", fn {key, sql} ->
                 "PREPARE #{Map.fetch!(@names, key)} AS #{sql}"
               end)

  @record_migration """
  PREPARE grove_record_migration AS
  INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)
  """

  # The key of the advisory lock that makes concurrent migrations take turns.
  @migration_lock :erlang.phash2("Grove.Store.Migrations")

  # Errors that mean "busy", logged as warnings: statement timeout, lock
  # timeout, serialization failure, deadlock.
  @busy_codes ["57014", "55P03", "40001", "40P01"]

  ## Connections

  @impl true
  def config!(opts) do
    opts =
      Keyword.validate!(opts,
        host: "localhost",
        port: 5432,
        database: "grove",
        username: "grove",
        password: "",
        statement_timeout: 4000,
        connect_timeout: 5000
      )

    for key <- [:host, :database, :username], not is_binary(opts[key]) do
      raise ArgumentError, "#{inspect(key)} must be a string, got: #{inspect(opts[key])}"
    end

    # Held as a Grove.Secret from here on; never printed, even when wrong.
    unless is_binary(opts[:password]) or is_struct(opts[:password], Grove.Secret),
      do: raise(ArgumentError, ":password must be a string")

    opts = Keyword.update!(opts, :password, &Grove.Secret.new/1)

    unless is_integer(opts[:port]) and opts[:port] in 1..65_535 do
      raise ArgumentError, ":port must be a TCP port number, got: #{inspect(opts[:port])}"
    end

    unless is_integer(opts[:statement_timeout]) and opts[:statement_timeout] in 1..4_999 do
      raise ArgumentError,
            ":statement_timeout must be 1..4999 milliseconds (the driver gives up on a call after 5000), " <>
              "got: #{inspect(opts[:statement_timeout])}"
    end

    unless is_integer(opts[:connect_timeout]) and opts[:connect_timeout] > 0 do
      raise ArgumentError,
            ":connect_timeout must be a positive integer, got: #{inspect(opts[:connect_timeout])}"
    end

    Map.new(opts)
  end

  @impl true
  def default_pool_size, do: 4

  @impl true
  def connect(config) do
    with {:ok, conn} <- open(config) do
      case simple(conn, @prepare_all, config.connect_timeout) do
        :ok ->
          {:ok, conn}

        {:error, reason} ->
          disconnect(conn)
          {:error, {:prepare, reason}}
      end
    end
  end

  # A connection with its session set up, linked to the caller.
  defp open(config) do
    options = [
      host: String.to_charlist(config.host),
      port: config.port,
      database: config.database,
      user: config.username,
      password: Grove.Secret.reveal(config.password),
      as_binary: true,
      connect_timeout: config.connect_timeout
    ]

    # The driver starts its connection unlinked; link it so that it dies with
    # its owner, and its owner (trapping exits) hears when it dies.
    with {:ok, conn} <- :pgsql.connect(options) do
      Process.link(conn)

      # SET takes no parameters; the only value put in is a validated integer.
      session =
        "SET statement_timeout = #{config.statement_timeout}; SET application_name = 'grove'"

      case simple(conn, session, config.connect_timeout) do
        :ok ->
          {:ok, conn}

        {:error, _} = error ->
          disconnect(conn)
          error
      end
    end
  end

  @impl true
  def disconnect(conn) do
    # An exit signal takes the driver's socket process with it (a polite
    # `terminate` leaves that process behind) and never waits on a busy
    # connection. The server sees the socket close, as after a Terminate.
    Process.unlink(conn)
    Process.exit(conn, :shutdown)
    :ok
  end

  @impl true
  def migrate(config) do
    with {:ok, conn} <- open(config) do
      try do
        run_migrations(conn)
      after
        disconnect(conn)
      end
    end
  end

  defp run_migrations(conn) do
    with :ok <- simple(conn, "BEGIN"),
         :ok <- simple(conn, "SELECT pg_advisory_xact_lock(#{@migration_lock})"),
         :ok <- simple(conn, Migrations.table(:postgres)),
         :ok <- simple(conn, @record_migration),
         {:ok, applied} <- applied_versions(conn),
         {:ok, done} <- apply_migrations(conn, Migrations.pending(:postgres, applied)),
         :ok <- simple(conn, "COMMIT") do
      {:ok, done}
    else
      {:error, _} = error ->
        _ = :pgsql.squery(conn, "ROLLBACK")
        error
    end
  end

  defp applied_versions(conn) do
    case :pgsql.squery(conn, "SELECT version FROM schema_migrations") do
      {:ok, [{_command, _columns, rows}]} ->
        {:ok, for([version] <- rows, do: String.to_integer(version))}

      {:ok, results} ->
        {:error, first_error(results)}
    end
  end

  defp apply_migrations(conn, migrations) do
    Migrations.apply_each(migrations, &simple(conn, &1), &record_migration(conn, &1, &2))
  end

  defp record_migration(conn, version, name) do
    case :pgsql.execute(conn, "grove_record_migration", [version, name, now()]) do
      {:ok, _} -> :ok
      {:error, fields} -> {:error, message(fields)}
    end
  end

  ## Writes, in one transaction

  @impl true
  def write(conn, [{fun, args}]) do
    case apply(__MODULE__, fun, [conn | args]) do
      {:error, :unavailable} -> {:error, :unavailable}
      result -> {:ok, [result]}
    end
  end

  def write(conn, operations) do
    with :ok <- simple_write(conn, "BEGIN") do
      results = Enum.map(operations, fn {fun, args} -> apply(__MODULE__, fun, [conn | args]) end)

      if {:error, :unavailable} in results do
        _ = simple_write(conn, "ROLLBACK")
        {:error, :unavailable}
      else
        case simple_write(conn, "COMMIT") do
          :ok -> {:ok, results}
          {:error, :unavailable} -> {:error, :unavailable}
        end
      end
    end
  end

  defp simple_write(conn, sql) do
    case :pgsql.squery(conn, sql) do
      {:ok, results} ->
        case first_error(results) do
          nil ->
            :ok

          error ->
            Logger.error("postgres store: #{sql} failed: #{error}")
            {:error, :unavailable}
        end
    end
  end

  ## Accounts

  @impl true
  def create_account(conn, attrs) do
    params = [
      attrs.name,
      attrs.device_id,
      attrs.password_hash,
      attrs.password_salt,
      attrs.avatar,
      now()
    ]

    {statement, params} =
      case attrs[:token] do
        nil -> {:insert_account, params}
        %{id: id, expires_at: expires_at} -> {:insert_account_token, params ++ [id, expires_at]}
      end

    case execute(conn, statement, params) do
      {:ok, [row]} -> {:ok, account(row)}
      # Skipped for a conflict: which one?
      {:ok, []} -> conflict(conn, attrs.name)
      {:error, error} -> unavailable(:create_account, error)
    end
  end

  defp conflict(_conn, nil), do: {:error, :device_taken}

  defp conflict(conn, name) do
    case execute(conn, :name_taken, [name]) do
      {:ok, [_]} -> {:error, :name_taken}
      {:ok, []} -> {:error, :device_taken}
      {:error, error} -> unavailable(:create_account, error)
    end
  end

  @impl true
  def fetch_account(conn, {by, value}) do
    statement =
      case by do
        :id -> :account_by_id
        :name -> :account_by_name
        :device -> :account_by_device
      end

    case execute(conn, statement, [value]) do
      {:ok, [row]} -> {:ok, account(row)}
      {:ok, []} -> {:error, :not_found}
      {:error, error} -> unavailable(:fetch_account, error)
    end
  end

  @impl true
  def update_account(conn, id, changes) do
    params = [
      id,
      changes[:name],
      changes[:avatar],
      changes[:password_hash],
      changes[:password_salt],
      now()
    ]

    case execute(conn, :update_account, params) do
      {:ok, [row]} -> {:ok, account(row)}
      {:ok, []} -> missing_or_taken(conn, id, :update_account)
      {:error, error} -> unavailable(:update_account, error)
    end
  end

  # A statement that changed nothing: no such account, or the name was taken.
  defp missing_or_taken(conn, id, operation) do
    case execute(conn, :account_exists, [id]) do
      {:ok, [_]} -> {:error, :name_taken}
      {:ok, []} -> {:error, :not_found}
      {:error, error} -> unavailable(operation, error)
    end
  end

  defp account([id, name, device_id, password_hash, password_salt, avatar, created_at, updated_at]) do
    %Account{
      id: integer(id),
      name: value(name),
      device_id: value(device_id),
      password_hash: value(password_hash),
      password_salt: value(password_salt),
      avatar: value(avatar),
      created_at: integer(created_at),
      updated_at: integer(updated_at)
    }
  end

  ## Tokens

  @impl true
  def create_token(conn, %{id: id, account_id: account_id, expires_at: expires_at}) do
    case execute(conn, :insert_token, [id, account_id, expires_at, now()]) do
      {:ok, 1} ->
        :ok

      # Skipped: no such account, or a token with this id exists.
      {:ok, 0} ->
        case execute(conn, :account_exists, [account_id]) do
          {:ok, [_]} -> {:error, :token_taken}
          {:ok, []} -> {:error, :not_found}
          {:error, error} -> unavailable(:create_token, error)
        end

      {:error, error} ->
        unavailable(:create_token, error)
    end
  end

  @impl true
  def fetch_token(conn, token_id) do
    case execute(conn, :select_token, [token_id]) do
      {:ok, [[account_id, expires_at, {:bool, revoked}]]} ->
        {:ok,
         %{
           account_id: integer(account_id),
           expires_at: integer(expires_at),
           revoked: revoked == "1"
         }}

      {:ok, []} ->
        {:error, :not_found}

      {:error, error} ->
        unavailable(:fetch_token, error)
    end
  end

  @impl true
  def revoke_token(conn, token_id) do
    case execute(conn, :revoke_token, [token_id]) do
      {:ok, 1} -> :ok
      {:ok, 0} -> {:error, :not_found}
      {:error, error} -> unavailable(:revoke_token, error)
    end
  end

  ## Positions

  @impl true
  def save_positions(conn, positions) do
    params = [
      array(positions, :account_id),
      array(positions, :x),
      array(positions, :y),
      now()
    ]

    case execute(conn, :upsert_positions, params) do
      {:ok, _} -> :ok
      {:error, error} -> unavailable(:save_positions, error)
    end
  end

  # An array literal of integers, as a list: the driver sends lists as text
  # (binaries it would send in binary format, which an array is not).
  defp array(positions, key) do
    [
      IO.iodata_to_binary([
        ?{,
        Enum.map_intersperse(positions, ?,, &Integer.to_string(&1[key])),
        ?}
      ])
    ]
  end

  @impl true
  def fetch_position(conn, account_id) do
    case execute(conn, :select_position, [account_id]) do
      {:ok, [[x, y]]} -> {:ok, {integer(x), integer(y)}}
      {:ok, []} -> {:error, :not_found}
      {:error, error} -> unavailable(:fetch_position, error)
    end
  end

  ## The game's state

  # The types of an array's elements, by their OIDs.
  @text_oid 25
  @bytea_oid 17

  # One statement, whatever the number of entries: a statement per entry
  # was a round trip each, and a save of a thousand zones took seconds of
  # a busy machine. Each key ends as its last entry says.
  @impl true
  def save_state(conn, scope, entries) do
    {deleted, saved} =
      entries
      |> Map.new()
      |> Enum.split_with(fn {_key, value} -> value == nil end)

    params = [
      scope,
      binary_array(@text_oid, for({key, nil} <- deleted, do: key)),
      binary_array(@text_oid, for({key, _value} <- saved, do: key)),
      binary_array(@bytea_oid, for({_key, value} <- saved, do: value)),
      now()
    ]

    case execute(conn, :save_state, params) do
      {:ok, _} -> :ok
      {:error, error} -> unavailable(:save_state, error)
    end
  end

  # A one-dimensional array of binaries in PostgreSQL's binary format (what
  # array_recv reads): its dimensions, no NULL among them, the type of its
  # elements, then each element's length and bytes as they are. Bytes go
  # through untouched, where a text literal would need escaping.
  defp binary_array(type, []), do: <<0::32, 0::32, type::32>>

  defp binary_array(type, elements) do
    IO.iodata_to_binary([
      <<1::32, 0::32, type::32, length(elements)::32, 1::32>>
      | Enum.map(elements, &[<<byte_size(&1)::32>>, &1])
    ])
  end

  @impl true
  def fetch_state(conn, scope, key) do
    case execute(conn, :select_state, [scope, key]) do
      {:ok, [[value]]} -> {:ok, value(value)}
      {:ok, []} -> {:error, :not_found}
      {:error, error} -> unavailable(:fetch_state, error)
    end
  end

  @impl true
  def list_state(conn, scope) do
    case execute(conn, :list_state, [scope]) do
      {:ok, rows} -> {:ok, for([key, value] <- rows, do: {value(key), value(value)})}
      {:error, error} -> unavailable(:list_state, error)
    end
  end

  @impl true
  def list_keys(conn, scope) do
    case execute(conn, :list_keys, [scope]) do
      {:ok, rows} -> {:ok, for([key] <- rows, do: value(key))}
      {:error, error} -> unavailable(:list_keys, error)
    end
  end

  ## Helpers

  # Rows (each a list of `{type, value}`) for a statement with result
  # columns, a count for one without, or the error's SQLSTATE, constraint
  # and fields.
  defp execute(conn, statement, params) do
    params =
      Enum.map(params, fn
        nil -> :null
        param -> param
      end)

    case :pgsql.execute(conn, Map.fetch!(@names, statement), params) do
      {:ok, {_command, rows}} when is_list(rows) ->
        {:ok, rows}

      {:ok, {_command, count}} when is_integer(count) ->
        {:ok, count}

      {:error, fields} when is_list(fields) ->
        {:error, {field(fields, :code), field(fields, ?n), fields}}
    end
  end

  # Runs SQL without parameters (session settings, migrations).
  defp simple(conn, sql, timeout \\ :infinity) do
    case :pgsql.squery(conn, sql, timeout) do
      {:ok, results} ->
        case first_error(results) do
          nil -> :ok
          error -> {:error, error}
        end
    end
  end

  defp first_error(results) do
    Enum.find_value(results, fn
      {:error, fields} -> message(fields)
      _ -> nil
    end)
  end

  defp unavailable(operation, {code, _constraint, fields}) do
    if code in @busy_codes do
      Logger.warning("postgres store: #{operation}: database busy: #{message(fields)}")
    else
      Logger.error("postgres store: #{operation} failed: #{message(fields)}")
    end

    {:error, :unavailable}
  end

  defp field(fields, key) do
    case List.keyfind(fields, key, 0) do
      {^key, value} -> value
      nil -> nil
    end
  end

  defp message(fields), do: "#{field(fields, :code)} #{field(fields, :message)}"

  defp integer({_type, text}), do: String.to_integer(text)

  defp value({_type, :null}), do: nil
  defp value({_type, value}), do: value

  defp now, do: System.os_time(:second)
end
