defmodule Grove.World.Door do
  @moduledoc false
  # Wakes this node's zones on demand ahead of an entity that comes near
  # them (`:wake_ahead`), so that the zone that asked does not wait for the
  # zone's start.
  #
  # And how a node reaches a zone on demand that another node owns, in a world
  # of a cluster: the zone may sleep there, and a message sent to the name
  # of a process that does not run is lost without a word. So it goes to
  # that node's door, which passes it on to the zone, waking it first
  # (`Grove.World.zone_address/2` on its own node), or on to the door of
  # the zone's owner if it has moved meanwhile. One hop more than a zone
  # that always runs, through one process per node.
  #
  # A zone of this node is asked for once until it runs: the first to ask
  # marks it in the door's table of wakes asked for, those after it find
  # the mark and send nothing (walkers in step come near the same zone
  # together, and each step of each would ask again), and the door wipes
  # the mark once it has woken the zone.
  #
  # And, in a cluster whose world has bacteria, how a zone's row of the
  # automaton reaches the nodes that run its neighbours (`share_row/3`):
  # the door writes it in its node's life table.
  #
  # To GenServer the door is a zone's address, `{:via, Door, {world, zone,
  # node}}`: a cast goes through the door; a call asks the owner for the
  # zone's process (waking it), then calls it.

  use GenServer

  import Kernel, except: [send: 2]

  alias Grove.World

  @spec start_link(World.t()) :: GenServer.on_start()
  def start_link(%World{} = world),
    do: GenServer.start_link(__MODULE__, world.name, name: name(world.name))

  @doc "The door's registered name for a world (the same on every node)."
  @spec name(atom()) :: atom()
  def name(world), do: :"#{world}.door"

  @doc "The address of zone `index` of `world`, which `node` owns."
  @spec address(atom(), non_neg_integer(), node()) :: {:via, module(), tuple()}
  def address(world, index, node), do: {:via, __MODULE__, {world, index, node}}

  @doc "Wakes a zone that `node` (this one, or another) owns, ahead of an entity that came near it."
  @spec wake(atom(), non_neg_integer(), node()) :: :ok
  def wake(world, index, node) do
    Kernel.send({name(world), node}, {:wake, index})
    :ok
  end

  @doc """
  Wakes a zone of this node ahead, unless a wake of it was asked for
  already and the door has not woken it yet: the door hears of each zone
  once, however many ask.
  """
  @spec wake_once(atom(), non_neg_integer()) :: :ok
  def wake_once(world, index) do
    if :ets.insert_new(name(world), {index}), do: wake(world, index, node())
    :ok
  rescue
    # The door restarts, or the world stops.
    ArgumentError -> :ok
  end

  @doc """
  Sends a zone's row of bacteria to `node`'s life table, where the zones
  beside it that `node` runs read its borders (`Grove.World.Zone.Bacteria`).
  """
  @spec share_row(atom(), node(), tuple()) :: :ok
  def share_row(world, node, row) do
    Kernel.send({name(world), node}, {:life_row, row})
    :ok
  end

  @doc "Sends rows of several zones at once, as `share_row/3` sends one."
  @spec share_rows(atom(), node(), [tuple()]) :: :ok
  def share_rows(world, node, rows) do
    Kernel.send({name(world), node}, {:life_rows, rows})
    :ok
  end

  ## As a `:via` registry

  @doc false
  def send({world, index, node}, message) do
    Kernel.send({name(world), node}, {:zone, index, message})
    self()
  end

  @doc false
  def whereis_name({world, index, node}) do
    case :erpc.call(node, World, :zone_process, [world, index], 5000) do
      pid when is_pid(pid) -> pid
      _none -> :undefined
    end
  catch
    _kind, _reason -> :undefined
  end

  @doc false
  def register_name(_name, _pid), do: :no

  @doc false
  def unregister_name(_name), do: :ok

  ## The process

  @impl true
  def init(world) do
    # The wakes asked for and not yet done (`wake_once/2`), by zone.
    :ets.new(name(world), [:named_table, :public, :set, write_concurrency: true])
    {:ok, world}
  end

  @impl true
  def handle_info({:zone, index, message}, world) do
    World.send_zone(World.fetch!(world), index, message)
    {:noreply, world}
  end

  def handle_info({:life_row, row}, world) do
    World.Bacteria.put_row(World.fetch!(world), row)
    {:noreply, world}
  end

  def handle_info({:life_rows, rows}, world) do
    fetched = World.fetch!(world)
    for row <- rows, do: World.Bacteria.put_row(fetched, row)
    {:noreply, world}
  end

  def handle_info({:wake, index}, world) do
    World.wake_here(World.fetch!(world), index)
    :ets.delete(name(world), index)
    {:noreply, world}
  end
end
