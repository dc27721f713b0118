defmodule Grove.World.Zone.GamePropertyTest do
  @moduledoc """
  A game's items and points across zone borders, on the pure `Zone.Game`,
  `Zone.Handoff` and `Zone.State`: entities walk, pick apples from trees,
  drop them, deliver them into baskets for points, leave and die, while a
  simulated network delivers the messages zones exchange in any order
  that keeps each sender-receiver channel first in, first out (what the
  BEAM guarantees). Actions aimed across a border run in the other zone
  and answer back, as in a world.

  Apples are never made (no ticks here) nor lost: at every step the apples
  on the cells, those the entities carry (an action's answer on its way
  counts for its actor) and the points scored add up to the apples the
  trees bore at first; each entity's score is what was tallied for it; and
  once everything is delivered every action has had exactly one outcome.
  """
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.AppleGame
  alias Grove.World.Game.Spec
  alias Grove.Test.SimulatedWorld
  alias Grove.World.{Grid, Rules, Terrain}
  alias Grove.World.Zone.{Game, State}

  # Zones of 2 x 2 cells: every cell is next to a border, so most moves are
  # handoffs and many actions run in another zone.
  @size 8
  @zone_size 2
  @grid Grid.new(@size, @size, @zone_size)
  @zones Grid.zone_count(@grid)
  @directions Grid.directions()
  @targets [:here | @directions]

  defp cell, do: {:proper_types.integer(0, @size - 1), :proper_types.integer(0, @size - 1)}

  defp command do
    :proper_types.frequency([
      {4, {:move, :proper_types.integer(0, 15), :proper_types.elements(@directions)}},
      {5,
       {:act, :proper_types.integer(0, 15), :proper_types.elements([:pick, :deliver, :drop]),
        :proper_types.elements(@targets)}},
      {8, {:deliver, :proper_types.integer(0, 1000)}},
      {1, {:leave, :proper_types.integer(0, 15)}},
      {1, {:owner_down, :proper_types.integer(0, 15)}}
    ])
  end

  defp scenario do
    {:proper_types.resize(12, :proper_types.list(cell())),
     :proper_types.resize(6, :proper_types.list(cell())),
     :proper_types.resize(20, :proper_types.non_empty(:proper_types.list(cell()))),
     :proper_types.resize(80, :proper_types.list(command()))}
  end

  test "no apple or point is ever lost or duplicated, and every action gets exactly one outcome" do
    property =
      forall(scenario(), fn {trees, baskets, starts, commands} ->
        sim = new_sim(trees, baskets, starts)
        sim = SimulatedWorld.play(sim, commands, &run/2, &check_invariants!/1)
        check_quiescent!(sim)
        true
      end)

    check(property, numtests: 200, deep_numtests: 6000)
  end

  ## The simulated world

  defp new_sim(trees, baskets, starts) do
    terrain = %Terrain{width: @size, height: @size, cells: :binary.copy(<<0>>, @size * @size)}
    baskets = Enum.uniq(baskets) -- trees
    spec = Spec.new!({AppleGame, trees: trees, baskets: baskets, apples: 2, tick: :manual})
    rules = Rules.new(move_rate: nil)

    zones =
      Map.new(0..(@zones - 1), fn index ->
        {index, Game.setup(State.new(index, @grid, terrain, rules), spec, :generate)}
      end)

    sim = SimulatedWorld.new(@grid, zones, starts, &%{account: &1})
    Map.put(sim, :apples, count_apples(sim))
  end

  defp run(sim, {:act, n, action, target}) do
    {:ok, name, args} = Grove.Game.check(AppleGame, action, %{})
    SimulatedWorld.run(sim, {:act, n, {name, target, args}})
  end

  defp run(sim, command), do: SimulatedWorld.run(sim, command)

  ## Invariants

  # Each entity counted once, as the zone the directory names holds it
  # (that zone adopted it last; zones it left may keep older copies until
  # they hear it arrived); one no zone owns any more is gone. An action's
  # answer on its way carries the attributes its actor will have.
  defp entities(sim) do
    answers =
      for {_channel, queue} <- sim.channels,
          {:act_done, id, _tag, _owner, _result, attrs} <- :queue.to_list(queue),
          attrs != :same,
          into: %{},
          do: {id, attrs}

    for {id, index} <- sim.directory, into: %{} do
      %{^id => entity} = sim.zones[index].entities
      {id, Map.get(answers, id, entity.attrs)}
    end
  end

  defp count_apples(sim) do
    layer = Enum.flat_map(sim.zones, fn {_index, zone} -> Map.to_list(zone.game.layer) end)
    {held, _scored} = AppleGame.apples(layer, Map.values(entities(sim)))
    held + Enum.sum(Map.values(sim.tallies))
  end

  defp check_invariants!(sim) do
    assert count_apples(sim) == sim.apples, "apples: #{count_apples(sim)}, at first #{sim.apples}"

    for {id, attrs} <- entities(sim), attrs != nil do
      assert attrs.score == Map.get(sim.tallies, id, 0),
             "entity #{id} scored #{attrs.score}, tallied #{Map.get(sim.tallies, id, 0)}"
    end

    for {index, zone} <- sim.zones do
      assert State.audit(zone) == [], "zone #{index}: #{inspect(State.audit(zone))}"
    end
  end

  defp check_quiescent!(sim) do
    for {tag, outcomes} <- sim.outcomes do
      assert length(outcomes) == 1,
             "operation #{tag} got #{length(outcomes)} outcomes: #{inspect(outcomes)}"
    end

    SimulatedWorld.check_answers!(sim)

    for {index, zone} <- sim.zones do
      assert zone.leaving == %{}, "zone #{index} still waits for a handoff"
      assert zone.acting == %{}, "zone #{index} still waits for an action"
    end

    SimulatedWorld.check_holders!(sim)
  end
end
