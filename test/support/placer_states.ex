defmodule Grove.Test.PlacerStates do
  @moduledoc """
  States of the placer's rules (`Grove.World.Placer.State`) that its tests
  start from, on the nodes `:a@host`, `:b@host`, `:c@host` and `:d@host`,
  and what its messages announce.
  """

  use Grove.Test.PlacerNodes

  alias Grove.Cluster.Placement
  alias Grove.World.Placer.State

  @doc """
  d joins a world of `zones` zones placed over a, b and c, and is handed
  the zones it owns now, each at the next epoch: d's state, and the zones
  as `State.take_over_all/4` takes them.
  """
  def taking(zones) do
    {a, _} = State.join_or_start(%{State.new(@a, zones) | members: [@a, @b, @c]}, nil)
    running = Tuple.to_list(a.locations)
    {d, _} = State.join_or_start(%{State.new(@d, zones) | members: [@a, @b, @c, @d]}, running)

    taken =
      for {{_at, epoch}, index} <- Enum.with_index(running),
          Placement.owner(index, [@a, @b, @c, @d]) == @d,
          do: {index, [], [], 0, epoch + 1}

    {d, taken}
  end

  @doc "The placements a message announces: `{index, node, epoch, how}` each."
  def announced_in({:zone_at, index, node, epoch, how}), do: [{index, node, epoch, how}]
  def announced_in({:zones_at, zones}), do: zones
  def announced_in(_message), do: []
end
