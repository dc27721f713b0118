defmodule Grove.World.Zone.HandoffPropertyTest do
  @moduledoc """
  Properties of zones moving entities between each other, on the pure
  `Zone.State`: a simulated network carries the same messages the zone
  processes exchange, delivered in any order that keeps each sender-receiver
  channel first in, first out (what the BEAM guarantees).
  """
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.World.{Entity, Grid, Rules, Terrain}
  alias Grove.World.Zone.State

  # Small and crowded on purpose: zones of 2 x 2 cells put a border next to
  # every cell, so most moves are handoffs and entities keep bumping into
  # each other across borders.
  @size 8
  @zone_size 2
  @grid Grid.new(@size, @size, @zone_size)
  @zones Grid.zone_count(@grid)
  @directions Grid.directions()

  defp cell, do: {:proper_types.integer(0, @size - 1), :proper_types.integer(0, @size - 1)}

  defp command do
    :proper_types.frequency([
      {3, {:move, :proper_types.integer(0, 15), :proper_types.elements(@directions)}},
      {3, {:deliver, :proper_types.integer(0, 1000)}}
    ])
  end

  defp scenario do
    {:proper_types.list(cell()),
     :proper_types.resize(30, :proper_types.non_empty(:proper_types.list(cell()))),
     :proper_types.resize(60, :proper_types.list(command()))}
  end

  test "entities are never lost, duplicated, stacked or put on trees, and every move gets exactly one outcome" do
    property =
      forall(scenario(), fn {trees, starts, commands} ->
        sim = new_sim(trees, starts)

        sim =
          Enum.reduce(commands, sim, fn command, sim ->
            sim = run(sim, command)
            check_invariants!(sim)
            sim
          end)

        sim = drain(sim)
        check_invariants!(sim)
        check_quiescent!(sim)
        true
      end)

    check(property, numtests: 1000)
  end

  ## The simulated world

  defp new_sim(trees, starts) do
    terrain = terrain_with_trees(trees)
    rules = Rules.new(move_rate: nil)
    zones = Map.new(0..(@zones - 1), &{&1, State.new(&1, @grid, terrain, rules)})

    sim = %{
      terrain: terrain,
      zones: zones,
      directory: %{},
      channels: %{},
      outcomes: %{},
      issued: 0,
      ids: []
    }

    starts
    |> Enum.with_index(1)
    |> Enum.reduce(sim, fn {{x, y}, id}, sim ->
      index = Grid.zone_of(@grid, x, y)

      case State.place(sim.zones[index], %Entity{id: id, owner: self()}, [{x, y}]) do
        {:ok, _entity, zone} ->
          %{
            sim
            | zones: Map.put(sim.zones, index, zone),
              directory: Map.put(sim.directory, id, index),
              ids: [id | sim.ids]
          }

        {:rejected, _reason, _zone} ->
          sim
      end
    end)
  end

  defp terrain_with_trees(trees) do
    set = MapSet.new(trees)

    cells =
      for y <- 0..(@size - 1),
          x <- 0..(@size - 1),
          into: <<>>,
          do: <<if(MapSet.member?(set, {x, y}), do: 1, else: 0)>>

    %Terrain{width: @size, height: @size, cells: cells}
  end

  # A client move goes to the zone the directory names, like Grove.World.move/4.
  defp run(sim, {:move, n, direction}) do
    case sim.ids do
      [] ->
        sim

      ids ->
        id = Enum.at(ids, rem(n, length(ids)))
        tag = sim.issued
        sim = %{sim | issued: tag + 1, outcomes: Map.put(sim.outcomes, tag, [])}
        post(sim, :client, sim.directory[id], {:move, id, direction, tag, 0})
    end
  end

  defp run(sim, {:deliver, k}) do
    case Map.keys(sim.channels) do
      [] ->
        sim

      keys ->
        channel = Enum.at(Enum.sort(keys), rem(k, length(keys)))
        deliver(sim, channel)
    end
  end

  defp drain(sim) do
    case Map.keys(sim.channels) do
      [] -> sim
      [channel | _] -> sim |> deliver(channel) |> drain()
    end
  end

  defp post(sim, from, to, message) do
    channels =
      Map.update(sim.channels, {from, to}, :queue.from_list([message]), &:queue.in(message, &1))

    %{sim | channels: channels}
  end

  defp deliver(sim, {_from, to} = channel) do
    {{:value, message}, queue} = :queue.out(sim.channels[channel])

    channels =
      if :queue.is_empty(queue),
        do: Map.delete(sim.channels, channel),
        else: Map.put(sim.channels, channel, queue)

    handle(%{sim | channels: channels}, to, message)
  end

  defp outcome(sim, tag, outcome),
    do: %{sim | outcomes: Map.update!(sim.outcomes, tag, &[outcome | &1])}

  defp put_zone(sim, index, zone), do: %{sim | zones: Map.put(sim.zones, index, zone)}

  ## What a zone process does with each message (mirrors Grove.World.Zone)

  defp handle(sim, index, {:move, id, direction, tag, hops}) do
    case State.apply_move(sim.zones[index], id, direction, self(), tag, 0) do
      {:moved, entity, _from, zone} ->
        sim |> put_zone(index, zone) |> outcome(tag, {:ok, {entity.x, entity.y}})

      {:rejected, reason, zone} ->
        sim |> put_zone(index, zone) |> outcome(tag, {:rejected, reason})

      {:handoff, entity, to, target, zone} ->
        sim |> put_zone(index, zone) |> post(index, to, {:arrive, entity, target, index, tag})

      {:leaving, zone} ->
        case State.defer(zone, id, {:move, direction, tag}) do
          {:ok, zone} -> put_zone(sim, index, zone)
          {:error, :busy} -> sim |> put_zone(index, zone) |> outcome(tag, {:rejected, :busy})
        end

      {:unknown, zone} ->
        sim = put_zone(sim, index, zone)

        case sim.directory[id] do
          other when other != nil and other != index and hops < 4 ->
            post(sim, index, other, {:move, id, direction, tag, hops + 1})

          _ ->
            outcome(sim, tag, {:rejected, :unknown_entity})
        end
    end
  end

  defp handle(sim, index, {:arrive, entity, target, from, tag}) do
    case State.accept_arrival(sim.zones[index], entity, target) do
      {:ok, arrived, zone} ->
        %{put_zone(sim, index, zone) | directory: Map.put(sim.directory, arrived.id, index)}
        |> outcome(tag, {:ok, target})
        |> post(index, from, {:arrived, arrived.id})

      {:rejected, reason, zone} ->
        sim |> put_zone(index, zone) |> post(index, from, {:refused, entity.id, tag, reason})
    end
  end

  defp handle(sim, index, {:arrived, id}) do
    {_entity, deferred, zone} = State.finish_handoff(sim.zones[index], id)
    sim = put_zone(sim, index, zone)

    Enum.reduce(deferred, sim, fn {:move, direction, tag}, sim ->
      post(sim, index, sim.directory[id], {:move, id, direction, tag, 1})
    end)
  end

  defp handle(sim, index, {:refused, id, tag, reason}) do
    {:ok, ^tag, deferred, zone} = State.cancel_handoff(sim.zones[index], id)
    sim = sim |> put_zone(index, zone) |> outcome(tag, {:rejected, reason})

    Enum.reduce(deferred, sim, fn {:move, direction, tag}, sim ->
      handle(sim, index, {:move, id, direction, tag, 0})
    end)
  end

  ## Invariants

  defp check_invariants!(sim) do
    records =
      for {index, zone} <- sim.zones, {id, entity} <- zone.entities do
        {id, index, State.leaving?(zone, id), {entity.x, entity.y}}
      end

    for {index, zone} <- sim.zones do
      assert State.audit(zone) == [], "zone #{index}: #{inspect(State.audit(zone))}"
    end

    by_id = Enum.group_by(records, &elem(&1, 0))

    # While handoffs are in flight an entity may be held by several zones
    # (each earlier one keeps a reservation until it hears back), but it is
    # resident in one zone at most and always held by the zone the directory
    # names.
    for id <- sim.ids do
      held = Map.get(by_id, id, [])
      resident = for {_, index, false, _} <- held, do: index
      assert length(resident) <= 1, "entity #{id} resident in #{inspect(resident)}"
      assert held != [], "entity #{id} was lost"
      owner = sim.directory[id]

      assert Enum.any?(held, &(elem(&1, 1) == owner)),
             "entity #{id} is not held by its zone #{owner}"
    end

    cells = Enum.map(records, fn {id, _, _, cell} -> {cell, id} end)

    shared =
      cells
      |> Enum.group_by(&elem(&1, 0), &elem(&1, 1))
      |> Enum.filter(fn {_, ids} -> length(Enum.uniq(ids)) > 1 end)

    assert shared == [], "entities share cells: #{inspect(shared)}"

    for {id, _, _, {x, y}} <- records do
      refute Terrain.blocked?(sim.terrain, x, y),
             "entity #{id} stands on a tree at #{inspect({x, y})}"
    end
  end

  defp check_quiescent!(sim) do
    for {tag, outcomes} <- sim.outcomes do
      assert length(outcomes) == 1,
             "move #{tag} got #{length(outcomes)} outcomes: #{inspect(outcomes)}"
    end

    for id <- sim.ids do
      holders = for {index, zone} <- sim.zones, is_map_key(zone.entities, id), do: index
      assert holders == [sim.directory[id]], "entity #{id} held by #{inspect(holders)}"
    end

    for {index, zone} <- sim.zones do
      assert zone.leaving == %{},
             "zone #{index} still waits for #{inspect(Map.keys(zone.leaving))}"
    end

    total = Enum.reduce(sim.zones, 0, fn {_, zone}, acc -> acc + State.size(zone) end)
    assert total == length(sim.ids)
  end
end
