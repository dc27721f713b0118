defmodule Grove.World.Relay do
  @moduledoc false
  # This node's directory, kept for zones that run on other nodes.
  #
  # Each node has a directory (`Grove.World.Directory`) of where entities
  # are: those in its own zones, written by the zones themselves, and
  # those its own clients own, wherever they are, since a client's moves
  # are routed from its own node's directory. A zone that takes or drops
  # an entity whose owner lives on another node tells that node's relay,
  # which writes the entry there. The relay holds nothing of its own: the
  # tables are the keeper's, so it can crash and restart at no cost.

  use GenServer

  alias Grove.World
  alias Grove.World.Directory

  @spec start_link(World.t()) :: GenServer.on_start()
  def start_link(%World{} = world),
    do: GenServer.start_link(__MODULE__, world.name, name: name(world.name))

  @doc "The relay's registered name for a world (the same on every node)."
  @spec name(atom()) :: atom()
  def name(world), do: :"#{world}.relay"

  @doc """
  Records that an entity is in `zone`: in this node's directory and, when
  its owner lives on another node, in that node's.
  """
  @spec assign(World.t(), non_neg_integer(), non_neg_integer(), node()) :: :ok
  def assign(%World{} = world, id, zone, owner_node) do
    ensure_chunk(world, id)
    Directory.assign(world.name, id, zone)
    if owner_node != node(), do: send({name(world.name), owner_node}, {:assign, id, zone})
    :ok
  end

  @doc "Forgets an entity that left `zone`, here and on its owner's node."
  @spec release(World.t(), non_neg_integer(), non_neg_integer(), node()) :: :ok
  def release(%World{} = world, id, zone, owner_node) do
    Directory.release(world.name, id, zone)
    if owner_node != node(), do: send({name(world.name), owner_node}, {:release, id, zone})
    :ok
  end

  # The first id of a chunk from another node's range makes room for it here.
  defp ensure_chunk(world, id) do
    unless Directory.ready?(world.name, id),
      do: :ok = GenServer.call(world.keeper, {:directory_chunk, id})
  end

  # Callbacks

  @impl true
  def init(name), do: {:ok, name}

  @impl true
  def handle_info({:assign, id, zone}, name) do
    ensure_chunk(World.fetch!(name), id)
    Directory.assign(name, id, zone)
    {:noreply, name}
  end

  def handle_info({:release, id, zone}, name) do
    if Directory.ready?(name, id), do: Directory.release(name, id, zone)
    {:noreply, name}
  end
end
