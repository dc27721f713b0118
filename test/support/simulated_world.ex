defmodule Grove.Test.SimulatedWorld do
  @moduledoc """
  A world's zones run on their pure functions (`Zone.Handoff`, `Zone.Game`,
  `Zone.State`), each zone's effects carried out by a simulated network that
  delivers the messages zones exchange in any order that keeps each
  sender-receiver channel first in, first out (what the BEAM guarantees).
  Clients move, act, leave and die meanwhile, as property tests command.

  The simulation is a map: `zones` by index, the `directory` (entity id to
  the zone that holds it), the `channels` in flight, the `outcomes` of moves
  and actions by tag, the `answers` to leaves, the `tallies` of points by
  account, the ids of entities whose owner lives (`ids`) and of those whose
  owner died (`dead`), and all those `placed` at first. A test may add its
  own keys.
  """

  import ExUnit.Assertions

  alias Grove.World.{Entity, Grid}
  alias Grove.World.Zone.{Game, Handoff, State}

  @doc """
  A simulation of `zones` (index to zone) on `grid`, with an entity placed
  at each of `starts` that has room, ids from 1; `info` makes the place
  info of an id.
  """
  def new(grid, zones, starts, info \\ fn _id -> %{} end) do
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

    starts
    |> Enum.with_index(1)
    |> Enum.reduce(sim, fn {{x, y}, id}, sim ->
      index = Grid.zone_of(grid, x, y)
      entity = %Entity{id: id, owner: self()}

      case State.place(sim.zones[index], entity, [{x, y}], info.(id)) do
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

  @doc """
  Runs `commands` one by one, `check` after each, delivers all that is in
  flight and checks again.
  """
  def play(sim, commands, run, check) do
    sim =
      Enum.reduce(commands, sim, fn command, sim ->
        sim = run.(sim, command)
        check.(sim)
        sim
      end)

    sim = drain(sim)
    check.(sim)
    sim
  end

  @doc """
  Runs a command. A client's move, act (`{:act, n, request}`) and leave go
  to the zone the directory names, like `Grove.World.move/4`, `act/6` and
  `leave/3`; its `n` picks an entity whose owner lives. `{:owner_down, n}`
  kills an owner: every zone holding the entity then (resident or with a
  handoff pending) gets a DOWN, and so will any zone that adopts it later.
  `{:deliver, k}` delivers the next message of a channel `k` picks.
  """
  def run(sim, {:move, n, direction}),
    do: ask(sim, n, &{:move, &1, direction, self(), &2, 0})

  def run(sim, {:act, n, request}),
    do: ask(sim, n, &{:act, &1, request, self(), &2, 0})

  def run(sim, {:leave, n}) do
    with_entity(sim, n, fn sim, id, tag ->
      from = {:leave, tag, id}
      sim = %{sim | answers: Map.put(sim.answers, from, [])}

      case sim.directory[id] do
        nil -> answer(sim, from, {:error, :unknown_entity})
        index -> post(sim, :client, index, {:leave, id, self(), from, 0})
      end
    end)
  end

  def run(sim, {:owner_down, n}) do
    with_entity(sim, n, fn sim, id, _tag ->
      sim = %{sim | ids: List.delete(sim.ids, id), dead: [id | sim.dead]}

      Enum.reduce(sim.zones, sim, fn {index, zone}, sim ->
        if is_map_key(zone.entities, id), do: post(sim, :monitor, index, {:down, id}), else: sim
      end)
    end)
  end

  def run(sim, {:deliver, k}) do
    case Map.keys(sim.channels) do
      [] ->
        sim

      keys ->
        channel = Enum.at(Enum.sort(keys), rem(k, length(keys)))
        deliver(sim, channel)
    end
  end

  @doc "Delivers every message in flight, and those they bring about."
  def drain(sim) do
    case Map.keys(sim.channels) do
      [] -> sim
      [channel | _] -> sim |> deliver(channel) |> drain()
    end
  end

  @doc "Every leave has had exactly one answer."
  def check_answers!(sim) do
    for {from, answers} <- sim.answers do
      assert length(answers) == 1,
             "#{inspect(from)} got #{length(answers)} answers: #{inspect(answers)}"
    end
  end

  @doc """
  Every entity placed is held by the zone the directory names alone, or,
  gone, by none.
  """
  def check_holders!(sim) do
    for id <- sim.placed do
      holders = for {index, zone} <- sim.zones, is_map_key(zone.entities, id), do: index

      if id in sim.ids,
        do: assert(holders == [sim.directory[id]], "entity #{id} held by #{inspect(holders)}"),
        else: assert({holders, sim.directory[id]} == {[], nil}, "entity #{id} is left behind")
    end
  end

  # A move or an act, its message made of the entity's id and the tag.
  defp ask(sim, n, message) do
    with_entity(sim, n, fn sim, id, tag ->
      sim = %{sim | outcomes: Map.put(sim.outcomes, tag, [])}

      case sim.directory[id] do
        nil -> outcome(sim, tag, {:rejected, :unknown_entity})
        index -> post(sim, :client, index, message.(id, tag))
      end
    end)
  end

  defp with_entity(%{ids: []} = sim, _n, _fun), do: sim

  defp with_entity(sim, n, fun) do
    id = Enum.at(sim.ids, rem(n, length(sim.ids)))
    fun.(%{sim | issued: sim.issued + 1}, id, sim.issued)
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
    # A zone that let the entity go since demonitored its owner.
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
  # write here), its game's tallies (to the world's tally), no failure
  # expected. A zone without a game has no output.
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
end
