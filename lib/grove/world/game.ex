defmodule Grove.World.Game do
  @moduledoc """
  A running world's game, for clients and tools: reading its cell layer
  and entities' attributes without a message, changing its code while it
  runs, and the glue its zones use (where a layer comes from, where
  tallies go, how failures are logged).

  The rules are the zones' (`Grove.World.Zone.Game`, on their pure cores);
  everything here reads ETS and `:atomics`, or casts.

  ## State that lasts

  In a world with a store (the world's `:store` option, see
  `Grove.World.Game.Storage`, which an instance with a store sets), the zones' game state and the game's tallies last:

    * every `:save` milliseconds (the game's option, 5 s by default), the
      zones of this node whose layer changed are saved, all in one batch
      (`Grove.World.Game.Saver`); a zone that starts with nothing in its
      table loads its last save, so a zone lost with its node comes back
      on a survivor at most one interval (and the write) older, and a
      world that restarts finds its game as it left it;
    * tallies (`{:tally, board, key, delta}`) are added up and written at
      most once a second (`Grove.World.Game.Tally`), each node its own
      share, and `board/1` reads the best of a board without a message.

  Entities' attributes are not saved: they travel with their entities;
  a game that wants a player's score to outlive the player keeps it in a
  tally.
  """

  alias Grove.World
  alias Grove.World.Game.{Save, Spec, Storage}
  alias Grove.World.{Directory, Entity, Grid, Slots, Stats}

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

    with %Spec{} <- world.game,
         true <- Grid.in_bounds?(world.grid, x, y),
         index = Grid.zone_of(world.grid, x, y),
         [{_key, value, code, _walk}] <-
           Slots.game_lookup(world, index, Grid.cell_key(world.grid, x, y)) do
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
  def near(world, {x, y}, radius) do
    world = World.fetch!(world)

    case world.game do
      nil ->
        {%{}, %{}}

      _spec ->
        grid = world.grid
        {x0, y0} = {max(x - radius, 0), max(y - radius, 0)}
        {x1, y1} = {min(x + radius, grid.width - 1), min(y + radius, grid.height - 1)}

        Enum.reduce(y0..y1//1, {%{}, %{}}, fn cy, acc ->
          near_row(world, grid, cy, x0, x1, acc)
        end)
    end
  end

  # A row of the square, zone by zone: each zone's table is ordered by cell
  # key (`y * width + x`), so the row's cells in it are a range of keys,
  # walked from its first key with `:ets.next/2` (only the cells that hold
  # a value are visited, never the whole table).
  # A zone on demand that has no table (it sleeps, or never ran) has
  # nothing there; one whose table goes as it is read, the same.
  defp near_row(_world, _grid, _cy, x0, x1, acc) when x0 > x1, do: acc

  defp near_row(world, grid, cy, x0, x1, acc) do
    zone_x1 = min((div(x0, grid.zone_size) + 1) * grid.zone_size - 1, x1)
    high = Grid.cell_key(grid, zone_x1, cy)

    acc =
      case Slots.game_table(world, Grid.zone_of(grid, x0, cy)) do
        nil ->
          acc

        table ->
          try do
            walk_keys(table, grid, :ets.next(table, Grid.cell_key(grid, x0, cy) - 1), high, acc)
          rescue
            ArgumentError -> acc
          end
      end

    near_row(world, grid, cy, zone_x1 + 1, x1, acc)
  end

  defp walk_keys(table, grid, key, high, {cells, walls} = acc)
       when is_integer(key) and key <= high do
    acc =
      case :ets.lookup(table, key) do
        [{^key, value, _code, walk}] ->
          cell = Grid.cell_of_key(grid, key)
          walls = if walk == nil, do: walls, else: Map.put(walls, cell, walk)
          {Map.put(cells, cell, value), walls}

        # Gone since `next` found it.
        [] ->
          acc
      end

    walk_keys(table, grid, :ets.next(table, key), high, acc)
  end

  defp walk_keys(_table, _grid, _key, _high, acc), do: acc

  @doc """
  An entity's game attributes and look, `{attrs, look}`, read from its
  zone's table without a message; `nil` when it is not in the world.
  """
  @spec attrs(World.name() | World.t(), Entity.id()) :: {term(), byte()} | nil
  def attrs(world, id) do
    world = World.fetch!(world)

    with index when index != nil <- Directory.lookup(world.name, id),
         [row] <- Slots.lookup(world, index, id) do
      entity = Entity.from_row(row)
      {entity.attrs, entity.look}
    else
      _ -> nil
    end
  end

  @typedoc "Zones held by `hold/2`, and what starts zones on demand."
  @opaque held :: %{zones: [{Grid.zone_index(), pid()}], starter: pid() | nil}

  @doc """
  Holds every zone of this node that runs (`:sys.suspend/1`, as OTP's
  release handling does), for a reload of the game's code
  (`Grove.Reloader`): until `release/1`, no zone handles a message, so no
  action, hook or tick runs code loaded meanwhile on state that `renew/3`
  has not brought along. What arrives meanwhile waits in the zones'
  mailboxes and is handled after, in order: nothing is lost. In a world of
  zones on demand no zone starts meanwhile either (a client that wakes one
  waits). Bounded: a zone that does not answer within `timeout`
  milliseconds is not waited for, and `{:error, late}` names those zones
  (`:starter` for the supervisor that starts zones on demand); none is
  held then.
  """
  @spec hold(World.name() | World.t(), timeout()) ::
          {:ok, held()} | {:error, [Grid.zone_index() | :starter]}
  def hold(world, timeout) do
    world = World.fetch!(world)

    # First what starts zones on demand, so that the zones found next are
    # all there are.
    starter =
      if world.zones_on_demand,
        do: Process.whereis(World.Supervisor.awake_supervisor(world.name))

    case starter && suspend(starter, timeout) do
      :late -> late(world, [{:starter, starter}], %{zones: [], starter: nil})
      _held_or_none -> hold_zones(world, starter, timeout)
    end
  end

  defp hold_zones(world, starter, timeout) do
    zones =
      for index <- World.awake_zones(world),
          World.zone_node(world, index) == node(),
          pid = World.zone_pid(world, index),
          pid != nil,
          do: {index, pid}

    # All at once: the wait is the slowest zone's, not the sum of them.
    answers =
      zones
      |> Task.async_stream(fn {_index, pid} -> suspend(pid, timeout) end,
        max_concurrency: 64,
        timeout: :infinity
      )
      |> Enum.zip_with(zones, fn {:ok, answer}, zone -> {zone, answer} end)

    held = %{zones: for({zone, :ok} <- answers, do: zone), starter: starter}

    case for({zone, :late} <- answers, do: zone) do
      [] -> {:ok, held}
      late -> late(world, late, held)
    end
  end

  # Some did not answer in time: none is held. Their suspension is on its
  # way still, so a resume follows it, unawaited: none is left held.
  defp late(world, late, held) do
    release(held)
    for {_index, pid} <- late, do: sys(fn -> :sys.resume(pid, 0) end)
    Stats.incr(world.stats, :reload_zones_late, length(late))
    {:error, Enum.map(late, &elem(&1, 0))}
  end

  @doc "Lets the zones held by `hold/2` go on, in order with what waited."
  @spec release(held()) :: :ok
  def release(%{zones: zones, starter: starter}) do
    for {_index, pid} <- zones, do: resume(pid)
    if starter, do: resume(starter)
    :ok
  end

  @doc """
  The game's module was reloaded while its zones were held (`hold/2`):
  its spec is made again (`Grove.World.Game.Spec.renew!/1`) and every
  held zone takes it (`:sys.change_code/4`), passing its cell layer and
  its entities' attributes through the game's `upgrade/3` when the
  version changed. Every zone upgrades first and keeps its old state
  beside the new; only when all have succeeded do they keep the new, and
  is the spec published for readers. A zone whose upgrade raised, or that
  did not answer within `timeout`, and every zone keeps its old state:
  `{:error, why}`, the old code then to be loaded back by the caller.
  Raises `ArgumentError` when the new code is not a game any more.
  """
  @spec renew(World.name() | World.t(), held(), timeout()) ::
          {:ok, Spec.t()} | {:error, :no_game | String.t()}
  def renew(world, %{zones: zones}, timeout) do
    world = World.fetch!(world)

    case world.game do
      nil ->
        {:error, :no_game}

      old ->
        spec = Spec.renew!(old)

        answers =
          zones
          |> Task.async_stream(
            fn {_index, pid} -> change(pid, {:grove_game, :upgrade, spec}, timeout) end,
            max_concurrency: 64,
            timeout: :infinity
          )
          |> Enum.zip_with(zones, fn {:ok, answer}, zone -> {zone, answer} end)

        case for({{index, _pid}, answer} <- answers, answer != :ok, do: {index, answer}) do
          [] ->
            World.publish(%{World.fetch!(world.name) | game: spec})
            for {_index, pid} <- zones, do: change(pid, {:grove_game, :commit}, timeout)
            {:ok, spec}

          failed ->
            for {_index, pid} <- zones, do: change(pid, {:grove_game, :abort}, timeout)
            {:error, describe_failed(spec.module, failed, length(zones))}
        end
    end
  end

  # Calls to a zone's system messages, bounded: a zone that stopped, or
  # does not answer in time, answers `:late` (what was asked of it is in
  # its mailbox still, and whatever is asked of it next comes after).
  defp suspend(pid, timeout), do: sys(fn -> :sys.suspend(pid, timeout) end)

  # A held process answers system messages at once.
  defp resume(pid), do: sys(fn -> :sys.resume(pid, 5000) end)

  defp change(pid, extra, timeout) do
    case sys(fn -> :sys.change_code(pid, Grove.World.Zone, nil, extra, timeout) end) do
      {:error, {:error, {_module, _callback, _kind, _reason, _stack} = failure}} -> failure
      other -> other
    end
  end

  defp sys(call) do
    call.()
  catch
    :exit, _late_or_gone -> :late
  end

  defp describe_failed(module, failed, count) do
    {first, rest} =
      case Enum.find(failed, &match?({_index, {_, _, _, _, _}}, &1)) do
        {index, {module, callback, kind, reason, stack}} ->
          {"#{inspect(module)}.#{callback}/3 failed in zone #{index}: " <>
             Exception.format_banner(kind, reason, stack), length(failed) - 1}

        nil ->
          indices = failed |> Enum.map(&elem(&1, 0)) |> Enum.take(10) |> Enum.join(", ")
          {"#{if length(failed) == 1, do: "zone", else: "zones"} #{indices} did not answer", 0}
      end

    "#{first}#{if rest > 0, do: " (and in #{rest} more of #{count} zones)", else: ""}; " <>
      "no zone took #{inspect(module)}'s new version"
  end

  @doc """
  Makes every zone of this node call the game's `tick/2` now; for games
  whose `:tick` is `:manual` (tests drive time this way).
  """
  @spec tick(World.name() | World.t()) :: :ok
  def tick(world) do
    world = World.fetch!(world)

    for index <- World.awake_zones(world),
        World.zone_node(world, index) == node(),
        pid = World.zone_pid(world, index),
        pid != nil,
        do: send(pid, :game_tick)

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
    world = World.fetch!(world)

    with %Spec{} = spec <- world.game,
         %{tally: board} when is_atom(board) <- Map.get(Spec.legend(spec), :board),
         tally when tally != nil <- world.tally do
      %{"board" => Atom.to_string(board), "top" => Grove.World.Game.Tally.top(tally, board, 10)}
    else
      _ -> %{"board" => :null, "top" => []}
    end
  end

  ## The zones' side

  @doc false
  # Where a zone's layer comes from when its table has none (a world that
  # starts, or a lost node's zone starting again on a survivor): its last
  # save in the store when the world has one (`Grove.World.Game.Save`: a
  # base and the cells changed since), as `{rows, changed_keys}`, else the
  # game lays it anew. A save of another version of the game is passed
  # through `upgrade/3`; one that cannot be read or upgraded, or a store
  # that cannot answer, and the game lays the zone anew (logged).
  @spec load(World.t(), Grid.zone_index()) ::
          {[{non_neg_integer(), term()}], [non_neg_integer()]} | :generate
  def load(%World{store: nil}, _index), do: :generate

  def load(%World{game_saves: saves} = world, index) when saves != nil do
    if :ets.member(saves, index) do
      read_save(world, index)
    else
      Stats.incr(world.stats, :game_loads_skipped)
      :generate
    end
  end

  def load(world, index), do: read_save(world, index)

  defp read_save(%World{game: spec, store: store} = world, index) do
    scope = save_scope(world)

    with {:ok, base} <- Storage.fetch_state(store, scope, Save.base_key(index)),
         {:ok, changes} <- fetch_changes(store, scope, index) do
      case decode_save(spec, base, changes) do
        {:ok, rows, changed, saved_at} ->
          Stats.incr(world.stats, :game_zones_loaded)
          age = System.system_time(:millisecond) - saved_at
          Logger.info("game: zone #{index} restored from its save of #{age} ms ago")
          {rows, changed}

        {:error, why} ->
          Logger.warning("game: zone #{index}'s save cannot be read (#{why}); laid anew")
          :generate
      end
    else
      {:error, :not_found} ->
        :generate

      {:error, _unavailable} ->
        Stats.incr(world.stats, :game_save_failures)
        Logger.warning("game: the store could not give zone #{index}'s save; laid anew")
        :generate
    end
  end

  defp fetch_changes(store, scope, index) do
    case Storage.fetch_state(store, scope, Save.changes_key(index)) do
      {:ok, changes} -> {:ok, changes}
      {:error, :not_found} -> {:ok, nil}
      {:error, _unavailable} = error -> error
    end
  end

  @doc false
  # A zone's layer as its table holds it: `{key, value}` pairs, or nil
  # when the zone has not laid it (or no longer runs here).
  @spec layer(World.t(), Grid.zone_index()) :: [{non_neg_integer(), term()}] | nil
  def layer(%World{} = world, index) do
    case Slots.game_lookup(world, index, :ready) do
      [] ->
        nil

      _ready ->
        Slots.game_select(world, index, [
          {{:"$1", :"$2", :_, :_}, [{:is_integer, :"$1"}], [{{:"$1", :"$2"}}]}
        ])
    end
  end

  @doc false
  # A zone's mark, in its layer's table, of a cell that changed since the
  # base of its save (the zone writes it after the cell's value).
  @spec changed_mark(non_neg_integer()) :: tuple()
  def changed_mark(key), do: {{:changed, key}, nil, 0, nil}

  @doc false
  # The cells of a zone marked as changed since the base of its save, with
  # their values now (`nil`: the cell has none now), or nil when the zone
  # has not laid its layer (or no longer runs here).
  @spec changed(World.t(), Grid.zone_index()) :: [{non_neg_integer(), term()}] | nil
  def changed(%World{} = world, index) do
    case Slots.game_table(world, index) do
      nil ->
        nil

      table ->
        try do
          keys = :ets.select(table, [{{{:changed, :"$1"}, :_, :_, :_}, [], [:"$1"]}])

          for key <- keys do
            case :ets.lookup(table, key) do
              [{^key, value, _code, _walk}] -> {key, value}
              [] -> {key, nil}
            end
          end
        rescue
          ArgumentError -> nil
        end
    end
  end

  @doc false
  # Forgets a zone's marks of changed cells, before its whole layer is read
  # for a new base: a cell that changes after is marked again.
  @spec forget_changed(World.t(), Grid.zone_index()) :: :ok
  def forget_changed(%World{} = world, index) do
    Slots.game_select_delete(world, index, [{{{:changed, :_}, :_, :_, :_}, [], [true]}])
    :ok
  end

  @doc false
  # Which zones have a save of their layer in the store, for a world of
  # zones on demand on one node: read once as it starts (`list_keys/2`),
  # and kept as its zones and its saver write, so that a zone that wakes
  # for the first time lays its layer without asking the store. Nil (each
  # wake asks) without a store that lists its keys, or in a cluster, where
  # other nodes write saves too.
  @spec known_saves(World.t()) :: :ets.tid() | nil
  def known_saves(%World{store: nil}), do: nil
  def known_saves(%World{cluster: cluster}) when cluster != nil, do: nil

  def known_saves(%World{store: store} = world) do
    case Storage.list_keys(store, save_scope(world)) do
      {:ok, keys} ->
        table = :ets.new(:grove_game_saves, [:set, :public, write_concurrency: true])
        :ets.insert(table, for(key <- keys, {index, ""} <- [Integer.parse(key)], do: {index}))
        table

      {:error, :not_supported} ->
        nil

      {:error, reason} ->
        Logger.warning(
          "game: the store could not list the zones' saves (#{inspect(reason)}); " <>
            "every zone asks it as it wakes"
        )

        nil
    end
  end

  @doc false
  # Zones whose layer the store now has.
  @spec has_saves(World.t(), [Grid.zone_index()]) :: :ok
  def has_saves(%World{game_saves: nil}, _indexes), do: :ok

  def has_saves(%World{game_saves: saves}, indexes) do
    :ets.insert(saves, for(index <- indexes, do: {index}))
    :ok
  end

  @doc false
  # Where a world's game saves its zones in the store: the game and the
  # world's shape, so that a world of another size or seed, or another
  # game, never reads them.
  @spec save_scope(World.t()) :: String.t()
  def save_scope(%World{game: spec, grid: grid} = world) do
    seed = Keyword.get(world.terrain_options, :seed, 1)
    "game/#{inspect(spec.module)}/#{grid.width}x#{grid.height}/#{grid.zone_size}/#{inspect(seed)}"
  end

  @doc false
  # A zone's whole layer as a base of its save (`Grove.World.Game.Save`),
  # with the removal of the changes of any earlier base: the entries to
  # write in one `save_state/3`, and the base's id.
  @spec base_entries(World.t(), Grid.zone_index(), [{non_neg_integer(), term()}]) ::
          {[{String.t(), binary() | nil}], pos_integer()}
  def base_entries(%World{game: spec}, index, rows) do
    id = Save.new_id()

    {[
       {Save.base_key(index), Save.encode_base(spec.version, rows, id)},
       {Save.changes_key(index), nil}
     ], id}
  end

  defp decode_save(spec, base, changes) do
    upgrade = fn value, from ->
      if function_exported?(spec.module, :upgrade, 3),
        do: spec.module.upgrade(:cell, value, from),
        else: throw({:no_upgrade, from})
    end

    Save.decode(base, changes, spec.version, upgrade)
  rescue
    error -> {:error, Exception.message(error)}
  catch
    {:no_upgrade, from} ->
      {:error,
       "it is of version #{from} of the game, which runs #{spec.version} and has no upgrade/3"}
  end

  @doc false
  # The saver wrote: when, for the age of what a lost zone would come back with.
  @spec saved(World.t()) :: :ok
  def saved(%World{game_changes: changes} = world),
    do: :atomics.put(changes, saved_slot(world), System.system_time(:millisecond))

  # After the zones' counts, or alone in a world of zones on demand, whose
  # zones count in their slots.
  defp saved_slot(%World{zones_on_demand: true}), do: 1
  defp saved_slot(world), do: Grid.zone_count(world.grid) + 1

  @doc """
  When the zones' game state was last saved to the store (system time in
  milliseconds), or nil: what a zone lost with its node would come back
  with is at most that old.
  """
  @spec saved_at(World.name() | World.t()) :: integer() | nil
  def saved_at(world) do
    world = World.fetch!(world)

    case world.game_changes do
      nil ->
        nil

      changes ->
        case :atomics.get(changes, saved_slot(world)) do
          0 -> nil
          at -> at
        end
    end
  end

  @doc false
  # The zone changed its layer: one more in its count, which the saver
  # compares with what it saved last.
  @spec touched(World.t(), Grid.zone_index()) :: :ok
  def touched(%World{} = world, index), do: Slots.touched(world, index)

  @doc false
  @spec tally(World.t(), [{atom(), integer() | String.t(), integer()}]) :: :ok
  def tally(%World{tally: nil} = world, tallies) do
    Stats.incr(world.stats, :tallies_dropped, length(tallies))
    :ok
  end

  def tally(%World{tally: tally}, tallies), do: Grove.World.Game.Tally.add(tally, tallies)

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
