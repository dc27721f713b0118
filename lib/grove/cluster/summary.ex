defmodule Grove.Cluster.Summary do
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

  alias Grove.World
  alias Grove.World.Grid

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
          members: [member()]
        }

  @spec gather(atom(), timeout()) :: t()
  def gather(instance, timeout) do
    world = World.fetch!(Grove.world(instance))
    zone_count = Grid.zone_count(world.grid)
    placement = for index <- 0..(zone_count - 1), do: World.zone_node(world, index)
    zones = Enum.frequencies(placement)
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

  @doc false
  # This node's own counts, asked for by the others.
  @spec local(atom()) :: %{players: integer(), actors: integer(), sessions: integer() | nil}
  def local(instance) do
    stats = World.stats(Grove.world(instance))
    %{players: stats.players, actors: stats.actors, sessions: sessions(instance)}
  end

  # The gateway is one per node; its sessions count when it is this instance's.
  defp sessions(instance) do
    case :persistent_term.get(Grove.Gateway, nil) do
      %{instance: ^instance} -> Grove.Gateway.stats()[:sessions] || 0
      _ -> nil
    end
  end
end
