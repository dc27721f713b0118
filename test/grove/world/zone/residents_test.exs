defmodule Grove.World.Zone.ResidentsTest do
  @moduledoc "A zone's residents on their schedule, and the rounds by hand they step in."
  use ExUnit.Case, async: true

  alias Grove.World.Zone.Residents

  doctest Residents

  defp two, do: Residents.new(250, 0) |> Residents.add(7, 1000) |> Residents.add(8, 1000)

  test "a resident that arrived by its step of a round the zone has walked already steps in the next" do
    {[_, _], residents} = Residents.start_round(two(), 5)
    residents = Residents.arrived(residents, 8, 5)
    {ids, _residents} = Residents.start_round(residents, 6)
    assert Enum.sort(ids) == [7, 8]
  end

  test "a resident that arrived by its step of a round to come steps in every round but that one" do
    residents = Residents.arrived(two(), 8, 6)
    {ids, residents} = Residents.start_round(residents, 5)
    assert Enum.sort(ids) == [7, 8]
    {[7], residents} = Residents.start_round(residents, 6)
    {ids, _residents} = Residents.start_round(residents, 7)
    assert Enum.sort(ids) == [7, 8]
  end

  test "a resident that leaves is forgotten with the round it stepped in" do
    residents = two() |> Residents.arrived(8, 5) |> Residents.drop(8, 1000)
    assert residents.stepped == %{}
    {[7], residents} = Residents.start_round(residents, 5)
    assert Residents.current_round(residents) == 5
  end

  test "no round before the first" do
    assert Residents.current_round(two()) == nil
  end
end
