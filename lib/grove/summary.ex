defmodule Grove.Summary do
  @moduledoc false
  # The cluster at a glance, for the dashboard: every member with the zones
  # it runs, the players and actors in those zones and the sessions
  # connected to its gateway, and where each zone runs (`placement`, by
  # zone index, row by row), so that an operator or a test can tell which
  # node serves which part of the world.
  #
  # Zones per node come from where this node sends each zone's messages
  # (`Grove.World.zone_node/2`), read in place: one view, so they add up to
  # the zone count. Each node's players and actors are counted by the zones
  # it runs, in its own world's counters, which only it can read: one
  # `:erpc.multicall/5` asks every other member for them. That costs one
  # short-lived process per member and reads counters only (no message to a
  # zone or a session), and a dashboard asks once a second; the timeout
  # bounds the wait on a member that is slow or gone, which is then shown
  # unreachable, its counts nil, instead of holding the page. Publishing
  # counts from every node all the time would cost the same work whether or
  # not anyone looks.
  #
  # Each zone's load for the heat maps (moves per second, mailbox) comes
  # with the counts, and is read from the node the zone runs on: a node
  # keeps the last figures of a zone it handed away, and knows nothing of
  # the others'. A zone of a node that does not answer shows 0.
  #
  # It reads every part (the world, the gateway, the members), so it sits
  # above them, with the instance (`Grove.summary/2`).

  alias Grove.World
  alias Grove.World.Grid

  @pictured 100_000

  @type member :: %{
          node: node(),
          self: boolean(),
          member: boolean(),
          reachable: boolean(),
          zones: non_neg_integer(),
          players: non_neg_integer() | nil,
          actors: non_neg_integer() | nil,
          sessions: non_neg_integer() | nil
        }

  @type t :: %{
          node: node(),
          zone_count: pos_integer(),
          placement: [node()],
          members: [member()],
          zone_moves_per_s: [non_neg_integer()],
          zone_mailbox: [non_neg_integer()]
        }

  @spec gather(atom(), timeout()) :: t()
  def gather(instance, timeout) do
    world = World.fetch!(Grove.world(instance))
    zone_count = Grid.zone_count(world.grid)

    # A zone's figures are pictured one by one up to the most zones that
    # run at once; past that (zones on demand), only how many are awake.
    {placement, zones} =
      if world.zones_on_demand and zone_count > @pictured do
        {[], %{node() => World.stats(world).zones_awake}}
      else
        placement = for index <- 0..(zone_count - 1), do: World.zone_node(world, index)
        {placement, Enum.frequencies(placement)}
      end

    members = Grove.Cluster.members(instance)

    # A node that left may still run zones until their handover: shown too.
    nodes = Enum.sort(Enum.uniq([node() | members] ++ Map.keys(zones)))
    others = nodes -- [node()]

    answers =
      others
      |> Enum.zip(:erpc.multicall(others, __MODULE__, :local, [instance], timeout))
      |> Map.new()
      |> Map.put(node(), {:ok, local(instance)})

    %{
      node: node(),
      zone_count: zone_count,
      placement: placement,
      zone_moves_per_s: by_zone(placement, answers, :heat),
      zone_mailbox: by_zone(placement, answers, :mailbox),
      members:
        for node <- nodes do
          counts =
            case answers[node] do
              {:ok, %{} = counts} -> counts
              _ -> nil
            end

          %{
            node: node,
            self: node == node(),
            member: node in members,
            reachable: counts != nil,
            zones: Map.get(zones, node, 0),
            players: counts && counts.players,
            actors: counts && counts.actors,
            sessions: counts && counts.sessions
          }
        end
    }
  end

  # Each zone's figure, from the node that runs it.
  defp by_zone(placement, answers, key) do
    for {node, index} <- Enum.with_index(placement) do
      case answers[node] do
        {:ok, %{^key => values}} -> Enum.at(values, index) || 0
        _ -> 0
      end
    end
  end

  @doc false
  # This node's own counts and zone loads, asked for by the others.
  @spec local(atom()) :: %{
          players: integer(),
          actors: integer(),
          sessions: integer() | nil,
          heat: [non_neg_integer()],
          mailbox: [non_neg_integer()]
        }
  def local(instance) do
    world = Grove.world(instance)
    stats = World.stats(world)

    %{
      players: stats.players,
      actors: stats.actors,
      sessions: sessions(instance),
      heat: Grove.Metrics.Collector.current(instance, :zone_heat, []),
      mailbox: Enum.map(World.zone_loads(world), & &1.mailbox)
    }
  end

  # The gateway is one per node; its sessions count when it is this instance's.
  defp sessions(instance) do
    case Grove.Gateway.lookup() do
      %{instance: ^instance} -> Grove.Gateway.stats()[:sessions] || 0
      _ -> nil
    end
  end
end
