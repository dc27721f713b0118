defmodule Grove.World.Zone.HandoffPropertyTest do
  @moduledoc """
  Properties of zones moving entities between each other, on the pure
  `Zone.Handoff` and `Zone.State`: each zone's effects are carried out by a
  simulated network, which delivers the messages zones exchange on the wire
  in any order that keeps each sender-receiver channel first in, first out
  (what the BEAM guarantees). Clients move, leave and die meanwhile.
  """
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.World.{Entity, Grid, Rules, Terrain}
  alias Grove.World.Zone.{Handoff, State}

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
      {6, {:move, :proper_types.integer(0, 15), :proper_types.elements(@directions)}},
      {6, {:deliver, :proper_types.integer(0, 1000)}},
      {1, {:leave, :proper_types.integer(0, 15)}},
      {1, {:owner_down, :proper_types.integer(0, 15)}}
    ])
  end

  defp scenario do
    {:proper_types.list(cell()),
     :proper_types.resize(30, :proper_types.non_empty(:proper_types.list(cell()))),
     :proper_types.resize(60, :proper_types.list(command()))}
  end

  test "entities are never lost, duplicated, stacked or put on trees, and every move and leave gets exactly one outcome" do
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

    check(property, numtests: 300, deep_numtests: 10_000)
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
      answers: %{},
      issued: 0,
      # Entities whose owner lives, and those whose owner died.
      ids: [],
      dead: [],
      placed: []
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
              ids: [id | sim.ids],
              placed: [id | sim.placed]
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

  # A client's move and leave go to the zone the directory names, like
  # Grove.World.move/4 and leave/3.
  defp run(sim, {:move, n, direction}) do
    with_entity(sim, n, fn sim, id, tag ->
      sim = %{sim | outcomes: Map.put(sim.outcomes, tag, [])}

      case sim.directory[id] do
        nil -> outcome(sim, tag, {:rejected, :unknown_entity})
        index -> post(sim, :client, index, {:move, id, direction, self(), tag, 0})
      end
    end)
  end

  defp run(sim, {:leave, n}) do
    with_entity(sim, n, fn sim, id, tag ->
      from = {:leave, tag, id}
      sim = %{sim | answers: Map.put(sim.answers, from, [])}

      case sim.directory[id] do
        nil -> answer(sim, from, {:error, :unknown_entity})
        index -> post(sim, :client, index, {:leave, id, self(), from, 0})
      end
    end)
  end

  # The owner dies: every zone holding the entity then (resident or with a
  # handoff pending) gets a DOWN, and so will any zone that adopts it later.
  defp run(sim, {:owner_down, n}) do
    with_entity(sim, n, fn sim, id, _tag ->
      sim = %{sim | ids: List.delete(sim.ids, id), dead: [id | sim.dead]}

      Enum.reduce(sim.zones, sim, fn {index, zone}, sim ->
        if is_map_key(zone.entities, id), do: post(sim, :monitor, index, {:down, id}), else: sim
      end)
    end)
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

  defp with_entity(%{ids: []} = sim, _n, _fun), do: sim

  defp with_entity(sim, n, fun) do
    id = Enum.at(sim.ids, rem(n, length(sim.ids)))
    fun.(%{sim | issued: sim.issued + 1}, id, sim.issued)
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

  # A leave done takes the entity out of those its owner moves.
  defp answer(sim, {:leave, _tag, id} = from, result) do
    sim = %{sim | answers: Map.update!(sim.answers, from, &[result | &1])}
    if result == :ok, do: %{sim | ids: List.delete(sim.ids, id)}, else: sim
  end

  ## A zone: the pure functions, with their effects carried out

  defp handle(sim, index, {:move, id, direction, owner, tag, hops}) do
    case Handoff.move(sim.zones[index], id, direction, owner, tag, hops, 0, locate(sim)) do
      {:moved, entity, _from, zone} ->
        sim |> put_zone(index, zone) |> outcome(tag, {:ok, {entity.x, entity.y}})

      {:rejected, reason, zone} ->
        sim |> put_zone(index, zone) |> outcome(tag, {:rejected, reason})

      {:pending, effects, zone} ->
        sim |> put_zone(index, zone) |> run_effects(index, effects)
    end
  end

  defp handle(sim, index, {:arrive, entity, cell, from, tag}),
    do: carry_out(sim, index, Handoff.arrive(sim.zones[index], entity, cell, from, tag))

  defp handle(sim, index, {:arrived, id, to}),
    do: carry_out(sim, index, Handoff.arrived(sim.zones[index], id, to, env(sim)))

  defp handle(sim, index, {:refused, id, owner, tag, reason}),
    do: carry_out(sim, index, Handoff.refused(sim.zones[index], id, owner, tag, reason, env(sim)))

  defp handle(sim, index, {:leave, id, owner, from, hops}),
    do: carry_out(sim, index, Handoff.leave(sim.zones[index], id, owner, from, hops, locate(sim)))

  defp handle(sim, index, {:down, id}) do
    # A zone that let the entity go since demonitored its owner.
    if is_map_key(sim.zones[index].entities, id),
      do: carry_out(sim, index, Handoff.owner_down(sim.zones[index], id)),
      else: sim
  end

  defp carry_out(sim, index, {effects, zone}),
    do: sim |> put_zone(index, zone) |> run_effects(index, effects)

  defp run_effects(sim, index, effects), do: Enum.reduce(effects, sim, &run_effect(&2, index, &1))

  defp run_effect(sim, index, {:send, to, message}), do: post(sim, index, to, message)

  defp run_effect(sim, _index, {:reply, _owner, _id, tag, outcome}),
    do: outcome(sim, tag, outcome)

  defp run_effect(sim, _index, {:answer, from, result}), do: answer(sim, from, result)

  defp run_effect(sim, index, {:adopt, %Entity{id: id}}) do
    sim = %{sim | directory: Map.put(sim.directory, id, index)}
    if id in sim.dead, do: post(sim, :monitor, index, {:down, id}), else: sim
  end

  defp run_effect(sim, index, {:directory, id, to}) do
    if sim.directory[id] == index,
      do: %{sim | directory: Map.put(sim.directory, id, to)},
      else: sim
  end

  defp run_effect(sim, index, {:dropped, %Entity{id: id}}) do
    if sim.directory[id] == index,
      do: %{sim | directory: Map.delete(sim.directory, id)},
      else: sim
  end

  defp run_effect(sim, _index, {kind, _entity})
       when kind in [:let_go, :count],
       do: sim

  defp run_effect(sim, _index, {kind, _entity, _cell})
       when kind in [:moved, :view],
       do: sim

  defp locate(sim) do
    directory = sim.directory
    &Map.get(directory, &1)
  end

  defp env(sim), do: %{locate: locate(sim), now: 0, busy: false}

  defp put_zone(sim, index, zone), do: %{sim | zones: Map.put(sim.zones, index, zone)}

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
    # names. (An entity whose owner died may be gone already.)
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

    for {from, answers} <- sim.answers do
      assert length(answers) == 1,
             "#{inspect(from)} got #{length(answers)} answers: #{inspect(answers)}"
    end

    for id <- sim.placed do
      holders = for {index, zone} <- sim.zones, is_map_key(zone.entities, id), do: index

      if id in sim.ids,
        do: assert(holders == [sim.directory[id]], "entity #{id} held by #{inspect(holders)}"),
        else: assert({holders, sim.directory[id]} == {[], nil}, "entity #{id} is left behind")
    end

    for {index, zone} <- sim.zones do
      assert zone.leaving == %{},
             "zone #{index} still waits for #{inspect(Map.keys(zone.leaving))}"
    end

    total = Enum.reduce(sim.zones, 0, fn {_, zone}, acc -> acc + State.size(zone) end)
    assert total == length(sim.ids)
  end
end
