defmodule Grove.World.Game do
  @moduledoc """
  A running world's game, for clients and tools: reading its cell layer
  and entities' attributes without a message, changing its code while it
  runs, and the glue its zones use (where a layer comes from, where
  tallies go, how failures are logged).

  The rules are the zones' (`Grove.World.Zone.Game`, on their pure cores);
  everything here reads ETS and `:atomics`, or casts.
  """

  alias Grove.Game.Spec
  alias Grove.World
  alias Grove.World.{Directory, Entity, Grid, Stats}

  require Logger

  # At most one line about a failing callback every this many milliseconds
  # on a node, whatever the number of zones failing.
  @log_every 10_000

  @doc "The world's game, or nil."
  @spec spec(World.name() | World.t()) :: Spec.t() | nil
  def spec(world), do: World.fetch!(world).game

  @doc """
  A cell's layer value and visible code, `{value, code}`, read from its
  zone's table without a message; `nil` for a cell without a value (or a
  world without a game).
  """
  @spec cell(World.name() | World.t(), Grid.cell()) :: {term(), byte()} | nil
  def cell(world, {x, y}) do
    world = World.fetch!(world)

    with tables when tables != nil <- world.game_tables,
         true <- Grid.in_bounds?(world.grid, x, y),
         index = Grid.zone_of(world.grid, x, y),
         [{_key, value, code, _walk}] <-
           :ets.lookup(elem(tables, index), Grid.cell_key(world.grid, x, y)) do
      {value, code}
    else
      _ -> nil
    end
  end

  @doc """
  The game's layer around a cell: the values of the cells within `radius`
  (a square, clipped to the grid), and those cells where the layer blocks
  (`true`) or frees (`false`) movement, read from the zones' tables
  without a message; what an actor that plays the game senses (see
  `Grove.Actor.Senses`).
  """
  @spec near(World.name() | World.t(), Grid.cell(), non_neg_integer()) ::
          {%{Grid.cell() => term()}, %{Grid.cell() => boolean()}}
  def near(world, {x, y} = cell, radius) do
    world = World.fetch!(world)

    case world.game_tables do
      nil ->
        {%{}, %{}}

      tables ->
        grid = world.grid
        {x0, y0} = {max(x - radius, 0), max(y - radius, 0)}
        {x1, y1} = {min(x + radius, grid.width - 1), min(y + radius, grid.height - 1)}
        low = Grid.cell_key(grid, x0, y0)
        high = Grid.cell_key(grid, x1, y1)

        spec = [
          {{:"$1", :"$2", :_, :"$3"},
           [{:is_integer, :"$1"}, {:>=, :"$1", low}, {:"=<", :"$1", high}],
           [{{:"$1", :"$2", :"$3"}}]}
        ]

        Grid.view_zones(grid, cell, radius)
        |> Enum.flat_map(&:ets.select(elem(tables, &1), spec))
        |> Enum.reduce({%{}, %{}}, fn {key, value, walk}, {cells, walls} ->
          {cx, cy} = Grid.cell_of_key(grid, key)

          if cx >= x0 and cx <= x1 and cy >= y0 and cy <= y1 do
            walls = if walk == nil, do: walls, else: Map.put(walls, {cx, cy}, walk)
            {Map.put(cells, {cx, cy}, value), walls}
          else
            {cells, walls}
          end
        end)
    end
  end

  @doc """
  An entity's game attributes and look, `{attrs, look}`, read from its
  zone's table without a message; `nil` when it is not in the world.
  """
  @spec attrs(World.name() | World.t(), Entity.id()) :: {term(), byte()} | nil
  def attrs(world, id) do
    world = World.fetch!(world)

    with index when index != nil <- Directory.lookup(world.name, id),
         [row] <- :ets.lookup(elem(world.tables, index), id) do
      entity = Entity.from_row(row)
      {entity.attrs, entity.look}
    else
      _ -> nil
    end
  end

  @doc """
  Every zone of this node takes the game's module as it is now: its spec
  made again (`Grove.Game.Spec.renew!/1`), published for new readers and
  sent to the zones, which keep their state (and pass it through the
  game's `upgrade/3` when its version changed). Raises `ArgumentError`
  when the new code is not a game any more; the old spec stays then.
  """
  @spec renew(World.name() | World.t()) :: {:ok, Spec.t()} | {:error, :no_game}
  def renew(world) do
    world = World.fetch!(world)

    case world.game do
      nil ->
        {:error, :no_game}

      old ->
        spec = Spec.renew!(old)
        :persistent_term.put({World, world.name}, %{world | game: spec})

        for index <- 0..(tuple_size(world.zones) - 1),
            World.zone_node(world, index) == node(),
            do: GenServer.cast(elem(world.zones, index), {:game, spec})

        {:ok, spec}
    end
  end

  @doc """
  Makes every zone of this node call the game's `tick/2` now; for games
  whose `:tick` is `:manual` (tests drive time this way).
  """
  @spec tick(World.name() | World.t()) :: :ok
  def tick(world) do
    world = World.fetch!(world)

    for index <- 0..(tuple_size(world.zones) - 1),
        World.zone_node(world, index) == node(),
        do: send(elem(world.zones, index), :game_tick)

    :ok
  end

  @doc """
  The game's leaderboard, as `GET /game/board` gives it: the board its
  legend names and the best of that tally, with names; `%{"board" =>
  :null, "top" => []}` (JSON's null, for jiffy) while the world keeps no
  tallies.
  """
  @spec board(World.name() | World.t()) :: map()
  def board(world) do
    _world = World.fetch!(world)
    %{"board" => :null, "top" => []}
  end

  ## The zones' side

  @doc false
  # Where a zone's layer comes from when its table has none.
  @spec load(World.t(), Grid.zone_index()) :: [{non_neg_integer(), term()}] | :generate
  def load(%World{}, _index), do: :generate

  @doc false
  # The zone changed its layer: one more in its count, which the saver
  # compares with what it saved last.
  @spec touched(World.t(), Grid.zone_index()) :: :ok
  def touched(%World{game_changes: changes}, index), do: :atomics.add(changes, index + 1, 1)

  @doc false
  @spec tally(World.t(), [{atom(), integer() | String.t(), integer()}]) :: :ok
  def tally(%World{tally: nil} = world, tallies) do
    Stats.incr(world.stats, :tallies_dropped, length(tallies))
    :ok
  end

  def tally(%World{tally: tally}, tallies) do
    send(tally, {:tallies, tallies})
    :ok
  end

  @doc false
  # A callback failed: counted always, logged at most once every ten
  # seconds on this node (with how many were not), naming the module.
  @spec failed(World.t(), Grid.zone_index(), Grove.World.Zone.Game.failure()) :: :ok
  def failed(%World{game_log: log} = world, index, {module, callback, kind, reason, stack}) do
    Stats.incr(world.stats, :game_failures)
    now = System.monotonic_time(:millisecond)
    last = :atomics.get(log, 1)

    if now - last >= @log_every and :atomics.compare_exchange(log, 1, last, now) == :ok do
      quiet = :atomics.exchange(log, 2, 0)

      Logger.error(
        "game #{inspect(module)}: #{callback} failed in zone #{index}: " <>
          Exception.format_banner(kind, reason, stack) <>
          if(quiet > 0, do: " (and #{quiet} more failures since the last report)", else: "")
      )
    else
      :atomics.add(log, 2, 1)
    end

    :ok
  end
end
