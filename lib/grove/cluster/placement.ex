defmodule Grove.Cluster.Placement do
  @moduledoc """
  Which node owns each zone: rendezvous (highest random weight) hashing
  over the cluster's members.

  Every node computes the same owner for a zone from nothing but the member
  list, so placement needs no coordinator and no message: a zone goes to
  the member whose hash of `{zone, member}` is highest. When a member
  joins, only the zones it now wins move (to it); when one leaves, only its
  own zones move, each to the member that came second for it. With the
  default world's 400 zones, each of `n` members owns about `400 / n`
  zones. See `docs/decisions.md` ("Zones are placed by rendezvous
  hashing").

  The hash is `:erlang.phash2/2` of the zone and the member's name as a
  string: the same on every machine and every ERTS version, as a cluster
  that upgrades one node at a time needs.

  ## Examples

      iex> Grove.Cluster.Placement.owner(7, [:"a@host"])
      :"a@host"

      iex> members = [:"a@host", :"b@host", :"c@host"]
      iex> Grove.Cluster.Placement.owner(7, members) == Grove.Cluster.Placement.owner(7, Enum.reverse(members))
      true

      iex> Grove.Cluster.Placement.owners(4, [:"a@host"])
      {:"a@host", :"a@host", :"a@host", :"a@host"}
  """

  @range 4_294_967_296

  @typedoc "Zone index to owning node, for every zone of a world."
  @type owners :: tuple()

  @doc "The member that owns a zone; members may come in any order."
  @spec owner(non_neg_integer(), [node(), ...]) :: node()
  def owner(zone, [_ | _] = members) do
    # Ties (two members with the same hash) go to the greater name, so the
    # order of the list never matters.
    Enum.max_by(members, &{weight(zone, &1), &1})
  end

  @doc "The owner of each of `count` zones, as a tuple indexed by zone."
  @spec owners(pos_integer(), [node(), ...]) :: owners()
  def owners(count, [_ | _] = members) do
    members = Enum.uniq(members)
    List.to_tuple(for zone <- 0..(count - 1), do: owner(zone, members))
  end

  @doc """
  The zones whose owner differs between two placements, as
  `{zone, from, to}`: what a change of members moves.
  """
  @spec moves(owners(), owners()) :: [{non_neg_integer(), node(), node()}]
  def moves(before, later) when tuple_size(before) == tuple_size(later) do
    for zone <- 0..(tuple_size(before) - 1)//1,
        from = elem(before, zone),
        to = elem(later, zone),
        from != to,
        do: {zone, from, to}
  end

  @doc "How many zones each member owns."
  @spec shares(owners()) :: %{node() => non_neg_integer()}
  def shares(owners), do: owners |> Tuple.to_list() |> Enum.frequencies()

  @doc "The zones a member owns, in order."
  @spec zones_of(owners(), node()) :: [non_neg_integer()]
  def zones_of(owners, member),
    do: for(zone <- 0..(tuple_size(owners) - 1)//1, elem(owners, zone) == member, do: zone)

  defp weight(zone, member), do: :erlang.phash2({zone, Atom.to_string(member)}, @range)
end
