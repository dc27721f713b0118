defmodule Grove.Cluster.PlacementTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.Cluster.Placement

  doctest Placement

  # A member list of one to seven distinct nodes.
  defp members do
    :proper_types.non_empty(
      :proper_types.list(:proper_types.oneof(Enum.map(1..9, &:"grove#{&1}@10.0.0.#{&1}")))
    )
  end

  defp zones, do: :proper_types.integer(1, 500)

  test "every zone is owned by one of the members, whatever their order" do
    check(
      forall({members(), zones()}, fn {members, count} ->
        owners = Placement.owners(count, members)
        assert tuple_size(owners) == count
        assert Enum.all?(Tuple.to_list(owners), &(&1 in members))
        assert Placement.owners(count, Enum.shuffle(members)) == owners
        assert Placement.owners(count, members ++ members) == owners
      end)
    )
  end

  test "a member that joins takes zones only for itself, and one that leaves gives only its own" do
    check(
      forall({members(), zones()}, fn {members, count} ->
        members = Enum.uniq(members)
        newcomer = :"newcomer@10.0.1.1"
        before = Placement.owners(count, members)
        later = Placement.owners(count, [newcomer | members])

        # Joining moves zones to the newcomer and nowhere else ...
        assert Enum.all?(Placement.moves(before, later), fn {_zone, _from, to} ->
                 to == newcomer
               end)

        # ... and its leaving moves exactly those zones back.
        assert Placement.moves(later, before) ==
                 for({zone, from, to} <- Placement.moves(before, later), do: {zone, to, from})
      end)
    )
  end

  test "the default world's zones are shared about evenly" do
    members = for n <- 1..3, do: :"grove#{n}@127.0.0.1"
    shares = Placement.shares(Placement.owners(400, members))

    assert Map.keys(shares) |> Enum.sort() == Enum.sort(members)
    # 133 each on average; rendezvous hashing is random-like, not exact.
    assert Enum.all?(Map.values(shares), &(&1 in 100..166))
    assert Enum.sum(Map.values(shares)) == 400
  end

  test "zones_of lists a member's zones in order" do
    owners = {:a, :b, :a, :c}
    assert Placement.zones_of(owners, :a) == [0, 2]
    assert Placement.zones_of(owners, :d) == []
  end
end
