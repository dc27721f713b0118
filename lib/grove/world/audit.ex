defmodule Grove.World.Audit do
  @moduledoc false
  # The world's consistency check (`Grove.World.audit/2`): every entity in
  # exactly one zone and in the directory, no cell shared, no entity on
  # blocking ground, tables agreeing with zones. Gathering asks every zone
  # (a call each); judging what they said is a plain function.

  alias Grove.World
  alias Grove.World.{Directory, Grid, Slots}
  alias Grove.World.Zone.Saves

  @doc "Asks every zone of a world for its report, then judges them together."
  @spec run(World.t(), timeout()) :: :ok | {:error, [String.t()]}
  def run(%World{cluster: nil} = world, timeout) do
    reports = for index <- Slots.known(world), do: report(world, index, timeout)
    directory = Directory.entries(world.name)

    case findings(reports, directory, World.entity_count(world)) do
      [] -> :ok
      all -> {:error, all}
    end
  end

  # In a cluster no node's directory holds every entity: the zones, wherever
  # they run, are asked, and their reports judged together.
  def run(%World{} = world, timeout) do
    reports =
      for index <- zones(world),
          do: GenServer.call(World.zone_address(world, index), :audit, timeout)

    problems = Enum.flat_map(reports, fn {_resident, problems} -> problems end)
    counts = reports |> Enum.flat_map(fn {resident, _} -> resident end) |> Enum.frequencies()
    duplicates = for {id, n} <- counts, n > 1, do: "entity #{id} is resident in #{n} zones"

    case problems ++ duplicates do
      [] -> :ok
      all -> {:error, all}
    end
  end

  # Every zone of a world whose zones all run; in a world of zones on
  # demand, those it knows (`Grove.World.Slots`): a zone without a slot
  # holds nothing.
  #
  # A zone on demand that sleeps has only its table (or its save in the
  # store) to show: its entities are those, and nothing else in it can be
  # wrong.
  defp report(%World{zones_on_demand: true} = world, index, timeout) do
    case World.zone_pid(world, index) do
      nil -> {for(row <- Saves.rows(world, index), do: elem(row, 0)), []}
      pid -> GenServer.call(pid, :audit, timeout)
    end
  end

  defp report(world, index, timeout),
    do: GenServer.call(elem(world.zones, index), :audit, timeout)

  @doc "The ids resident in every zone of a world, wherever each runs."
  @spec residents(World.t(), timeout()) :: [non_neg_integer()]
  def residents(%World{} = world, timeout \\ 15_000) do
    Enum.flat_map(zones(world), fn index ->
      {resident, _problems} = GenServer.call(World.zone_address(world, index), :audit, timeout)
      resident
    end)
  end

  # In a cluster, every zone, wherever it runs: this node knows only the
  # zones on demand it woke (a cluster places at most 100,000 zones).
  defp zones(%World{cluster: nil} = world), do: Slots.known(world)
  defp zones(world), do: 0..(Grid.zone_count(world.grid) - 1)

  @doc """
  What is wrong, given each zone's `{resident ids, problems}`, the
  directory's `{id, zone}` entries and the entity count: `[]` when nothing.
  """
  @spec findings([{[integer()], [String.t()]}], [{integer(), integer()}], non_neg_integer()) ::
          [String.t()]
  def findings(reports, directory, entity_count) do
    problems = Enum.flat_map(reports, fn {_resident, problems} -> problems end)
    counts = reports |> Enum.flat_map(fn {resident, _} -> resident end) |> Enum.frequencies()
    listed = Map.new(directory)

    duplicates = for {id, n} <- counts, n > 1, do: "entity #{id} is resident in #{n} zones"

    missing =
      for {id, _index} <- directory,
          not is_map_key(counts, id),
          do: "entity #{id} is in the directory but in no zone"

    unlisted =
      for {id, _} <- counts,
          not is_map_key(listed, id),
          do: "entity #{id} is in a zone but not in the directory"

    counted =
      if length(directory) == entity_count,
        do: [],
        else: ["#{length(directory)} entities in the directory, #{entity_count} counted"]

    problems ++ duplicates ++ missing ++ unlisted ++ counted
  end
end
