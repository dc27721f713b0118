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

  alias Grove.Test.SimulatedWorld
  alias Grove.World.{Grid, Rules, Terrain}
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
        sim = SimulatedWorld.play(sim, commands, &SimulatedWorld.run/2, &check_invariants!/1)
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

    @grid
    |> SimulatedWorld.new(zones, starts)
    |> Map.put(:terrain, terrain)
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

    SimulatedWorld.check_answers!(sim)
    SimulatedWorld.check_holders!(sim)

    for {index, zone} <- sim.zones do
      assert zone.leaving == %{},
             "zone #{index} still waits for #{inspect(Map.keys(zone.leaving))}"
    end

    total = Enum.reduce(sim.zones, 0, fn {_, zone}, acc -> acc + State.size(zone) end)
    assert total == length(sim.ids)
  end
end
