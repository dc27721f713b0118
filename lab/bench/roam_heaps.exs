# What the zones' and the walkers' heaps are while walkers roam: required
# with `roam_inproc.exs` (before it), it waits `ROAM_HEAPS_AFTER` seconds
# (default 40: the walkers joined and walking) and reads every zone's and
# every other process's heap (`Process.info/2`: the young heap, the whole,
# the least it may shrink to, the minor collections since the last full)
# and prints, by kind
# (a zone that holds an entity, one that holds none, the rest by what
# `process_kind.exs` names them), how many there are and the median and
# 90th percentile of each, in words, as lines that start with `HEAPS`.
# From the repository's root:
#
#   GROVE_ACTORS=0 ... taskset -c 0 mix run -r lab/bench/roam_heaps.exs lab/bench/roam_inproc.exs 500
Code.require_file("process_kind.exs", __DIR__)

defmodule Bench.RoamHeaps do
  @moduledoc false

  @keys [:heap_size, :total_heap_size, :garbage_collection]

  def read do
    Process.list()
    |> Enum.flat_map(fn pid ->
      case Process.info(pid, @keys) do
        nil -> []
        info -> [{kind(pid, info), info}]
      end
    end)
    |> Enum.group_by(&elem(&1, 0), &elem(&1, 1))
    |> Enum.sort_by(fn {_kind, infos} -> -length(infos) end)
    |> Enum.take(6)
    |> Enum.each(&print/1)
  end

  defp kind(pid, info) do
    case Grove.Bench.ProcessKind.of(pid) do
      "Elixir.Grove.World.zone.N" ->
        if holds?(pid), do: :zone_holding, else: :zone_empty

      {Grove.World.Zone, :init, 1} ->
        if holds?(pid), do: :zone_holding, else: :zone_empty

      other ->
        other
    end
  end

  # A zone holds an entity (a walker) if its state has one.
  defp holds?(pid) do
    case :sys.get_state(pid, 1000) do
      %Grove.World.Zone{core: %Grove.World.Zone.State{} = core} ->
        Grove.World.Zone.State.size(core) > 0

      _ ->
        false
    end
  catch
    :exit, _ -> false
  end

  defp print({kind, infos}) do
    young = Enum.map(infos, & &1[:heap_size])
    total = Enum.map(infos, & &1[:total_heap_size])
    least = Enum.map(infos, &Keyword.get(&1[:garbage_collection], :min_heap_size))
    minor = Enum.map(infos, &Keyword.get(&1[:garbage_collection], :minor_gcs))

    IO.puts(
      "HEAPS #{inspect(kind)}: #{length(infos)}, words young #{q(young)}, all #{q(total)}, " <>
        "least #{q(least)}, minor collections since the last full #{q(minor)} (median, p90)"
    )
  end

  defp q(values) do
    sorted = Enum.sort(values)
    n = length(sorted)
    "#{Enum.at(sorted, div(n, 2))}, #{Enum.at(sorted, min(n - 1, div(n * 9, 10)))}"
  end
end

spawn(fn ->
  Process.sleep(String.to_integer(System.get_env("ROAM_HEAPS_AFTER", "40")) * 1000)
  Bench.RoamHeaps.read()
end)
