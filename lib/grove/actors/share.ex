defmodule Grove.Actors.Share do
  @moduledoc """
  How a cluster splits its actors among its members: each node's share of
  a kind's total, from the sorted member list alone, so that every node
  computes the same split without asking anyone.

  Member `i` (its rank in the sorted list, from 0) of `m` runs `div(n, m)`
  actors of a kind of total `n`, plus one if its rank comes among the
  first `rem(n, m)` counted from the kind's `offset` (the kind's index, so
  that the spare actors of several kinds do not all land on the first
  node). The shares add up to `n` exactly and differ by at most one; a
  node that is not a member runs none. See `docs/decisions.md` ("Actors
  are shared by rank").

  ## Examples

      iex> Grove.Actors.Share.of(10, [:a@h, :b@h, :c@h], :a@h)
      4
      iex> Grove.Actors.Share.of(10, [:c@h, :b@h, :a@h], :b@h)
      3
      iex> Grove.Actors.Share.of(10, [:a@h, :b@h, :c@h], :b@h, 1)
      4
      iex> Grove.Actors.Share.all(10, [:b@h, :a@h, :c@h])
      %{a@h: 4, b@h: 3, c@h: 3}
      iex> Grove.Actors.Share.of(10, [:a@h], :b@h)
      0
  """

  @doc "The share of `node` in `total` actors of a kind whose spare ones start at rank `offset`."
  @spec of(non_neg_integer(), [node()], node(), non_neg_integer()) :: non_neg_integer()
  def of(total, members, node, offset \\ 0) do
    sorted = members |> Enum.uniq() |> Enum.sort()

    case Enum.find_index(sorted, &(&1 == node)) do
      nil -> 0
      rank -> by_rank(total, length(sorted), rank, offset)
    end
  end

  @doc "Every member's share in `total` actors of a kind (see `of/4`)."
  @spec all(non_neg_integer(), [node()], non_neg_integer()) :: %{node() => non_neg_integer()}
  def all(total, members, offset \\ 0) do
    sorted = members |> Enum.uniq() |> Enum.sort()
    count = length(sorted)

    for {node, rank} <- Enum.with_index(sorted),
        into: %{},
        do: {node, by_rank(total, count, rank, offset)}
  end

  defp by_rank(total, count, rank, offset) do
    spare = if Integer.mod(rank - offset, count) < rem(total, count), do: 1, else: 0
    div(total, count) + spare
  end
end
