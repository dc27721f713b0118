defmodule Grove.Cluster.MembershipTest do
  # Who counts towards a quorum, as plain functions of what a node has seen.
  use ExUnit.Case, async: true

  alias Grove.Cluster.Membership

  defp seen(known, opts \\ []) do
    %Membership{
      known: MapSet.new(known),
      going: MapSet.new(Keyword.get(opts, :going, [])),
      left: MapSet.new(Keyword.get(opts, :left, [])),
      size: opts[:size]
    }
  end

  test "more than half of the nodes seen, or half with the first of them by name" do
    assert %{quorum: true, size: 3} = Membership.tally(seen([:a, :b, :c]), [:b, :c])
    assert %{quorum: false} = Membership.tally(seen([:a, :b, :c]), [:c])
    assert %{quorum: true} = Membership.tally(seen([:a, :b, :c, :d]), [:a, :b])
    assert %{quorum: false} = Membership.tally(seen([:a, :b, :c, :d]), [:c, :d])
    # A configured size counts nodes never seen.
    assert %{quorum: false, size: 5} = Membership.tally(seen([:a, :b], size: 5), [:a, :b])
  end

  test "a node that said it leaves is away while the group still lists it and once it no longer does" do
    # Three nodes; one said it leaves and the group still lists it: the
    # other two are the whole cluster.
    state = seen([:a, :b, :c], going: [:a])

    assert %{quorum: true, size: 2, present: [:b, :c]} =
             tally = Membership.tally(state, [:a, :b, :c])

    assert tally.going == MapSet.new([:a])

    # Out of the group now: it has left.
    state = %{state | going: tally.going, left: tally.left}
    tally = Membership.tally(state, [:b, :c])
    assert tally.going == MapSet.new() and tally.left == MapSet.new([:a])

    # The second says it leaves too: the last node alone keeps its quorum,
    # before the group drops the second and after.
    state = %{state | going: MapSet.put(tally.going, :b), left: tally.left}
    assert %{quorum: true, size: 1, present: [:c]} = tally = Membership.tally(state, [:b, :c])
    state = %{state | going: tally.going, left: tally.left}
    assert %{quorum: true, size: 1} = tally = Membership.tally(state, [:c])

    # Back in the group, it counts again.
    state = %{state | going: tally.going, left: tally.left}
    tally = Membership.tally(state, [:a, :c])
    assert %{size: 2, quorum: true} = tally
    assert tally.left == MapSet.new([:b])
  end

  test "a node lost without a word still counts: the survivor of one lost and one gone is short of a quorum unless it is first by name" do
    # `:a` died (it may be alive on the other side of a split), `:b` left.
    assert %{quorum: false, size: 2} = Membership.tally(seen([:a, :b, :c], left: [:b]), [:c])

    assert %{quorum: true, size: 2} = Membership.tally(seen([:a, :b, :c], left: [:b]), [:a])
  end
end
