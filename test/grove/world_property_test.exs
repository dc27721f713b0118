defmodule Grove.WorldPropertyTest do
  @moduledoc "Properties of the running world: real zone processes, real clients, any interleaving."
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.World
  alias Grove.World.Grid

  @clients 4
  @per_client 3

  defp moves do
    :proper_types.list(
      {:proper_types.integer(0, @clients * @per_client - 1),
       :proper_types.elements(Grid.directions()), :proper_types.boolean()}
    )
  end

  test "every move gets exactly one outcome, and the world stays sound" do
    property =
      forall({:proper_types.integer(1, 1000), :proper_types.resize(80, moves())}, fn {seed, moves} ->
        name = :"prop_world_#{System.unique_integer([:positive])}"

        {:ok, sup} =
          World.start_link(
            name: name,
            width: 20,
            height: 20,
            zone_size: 5,
            seed: seed,
            tick: :manual,
            terrain: [tree_density: 0.2],
            rules: [move_rate: nil]
          )

        try do
          run(name, moves)
        after
          Supervisor.stop(sup)
        end
      end)

    check(property, numtests: 40)
  end

  # Each client owns a few entities and sends its share of the moves, singly
  # or in batches, all at once; then reports every outcome it received.
  defp run(world, moves) do
    test = self()

    clients =
      for c <- 0..(@clients - 1) do
        mine =
          for {{entity, direction, batch}, tag} <- Enum.with_index(moves),
              div(entity, @per_client) == c,
              do: {rem(entity, @per_client), direction, batch, tag}

        spawn_link(fn ->
          ids = for _ <- 1..@per_client, do: elem(World.join(world, spawn_opts()), 1)
          send(test, {:ready, self()})
          receive do: (:go -> :ok)

          {batched, single} = Enum.split_with(mine, fn {_, _, batch, _} -> batch end)

          for {n, direction, _, tag} <- single,
              do: World.move(world, Enum.at(ids, n), direction, tag)

          World.move_many(
            world,
            for({n, direction, _, tag} <- batched, do: {Enum.at(ids, n), direction, tag})
          )

          send(test, {:outcomes, self(), collect(length(mine), [])})
          receive do: (:done -> :ok)
        end)
      end

    for pid <- clients, do: assert_receive({:ready, ^pid}, 2000)
    for pid <- clients, do: send(pid, :go)

    tags =
      Enum.flat_map(clients, fn pid ->
        assert_receive {:outcomes, ^pid, outcomes}, 5000
        for {tag, _outcome} <- outcomes, do: tag
      end)

    assert Enum.sort(tags) == Enum.to_list(0..(length(moves) - 1)//1)
    assert World.audit(world) == :ok
    assert World.entity_count(world) == @clients * @per_client
    for pid <- clients, do: send(pid, :done)
    true
  end

  defp spawn_opts, do: [updates: :none]

  defp collect(0, acc), do: acc

  defp collect(left, acc) do
    receive do
      {:grove_move, _id, tag, outcome} ->
        collect(left - 1, [{tag, outcome} | acc])

      {:grove_moves, outcomes} ->
        collect(left - length(outcomes), Enum.map(outcomes, fn {_, t, o} -> {t, o} end) ++ acc)
    after
      3000 -> acc
    end
  end
end
