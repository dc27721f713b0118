defmodule Grove.Accounts do
  @moduledoc """
  Players' accounts: device login (create-or-login by a device id), names
  with passwords, bearer tokens that are signed, expire and can be revoked,
  and the last position of every player, written behind in batches.

  Reads are served from ETS caches in front of the store (`Grove.Store`): an
  account, or a token's revocation, is read from the database once and then
  from memory until a write through this module changes it, so a `me` right
  after a change is never stale. Password hashing runs under
  `Grove.Permits`, so a login storm gets fast refusals instead of starving
  the game of CPU.

  ## Deadlines

  Every call that may wait takes `deadline:` in its options, an instant of
  `System.monotonic_time(:millisecond)` (the HTTP API passes its
  request's): each store call waits at most until then, and a password is
  hashed only when a permit comes soon enough for the hash, which takes
  about as long as the last ones did, to end by then. A call that cannot
  finish in time answers `{:error, :busy}` (no permit in time) or
  `{:error, :unavailable}` (the store could not answer in time) by its
  deadline. A first device login is one write: the account and its token
  are stored together.

  ## Options

    * `:name` - this accounts service's name (required)
    * `:store` - the `Grove.Store` to use (required)
    * `:world` - the world whose players' positions are saved (required)
    * `:secret` - the key tokens are signed with (a string or a
      `Grove.Secret`), at least 32 bytes; when
      `nil`, one is read from `:secret_path` or created there (default `nil`)
    * `:secret_path` - where the generated key is kept (default `nil`: a
      new key each start, so tokens die with the server)
    * `:token_ttl` - seconds a token lives (default one week)
    * `:password_cost` - PBKDF2 iterations (default `100_000`)
    * `:hash_concurrency` - passwords hashed at once (default the number of
      schedulers) and `:hash_queue` - logins that may wait for a turn
      (default `32`); `:hash_timeout` - how long they wait, ms (default `1000`)
    * `:guests` - whether players may join the game without a token
      (default `false`)
    * `:save_interval` - milliseconds between batched position saves: the
      most a crash can lose (default `1000`)
    * `:flush_timeout` - milliseconds a stop keeps trying to write the last
      positions while the store cannot take them (default `10_000`)
    * `:ip_rate`, `:ip_burst` - login attempts per second, and at once, per
      address (defaults `10`, `20`); `:account_rate`, `:account_burst` - per
      account name (defaults `2`, `5`)
  """

  use Supervisor

  alias Grove.{RateLimit, Store}
  alias Grove.Accounts.{Password, Saver, Token}
  alias Grove.Store.Account

  @defaults [
    name: nil,
    store: nil,
    world: nil,
    secret: nil,
    secret_path: nil,
    token_ttl: 7 * 24 * 3600,
    password_cost: 100_000,
    hash_concurrency: nil,
    hash_queue: 32,
    hash_timeout: 1000,
    guests: false,
    save_interval: 1000,
    flush_timeout: 10_000,
    ip_rate: 10,
    ip_burst: 20,
    account_rate: 2,
    account_burst: 5
  ]

  @name_pattern ~r/^[\p{L}\p{N}_.\-]{3,24}$/u
  # What a player sees itself as until it picks another emoji.
  @default_avatar "😀"

  defstruct [
    :name,
    :store,
    :world,
    :secret,
    :token_ttl,
    :password_cost,
    :hash_timeout,
    :guests,
    :permits,
    :saver,
    :accounts_cache,
    :tokens_cache,
    :left_cells,
    :playing,
    :limits,
    :ip_limit,
    :account_limit,
    :hash_wait,
    :hash_cost
  ]

  @type t :: %__MODULE__{}
  @type login_error :: :busy | :unavailable | :rate_limited

  ## Starting

  @spec start_link(keyword()) :: Supervisor.on_start()
  def start_link(opts) do
    opts = validate!(opts)
    Supervisor.start_link(__MODULE__, opts, name: opts[:name])
  end

  @doc false
  def child_spec(opts),
    do: %{
      id: Keyword.get(opts, :name, __MODULE__),
      start: {__MODULE__, :start_link, [opts]},
      type: :supervisor
    }

  @impl true
  def init(opts) do
    name = opts[:name]

    accounts = %__MODULE__{
      name: name,
      store: opts[:store],
      world: opts[:world],
      secret: secret(opts),
      token_ttl: opts[:token_ttl],
      password_cost: opts[:password_cost],
      hash_timeout: opts[:hash_timeout],
      guests: opts[:guests],
      permits: :"#{name}.Permits",
      saver: :"#{name}.Saver",
      # Owned by this supervisor's process, which outlives its children.
      accounts_cache: :ets.new(:grove_accounts, [:set, :public, read_concurrency: true]),
      tokens_cache: :ets.new(:grove_tokens, [:set, :public, read_concurrency: true]),
      # Last cells of players who left, until the saver has written them.
      left_cells: :ets.new(:grove_left_cells, [:set, :public, read_concurrency: true]),
      # Which entity each player in the world is, for the saver to read.
      playing: :ets.new(:grove_playing, [:set, :public, write_concurrency: true]),
      limits: :ets.new(:grove_login_limits, [:set, :public, write_concurrency: true]),
      ip_limit: RateLimit.new(opts[:ip_rate], opts[:ip_burst]),
      account_limit: RateLimit.new(opts[:account_rate], opts[:account_burst]),
      # How long logins wait for a permit to hash, in microseconds.
      hash_wait: Grove.Metrics.Histogram.new(),
      # How long the last hash took, in microseconds: what a permit must leave room for.
      hash_cost: :atomics.new(1, [])
    }

    :persistent_term.put({__MODULE__, name}, accounts)

    children = [
      {Grove.Permits,
       name: accounts.permits,
       concurrency: opts[:hash_concurrency] || System.schedulers_online(),
       queue: opts[:hash_queue]},
      # Trapping exits, it writes the last batch when the tree stops.
      {Saver,
       accounts: accounts, interval: opts[:save_interval], flush_timeout: opts[:flush_timeout]}
    ]

    # What the children know lives in the tables this process owns, so a
    # child restarted alone loses nothing and may restart as often as it
    # crashes; giving up here would restart the gateway and drain every
    # session.
    Supervisor.init(children, strategy: :one_for_one, max_restarts: 100, max_seconds: 5)
  end

  @doc "The service's settings, read without a message."
  @spec fetch!(atom() | t()) :: t()
  def fetch!(%__MODULE__{} = accounts), do: accounts
  def fetch!(name), do: :persistent_term.get({__MODULE__, name})

  @doc false
  # The same, or nil when these accounts do not run on this node. This
  # module is the one owner of its `:persistent_term` key; others ask it.
  @spec lookup(atom()) :: t() | nil
  def lookup(name), do: :persistent_term.get({__MODULE__, name}, nil)

  ## Logging in

  @doc """
  Logs in by device id, creating the account the first time (the flow of
  mobile games and of the Gamend stress test).
  """
  @spec device_login(atom(), String.t(), keyword()) ::
          {:ok, String.t(), Account.t(), :created | :existing}
          | {:error, :invalid_device | login_error()}
  def device_login(accounts, device_id, opts \\ []) do
    accounts = fetch!(accounts)

    with :ok <- valid_device(device_id),
         :ok <- limit(accounts, :ip, opts[:ip]) do
      case Store.fetch_account(accounts.store, {:device, device_id}, store_opts(opts)) do
        {:ok, account} ->
          issue(accounts, cache(accounts, account), :existing, opts)

        {:error, :not_found} ->
          # The account and its first token in one write.
          case create_with_token(accounts, %{device_id: device_id, avatar: @default_avatar}, opts) do
            {:ok, token, account} ->
              {:ok, token, account, :created}

            # Two first logins of one device raced; the other one created it.
            {:error, :device_taken} ->
              device_login(accounts, device_id, Keyword.delete(opts, :ip))

            {:error, reason} ->
              {:error, reason}
          end

        {:error, reason} ->
          {:error, reason}
      end
    end
  end

  @doc "Creates an account with a name and a password."
  @spec register(atom(), String.t(), String.t(), keyword()) ::
          {:ok, String.t(), Account.t()}
          | {:error,
             :invalid_name | :weak_password | :invalid_avatar | :name_taken | login_error()}
  def register(accounts, name, password, opts \\ []) do
    accounts = fetch!(accounts)
    name = normalize(name)
    avatar = Keyword.get(opts, :avatar) || @default_avatar

    with :ok <- valid_name(name),
         :ok <- valid_password(password),
         :ok <- valid_avatar(avatar),
         :ok <- limit(accounts, :ip, opts[:ip]),
         salt = Password.salt(),
         {:ok, hash} <-
           hash(accounts, opts, fn -> Password.hash(password, salt, accounts.password_cost) end) do
      create_with_token(
        accounts,
        %{name: name, password_hash: hash, password_salt: salt, avatar: avatar},
        opts
      )
    end
  end

  @doc "Logs in with a name and a password."
  @spec login(atom(), String.t(), String.t(), keyword()) ::
          {:ok, String.t(), Account.t()} | {:error, :invalid_credentials | login_error()}
  def login(accounts, name, password, opts \\ []) do
    accounts = fetch!(accounts)
    name = normalize(name)

    with true <- (is_binary(name) and is_binary(password)) || {:error, :invalid_credentials},
         :ok <- limit(accounts, :ip, opts[:ip]),
         :ok <- limit(accounts, :account, name) do
      case Store.fetch_account(accounts.store, {:name, name}, store_opts(opts)) do
        {:ok, %Account{password_hash: hash, password_salt: salt} = account}
        when is_binary(hash) ->
          case hash(accounts, opts, fn ->
                 Password.verify?(password, salt, hash, accounts.password_cost)
               end) do
            {:ok, true} ->
              with {:ok, token, account, _} <-
                     issue(accounts, cache(accounts, account), :existing, opts),
                   do: {:ok, token, account}

            {:ok, false} ->
              {:error, :invalid_credentials}

            {:error, reason} ->
              {:error, reason}
          end

        {:error, :unavailable} ->
          {:error, :unavailable}

        # No such name, or a device-only account: the same answer, after the same work.
        _ ->
          case hash(accounts, opts, fn -> Password.waste(password, accounts.password_cost) end) do
            {:ok, false} -> {:error, :invalid_credentials}
            {:error, reason} -> {:error, reason}
          end
      end
    end
  end

  @doc "The account a token belongs to, if the token is genuine, unexpired and not revoked."
  @spec authenticate(atom(), String.t(), keyword()) ::
          {:ok, Account.t(), binary()}
          | {:error, :invalid_token | :expired | :revoked | :unavailable}
  def authenticate(accounts, token, opts \\ []) do
    accounts = fetch!(accounts)

    with {:ok, %{id: id, account_id: account_id}} <-
           Token.verify(accounts.secret, token, now()),
         :ok <- not_revoked(accounts, id, opts),
         {:ok, account} <- account(accounts, account_id, opts) do
      {:ok, account, id}
    else
      {:error, :not_found} -> {:error, :invalid_token}
      {:error, reason} -> {:error, reason}
    end
  end

  @doc """
  Revokes a token; it fails from now on, here and on every node of the
  cluster that can be reached (each forgets its cached copy).
  """
  @spec logout(atom(), String.t(), keyword()) ::
          :ok | {:error, :invalid_token | :expired | :unavailable}
  def logout(accounts, token, opts \\ []) do
    accounts = fetch!(accounts)

    with {:ok, %{id: id, expires_at: expires_at, account_id: account_id}} <-
           Token.verify(accounts.secret, token, now()),
         :ok <- Store.revoke_token(accounts.store, id, store_opts(opts)) do
      :ets.insert(accounts.tokens_cache, {id, account_id, expires_at, true})
      tell_members(accounts, :tokens_cache, id)
      :ok
    else
      {:error, :not_found} -> {:error, :invalid_token}
      {:error, reason} -> {:error, reason}
    end
  end

  @doc "An account by id, from the cache or the store."
  @spec account(atom() | t(), pos_integer(), keyword()) ::
          {:ok, Account.t()} | {:error, :not_found | :unavailable}
  def account(accounts, id, opts \\ []) do
    accounts = fetch!(accounts)

    case :ets.lookup(accounts.accounts_cache, id) do
      [{^id, account}] ->
        {:ok, account}

      [] ->
        with {:ok, account} <- Store.fetch_account(accounts.store, {:id, id}, store_opts(opts)) do
          {:ok, cache(accounts, account)}
        end
    end
  end

  @doc """
  Changes an account's name or avatar; the cache follows at once, and the
  other nodes of a cluster forget their cached copy.
  """
  @spec update(atom(), pos_integer(), map(), keyword()) ::
          {:ok, Account.t()}
          | {:error, :invalid_name | :invalid_avatar | :name_taken | :not_found | :unavailable}
  def update(accounts, id, changes, opts \\ []) do
    accounts = fetch!(accounts)
    changes = Map.take(changes, [:name, :avatar])

    changes =
      if Map.has_key?(changes, :name),
        do: %{changes | name: normalize(changes.name)},
        else: changes

    with :ok <- if(Map.has_key?(changes, :name), do: valid_name(changes.name), else: :ok),
         :ok <- if(Map.has_key?(changes, :avatar), do: valid_avatar(changes.avatar), else: :ok) do
      # Drop the cached copy first: a reader between the write and the
      # refill reads the store, never the old value.
      :ets.delete(accounts.accounts_cache, id)

      with {:ok, account} <- Store.update_account(accounts.store, id, changes, store_opts(opts)) do
        tell_members(accounts, :accounts_cache, id)
        {:ok, cache(accounts, account)}
      end
    end
  end

  @doc "Whether players may join without an account."
  @spec guests?(atom()) :: boolean()
  def guests?(accounts), do: fetch!(accounts).guests

  ## Positions

  @doc """
  Where the player last stood: `{:error, :not_found}` for a player never
  saved, `{:error, :unavailable}` when the store cannot say now.
  """
  @spec last_position(atom(), pos_integer()) ::
          {:ok, {non_neg_integer(), non_neg_integer()}} | {:error, :not_found | :unavailable}
  def last_position(accounts, account_id) do
    accounts = fetch!(accounts)

    # A player who just left (a reload) may not be saved yet.
    case :ets.lookup(accounts.left_cells, account_id) do
      [{_, cell}] -> {:ok, cell}
      [] -> Store.fetch_position(accounts.store, account_id)
    end
  end

  @doc "The player with this account is in the world as this entity; its position will be saved."
  @spec playing(atom(), pos_integer(), pos_integer()) :: :ok
  def playing(accounts, account_id, entity_id) do
    accounts = fetch!(accounts)
    # In the caller, in order with its own `left/3` that ends this play.
    :ets.delete(accounts.left_cells, account_id)
    :ets.insert(accounts.playing, {account_id, entity_id})
    :ok
  end

  @doc "The player left, from this cell; it is saved with the next batch."
  @spec left(atom(), pos_integer(), {non_neg_integer(), non_neg_integer()} | nil) :: :ok
  def left(accounts, account_id, cell) do
    accounts = fetch!(accounts)
    # Here, in the caller, so that a join that follows (a reload) finds it.
    if cell, do: :ets.insert(accounts.left_cells, {account_id, cell})
    :ets.delete(accounts.playing, account_id)
    :ok
  end

  ## Helpers

  defp issue(accounts, %Account{id: id} = account, how, opts) do
    expires_at = now() + accounts.token_ttl
    {token, token_id} = Token.sign(accounts.secret, id, expires_at)

    case Store.create_token(
           accounts.store,
           %{id: token_id, account_id: id, expires_at: expires_at},
           store_opts(opts)
         ) do
      :ok ->
        :ets.insert(accounts.tokens_cache, {token_id, id, expires_at, false})
        {:ok, token, account, how}

      # 16 random bytes never collide in practice; an account deleted behind
      # our back makes no token either. Both read as "try again".
      {:error, reason} when reason in [:token_taken, :not_found] ->
        {:error, :unavailable}

      {:error, reason} ->
        {:error, reason}
    end
  end

  # A new account and its first token, stored in one write.
  defp create_with_token(accounts, attrs, opts) do
    expires_at = now() + accounts.token_ttl
    token_id = Token.new_id()
    attrs = Map.put(attrs, :token, %{id: token_id, expires_at: expires_at})

    with {:ok, %Account{id: id} = account} <-
           Store.create_account(accounts.store, attrs, store_opts(opts)) do
      :ets.insert(accounts.tokens_cache, {token_id, id, expires_at, false})
      {:ok, Token.sign(accounts.secret, id, expires_at, token_id), cache(accounts, account)}
    end
  end

  defp store_opts(opts) do
    case opts[:deadline] do
      nil -> []
      deadline -> [deadline: deadline]
    end
  end

  defp not_revoked(accounts, token_id, opts) do
    case :ets.lookup(accounts.tokens_cache, token_id) do
      [{_, _, _, false}] ->
        :ok

      [{_, _, _, true}] ->
        {:error, :revoked}

      [] ->
        case Store.fetch_token(accounts.store, token_id, store_opts(opts)) do
          {:ok, %{revoked: revoked, account_id: account_id, expires_at: expires_at}} ->
            :ets.insert(accounts.tokens_cache, {token_id, account_id, expires_at, revoked})
            if revoked, do: {:error, :revoked}, else: :ok

          {:error, reason} ->
            {:error, reason}
        end
    end
  end

  # The other nodes of a cluster cache tokens and accounts too, read from
  # the same store: each is told to forget what changed here, and reads it
  # again from the store when next asked. By cast, so that a slow member
  # holds nobody up: one that cannot be reached then keeps its copy (a
  # revoked token still good there, an old name or avatar) until it
  # restarts.
  defp tell_members(accounts, table, key) do
    case Grove.World.fetch!(accounts.world).cluster do
      nil ->
        :ok

      instance ->
        for node <- Grove.Cluster.members(instance), node != node() do
          :erpc.cast(node, __MODULE__, :forget, [accounts.name, table, key])
        end

        :ok
    end
  rescue
    # The world is gone (the instance is stopping): the change is stored
    # all the same, and there is nobody left to tell.
    ArgumentError -> :ok
  end

  @doc false
  # Asked by another member: drops a cached token or account, if this node
  # runs these accounts.
  @spec forget(atom(), :tokens_cache | :accounts_cache, term()) :: :ok
  def forget(name, table, key) when table in [:tokens_cache, :accounts_cache] do
    case lookup(name) do
      nil -> :ok
      accounts -> :ets.delete(Map.fetch!(accounts, table), key) && :ok
    end
  end

  defp cache(accounts, %Account{id: id} = account) do
    :ets.insert(accounts.accounts_cache, {id, account})
    account
  end

  # A permit to hash, waited for no longer than leaves room for the hash
  # (as long as the last one took) before the deadline.
  defp hash(accounts, opts, fun) do
    asked = System.monotonic_time(:microsecond)
    cost_ms = div(:atomics.get(accounts.hash_cost, 1), 1000)

    timeout =
      case opts[:deadline] do
        nil -> accounts.hash_timeout
        deadline -> min(accounts.hash_timeout, deadline - div(asked, 1000) - cost_ms)
      end

    timed = fn ->
      started = System.monotonic_time(:microsecond)
      Grove.Metrics.Histogram.record(accounts.hash_wait, started - asked)
      result = fun.()
      :atomics.put(accounts.hash_cost, 1, System.monotonic_time(:microsecond) - started)
      result
    end

    if timeout > 0 do
      case Grove.Permits.run(accounts.permits, timeout, timed) do
        {:ok, result} -> {:ok, result}
        {:error, :busy} -> {:error, :busy}
      end
    else
      {:error, :busy}
    end
  end

  @doc """
  How long logins waited for a permit to hash a password: a histogram in
  microseconds (`Grove.Metrics.Histogram`).
  """
  @spec hash_waits(atom()) :: Grove.Metrics.Histogram.t()
  def hash_waits(accounts), do: fetch!(accounts).hash_wait

  # Rate limits per address and per account name, in a public ETS table.
  # Two requests of the same key at the same instant may both pass: a
  # limit, not a lock.
  defp limit(_accounts, _kind, nil), do: :ok

  defp limit(accounts, kind, key) do
    limit = if kind == :ip, do: accounts.ip_limit, else: accounts.account_limit
    table_key = {kind, key}

    booked =
      case :ets.lookup(accounts.limits, table_key) do
        [{_, booked}] -> booked
        [] -> nil
      end

    case RateLimit.allow(limit, booked, System.monotonic_time(:millisecond)) do
      {:ok, booked} ->
        :ets.insert(accounts.limits, {table_key, booked})
        :ok

      :limited ->
        {:error, :rate_limited}
    end
  end

  # One spelling per name: "é" typed composed or decomposed is the same name.
  defp normalize(name) when is_binary(name) do
    case :unicode.characters_to_nfc_binary(name) do
      normalized when is_binary(normalized) -> normalized
      _invalid -> name
    end
  end

  defp normalize(other), do: other

  defp valid_name(name) when is_binary(name) do
    if String.valid?(name) and Regex.match?(@name_pattern, name),
      do: :ok,
      else: {:error, :invalid_name}
  end

  defp valid_name(_), do: {:error, :invalid_name}

  defp valid_password(password)
       when is_binary(password) and byte_size(password) >= 8 and byte_size(password) <= 128,
       do: :ok

  defp valid_password(_), do: {:error, :weak_password}

  defp valid_device(device_id)
       when is_binary(device_id) and byte_size(device_id) >= 8 and byte_size(device_id) <= 128 do
    if String.valid?(device_id) and not String.match?(device_id, ~r/[\x00-\x1f\x7f]/),
      do: :ok,
      else: {:error, :invalid_device}
  end

  defp valid_device(_), do: {:error, :invalid_device}

  # One emoji: a single grapheme (flags, skin tones and ZWJ sequences such
  # as families are one) that starts in Unicode's emoji blocks, or a keycap.
  defp valid_avatar(avatar) when is_binary(avatar) and byte_size(avatar) <= 64 do
    with true <- String.valid?(avatar),
         [grapheme] <- String.graphemes(avatar),
         [first | rest] <- String.to_charlist(grapheme),
         true <- emoji_start?(first) or 0x20E3 in rest do
      :ok
    else
      _ -> {:error, :invalid_avatar}
    end
  end

  defp valid_avatar(_), do: {:error, :invalid_avatar}

  defp emoji_start?(c)
       when c in 0x1F000..0x1FAFF or c in 0x2600..0x27BF or c in 0x2300..0x23FF or
              c in 0x2B00..0x2BFF or c in 0x2190..0x21FF or c in 0x25A0..0x25FF or
              c in [
                0xA9,
                0xAE,
                0x203C,
                0x2049,
                0x2122,
                0x2139,
                0x24C2,
                0x3030,
                0x303D,
                0x3297,
                0x3299
              ],
       do: true

  defp emoji_start?(_), do: false

  defp now, do: System.system_time(:second)

  @doc """
  A digest of the token key these options give, so that the nodes of a
  cluster can check they sign alike without sending the key; `nil` when
  no key is configured (one is then made afresh at each start).
  """
  @spec key_digest(keyword()) :: binary() | nil
  def key_digest(opts) do
    if opts[:secret] || opts[:secret_path],
      do: :crypto.mac(:hmac, :sha256, key(opts), "grove token key check")
  end

  defp secret(opts), do: Grove.Secret.new(key(opts))

  defp key(opts) do
    cond do
      is_struct(opts[:secret], Grove.Secret) ->
        Grove.Secret.reveal(opts[:secret])

      is_binary(opts[:secret]) ->
        opts[:secret]

      opts[:secret_path] ->
        path = opts[:secret_path]

        case File.read(path) do
          {:ok, secret} when byte_size(secret) >= 32 ->
            secret

          _ ->
            secret = :crypto.strong_rand_bytes(32)
            File.mkdir_p!(Path.dirname(path))
            File.write!(path, secret)
            File.chmod!(path, 0o600)
            secret
        end

      true ->
        :crypto.strong_rand_bytes(32)
    end
  end

  defp validate!(opts) do
    opts = Keyword.validate!(opts, @defaults)

    for key <- [:name, :store, :world], opts[key] == nil do
      raise ArgumentError, "accounts need #{inspect(key)}"
    end

    if (is_binary(opts[:secret]) and byte_size(opts[:secret]) < 32) or
         (is_struct(opts[:secret], Grove.Secret) and
            byte_size(Grove.Secret.reveal(opts[:secret])) < 32),
       do: raise(ArgumentError, ":secret must be at least 32 bytes")

    for key <- [
          :token_ttl,
          :password_cost,
          :hash_queue,
          :hash_timeout,
          :save_interval,
          :flush_timeout,
          :ip_rate,
          :ip_burst,
          :account_rate,
          :account_burst
        ],
        not (is_integer(opts[key]) and opts[key] > 0) do
      raise ArgumentError,
            "#{inspect(key)} must be a positive integer, got: #{inspect(opts[key])}"
    end

    opts
  end
end
