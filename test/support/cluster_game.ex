defmodule Grove.ClusterGame do
  @moduledoc """
  What the tests of a game in a cluster run on the nodes (test modules
  exist on the test node alone; this one is compiled where the peers
  find it): where a node says a zone runs, a client that picks apples of
  `Grove.AppleGame` when told, and a save asked of a node's saver now.
  """

  alias Grove.World

  @doc false
  # On a node of the cluster: joins next to the first tree, picks, and
  # when told, walks to the second and picks there.
  def picker(test, world, {sx, sy}, {ux, uy}) do
    {:ok, id, _} = World.join(world, at: {sx + 1, sy})
    :ok = World.act(world, id, :pick, :w, %{}, :first)

    receive do:
              ({:grove_act, ^id, :first, outcome} ->
                 send(test, {:picked, self(), :saved, outcome}))

    receive do: (:pick_again -> :ok)
    :ok = World.leave(world, id)
    {:ok, id, _} = World.join(world, at: {ux + 1, uy})
    :ok = World.act(world, id, :pick, :w, %{}, :second)

    receive do:
              ({:grove_act, ^id, :second, outcome} ->
                 send(test, {:picked, self(), :unsaved, outcome}))

    receive do: (:never -> :ok)
  end

  @doc false
  # On a node: where it says a zone runs.
  def zone_node(world, index), do: World.zone_node(World.fetch!(world), index)

  @doc false
  # On the node that runs the zone: its saver writes what changed, now.
  def save_now(world) do
    {_, saver, _, _} =
      world |> Supervisor.which_children() |> Enum.find(&(elem(&1, 0) == Grove.World.Game.Saver))

    Grove.World.Game.Saver.save_now(saver)
  end
end
