defmodule Grove.World.Zone.BatchHandoffPropertyTest do
  @moduledoc """
  A batch's moves that cross into another zone, on a running world: the
  zone takes the batch in one pass (`World.move_many/2`), and a move that
  crosses a border leaves it `:pending`, its outcome given by the zone it
  goes to (or by this one, should that zone refuse it); the entity's later
  moves in the batch wait behind the handoff and follow it.

  The world's property (`Grove.WorldPropertyTest`) sends such batches to
  a world of 16 zones and checks one outcome per move, the audit and the
  entity count. This one checks besides what the outcomes say: each
  entity stands where its outcomes, in the order its moves were sent, put
  it, and the directory gives the zone of that cell for it, after every
  round (a batch, sent once the one before is answered) and not only at
  the end; the world's counters match the outcomes, and its handoffs the
  crossings done; an id the world no longer knows is refused as unknown;
  and entities that watch take the batch's way around its plain step (a
  move undone and applied again on its own).
  """
  use ExUnit.Case, async: true

  import Grove.PropCase
  import Grove.WorldCase, only: [with_world: 2]

  alias Grove.World
  alias Grove.World.Grid

  # Zones of 3 x 3 cells, six of them: every cell is on a zone's border or
  # the world's edge, so a batch mixes steps inside a zone, crossings,
  # refusals at the edge and on blocked ground, and entities that meet
  # across a border. The terrain given replaces `Grove.WorldCase`'s
  # meadow-only one: trees as asked, and water, rock and flowers at the
  # terrain's defaults (a cell or two of water).
  @width 9
  @height 6
  @zone_size 3
  @entities 10
  # Two of them watch: their every move, a crossing or not, takes the
  # batch's way around its plain step.
  @viewers 2

  # A batch names an entity by its place among those joined, the last
  # place one that left: an id the world no longer knows.
  defp batch do
    :proper_types.resize(
      40,
      :proper_types.list(
        {:proper_types.integer(0, @entities), :proper_types.elements(Grid.directions())}
      )
    )
  end

  # Each case starts a world and sends it a few batches: a few seconds on a
  # quiet machine, past ExUnit's minute when it is loaded many times over.
  @tag timeout: 300_000
  test "a batch's moves across zones each get one outcome, and the entities stand where their outcomes say" do
    property =
      forall(
        {:proper_types.integer(1, 1000),
         :proper_types.resize(4, :proper_types.non_empty(:proper_types.list(batch())))},
        fn {seed, batches} ->
          # What the world of an earlier case that failed sent after it
          # failed: a case that passed left only views.
          flush()

          with_world(
            [
              width: @width,
              height: @height,
              zone_size: @zone_size,
              seed: seed,
              terrain: [tree_density: 0.15]
            ],
            &run(&1, batches)
          )

          # No move answered twice, however late the second answer: the
          # world stopped, so all it ever sent is here.
          assert stray() == []
        end
      )

    # A failing try that lost an outcome waits out `collect/2`'s wait:
    # few enough of them that the smallest case comes before the timeout.
    check(property, numtests: 40, max_size: 30, max_shrinks: 40)
  end

  # The batches, one after the other, each sent once the one before is
  # answered in full: an entity's moves are then applied in the order they
  # were sent, which is what lets its outcomes say where it stands.
  defp run(name, batches) do
    grid = World.grid(name)

    {ids, cells} =
      for n <- 0..(@entities - 1) do
        {:ok, id, cell} = World.join(name, updates: if(n < @viewers, do: :view, else: :none))
        {id, cell}
      end
      |> Enum.unzip()

    {:ok, gone, _cell} = World.join(name, updates: :none)
    :ok = World.leave(name, gone)
    ids = List.to_tuple(ids ++ [gone])
    at = ids |> Tuple.to_list() |> Enum.zip(cells) |> Map.new()

    {_at, tally} =
      batches
      |> Enum.with_index()
      |> Enum.reduce({at, %{}}, fn {batch, round}, {at, tally} ->
        sent =
          for {{n, direction}, k} <- Enum.with_index(batch),
              do: {elem(ids, n), direction, {round, k}}

        World.move_many(name, sent)
        outcomes = collect(length(sent), %{})

        # Every move gets exactly one outcome: as many as were sent, one
        # for each tag.
        assert Enum.sort(Map.keys(outcomes)) == Enum.sort(for {_, _, tag} <- sent, do: tag)

        {at, tally} = follow(sent, outcomes, grid, gone, at, tally)
        check_world!(name, grid, Map.delete(at, gone))
        {at, tally}
      end)

    assert World.audit(name) == :ok
    check_counts!(name, tally)
    assert World.entity_count(name) == @entities
    assert World.position(name, gone) == nil
    true
  end

  # Each entity's moves, in the order they were sent: a move done goes
  # one step from where the entity stood, a move refused leaves it there.
  # The tally counts the outcomes by kind, and the crossings done.
  defp follow(sent, outcomes, grid, gone, at, tally) do
    Enum.reduce(sent, {at, tally}, fn {id, direction, tag}, {at, tally} ->
      outcome = Map.fetch!(outcomes, tag)

      case {id, outcome} do
        {^gone, _} ->
          assert outcome == {:rejected, :unknown_entity}
          {at, count(tally, outcome)}

        {_, {:ok, {x, y} = cell}} ->
          {fx, fy} = from = Map.fetch!(at, id)

          assert cell == Grid.step(from, direction),
                 "entity #{id} at #{inspect(from)} moved #{direction} to #{inspect(cell)}"

          tally = count(tally, outcome)

          tally =
            if Grid.zone_of(grid, fx, fy) != Grid.zone_of(grid, x, y),
              do: Map.update(tally, :crossed, 1, &(&1 + 1)),
              else: tally

          {Map.put(at, id, cell), tally}

        {_, {:rejected, reason}} ->
          {x, y} = Grid.step(Map.fetch!(at, id), direction)

          # A step off the world is refused for that and nothing else.
          assert Grid.in_bounds?(grid, x, y) != (reason == :out_of_bounds),
                 "entity #{id}'s move #{direction} was refused #{reason}"

          {at, count(tally, outcome)}
      end
    end)
  end

  defp count(tally, {:ok, _cell}), do: Map.update(tally, :moves_ok, 1, &(&1 + 1))
  defp count(tally, {:rejected, reason}), do: Map.update(tally, reason, 1, &(&1 + 1))

  # The handoffs settled: no entity lost or held by two zones, each where
  # its outcomes put it and in the zone of that cell.
  defp check_world!(name, grid, at) do
    assert World.audit(name) == :ok

    for {id, {x, y} = cell} <- at do
      assert World.position(name, id) == cell
      assert World.zone_index(name, id) == Grid.zone_of(grid, x, y)
    end
  end

  # The world counts each move once, by its outcome, and a handoff for
  # each crossing done or refused by the zone it went to.
  defp check_counts!(name, tally) do
    stats = World.stats(name)

    for key <- [:moves_ok | World.rejections()],
        do: assert({key, stats[key]} == {key, Map.get(tally, key, 0)})

    assert stats.handoffs - stats.handoffs_refused == Map.get(tally, :crossed, 0)
  end

  # The outcomes of `left` moves, by tag; a move unanswered for two
  # seconds leaves its tag out. No timer runs in these worlds (ticks are
  # manual, moves unlimited): every answer follows from the batch at
  # once, and the wait covers only a loaded machine.
  defp collect(0, outcomes), do: outcomes

  defp collect(left, outcomes) do
    receive do
      {:grove_move, id, tag, outcome} ->
        collect(left - 1, put_outcome(outcomes, id, tag, outcome))

      {:grove_moves, answered} ->
        outcomes =
          Enum.reduce(answered, outcomes, fn {id, tag, outcome}, outcomes ->
            put_outcome(outcomes, id, tag, outcome)
          end)

        collect(left - length(answered), outcomes)
    after
      2000 -> outcomes
    end
  end

  defp put_outcome(outcomes, id, tag, outcome) do
    refute Map.has_key?(outcomes, tag),
           "move #{inspect(tag)} of entity #{id} answered twice: " <>
             "#{inspect(outcomes[tag])}, then #{inspect(outcome)}"

    Map.put(outcomes, tag, outcome)
  end

  # Outcomes that came after all were answered (views are not outcomes;
  # any other message stays).
  defp stray do
    receive do
      {:grove_move, _, _, _} = message -> [message | stray()]
      {:grove_moves, _} = message -> [message | stray()]
      {:grove_view, _, _, _, _} -> stray()
    after
      0 -> []
    end
  end

  defp flush do
    receive do
      _ -> flush()
    after
      0 -> :ok
    end
  end
end
