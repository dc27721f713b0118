defmodule Grove.Cluster do
  @moduledoc """
  The nodes that share one world, joined with distributed Erlang.

  A node is a member of its instance's cluster when it runs the same world:
  the same size, zones, terrain seed and rules, the same store and token
  key, and the same version of Grove (`Grove.Cluster.Fingerprint`). A node
  that differs is refused: it is never a member, and an error line names
  every difference (`refused/1` lists them). Membership is OTP's: one
  process per member in a `:pg` group, nodes seen with
  `net_kernel:monitor_nodes/1`. Zones are placed on the members by
  `Grove.Cluster.Placement`, which every node computes alike from the member
  list (`owners/1`).

  With no option, as `make run` starts it, a node is a cluster of one and
  does nothing distributed.

  ## Options

    * `:node` - the name to start distributed Erlang under, such as
      `"grove1@10.0.0.5"` (long names when the host has a dot, short names
      otherwise), or `nil` to leave the node as it is (default `nil`)
    * `:cookie` - the cookie, a `Grove.Secret` or string; required with
      `:node`, never defaulted (default `nil`)
    * `:peers` - nodes to join, as atoms or strings (default `[]`)
    * `:dns` - a host name whose A records are the peers' addresses, each
      peer named `basename@address` (default `nil`)
    * `:basename` - the name part of peers found by `:dns` (default this
      node's own)
    * `:connect_interval` - milliseconds between tries to reach peers not
      connected yet (default `2000`)
    * `:boot_wait` - milliseconds a node with peers to join waits for one
      of them before it starts the world alone (default `5000`)
    * `:size` - how many nodes the cluster is meant to have, for the
      quorum (see below; default: this node, its peers, and every other
      node it has seen as a member)

  ## Quorum

  A node whose side of the cluster holds more than half of its size (or
  exactly half, with the first node of the cluster by name) has a quorum
  (`quorum?/1`); one without it stops its zones and tells its players to
  reconnect (`Grove.World.Placer`), so that after a netsplit only one side
  runs the world. A node that leaves on purpose first leaves the group and
  is not counted in the size while it is away, so a rolling restart
  pauses no one.

  `:instance`, `:fingerprint` and `:zone_count` are derived by `Grove.Config`.
  """

  use Supervisor

  alias Grove.Cluster.Membership

  require Logger

  @defaults [
    instance: nil,
    fingerprint: nil,
    zone_count: nil,
    node: nil,
    cookie: nil,
    peers: [],
    dns: nil,
    basename: nil,
    connect_interval: 2000,
    boot_wait: 5000,
    size: nil
  ]

  @doc "Starts an instance's cluster membership; see the module doc for options."
  @spec start_link(keyword()) :: Supervisor.on_start()
  def start_link(opts) do
    opts = validate!(opts)
    Supervisor.start_link(__MODULE__, opts, name: :"#{opts[:instance]}.Cluster")
  end

  @doc """
  Validates options (all but the derived ones); raises `ArgumentError`
  naming the bad one. Returns them with peers as atoms.
  """
  @spec validate!(keyword()) :: keyword()
  def validate!(opts) do
    opts = Keyword.validate!(opts, @defaults)

    peers =
      case opts[:peers] do
        peers when is_list(peers) -> Enum.map(peers, &node_name!(&1, ":peers"))
        other -> raise ArgumentError, ":peers must be a list of nodes, got: #{inspect(other)}"
      end

    node = if opts[:node], do: node_name!(opts[:node], ":node")

    if node && opts[:cookie] in [nil, ""],
      do:
        raise(
          ArgumentError,
          "a named node needs a cookie (GROVE_COOKIE or GROVE_COOKIE_FILE); there is no default"
        )

    unless opts[:dns] == nil or (is_binary(opts[:dns]) and opts[:dns] != ""),
      do: raise(ArgumentError, ":dns must be a host name or nil, got: #{inspect(opts[:dns])}")

    unless is_integer(opts[:connect_interval]) and opts[:connect_interval] > 0,
      do:
        raise(
          ArgumentError,
          ":connect_interval must be a positive integer, got: #{inspect(opts[:connect_interval])}"
        )

    unless is_integer(opts[:boot_wait]) and opts[:boot_wait] >= 0,
      do:
        raise(
          ArgumentError,
          ":boot_wait must be a non-negative integer, got: #{inspect(opts[:boot_wait])}"
        )

    unless opts[:size] == nil or (is_integer(opts[:size]) and opts[:size] > 0),
      do: raise(ArgumentError, ":size must be a positive integer, got: #{inspect(opts[:size])}")

    Keyword.merge(opts, peers: peers, node: node)
  end

  @doc """
  How long (ms) a node of an instance's cluster waits for a peer before it
  starts the world alone: `:boot_wait` when it was given other nodes to
  join, else 0.
  """
  @spec boot_wait(atom()) :: non_neg_integer()
  def boot_wait(instance), do: Membership.boot_wait(instance)

  @doc "True when these options name other nodes to join (peers or a DNS name)."
  @spec multi_node?(keyword()) :: boolean()
  def multi_node?(opts), do: Keyword.get(opts, :peers, []) != [] or Keyword.get(opts, :dns) != nil

  @doc "The member nodes of an instance's cluster, sorted; this node alone before it starts."
  @spec members(atom()) :: [node()]
  def members(instance) do
    case Membership.published(instance) do
      nil -> [node()]
      %{members: members} -> members
    end
  end

  @doc "The owner of each zone, indexed by zone (see `Grove.Cluster.Placement`)."
  @spec owners(atom()) :: Grove.Cluster.Placement.owners() | nil
  def owners(instance) do
    case Membership.published(instance) do
      nil -> nil
      %{owners: owners} -> owners
    end
  end

  @doc """
  True when this node's side of the cluster has a quorum (see the module
  doc); a cluster of one always has.
  """
  @spec quorum?(atom()) :: boolean()
  def quorum?(instance) do
    case Membership.published(instance) do
      nil -> true
      %{quorum: quorum} -> quorum
    end
  end

  @doc "Leaves the cluster on purpose (see `Grove.Cluster.Membership.leave/1`)."
  @spec leave(atom()) :: :ok
  def leave(instance), do: Membership.leave(instance)

  @doc "Back in the cluster after `leave/1` (see `Grove.Cluster.Membership.join/1`)."
  @spec join(atom()) :: :ok
  def join(instance), do: Membership.join(instance)

  @doc """
  True when `node` said, greeting this one, that it speaks `form` of the
  cluster's messages (`:zones_at`, `:take_over_all`, `:take_over_fresh`:
  see `Grove.World.Placer`); false for a node of an older release, which
  says nothing of them (or of the later ones), and for one not heard
  from yet.
  """
  @spec speaks?(atom(), node(), atom()) :: boolean()
  def speaks?(instance, node, form), do: form in Map.get(Membership.speaks(instance), node, [])

  @doc "Nodes refused for a configuration of their own, each with the differences."
  @spec refused(atom()) :: %{node() => [String.t()]}
  def refused(instance), do: Membership.refused(instance)

  @doc """
  Sends the calling process `{:grove_cluster, instance, members}` each
  time the members change, until it exits; returns the members now.
  """
  @spec subscribe(atom()) :: [node()]
  def subscribe(instance), do: GenServer.call(Membership.name(instance), {:subscribe, self()})

  @doc """
  This node's range of entity ids in a cluster, from its name: `1..1023`
  when distributed, `0` otherwise (`Grove.World` draws ids from it). Two
  members whose names give the same range refuse each other.
  """
  @spec id_slot() :: non_neg_integer()
  def id_slot do
    if Node.alive?(), do: id_slot(node()), else: 0
  end

  @doc "The range of entity ids a node of that name draws from (see `id_slot/0`)."
  @spec id_slot(node()) :: pos_integer()
  def id_slot(node), do: 1 + :erlang.phash2(Atom.to_string(node), 1023)

  @doc """
  Bytes sent to and received from each connected node over distributed
  Erlang, since that connection came up (a connection that drops and
  comes back counts from zero again). Read from the sockets' own counters;
  a connection whose controller is a process (TLS distribution) is left
  out. Empty when the node is not distributed.
  """
  @spec traffic() :: %{node() => %{sent: non_neg_integer(), received: non_neg_integer()}}
  def traffic do
    for {node, controller} <- :erlang.system_info(:dist_ctrl),
        is_port(controller),
        {:ok, counts} <- [:inet.getstat(controller, [:send_oct, :recv_oct])],
        into: %{},
        do: {node, %{sent: counts[:send_oct], received: counts[:recv_oct]}}
  end

  # Callbacks

  @impl true
  def init(opts) do
    if opts[:node], do: start_distribution!(opts[:node], opts[:cookie])

    scope = :"#{opts[:instance]}.Cluster.Scope"

    basename = opts[:basename] || node() |> Atom.to_string() |> String.split("@") |> hd()

    children = [
      %{id: :pg, start: {:pg, :start_link, [scope]}},
      {Membership, Keyword.merge(opts, scope: scope, basename: basename)}
    ]

    # Membership reads the scope: it goes with it.
    Supervisor.init(children, strategy: :rest_for_one)
  end

  defp start_distribution!(node, cookie) do
    if Node.alive?() do
      if node() != node,
        do: Logger.warning("cluster: this node is already #{node()}; #{node} not used")
    else
      # Without one, starting the distribution fails and says why.
      _ = ensure_epmd()
      host = node |> Atom.to_string() |> String.split("@") |> List.last()
      names = if String.contains?(host, "."), do: :longnames, else: :shortnames

      case :net_kernel.start([node, names]) do
        {:ok, _} ->
          :ok

        {:error, reason} ->
          raise ArgumentError,
                "could not start distributed Erlang as #{node}: #{inspect(reason)}"
      end
    end

    cookie = if is_struct(cookie, Grove.Secret), do: Grove.Secret.reveal(cookie), else: cookie
    Node.set_cookie(String.to_atom(cookie))
  end

  @doc """
  Starts epmd (the Erlang port mapper, through which nodes find each
  other) when none answers on this machine, and waits until it does, for
  at most 5 s: `erl -name` starts it, a node made distributed at run time
  does not, and `epmd -daemon` returns before it listens (nodes started
  together on a machine without one failed to register with it).
  `{:ok, :running}` when one answered already, `{:ok, :started}` when
  this call started it (the caller may stop it after), else
  `{:error, :no_epmd}`.
  """
  @spec ensure_epmd() :: {:ok, :running | :started} | {:error, :no_epmd}
  def ensure_epmd do
    if epmd_up?() do
      {:ok, :running}
    else
      epmd =
        System.find_executable("epmd") ||
          Path.wildcard(Path.join(:code.root_dir(), "erts-*/bin/epmd")) |> List.first()

      if epmd, do: System.cmd(epmd, ["-daemon"], stderr_to_stdout: true)
      if await_epmd(100), do: {:ok, :started}, else: {:error, :no_epmd}
    end
  end

  defp await_epmd(0), do: false

  defp await_epmd(tries) do
    epmd_up?() or
      receive do
      after
        50 -> await_epmd(tries - 1)
      end
  end

  defp epmd_up?, do: match?({:ok, _}, :erl_epmd.names(~c"localhost"))

  defp node_name!(name, option) when is_atom(name), do: node_name!(Atom.to_string(name), option)

  defp node_name!(name, option) when is_binary(name) do
    case String.split(name, "@") do
      [base, host] when base != "" and host != "" ->
        String.to_atom(name)

      _ ->
        raise ArgumentError, "#{option}: a node is name@host, got: #{inspect(name)}"
    end
  end

  defp node_name!(other, option),
    do: raise(ArgumentError, "#{option}: a node is name@host, got: #{inspect(other)}")
end
