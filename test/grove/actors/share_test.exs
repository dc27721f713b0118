defmodule Grove.Actors.ShareTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.Actors.Share

  doctest Share

  # A member list of one to nine distinct nodes, in any order, maybe with repeats.
  defp members do
    :proper_types.non_empty(
      :proper_types.list(:proper_types.oneof(Enum.map(1..9, &:"grove#{&1}@10.0.0.#{&1}")))
    )
  end

  defp totals, do: :proper_types.integer(0, 100_000)
  defp offsets, do: :proper_types.integer(0, 20)

  test "the members' shares add up to the total and differ by at most one, in any order" do
    check(
      forall({members(), totals(), offsets()}, fn {members, total, offset} ->
        shares = for node <- Enum.uniq(members), do: Share.of(total, members, node, offset)

        assert Enum.sum(shares) == total
        assert Enum.max(shares) - Enum.min(shares) <= 1
        assert Share.of(total, Enum.shuffle(members), hd(members), offset) == hd(shares)
        assert Share.all(total, members, offset) == Map.new(Enum.zip(Enum.uniq(members), shares))
      end),
      numtests: 500
    )
  end

  test "spare actors of several kinds go to different members" do
    members = [:a@h, :b@h, :c@h]
    per_node = for node <- members, do: Enum.sum(for k <- 0..2, do: Share.of(4, members, node, k))
    assert per_node == [4, 4, 4]
  end

  test "a node that is not a member runs none" do
    assert Share.of(7, [:a@h, :b@h], :c@h) == 0
  end
end
