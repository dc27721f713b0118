defmodule Grove do
  @moduledoc """
  Grove, a multiplayer game-world server for the BEAM: a shared grid world of
  meadows and forests, played from a browser while AI actors wander.

  A Grove instance is a supervisor of its parts, started in dependency order:
  the world (`Grove.World`), the actors walking in it (`Grove.Actors`), the
  HTTP and WebSocket gateway (`Grove.Gateway`, one per node) and a status
  line in the log (`Grove.Status`). The application starts one from
  `config :grove`; tests and tools start their own, side by side, under other
  names.

      {:ok, _} = Grove.start_link(name: MyGrove, world: [width: 200, height: 200], actors: [count: 100])
      Grove.world(MyGrove)   #=> :"Elixir.MyGrove.World"

  See `Grove.Config` for the options.
  """

  use Supervisor

  alias Grove.Config

  @doc "Starts an instance; see `Grove.Config` for options."
  @spec start_link(keyword() | Config.t()) :: Supervisor.on_start()
  def start_link(opts \\ [])

  def start_link(%Config{} = config),
    do: Supervisor.start_link(__MODULE__, config, name: config.name)

  def start_link(opts), do: start_link(Config.new(opts))

  @doc false
  def child_spec(%Config{name: name} = config) do
    %{id: name, start: {__MODULE__, :start_link, [config]}, type: :supervisor}
  end

  def child_spec(opts) do
    %{
      id: Keyword.get(opts, :name, __MODULE__),
      start: {__MODULE__, :start_link, [opts]},
      type: :supervisor
    }
  end

  @doc "The name of an instance's world, for the `Grove.World` client API."
  @spec world(atom()) :: atom()
  def world(name \\ __MODULE__), do: :"#{name}.World"

  @doc """
  The cluster at a glance, as the dashboard shows it: this node, the zone
  count, the node each zone runs on (`placement`, by zone index), and each member (sorted, this node among them; a cluster of one
  when alone) with the zones it runs, the players and actors in them and
  the sessions connected to it. Every other member is asked for its counts
  at once and given `timeout` ms; one that does not answer in time is
  `reachable: false`, its counts `nil`.
  """
  @spec summary(atom(), timeout()) :: Grove.Summary.t()
  def summary(name \\ __MODULE__, timeout \\ 500), do: Grove.Summary.gather(name, timeout)

  @doc "The name of an instance's actors, for `Grove.Actors`."
  @spec actors(atom()) :: atom()
  def actors(name \\ __MODULE__), do: :"#{name}.Actors"

  @doc """
  The name of an instance's store, for `Grove.Store` (accounts, positions
  and the game's state, `Grove.Store.save_state/4`); it runs when the
  instance has a store (`:store` is not `false`).
  """
  @spec store(atom()) :: atom()
  def store(name \\ __MODULE__), do: :"#{name}.Store"

  @impl true
  def init(%Config{} = config) do
    # What a node must share with the others of its cluster, from the world it describes.
    world = Grove.World.new!(config.world)

    cluster =
      Keyword.merge(config.cluster,
        fingerprint: Config.fingerprint(config, world),
        zone_count: Grove.World.Grid.zone_count(world.grid)
      )

    # Membership first: where zones run depends on who the members are.
    # Then the store: accounts need it, and the world restores positions
    # from it. Accounts after the world (they save players' positions from
    # it), before the gateway (whose sessions hand them their last cell).
    # Last: in development, changed code goes into the running world.
    children =
      [{Grove.Cluster, cluster}] ++
        if(config.store, do: [{Grove.Store, config.store}], else: []) ++
        [
          {Grove.World, config.world},
          # Actors start after the world they walk in; they join in the background.
          {Grove.Actors, config.actors},
          # Before the gateway, whose /metrics and dashboard read it.
          metrics(config)
        ] ++
        if(config.accounts, do: [{Grove.Accounts, config.accounts}], else: []) ++
        if(config.gateway, do: [{Grove.Gateway, config.gateway}], else: []) ++
        if(config.status_interval,
          do: [{Grove.Status, name: config.name, interval: config.status_interval}],
          else: []
        ) ++
        if(config.reload, do: [{Grove.Reloader, config.reload}], else: [])

    # A world that restarts loses its entities, so its actors must restart too.
    Supervisor.init(children, strategy: :rest_for_one)
  end

  # The collector and the exporters restart on their own, under a
  # supervisor of their own: at this level a crash of theirs would restart
  # everything after them, the gateway and its sessions included.
  defp metrics(config) do
    collector =
      config.metrics
      |> Keyword.delete(:mailbox_sample)
      |> Keyword.put(:sources, metric_sources(config))

    children =
      [{Grove.Metrics.Collector, collector}] ++
        if(config.statsd, do: [{Grove.Metrics.StatsD, config.statsd}], else: [])

    %{
      id: :metrics,
      start: {Supervisor, :start_link, [children, [strategy: :one_for_one]]},
      type: :supervisor
    }
  end

  # Each part says what its metrics are; the collector gathers those of
  # the parts this instance starts.
  defp metric_sources(%Config{name: name} = config) do
    [
      {Grove.Cluster.Metrics, nil},
      {Grove.World.Metrics, world(name)},
      {Grove.Actors.Metrics, actors(name)}
    ] ++
      if(config.store, do: [{Grove.Store.Metrics, store(name)}], else: []) ++
      if(config.accounts, do: [{Grove.Accounts.Metrics, config.accounts[:name]}], else: []) ++
      if(config.gateway, do: [{Grove.Gateway.Metrics, nil}], else: []) ++
      [{Grove.Metrics.BEAM, {name, config.metrics[:mailbox_sample]}}]
  end
end
