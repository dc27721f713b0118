defmodule Grove.Bench.ZoneSoak do
  @moduledoc """
  One zone put to sleep and woken over and over, checked each time
  (`mix grove.soak.zones`): a world of a million cells a side whose zones
  start on demand, with a store and a game (the orchard), a zone in it
  holding actors. Each cycle reads the zone's rows (its entities, their
  cells and attributes) and its game's layer, puts it to sleep (what it
  held goes to the store, its tables go), checks that it holds no table
  and that the world still counts its entities, wakes it, and checks
  that its rows are what they were, and its layer what it was when it
  last saved it; then one actor steps, so that the next cycle saves
  something else, and every tenth cycle an actor acts on the layer
  (grazes flowers or picks an apple beside it, when there are) and the
  game ticks (trees grow apples). The layer comes back as it was when
  an action changed it, and as last saved when only ticks did: in a
  world of zones on demand, what ticks alone changed is not saved
  (docs/decisions.md). Every `audit_every` cycles, the world's audit.
  """

  alias Grove.World
  alias Grove.World.{Game, Grid, Slots, Terrain, Zone}

  @type result :: %{
          cycles: non_neg_integer(),
          lost: non_neg_integer(),
          changed: non_neg_integer(),
          kept_tables: non_neg_integer(),
          audits: non_neg_integer(),
          audit_failures: non_neg_integer(),
          moves: non_neg_integer(),
          layer_saves: non_neg_integer(),
          millis: non_neg_integer()
        }

  @doc """
  Runs `cycles` cycles; `progress` is called with the cycles done every
  tenth of the run. Options: `:actors` (default 6), `:audit_every`
  (default 1000).
  """
  @spec run(pos_integer(), (non_neg_integer(), result() -> any()), keyword()) :: result()
  def run(cycles, progress \\ fn _done, _so_far -> :ok end, opts \\ []) do
    store = Grove.Bench.EtsStore.new()
    name = :"zone_soak_#{System.unique_integer([:positive])}"

    {:ok, sup} =
      name
      |> Grove.Bench.ZoneWakeWorld.options(
        tick: :manual,
        # Every tick run when it is sent (none owed while nobody watches):
        # the layer read before a sleep is then the one it saves.
        game: {Grove.Games.Orchard, [tick: :manual, save: 3_600_000, catch_up: 1]},
        store: {Grove.Bench.EtsStore, store}
      )
      |> World.start_link()

    try do
      world = World.fetch!(name)
      index = div(Grid.zone_count(world.grid), 2) + 777
      ids = place(world, index, Keyword.get(opts, :actors, 6))
      state = %{world: world, index: index, ids: ids}
      started = System.monotonic_time(:millisecond)

      empty = %{
        cycles: 0,
        lost: 0,
        changed: 0,
        kept_tables: 0,
        audits: 0,
        audit_failures: 0,
        moves: 0,
        layer_saves: 0,
        # The layer as the zone last saved it (or laid it), and whether an
        # action changed it since.
        saved_layer: nil,
        acted: false
      }

      every = max(div(cycles, 10), 1)
      audit_every = Keyword.get(opts, :audit_every, 1000)

      result =
        Enum.reduce(1..cycles, empty, fn n, acc ->
          acc = cycle(state, n, acc)
          acc = if rem(n, audit_every) == 0, do: audit(world, acc), else: acc
          if rem(n, every) == 0, do: progress.(n, acc)
          acc
        end)

      world
      |> audit(result)
      |> Map.drop([:saved_layer, :acted])
      |> Map.put(:millis, System.monotonic_time(:millisecond) - started)
    after
      Supervisor.stop(sup)
      :ets.delete(store)
    end
  end

  # Actors on walkable cells of the zone, a cell apart.
  defp place(world, index, count) do
    {x0, y0, x1, y1} = Grid.zone_bounds(world.grid, index)

    cells =
      for y <- (y0 + 2)..(y1 - 3)//3,
          x <- (x0 + 2)..(x1 - 3)//3,
          not Terrain.blocking?(Terrain.at(World.terrain(world), x, y)),
          do: {x, y}

    cells
    |> Enum.take(count)
    |> Enum.map(fn cell ->
      {:ok, id, ^cell} = World.join(world, at: cell, updates: :none)
      id
    end)
  end

  defp cycle(%{world: world, index: index} = state, n, acc) do
    {rows0, layer0} = held(world, index)
    # An action changed the layer since the last save: it is saved now.
    saves? = acc.acted or acc.saved_layer == nil
    saved_layer = if saves?, do: layer0, else: acc.saved_layer
    entities = World.entity_count(world)
    pid = World.zone_pid(world, index) || World.zone_address(world, index)
    :asleep = Zone.sleep_if_idle(pid, 5000)

    # Asleep: what it held is in the store, not in memory, and still counted.
    kept = if Slots.table(world, index) == nil, do: 0, else: 1
    lost = if World.entity_count(world) == entities, do: 0, else: 1

    World.zone_address(world, index)
    :ok = Zone.recovered(world, index)
    {rows1, layer1} = held(world, index)
    changed = if rows1 == rows0 and layer1 == saved_layer, do: 0, else: 1

    # The first few differences are shown: what went, what came.
    if changed == 1 and acc.changed < 3 do
      IO.puts(
        "cycle #{n}: rows gone #{inspect(rows0 -- rows1)}, come #{inspect(rows1 -- rows0)}; " <>
          "cells gone #{inspect(saved_layer -- layer1)}, come #{inspect(layer1 -- saved_layer)}"
      )
    end

    moved = step(state, n)

    acted =
      if rem(n, 10) == 0 do
        acted = act(state, n)
        Game.tick(world)
        # A call after the tick's message: answered once the tick is done.
        :ok = Zone.recovered(world, index)
        acted
      else
        false
      end

    %{
      acc
      | cycles: n,
        lost: acc.lost + lost,
        changed: acc.changed + changed,
        kept_tables: acc.kept_tables + kept,
        moves: acc.moves + moved,
        layer_saves: acc.layer_saves + if(saves? and n > 1, do: 1, else: 0),
        saved_layer: saved_layer,
        acted: acted
    }
  end

  # An actor grazes flowers or picks an apple beside it, the first that
  # it can: true when it did.
  defp act(%{world: world, ids: ids}, n) do
    id = Enum.at(ids, rem(div(n, 10), length(ids)))

    Enum.any?(
      for(action <- [:graze, :pick], direction <- Grid.directions(), do: {action, direction}),
      fn
        {action, direction} ->
          tag = {:soak_act, n, action, direction}
          :ok = World.act(world, id, action, direction, %{}, tag)

          receive do
            {:grove_act, ^id, ^tag, {:ok, _data}} -> true
            {:grove_act, ^id, ^tag, _refused} -> false
          after
            5000 -> raise "no outcome for an action in cycle #{n}"
          end
      end
    )
  end

  # Its entities' rows and its game's layer, in order.
  defp held(world, index),
    do: {Enum.sort(Slots.rows(world, index)), Enum.sort(Game.layer(world, index) || [])}

  # One actor steps east or west, back and forth, inside the zone.
  defp step(%{world: world, ids: ids}, n) do
    id = Enum.at(ids, rem(n, length(ids)))
    direction = if rem(div(n, length(ids)), 2) == 0, do: :e, else: :w
    :ok = World.move(world, id, direction, {:soak, n})

    receive do
      {:grove_move, ^id, {:soak, ^n}, {:ok, _cell}} -> 1
      {:grove_move, ^id, {:soak, ^n}, {:rejected, _why}} -> 0
    after
      5000 -> raise "no outcome for a move in cycle #{n}"
    end
  end

  defp audit(world, acc) do
    case World.audit(world) do
      :ok -> %{acc | audits: acc.audits + 1}
      {:error, _} -> %{acc | audits: acc.audits + 1, audit_failures: acc.audit_failures + 1}
    end
  end
end
