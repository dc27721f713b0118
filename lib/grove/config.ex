defmodule Grove.Config do
  @moduledoc """
  The options of a Grove instance, validated once into a struct.

  ## Options

    * `:name` - the instance's name; its world and actors are named after it
      (default `Grove`)
    * `:world` - options for `Grove.World` (default `[]`; its `:name` is derived)
    * `:actors` - options for `Grove.Actors`, among them `:kinds`, which kinds
      of actors run and how many of each, in a cluster of several nodes how
      many in the whole cluster (default `[count: 0]`; `:name`, `:world` and
      `:cluster` are derived)
    * `:store` - options for `Grove.Store` (accounts, tokens, positions), or
      `false` for a server without accounts (default `false`; `:name` is
      derived)
    * `:accounts` - options for `Grove.Accounts`, used when there is a store
      (default `[]`; `:name`, `:store` and `:world` are derived)
    * `:gateway` - options for `Grove.Gateway` (HTTP and WebSocket), or
      `false` to run without one (default `[]`; `:instance` is derived)
    * `:metrics` - options for `Grove.Metrics.Collector` (`:interval`,
      `:history`), `:mailbox_sample` (how many processes besides the named
      ones a scrape of `/metrics` looks at for the longest mailbox, see
      `Grove.Metrics.BEAM`; default `1000`) and `:statsd` (options for
      `Grove.Metrics.StatsD`, or `false`, the default)
    * `:status_interval` - milliseconds between status lines in the log, or
      `false` for none (default `10_000`)
    * `:cluster` - options for `Grove.Cluster` (the node's name, cookie and
      peers; default `[]`: a cluster of one). A cluster of several nodes
      needs a shared PostgreSQL store: SQLite is refused.
    * `:reload` - live reload of changed source files into the running
      world, for development: `true`, options for `Grove.Reloader`, or
      `false` (default `false`; `config/dev.exs`, which `make run` uses,
      turns it on)

  The application reads these from `config :grove, ...` (see `config/`), and
  `config/runtime.exs` lets environment variables override the usual ones
  (`GROVE_ACTORS`, `GROVE_ACTOR_KINDS`, `GROVE_SPAWN`, `GROVE_SEED`, `GROVE_WIDTH`, `GROVE_HEIGHT`, `GROVE_PORT`,
  `GROVE_LISTEN=all`).
  """

  @enforce_keys [
    :name,
    :world,
    :actors,
    :store,
    :accounts,
    :gateway,
    :metrics,
    :statsd,
    :status_interval,
    :cluster,
    :reload
  ]
  defstruct @enforce_keys

  @type t :: %__MODULE__{
          name: atom(),
          world: keyword(),
          actors: keyword(),
          store: keyword() | false,
          accounts: keyword() | false,
          gateway: keyword() | false,
          metrics: keyword(),
          statsd: keyword() | false,
          status_interval: pos_integer() | false,
          cluster: keyword(),
          reload: keyword() | false
        }

  @defaults [
    name: Grove,
    world: [],
    actors: [],
    store: false,
    accounts: [],
    gateway: [],
    metrics: [],
    status_interval: 10_000,
    cluster: [],
    reload: false
  ]

  @doc """
  The configuration of the application's instance, from the `:grove`
  application environment (whose other keys, such as `:start`, are not
  the instance's).
  """
  @spec from_env(keyword()) :: t()
  def from_env(env), do: new(Keyword.take(env, Keyword.keys(@defaults) -- [:name]))

  @doc "Validates options; raises `ArgumentError` naming the bad one."
  @spec new(keyword()) :: t()
  def new(opts) do
    opts = Keyword.validate!(opts, @defaults)

    name = opts[:name]

    unless is_atom(name) and name != nil,
      do: raise(ArgumentError, ":name must be an atom, got: #{inspect(name)}")

    unless opts[:status_interval] == false or
             (is_integer(opts[:status_interval]) and opts[:status_interval] > 0),
           do:
             raise(
               ArgumentError,
               ":status_interval must be a positive integer or false, got: #{inspect(opts[:status_interval])}"
             )

    world_name = :"#{name}.World"

    # A world with a store keeps its game's state there; its zones make
    # resident actors' senses as their herds would (`Grove.Actor.Senses`).
    world =
      opts[:world]
      |> Keyword.put(:name, world_name)
      |> Keyword.put(:cluster, if(Grove.Cluster.multi_node?(opts[:cluster]), do: name))
      |> Keyword.put(:store, if(opts[:store], do: {Grove.Store, :"#{name}.Store"}))
      |> Keyword.put_new(:senses, Grove.Actor.Senses)

    # Fail now, with the option's name, rather than deep in a supervisor.
    Grove.World.new!(world)

    # In a cluster of several nodes the counts are the cluster's totals, shared by its members.
    actors =
      opts[:actors]
      |> Keyword.put_new(:count, 0)
      |> Keyword.merge(
        name: :"#{name}.Actors",
        world: world_name,
        cluster: if(Grove.Cluster.multi_node?(opts[:cluster]), do: name)
      )

    store =
      case opts[:store] do
        false ->
          false

        store when is_list(store) ->
          store |> Keyword.put(:name, Grove.store(name)) |> secret(:password)

        other ->
          raise ArgumentError, ":store must be a keyword list or false, got: #{inspect(other)}"
      end

    accounts =
      if store do
        Keyword.merge(opts[:accounts],
          name: :"#{name}.Accounts",
          store: store[:name],
          world: world_name
        )
        |> secret(:secret)
      else
        false
      end

    gateway =
      case opts[:gateway] do
        false ->
          false

        gateway when is_list(gateway) ->
          gateway
          |> Keyword.merge(
            instance: name,
            world: Grove.world(name),
            actors: Grove.actors(name),
            summary: {Grove, :summary},
            accounts: if(accounts, do: accounts[:name])
          )
          |> secret(:admin_token)

        other ->
          raise ArgumentError, ":gateway must be a keyword list or false, got: #{inspect(other)}"
      end

    cluster =
      opts[:cluster]
      |> Keyword.put(:instance, name)
      |> secret(:cookie)
      |> Grove.Cluster.validate!()

    if Grove.Cluster.multi_node?(cluster) and store != false and
         Keyword.get(store, :adapter, :sqlite) != :postgres,
       do:
         raise(
           ArgumentError,
           "a cluster of several nodes needs PostgreSQL (GROVE_DATABASE_URL): " <>
             "SQLite keeps accounts in one node's file, which the others cannot reach"
         )

    # Nodes that each made a key of their own would refuse each other's tokens.
    if Grove.Cluster.multi_node?(cluster) and accounts != false and accounts[:secret] == nil and
         not (is_binary(accounts[:secret_path]) and File.exists?(accounts[:secret_path])),
       do:
         raise(
           ArgumentError,
           "a cluster of several nodes needs one token key made once for all of them: " <>
             "create it (head -c 32 /dev/urandom > FILE) and give every node GROVE_TOKEN_KEY_FILE=FILE"
         )

    metrics =
      Keyword.validate!(opts[:metrics],
        interval: 1000,
        history: 3600,
        mailbox_sample: 1000,
        statsd: false
      )

    unless is_integer(metrics[:mailbox_sample]) and metrics[:mailbox_sample] >= 0,
      do:
        raise(
          ArgumentError,
          ":mailbox_sample must be a non-negative integer, got: #{inspect(metrics[:mailbox_sample])}"
        )

    statsd =
      case metrics[:statsd] do
        false ->
          false

        statsd when is_list(statsd) ->
          Keyword.put(statsd, :instance, name)

        other ->
          raise ArgumentError, ":statsd must be a keyword list or false, got: #{inspect(other)}"
      end

    reload =
      case opts[:reload] do
        false ->
          false

        true ->
          [instance: name, name: :"#{name}.Reloader"]

        reload when is_list(reload) ->
          Keyword.merge(reload, instance: name, name: :"#{name}.Reloader")

        other ->
          raise ArgumentError,
                ":reload must be true, false or a keyword list, got: #{inspect(other)}"
      end

    %__MODULE__{
      name: name,
      world: world,
      actors: actors,
      store: store,
      accounts: accounts,
      gateway: gateway,
      metrics: [
        instance: name,
        interval: metrics[:interval],
        history: metrics[:history],
        mailbox_sample: metrics[:mailbox_sample]
      ],
      statsd: statsd,
      status_interval: opts[:status_interval],
      cluster: cluster,
      reload: reload
    }
  end

  # Secrets are wrapped as soon as they are known, so that no child spec,
  # process state or report built from the configuration can print them.
  defp secret(opts, key) do
    case Keyword.fetch(opts, key) do
      {:ok, value} when is_binary(value) -> Keyword.put(opts, key, Grove.Secret.new(value))
      _ -> opts
    end
  end

  @doc """
  What nodes of one cluster must agree on (`Grove.Cluster.Fingerprint`),
  from a configuration and the world it describes: the world's size,
  zones, terrain and rules, its bacteria, its game (module, options and version), the
  store every node writes to, the key tokens
  are signed with (as a digest: the key itself never leaves the node), and
  Grove's version.
  """
  @spec fingerprint(t(), Grove.World.t()) :: Grove.Cluster.Fingerprint.t()
  def fingerprint(%__MODULE__{} = config, %Grove.World{} = world) do
    [
      width: world.grid.width,
      height: world.grid.height,
      zone_size: world.grid.zone_size,
      view_tile: world.grid.tile_size,
      terrain: world.terrain_options,
      rules: world.rules |> Map.from_struct() |> Map.delete(:move_limit),
      tick: world.tick,
      # Zones beside each other on two nodes compute one automaton.
      life: world.life,
      game: fingerprint_game(world.game),
      store: fingerprint_store(config.store),
      token_key: token_key(config.accounts),
      version: version()
    ]
  end

  # Zones move between nodes with their game's state: the same module,
  # options and version everywhere.
  defp fingerprint_game(nil), do: :none
  defp fingerprint_game(spec), do: {spec.module, spec.options, spec.version}

  # Where the accounts live, without the password.
  defp fingerprint_store(false), do: :none

  defp fingerprint_store(store) do
    case Keyword.get(store, :adapter, :sqlite) do
      :postgres ->
        {:postgres, store[:host], store[:port] || 5432, store[:database]}

      adapter ->
        {adapter, store[:path]}
    end
  end

  # A digest of the key, so two nodes can compare keys without sending them.
  defp token_key(false), do: :none

  defp token_key(accounts) do
    case Grove.Accounts.key_digest(accounts) do
      nil -> :generated_per_start
      digest -> Base.encode16(digest, case: :lower)
    end
  end

  defp version do
    case Application.spec(:grove, :vsn) do
      nil -> :unknown
      vsn -> to_string(vsn)
    end
  end
end
