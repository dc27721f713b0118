defmodule Grove.Bench.Baseline do
  @moduledoc """
  The design Grove is measured against: the whole world in ONE GenServer, as
  in "How Far Can I Push a GenServer?" (see ../shared/seeds/), with a
  synchronous call per move.

  It applies exactly Grove's rules (it holds a single `Zone.State` covering
  the whole grid, on the same terrain), so the comparison is between designs,
  not between amounts of work. It implements `Grove.World.Client`, so the
  very same actors walk in it; as in the blog, every actor is its own process
  blocked in its call (the bench runs it with one actor per herd and no
  batching), and a call that takes longer than 5 s is a timeout.
  """

  use GenServer

  @behaviour Grove.World.Client

  alias Grove.World
  alias Grove.World.{Entity, Grid, Terrain}
  alias Grove.World.Zone.State

  @call_timeout 5000

  defstruct [:core, :grid, :terrain, :next_id, monitors: %{}]

  @doc """
  Starts the baseline server under `name` with `Grove.World`'s size, seed,
  terrain and rules options.
  """
  @spec start_link(keyword()) :: GenServer.on_start()
  def start_link(opts) do
    name = Keyword.fetch!(opts, :name)
    GenServer.start_link(__MODULE__, opts, name: name)
  end

  @impl Grove.World.Client
  def join(server, opts \\ []) do
    at = Keyword.get(opts, :at, :random)
    kind = if Keyword.get(opts, :kind, :actor) == :player, do: 1, else: 0
    GenServer.call(server, {:join, self(), at, kind}, @call_timeout)
  catch
    :exit, {:timeout, _} -> {:error, :timeout}
  end

  @impl Grove.World.Client
  def move(server, id, direction, tag) do
    outcome =
      try do
        GenServer.call(server, {:move, id, direction}, @call_timeout)
      catch
        :exit, {:timeout, _} -> {:rejected, :timeout}
      end

    send(self(), {:grove_move, id, tag, outcome})
    :ok
  end

  @impl Grove.World.Client
  def move_many(server, moves) do
    for {id, direction, tag} <- moves, do: move(server, id, direction, tag)
    :ok
  end

  @impl Grove.World.Client
  def leave(server, id), do: GenServer.call(server, {:leave, id}, @call_timeout)

  @impl Grove.World.Client
  def grid(server), do: :persistent_term.get({__MODULE__, server}).grid

  @impl Grove.World.Client
  def terrain(server), do: :persistent_term.get({__MODULE__, server}).terrain

  @doc "How many entities the server holds."
  @spec entity_count(GenServer.server()) :: non_neg_integer()
  def entity_count(server), do: GenServer.call(server, :count, 60_000)

  @doc "The server's consistency check, like `Grove.World.audit/1`."
  @spec audit(GenServer.server()) :: :ok | {:error, [String.t()]}
  def audit(server) do
    case GenServer.call(server, :audit, 60_000) do
      [] -> :ok
      problems -> {:error, problems}
    end
  end

  # Callbacks

  @impl true
  def init(opts) do
    # The same validation and defaults as a real world, minus the zones.
    world = World.new!(Keyword.take(opts, [:name, :width, :height, :seed, :terrain, :rules]))
    %Grid{width: w, height: h} = world.grid
    terrain = Terrain.generate(w, h, world.terrain_options)
    grid = Grid.new(w, h, max(w, h))
    core = State.new(0, grid, terrain, world.rules)
    :persistent_term.put({__MODULE__, world.name}, %{grid: world.grid, terrain: terrain})
    {:ok, %__MODULE__{core: core, grid: grid, terrain: terrain, next_id: 1}}
  end

  @impl true
  def handle_call({:join, owner, at, kind}, _from, server) do
    id = server.next_id
    server = %{server | next_id: id + 1}
    entity = %Entity{id: id, owner: owner, kind: kind, updates: :none}

    case State.place(server.core, entity, candidates(server, at)) do
      {:ok, placed, core} ->
        ref = Process.monitor(owner)

        {:reply, {:ok, id, {placed.x, placed.y}},
         %{server | core: core, monitors: Map.put(server.monitors, ref, id)}}

      {:rejected, reason, core} ->
        {:reply, {:error, reason}, %{server | core: core}}
    end
  end

  def handle_call({:move, id, direction}, {owner, _}, server) do
    now = :erlang.monotonic_time(:millisecond)

    case State.apply_move(server.core, id, direction, owner, nil, now) do
      {:moved, entity, _from, core} ->
        {:reply, {:ok, {entity.x, entity.y}}, %{server | core: core}}

      {:rejected, reason, core} ->
        {:reply, {:rejected, reason}, %{server | core: core}}

      {:unknown, core} ->
        {:reply, {:rejected, :unknown_entity}, %{server | core: core}}
    end
  end

  def handle_call({:leave, id}, _from, server) do
    {_entity, core} = State.remove(server.core, id)
    {:reply, :ok, %{server | core: core}}
  end

  def handle_call(:count, _from, server), do: {:reply, State.size(server.core), server}
  def handle_call(:audit, _from, server), do: {:reply, State.audit(server.core), server}

  @impl true
  def handle_info({:DOWN, ref, :process, _pid, _reason}, server) do
    {id, monitors} = Map.pop(server.monitors, ref)
    {_entity, core} = State.remove(server.core, id)
    {:noreply, %{server | core: core, monitors: monitors}}
  end

  defp candidates(_server, {x, y}) when is_integer(x) and is_integer(y), do: [{x, y}]

  defp candidates(server, area) do
    {x0, y0, x1, y1} =
      case area do
        {:within, rect} -> rect
        :random -> {0, 0, server.grid.width, server.grid.height}
      end

    for _ <- 1..32,
        x = x0 + :rand.uniform(x1 - x0) - 1,
        y = y0 + :rand.uniform(y1 - y0) - 1,
        not Terrain.blocked?(server.terrain, x, y),
        do: {x, y}
  end
end
