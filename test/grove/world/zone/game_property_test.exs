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
  alias Grove.World.{Entity, Grid, Rules, Terrain}
  alias Grove.World.Zone.{Game, Handoff, State}

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

    sim = %{
      zones: zones,
      directory: %{},
      channels: %{},
      outcomes: %{},
      answers: %{},
      tallies: %{},
      issued: 0,
      ids: [],
      dead: [],
      placed: []
    }

    sim =
      starts
      |> Enum.with_index(1)
      |> Enum.reduce(sim, fn {{x, y}, id}, sim ->
        index = Grid.zone_of(@grid, x, y)
        entity = %Entity{id: id, owner: self()}

        case State.place(sim.zones[index], entity, [{x, y}], %{account: id}) do
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

    Map.put(sim, :apples, count_apples(sim))
  end

  # A client's operations go to the zone the directory names, like
  # Grove.World.move/4, act/6 and leave/3.
  defp run(sim, {:move, n, direction}) do
    with_entity(sim, n, fn sim, id, tag ->
      sim = %{sim | outcomes: Map.put(sim.outcomes, tag, [])}

      case sim.directory[id] do
        nil -> outcome(sim, tag, {:rejected, :unknown_entity})
        index -> post(sim, :client, index, {:move, id, direction, self(), tag, 0})
      end
    end)
  end

  defp run(sim, {:act, n, action, target}) do
    with_entity(sim, n, fn sim, id, tag ->
      sim = %{sim | outcomes: Map.put(sim.outcomes, tag, [])}
      {:ok, name, args} = Grove.Game.check(AppleGame, action, %{})

      case sim.directory[id] do
        nil -> outcome(sim, tag, {:rejected, :unknown_entity})
        index -> post(sim, :client, index, {:act, id, {name, target, args}, self(), tag, 0})
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

  defp handle(sim, index, {:act, id, request, owner, tag, hops}) do
    case Game.act(sim.zones[index], id, request, owner, tag, hops, 0, locate(sim)) do
      {:acted, result, zone} -> sim |> put_zone(index, zone) |> outcome(tag, result)
      {:pending, effects, zone} -> sim |> put_zone(index, zone) |> run_effects(index, effects)
    end
  end

  defp handle(sim, index, {:act_at, act, from, owner, tag}),
    do: carry_out(sim, index, Game.act_at(sim.zones[index], act, from, owner, tag))

  defp handle(sim, index, {:act_done, id, tag, owner, result, attrs}),
    do:
      carry_out(
        sim,
        index,
        Game.act_done(sim.zones[index], id, tag, owner, result, attrs, env(sim))
      )

  defp handle(sim, index, {:arrive, entity, cell, from, tag}),
    do: carry_out(sim, index, Handoff.arrive(sim.zones[index], entity, cell, from, tag))

  defp handle(sim, index, {:arrived, id, to}),
    do: carry_out(sim, index, Handoff.arrived(sim.zones[index], id, to, env(sim)))

  defp handle(sim, index, {:refused, id, owner, tag, reason}),
    do: carry_out(sim, index, Handoff.refused(sim.zones[index], id, owner, tag, reason, env(sim)))

  defp handle(sim, index, {:leave, id, owner, from, hops}),
    do: carry_out(sim, index, Handoff.leave(sim.zones[index], id, owner, from, hops, locate(sim)))

  defp handle(sim, index, {:down, id}) do
    if is_map_key(sim.zones[index].entities, id),
      do: carry_out(sim, index, Handoff.owner_down(sim.zones[index], id)),
      else: sim
  end

  defp carry_out(sim, index, {effects, zone}),
    do: sim |> put_zone(index, zone) |> run_effects(index, effects)

  defp run_effects(sim, index, effects), do: Enum.reduce(effects, sim, &run_effect(&2, index, &1))

  defp run_effect(sim, index, {:send, to, message}), do: post(sim, index, to, message)

  defp run_effect(sim, _index, {:reply, _owner, _id, tag, result}), do: outcome(sim, tag, result)
  defp run_effect(sim, _index, {:acted, _owner, _id, tag, result}), do: outcome(sim, tag, result)
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

  defp run_effect(sim, _index, {kind, _entity}) when kind in [:let_go, :count], do: sim
  defp run_effect(sim, _index, {kind, _entity, _cell}) when kind in [:moved, :view], do: sim

  defp locate(sim) do
    directory = sim.directory
    &Map.get(directory, &1)
  end

  defp env(sim), do: %{locate: locate(sim), now: 0, busy: false}

  # What a zone process does after each operation: its writes (nothing to
  # write here), its tallies (to the world's tally), no failure expected.
  defp put_zone(sim, index, zone) do
    {output, zone} = Game.take_output(zone)

    sim =
      case output do
        nil ->
          sim

        %{tallies: tallies, failures: failures} ->
          assert failures == [], "the game failed: #{inspect(failures)}"

          Enum.reduce(tallies, sim, fn {:apples, account, n}, sim ->
            %{sim | tallies: Map.update(sim.tallies, account, n, &(&1 + n))}
          end)
      end

    %{sim | zones: Map.put(sim.zones, index, zone)}
  end

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

    for {from, answers} <- sim.answers do
      assert length(answers) == 1,
             "#{inspect(from)} got #{length(answers)} answers: #{inspect(answers)}"
    end

    for {index, zone} <- sim.zones do
      assert zone.leaving == %{}, "zone #{index} still waits for a handoff"
      assert zone.acting == %{}, "zone #{index} still waits for an action"
    end

    for id <- sim.placed do
      holders = for {index, zone} <- sim.zones, is_map_key(zone.entities, id), do: index

      if id in sim.ids,
        do: assert(holders == [sim.directory[id]], "entity #{id} held by #{inspect(holders)}"),
        else: assert({holders, sim.directory[id]} == {[], nil}, "entity #{id} is left behind")
    end
  end
end
