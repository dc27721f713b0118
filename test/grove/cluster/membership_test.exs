defmodule Grove.Cluster.MembershipTest do
  # Who counts towards a quorum, as plain functions of what a node has seen.
  use ExUnit.Case, async: true

  alias Grove.Cluster.Membership

  defp seen(known, opts \\ []) do
    %Membership{
      known: MapSet.new(known),
      going: Map.new(Keyword.get(opts, :going, [])),
      left: MapSet.new(Keyword.get(opts, :left, [])),
      size: opts[:size]
    }
  end

  # The group's members as the group holds them: a process per node (a
  # term standing for one here), the first of each node unless told.
  defp tally(state, members, processes \\ %{}) do
    group = for node <- members, do: Map.get(processes, node, {node, 1})
    Membership.tally(state, members, group)
  end

  defp next(state, tally), do: %{state | going: tally.going, left: tally.left}

  test "more than half of the nodes seen, or half with the first of them by name" do
    assert %{quorum: true, size: 3} = tally(seen([:a, :b, :c]), [:b, :c])
    assert %{quorum: false} = tally(seen([:a, :b, :c]), [:c])
    assert %{quorum: true} = tally(seen([:a, :b, :c, :d]), [:a, :b])
    assert %{quorum: false} = tally(seen([:a, :b, :c, :d]), [:c, :d])
    # A configured size counts nodes never seen.
    assert %{quorum: false, size: 5} = tally(seen([:a, :b], size: 5), [:a, :b])
  end

  test "a node that said it leaves is away while the group still holds it and once it no longer does" do
    # Three nodes; one said it leaves and the group still holds it: the
    # other two are the whole cluster.
    state = seen([:a, :b, :c], going: [{{:a, 1}, :a}])
    assert %{quorum: true, size: 2, present: [:b, :c]} = tally = tally(state, [:a, :b, :c])
    assert tally.going == %{{:a, 1} => :a}

    # Out of the group now: it has left.
    state = next(state, tally)
    tally = tally(state, [:b, :c])
    assert tally.going == %{} and tally.left == MapSet.new([:a])

    # The second says it leaves too: the last node alone keeps its quorum,
    # before the group drops the second and after.
    state = %{next(state, tally) | going: %{{:b, 1} => :b}}
    assert %{quorum: true, size: 1, present: [:c]} = tally = tally(state, [:b, :c])
    state = next(state, tally)
    assert %{quorum: true, size: 1} = tally = tally(state, [:c])

    # Back in the group, it counts again.
    state = next(state, tally)
    tally = tally(state, [:a, :c], %{a: {:a, 2}})
    assert %{size: 2, quorum: true} = tally
    assert tally.left == MapSet.new([:b])
  end

  test "a node back in the group before the others heard it leave is not taken for the one that left" do
    # `:a` left and joined again at once: its word comes after the group's
    # news, naming the process that left; the one in the group is new.
    state = seen([:a, :b, :c], going: [{{:a, 1}, :a}])

    assert %{quorum: true, size: 3, present: [:a, :b, :c]} =
             tally = tally(state, [:a, :b, :c], %{a: {:a, 2}})

    assert tally.going == %{} and tally.left == MapSet.new()
  end

  test "a node lost without a word still counts: the survivor of one lost and one gone is short of a quorum unless it is first by name" do
    # `:a` died (it may be alive on the other side of a split), `:b` left.
    assert %{quorum: false, size: 2} = tally(seen([:a, :b, :c], left: [:b]), [:c])
    assert %{quorum: true, size: 2} = tally(seen([:a, :b, :c], left: [:b]), [:a])
  end
end
