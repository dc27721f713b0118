defmodule Grove.WorldPropertyTest do
  @moduledoc "Properties of the running world: real zone processes, real clients, any interleaving."
  use ExUnit.Case, async: true

  import Grove.PropCase
  import Grove.WorldCase, only: [with_world: 2]

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

  # Forty worlds started and run: a few seconds on a quiet machine, past
  # ExUnit's minute when the machine is loaded many times over.
  @tag timeout: 300_000
  test "every move gets exactly one outcome, and the world stays sound" do
    property =
      forall({:proper_types.integer(1, 1000), :proper_types.resize(80, moves())}, fn {seed, moves} ->
        with_world(
          [width: 20, height: 20, zone_size: 5, seed: seed, terrain: [tree_density: 0.2]],
          &run(&1, moves)
        )
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

    for pid <- clients, do: assert_receive({:ready, ^pid}, 15_000)
    for pid <- clients, do: send(pid, :go)

    tags =
      Enum.flat_map(clients, fn pid ->
        assert_receive {:outcomes, ^pid, outcomes}, 15_000
        for {tag, _outcome} <- outcomes, do: tag
      end)

    assert Enum.sort(tags) == Enum.to_list(0..(length(moves) - 1)//1)
    assert World.audit(world) == :ok
    assert World.entity_count(world) == @clients * @per_client
    for pid <- clients, do: send(pid, :done)
    true
  end

  # A zone applies a batch in one pass (`Zone`'s `apply_batch/7`), the
  # common step apart from the rest: each move must come out as it would
  # alone, in order. One zone, so that nothing but the order of the moves
  # decides; entities that watch (their moves go the other way), unknown
  # ids and refused steps mixed in. Eighty worlds started and stopped: under
  # a second on a quiet machine, past ExUnit's minute when the machine is
  # loaded many times over, as the property above.
  @tag timeout: 300_000
  test "a batch of moves gives each move the outcome it gets sent one at a time" do
    property =
      forall(
        {:proper_types.integer(1, 1000),
         :proper_types.resize(
           60,
           :proper_types.list(
             {:proper_types.integer(0, 5), :proper_types.elements(Grid.directions())}
           )
         )},
        fn {seed, moves} ->
          {batch, cells} = one_zone(seed, moves, :batch, List.duplicate(:random, 5))
          {single, ^cells} = one_zone(seed, moves, :single, cells)
          {tallied, ^cells} = one_zone(seed, moves, :tallied, cells)
          batch == single and tallied == taken(batch)
        end
      )

    check(property, numtests: 40)
  end

  # A batch's outcomes as a tallied answer gives them: a step taken by
  # its tag alone (`:taken` here), any other as it is.
  defp taken({outcomes, audit, counts}) do
    outcomes =
      for {tag, outcome} <- outcomes do
        case outcome do
          {:ok, {_x, _y}} -> {tag, :taken}
          outcome -> {tag, outcome}
        end
      end

    {Enum.sort(outcomes), audit, counts}
  end

  # The outcomes, by the moves' tags, the audit and the outcomes' counts
  # of a world of one zone where five entities (two of them viewers) and
  # one that left are moved; with the cells the entities joined at.
  defp one_zone(seed, moves, how, cells) do
    with_world(
      [width: 8, height: 8, zone_size: 8, seed: seed, terrain: [tree_density: 0.2]],
      fn name ->
        {ids, cells} =
          cells
          |> Enum.with_index()
          |> Enum.map(fn {at, n} ->
            {:ok, id, cell} = World.join(name, at: at, updates: if(n < 2, do: :view, else: :none))
            {id, cell}
          end)
          |> Enum.unzip()

        # One more, gone: an id the world no longer knows.
        {:ok, gone, _cell} = World.join(name, updates: :none)
        World.leave(name, gone)
        ids = List.to_tuple(ids ++ [gone])

        sent =
          for {{n, direction}, tag} <- Enum.with_index(moves), do: {elem(ids, n), direction, tag}

        case how do
          :batch ->
            World.move_many(name, sent)
            collect(length(sent), [])

          :tallied ->
            World.move_many(name, sent, tally: true)
            collect(length(sent), [])

          :single ->
            for {id, direction, tag} <- sent do
              World.move(name, id, direction, tag)
              [outcome] = collect(1, [])
              outcome
            end
        end
        |> Enum.sort()
        |> then(&{{&1, World.audit(name), counted(name)}, cells})
      end
    )
  after
    flush_views()
  end

  # The world's counts of the moves' outcomes: a batch counts each as
  # its moves sent one at a time do.
  defp counted(name), do: Map.take(World.stats(name), [:moves_ok | World.rejections()])

  defp flush_views do
    receive do
      {:grove_view, _, _, _, _} -> flush_views()
    after
      0 -> :ok
    end
  end

  defp spawn_opts, do: [updates: :none]

  defp collect(0, acc), do: acc

  defp collect(left, acc) do
    receive do
      {:grove_move, _id, tag, outcome} ->
        collect(left - 1, [{tag, outcome} | acc])

      {:grove_moves, outcomes} ->
        collect(left - length(outcomes), Enum.map(outcomes, fn {_, t, o} -> {t, o} end) ++ acc)

      {:grove_moved, answers} ->
        answers = Enum.map(answers, &tallied/1)
        collect(left - length(answers), answers ++ acc)
    after
      3000 -> acc
    end
  end

  # A tallied answer: a step taken is its tag alone.
  defp tallied({_id, tag, outcome}), do: {tag, outcome}
  defp tallied(tag) when is_integer(tag), do: {tag, :taken}
end
