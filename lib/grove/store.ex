defmodule Grove.Store do
  @moduledoc """
  Persistence for accounts, login tokens, players' last positions and the
  game's own state.

  One behaviour (this module's callbacks), two adapters: `Grove.Store.SQLite`
  (embedded, the default) and `Grove.Store.Postgres`. In front of them sits a
  bounded queue with deadlines, so that a slow or stalled database turns into
  fast `{:error, :unavailable}` answers (an HTTP layer's 503) instead of a
  pile-up of waiting callers.

  A store is a supervisor: start as many as you like under different names.

      {:ok, _} = Grove.Store.start_link(name: MyStore, path: "data/grove.db")
      {:ok, account} = Grove.Store.create_account(MyStore, %{name: "ada"})
      {:ok, ^account} = Grove.Store.fetch_account(MyStore, {:name, "ada"})

  ## Options

    * `:name` - the store's name, an atom (required); every call takes it
    * `:adapter` - `:sqlite`, `:postgres`, or a module implementing this
      behaviour (default `:sqlite`)
    * `:pool_size` - connections, one worker each (default `1` for SQLite,
      `4` for PostgreSQL)
    * `:queue_limit` - requests that may wait for a worker; past it a call
      is answered `{:error, :unavailable}` at once (default `1000`)
    * `:timeout` - the default deadline of a call in milliseconds; a call
      never waits longer (default `2000`)
    * `:max_batch` - requests a worker takes from the queue at once; the
      writes among them commit in one transaction (default `500`; `1`
      commits every write on its own)

  and the adapter's own options: `:path`, `:busy_timeout` and `:synchronous`
  for SQLite (see `Grove.Store.SQLite`); `:host`, `:port`, `:database`,
  `:username`, `:password`, `:statement_timeout` and `:connect_timeout` for
  PostgreSQL (see `Grove.Store.Postgres`). Bad options raise `ArgumentError`
  naming the option.

  ## Start-up

  `start_link/1` connects once, applies the migrations the database lacks
  (see `Grove.Store.Migrations`), and only then starts the queue and the
  workers, each of which opens its connection before `start_link/1`
  returns: a store that has started serves at once, on a current schema.
  When the database cannot be reached or a migration fails, `start_link/1`
  returns `{:error, reason}` and nothing keeps running. Starting twice on
  the same database, even at the same time, is safe: applied migrations
  are recorded and skipped.

  ## Outcomes

  Every call returns one of the outcomes in its spec and never raises on
  database trouble (it raises `ArgumentError` on arguments of the wrong
  shape: those are bugs in the caller). `{:error, :unavailable}` means the
  store could not answer in time: its queue was full, the deadline passed,
  no connection was up, the store is not running, or the database reported
  an error (logged). For a write it means *unknown*, not *failed*: a write
  already running when its caller's deadline passed still completes. Every
  write is applied entirely or not at all.

  Every call takes an optional keyword list last: `timeout: ms` overrides
  the store's default deadline for that call, or `deadline: t` sets it to
  an instant of `System.monotonic_time(:millisecond)`, for a caller that
  has a deadline of its own to keep across several calls (never later
  than the store's default). A deadline already passed is answered
  `{:error, :unavailable}` without a message.

  Text (names, avatars) must be valid UTF-8 without NUL bytes, which
  PostgreSQL cannot store; device ids, token ids, password hashes and salts
  are opaque binaries. Ids, timestamps and coordinates fit in 64 bits.
  Names are unique byte for byte: case-sensitive, and not normalised.

  ## Group commit

  Writes are committed in groups. A worker that is free takes everything
  that waits in the queue (up to `:max_batch` requests): it answers the
  reads among them one by one, then runs all the writes, in the order they
  were asked, in one transaction, and answers each of them only once that
  transaction has committed. While one commit waits for the disk, the
  next batch gathers, so the store writes as many accounts a second as the
  disk syncs a second times the batch, instead of one account per sync. A
  write that is acknowledged (`{:ok, _}`, `:ok`, or a refusal such as
  `{:error, :name_taken}`) is durable: it committed before its answer was
  sent. When a transaction fails, each of its writes is tried again on its
  own, so that one refused write fails nobody else.

  Callers need do nothing to be grouped; a caller with many writes of its
  own (the game's saves) sends them in one call, `save_state/4`.

  ## The game's state

  `save_state/4`, `fetch_state/4`, `list_state/3` and `list_keys/3` keep what a game
  wants kept across restarts: values (any binary, typically
  `:erlang.term_to_binary/1` of a zone's state) under a key within a scope
  (`"zones"`, `"quests"`...), both UTF-8 strings. One `save_state/4` call
  writes many keys in one transaction, and is grouped with every other
  write that waits.

  ## The queue

  A call books a place in the store's queue with one atomic add; when the
  queue is full it returns `{:error, :unavailable}` without sending a
  message anywhere. Otherwise it sends its request, with its deadline, to
  the queue process and waits for the reply until the deadline and no
  longer; a reply that comes later is dropped by the runtime. The queue
  hands requests to idle workers, oldest first. A worker that picks up a
  request whose deadline has passed answers `{:error, :unavailable}`
  without running it, so after a stall the backlog drains at once instead
  of running work nobody waits for. A worker whose connection fails
  reconnects with backoff; while no worker has a connection, calls are
  answered `{:error, :unavailable}` at once.

  ## Stats

  `stats/1` reads counters kept in `:atomics` and `:counters`, so reading
  them costs the store nothing. See `t:stats/0`.
  """

  use Supervisor

  alias Grove.Store.{Account, Migrations, Queue, Worker}

  @enforce_keys [
    :name,
    :adapter,
    :adapter_config,
    :pool_size,
    :queue_limit,
    :timeout,
    :max_batch
  ]
  defstruct @enforce_keys

  @type name :: atom()

  @type t :: %__MODULE__{
          name: name(),
          adapter: module(),
          adapter_config: term(),
          pool_size: pos_integer(),
          queue_limit: pos_integer(),
          timeout: pos_integer(),
          max_batch: pos_integer()
        }

  @typedoc """
  Options of one call: `timeout:` milliseconds, or `deadline:` an instant of
  `System.monotonic_time(:millisecond)`, overrides the store's default deadline.
  """
  @type call_opts :: [timeout: pos_integer()] | [deadline: integer()]

  @typedoc "Fields of a new account; all optional."
  @type account_attrs :: %{
          optional(:name) => String.t() | nil,
          optional(:device_id) => binary() | nil,
          optional(:password_hash) => binary() | nil,
          optional(:password_salt) => binary() | nil,
          optional(:avatar) => String.t() | nil,
          optional(:token) => %{id: binary(), expires_at: integer()} | nil
        }

  @typedoc "Fields an update may change."
  @type account_changes :: %{
          optional(:name) => String.t(),
          optional(:avatar) => String.t(),
          optional(:password_hash) => binary(),
          optional(:password_salt) => binary()
        }

  @type lookup :: {:id, pos_integer()} | {:name, String.t()} | {:device, binary()}

  @type token :: %{id: binary(), account_id: pos_integer(), expires_at: integer()}

  @type token_info :: %{account_id: pos_integer(), expires_at: integer(), revoked: boolean()}

  @type position :: %{account_id: pos_integer(), x: integer(), y: integer()}

  @typedoc "A scope or a key of the game's state: a non-empty UTF-8 string without NUL bytes."
  @type state_key :: String.t()

  @typedoc "What `save_state/4` writes under a key: a binary, or `nil` to delete the key."
  @type state_value :: binary() | nil

  @typedoc "A write, as the queue hands it to an adapter's `c:write/2`: a callback's name and its arguments after the connection."
  @type operation :: {atom(), list()}

  @typedoc """
  The store's counters:

    * `:queued` - requests waiting for a worker now
    * `:running` - requests a worker is running now
    * `:connected` - workers with a connection to the database now (none:
      the database is unreachable, and the node is not ready)
    * `:completed` - requests that ran and got an answer from the database
      (including answers such as `:not_found` or `:name_taken`)
    * `:rejected_full` - calls answered at once because the queue was full
    * `:expired` - requests a worker dropped unrun because their deadline
      had passed while they waited
    * `:timed_out` - calls that stopped waiting at their deadline (their
      request then expires in the queue, or completes unseen)
    * `:errors` - requests that failed in the database or found no
      connection to it
    * `:transactions` - transactions that committed writes
    * `:batched_writes` - writes those transactions committed (divided by
      `:transactions`: the mean size of a group commit)

  The counters start from zero when the store (or its queue) starts.
  """
  @type stats :: %{
          queued: non_neg_integer(),
          running: non_neg_integer(),
          connected: non_neg_integer(),
          completed: non_neg_integer(),
          rejected_full: non_neg_integer(),
          expired: non_neg_integer(),
          timed_out: non_neg_integer(),
          errors: non_neg_integer(),
          transactions: non_neg_integer(),
          batched_writes: non_neg_integer()
        }

  ## The behaviour an adapter implements.
  #
  # Every callback that takes a connection runs in the worker that owns it.
  # Database errors are logged and returned as `{:error, :unavailable}`; a
  # connection that is broken may also make a callback exit, and the worker
  # then drops it and reconnects.

  @typedoc "A connection: a process the adapter opened, linked to the worker that owns it."
  @type conn :: pid()

  @doc "Validates the adapter's options; raises `ArgumentError` naming a bad one."
  @callback config!(opts :: keyword()) :: config :: term()

  @doc "How many connections a store opens when `:pool_size` is not given."
  @callback default_pool_size() :: pos_integer()

  @doc "Applies the migrations the database lacks, on a connection of its own."
  @callback migrate(config :: term()) :: {:ok, applied :: [pos_integer()]} | {:error, term()}

  @doc "Opens a connection linked to the calling process."
  @callback connect(config :: term()) :: {:ok, conn()} | {:error, term()}

  @doc "Closes a connection."
  @callback disconnect(conn()) :: :ok

  @doc """
  Runs writes (calls of the write callbacks below) in one transaction, in
  order, and returns each one's result once it has committed; or
  `{:error, :unavailable}` when the transaction failed as a whole (nothing
  of it stays). A write's own refusal (`:name_taken`...) must not fail the
  others: the statements are written so that the database does not abort
  the transaction for it.
  """
  @callback write(conn(), [operation(), ...]) :: {:ok, [term(), ...]} | {:error, :unavailable}

  @doc "Creates an account, and with it the login token in `:token` when that is not `nil`."
  @callback create_account(conn(), %{
              name: String.t() | nil,
              device_id: binary() | nil,
              password_hash: binary() | nil,
              password_salt: binary() | nil,
              avatar: String.t(),
              token: %{id: binary(), expires_at: integer()} | nil
            }) :: {:ok, Account.t()} | {:error, :name_taken | :device_taken | :unavailable}

  @callback fetch_account(conn(), lookup()) ::
              {:ok, Account.t()} | {:error, :not_found | :unavailable}

  @callback update_account(conn(), pos_integer(), account_changes()) ::
              {:ok, Account.t()} | {:error, :not_found | :name_taken | :unavailable}

  @callback create_token(conn(), token()) ::
              :ok | {:error, :not_found | :token_taken | :unavailable}

  @callback fetch_token(conn(), binary()) ::
              {:ok, token_info()} | {:error, :not_found | :unavailable}

  @callback revoke_token(conn(), binary()) :: :ok | {:error, :not_found | :unavailable}

  @doc "Upserts positions in one statement; account ids are distinct."
  @callback save_positions(conn(), [position(), ...]) :: :ok | {:error, :unavailable}

  @callback fetch_position(conn(), pos_integer()) ::
              {:ok, {integer(), integer()}} | {:error, :not_found | :unavailable}

  @doc "Upserts (or, for `nil`, deletes) keys of a scope; keys are distinct."
  @callback save_state(conn(), state_key(), [{state_key(), state_value()}, ...]) ::
              :ok | {:error, :unavailable}

  @callback fetch_state(conn(), state_key(), state_key()) ::
              {:ok, binary()} | {:error, :not_found | :unavailable}

  @doc "Every key of a scope with its value, ordered by key."
  @callback list_state(conn(), state_key()) ::
              {:ok, [{state_key(), binary()}]} | {:error, :unavailable}

  @doc "Every key of a scope, without its value, in no order."
  @callback list_keys(conn(), state_key()) :: {:ok, [state_key()]} | {:error, :unavailable}

  @adapters %{sqlite: Grove.Store.SQLite, postgres: Grove.Store.Postgres}
  @store_options [:name, :adapter, :pool_size, :queue_limit, :timeout, :max_batch]
  @default_avatar "🙂"
  @int64_max 9_223_372_036_854_775_807
  @int64_min -9_223_372_036_854_775_808

  defguardp is_id(id) when is_integer(id) and id > 0 and id <= @int64_max
  defguardp is_int64(n) when is_integer(n) and n >= @int64_min and n <= @int64_max

  ## Starting

  @doc "Starts a store; see the module doc for options and what start-up does."
  @spec start_link(keyword()) :: Supervisor.on_start()
  def start_link(opts) do
    store = new!(opts)
    Supervisor.start_link(__MODULE__, store, name: store.name)
  end

  @doc false
  def child_spec(opts) do
    %{
      id: Keyword.get(opts, :name, __MODULE__),
      start: {__MODULE__, :start_link, [opts]},
      type: :supervisor
    }
  end

  @doc "Validates options into a store description without starting anything."
  @spec new!(keyword()) :: t()
  def new!(opts) when is_list(opts) do
    {own, adapter_opts} = Keyword.split(opts, @store_options)

    own =
      Keyword.validate!(own,
        name: nil,
        adapter: :sqlite,
        pool_size: nil,
        queue_limit: 1000,
        timeout: 2000,
        max_batch: 500
      )

    name = own[:name]

    unless is_atom(name) and name not in [nil, true, false] do
      raise ArgumentError, "a store needs a :name atom, got: #{inspect(name)}"
    end

    adapter = adapter!(own[:adapter])
    pool_size = own[:pool_size] || adapter.default_pool_size()

    for {key, value} <- [
          pool_size: pool_size,
          queue_limit: own[:queue_limit],
          timeout: own[:timeout],
          max_batch: own[:max_batch]
        ],
        not (is_integer(value) and value > 0) do
      raise ArgumentError, "#{inspect(key)} must be a positive integer, got: #{inspect(value)}"
    end

    # One thread runs every SQLite statement of the VM: a second connection
    # waiting for the first one's transaction would wait on that thread.
    if adapter == Grove.Store.SQLite and pool_size != 1 do
      raise ArgumentError, "a SQLite store has one connection, got :pool_size #{pool_size}"
    end

    %__MODULE__{
      name: name,
      adapter: adapter,
      adapter_config: adapter.config!(adapter_opts),
      pool_size: pool_size,
      queue_limit: own[:queue_limit],
      timeout: own[:timeout],
      max_batch: own[:max_batch]
    }
  end

  defp adapter!(key) when is_map_key(@adapters, key), do: Map.fetch!(@adapters, key)

  defp adapter!(module) when is_atom(module) do
    if Code.ensure_loaded?(module) and function_exported?(module, :connect, 1) do
      module
    else
      raise ArgumentError,
            ":adapter must be :sqlite, :postgres or a module implementing Grove.Store, got: #{inspect(module)}"
    end
  end

  defp adapter!(other),
    do: raise(ArgumentError, ":adapter must be :sqlite or :postgres, got: #{inspect(other)}")

  @impl Supervisor
  def init(%__MODULE__{} = store) do
    children = [
      # Runs once, inside start_link: the schema is current before anything
      # can ask for data, and a failure fails the start.
      {Migrations, store},
      # Owns the queue and the counters, and publishes what calls need.
      {Queue, store},
      %{id: :workers, type: :supervisor, start: {__MODULE__, :start_workers, [store]}}
    ]

    # Workers hold the queue's pid: when the queue restarts, they must too.
    Supervisor.init(children, strategy: :rest_for_one)
  end

  @doc false
  def start_workers(%__MODULE__{} = store) do
    workers =
      for index <- 1..store.pool_size,
          do: Supervisor.child_spec({Worker, store}, id: {Worker, index})

    # A worker rides out a lost connection by itself; a restart means a bug.
    Supervisor.start_link(workers, strategy: :one_for_one, max_restarts: 10, max_seconds: 5)
  end

  ## Accounts

  @doc """
  Creates an account; every field is optional, the avatar defaults to
  `\"🙂\"`. With `token: %{id: id, expires_at: unix_seconds}`, a login
  token for the new account is recorded in the same transaction (as
  `create_token/3` would), so that a first login costs one write.
  """
  @spec create_account(name(), account_attrs(), call_opts()) ::
          {:ok, Account.t()} | {:error, :name_taken | :device_taken | :unavailable}
  def create_account(store, attrs, opts \\ [])

  def create_account(store, attrs, opts) when is_map(attrs) do
    {token, fields} = Map.pop(attrs, :token)
    for {key, value} <- fields, do: check_account_field!(key, value, :create)

    attrs = %{
      name: attrs[:name],
      device_id: attrs[:device_id],
      password_hash: attrs[:password_hash],
      password_salt: attrs[:password_salt],
      avatar: attrs[:avatar] || @default_avatar,
      token: new_token!(token)
    }

    Queue.call(store, :create_account, [attrs], opts)
  end

  def create_account(_store, attrs, _opts),
    do: raise(ArgumentError, "expected a map of account fields, got: #{inspect(attrs)}")

  @doc "Fetches an account by id, name or device id."
  @spec fetch_account(name(), lookup(), call_opts()) ::
          {:ok, Account.t()} | {:error, :not_found | :unavailable}
  def fetch_account(store, lookup, opts \\ [])

  def fetch_account(store, {:id, id} = lookup, opts) when is_id(id),
    do: Queue.call(store, :fetch_account, [lookup], opts)

  def fetch_account(store, {:device, device_id} = lookup, opts) when is_binary(device_id),
    do: Queue.call(store, :fetch_account, [lookup], opts)

  def fetch_account(store, {:name, name} = lookup, opts) do
    check_account_field!(:name, name, :lookup)
    Queue.call(store, :fetch_account, [lookup], opts)
  end

  def fetch_account(_store, lookup, _opts) do
    raise ArgumentError,
          "expected {:id, id}, {:name, name} or {:device, device_id}, got: #{inspect(lookup)}"
  end

  @doc "Changes an account's name, avatar, password hash or salt, and returns it."
  @spec update_account(name(), pos_integer(), account_changes(), call_opts()) ::
          {:ok, Account.t()} | {:error, :not_found | :name_taken | :unavailable}
  def update_account(store, id, changes, opts \\ [])

  def update_account(store, id, changes, opts) when is_id(id) and is_map(changes) do
    for {key, value} <- changes, do: check_account_field!(key, value, :update)
    Queue.call(store, :update_account, [id, changes], opts)
  end

  def update_account(_store, id, changes, _opts) do
    raise ArgumentError,
          "expected an account id and a map of changes, got: #{inspect(id)}, #{inspect(changes)}"
  end

  # What each account field holds; which fields an update may change.
  @account_fields %{
    name: :text,
    avatar: :text,
    device_id: :bytes,
    password_hash: :bytes,
    password_salt: :bytes
  }
  @changeable [:name, :avatar, :password_hash, :password_salt]

  defp check_account_field!(key, value, purpose) do
    kind = Map.get(@account_fields, key)

    cond do
      kind == nil or (purpose == :update and key not in @changeable) ->
        allowed = if purpose == :update, do: @changeable, else: Map.keys(@account_fields)

        raise ArgumentError,
              "unknown account field #{inspect(key)}, expected one of: #{inspect(allowed)}"

      value == nil and purpose == :create ->
        :ok

      kind == :bytes and is_binary(value) ->
        :ok

      kind == :text and is_binary(value) and byte_size(value) > 0 and
        String.valid?(value) and not String.contains?(value, <<0>>) ->
        :ok

      true ->
        raise ArgumentError,
              "account #{key} must be #{describe(kind)}, got: #{inspect(value)}"
    end
  end

  defp new_token!(nil), do: nil

  defp new_token!(%{id: id, expires_at: expires_at})
       when is_binary(id) and byte_size(id) > 0 and is_int64(expires_at),
       do: %{id: id, expires_at: expires_at}

  defp new_token!(other) do
    raise ArgumentError,
          "an account's token is %{id: binary, expires_at: unix seconds}, got: #{inspect(other)}"
  end

  defp describe(:text), do: "a non-empty UTF-8 string without NUL bytes"
  defp describe(:bytes), do: "a binary"

  ## Tokens

  @doc """
  Records a login token. Besides the outcomes of the contract it answers
  `{:error, :not_found}` when the account does not exist and
  `{:error, :token_taken}` when a token with this id exists already.
  """
  @spec create_token(name(), token(), call_opts()) ::
          :ok | {:error, :not_found | :token_taken | :unavailable}
  def create_token(store, token, opts \\ [])

  def create_token(store, %{id: id, account_id: account_id, expires_at: expires_at}, opts)
      when is_binary(id) and byte_size(id) > 0 and is_id(account_id) and is_int64(expires_at) do
    token = %{id: id, account_id: account_id, expires_at: expires_at}
    Queue.call(store, :create_token, [token], opts)
  end

  def create_token(_store, token, _opts) do
    raise ArgumentError,
          "expected %{id: binary, account_id: positive integer, expires_at: unix seconds}, got: #{inspect(token)}"
  end

  @doc "Fetches a token's account, expiry (unix seconds) and whether it was revoked."
  @spec fetch_token(name(), binary(), call_opts()) ::
          {:ok, token_info()} | {:error, :not_found | :unavailable}
  def fetch_token(store, token_id, opts \\ []),
    do: Queue.call(store, :fetch_token, [token_id!(token_id)], opts)

  @doc "Marks a token revoked; revoking it again is `:ok` too."
  @spec revoke_token(name(), binary(), call_opts()) :: :ok | {:error, :not_found | :unavailable}
  def revoke_token(store, token_id, opts \\ []),
    do: Queue.call(store, :revoke_token, [token_id!(token_id)], opts)

  defp token_id!(token_id) when is_binary(token_id), do: token_id

  defp token_id!(other),
    do: raise(ArgumentError, "a token id is a binary, got: #{inspect(other)}")

  ## Positions

  @doc """
  Saves players' last positions in one statement, inserting or overwriting
  each. Should an account appear twice, its last position wins. Positions
  are keyed by account id alone, with no check that the account exists, so
  one stale id cannot fail a whole batch.
  """
  @spec save_positions(name(), [position()], call_opts()) :: :ok | {:error, :unavailable}
  def save_positions(store, positions, opts \\ [])

  def save_positions(store, positions, opts) when is_list(positions) do
    positions =
      positions
      |> Enum.reverse()
      |> Enum.map(&position!/1)
      |> Enum.uniq_by(& &1.account_id)

    case positions do
      [] -> :ok
      positions -> Queue.call(store, :save_positions, [positions], opts)
    end
  end

  def save_positions(_store, positions, _opts),
    do: raise(ArgumentError, "expected a list of positions, got: #{inspect(positions)}")

  defp position!(%{account_id: account_id, x: x, y: y})
       when is_id(account_id) and is_int64(x) and is_int64(y),
       do: %{account_id: account_id, x: x, y: y}

  defp position!(other) do
    raise ArgumentError,
          "expected %{account_id: positive integer, x: integer, y: integer}, got: #{inspect(other)}"
  end

  @doc "Fetches a player's last saved position."
  @spec fetch_position(name(), pos_integer(), call_opts()) ::
          {:ok, {integer(), integer()}} | {:error, :not_found | :unavailable}
  def fetch_position(store, account_id, opts \\ [])

  def fetch_position(store, account_id, opts) when is_id(account_id),
    do: Queue.call(store, :fetch_position, [account_id], opts)

  def fetch_position(_store, account_id, _opts),
    do: raise(ArgumentError, "an account id is a positive integer, got: #{inspect(account_id)}")

  ## The game's state

  @doc """
  Writes keys of a scope in one transaction: each `{key, value}` stores the
  binary `value` under `key`, replacing what was there; `{key, nil}`
  deletes the key. Should a key appear twice, its last entry wins. Grouped
  with the other writes that wait, like every write: `:ok` means the whole
  call is on disk.

      :ok = Grove.Store.save_state(store, "zones", [{"3,7", :erlang.term_to_binary(state)}])
  """
  @spec save_state(name(), state_key(), [{state_key(), state_value()}], call_opts()) ::
          :ok | {:error, :unavailable}
  def save_state(store, scope, entries, opts \\ [])

  def save_state(store, scope, entries, opts) when is_list(entries) do
    check_state_key!(:scope, scope)

    entries =
      entries
      |> Enum.reverse()
      |> Enum.map(&state_entry!/1)
      |> Enum.uniq_by(&elem(&1, 0))
      |> Enum.reverse()

    case entries do
      [] -> :ok
      entries -> Queue.call(store, :save_state, [scope, entries], opts)
    end
  end

  def save_state(_store, _scope, entries, _opts),
    do: raise(ArgumentError, "expected a list of {key, value} entries, got: #{inspect(entries)}")

  @doc "The value saved under a key of a scope."
  @spec fetch_state(name(), state_key(), state_key(), call_opts()) ::
          {:ok, binary()} | {:error, :not_found | :unavailable}
  def fetch_state(store, scope, key, opts \\ []) do
    check_state_key!(:scope, scope)
    check_state_key!(:key, key)
    Queue.call(store, :fetch_state, [scope, key], opts)
  end

  @doc "Every key of a scope with its value, ordered by key (bytewise)."
  @spec list_state(name(), state_key(), call_opts()) ::
          {:ok, [{state_key(), binary()}]} | {:error, :unavailable}
  def list_state(store, scope, opts \\ []) do
    check_state_key!(:scope, scope)
    Queue.call(store, :list_state, [scope], opts)
  end

  @doc "Every key of a scope, without its value, in no order."
  @spec list_keys(name(), state_key(), call_opts()) ::
          {:ok, [state_key()]} | {:error, :unavailable}
  def list_keys(store, scope, opts \\ []) do
    check_state_key!(:scope, scope)
    Queue.call(store, :list_keys, [scope], opts)
  end

  defp state_entry!({key, value} = entry) when is_binary(value) or is_nil(value) do
    check_state_key!(:key, key)
    entry
  end

  defp state_entry!(other),
    do: raise(ArgumentError, "expected {key, binary or nil}, got: #{inspect(other)}")

  defp check_state_key!(what, key) do
    unless is_binary(key) and byte_size(key) > 0 and String.valid?(key) and
             not String.contains?(key, <<0>>) do
      raise ArgumentError,
            "a state #{what} must be a non-empty UTF-8 string without NUL bytes, got: #{inspect(key)}"
    end
  end

  ## Stats

  @doc "The store's counters (all zero when it is not running); see `t:stats/0`."
  @spec stats(name()) :: stats()
  def stats(store) when is_atom(store), do: Queue.stats(store)

  @doc """
  Where the store's requests waited, as histograms in microseconds
  (`Grove.Metrics.Histogram`, read them with its functions): `:queue`,
  from the call to a worker taking it, and `:database`, a read's
  statement or a batch's whole transaction; `nil` when the store is not
  running.
  """
  @spec waits(name()) ::
          %{queue: Grove.Metrics.Histogram.t(), database: Grove.Metrics.Histogram.t()} | nil
  def waits(store) when is_atom(store), do: Queue.waits(store)
end
