defmodule Grove.Status do
  @moduledoc """
  A status line in the log every few seconds, so whoever started Grove sees
  the world living: entities, actors, moves per second with their outcomes,
  each kind of actor with its moves, the move round trip seen by actors,
  the longest zone mailbox and memory; in a world with a game, its
  actions per second too, done or refused, in all and per kind.

      [info] grove: 20000 entities (20000 actors joined) | 19968 moves/s: 81% ok, 12% blocked, ... | walker 15000: 14990 moves/s 79% ok; wanderer 3000: 2995 moves/s 97% ok; sheep 2000: 520 moves/s 88% ok, 1470 stay/s | round trip p50 0.4 ms p99 3.1 ms | zone mailbox max 2 | 180 MB

  ## Options

    * `:name` - the Grove instance to report on (required)
    * `:interval` - milliseconds between lines (default `10_000`)
  """

  use GenServer

  alias Grove.Actors
  alias Grove.Metrics.Histogram

  require Logger

  defstruct [:name, :interval, :last, :timer]

  @spec start_link(keyword()) :: GenServer.on_start()
  def start_link(opts), do: GenServer.start_link(__MODULE__, opts)

  @doc "The status line for an instance right now, over the time since `since` (a reading)."
  @spec line(atom(), map() | nil) :: {String.t(), map()}
  def line(name, since \\ nil) do
    now = reading(name)
    since = since || now
    seconds = max((now.at - since.at) / 1000, 0.001)
    world = now.world
    moves = Actors.Stats.diff(now.actors, since.actors)
    ok = world.moves_ok - since.world.moves_ok

    rejected =
      for key <- [:blocked, :occupied, :out_of_bounds, :rate_limited, :busy],
          do: {key, world[key] - since.world[key]}

    total = ok + Enum.reduce(rejected, 0, fn {_, n}, acc -> acc + n end)

    shares =
      [{:ok, ok} | rejected]
      |> Enum.filter(fn {_, n} -> n > 0 end)
      |> Enum.map_join(", ", fn {key, n} -> "#{round(100 * n / max(total, 1))}% #{key}" end)

    # Residents have no round trip: how late their steps came stands for one.
    resident = Histogram.diff(now.resident, since.resident)

    latency =
      cond do
        Histogram.count(moves.latency) > 0 ->
          "round trip p50 #{ms(Histogram.percentile(moves.latency, 50))} p99 #{ms(Histogram.percentile(moves.latency, 99))}"

        Histogram.count(resident) > 0 ->
          "residents' steps late p50 #{ms(Histogram.percentile(resident, 50))} p99 #{ms(Histogram.percentile(resident, 99))}"

        true ->
          "no actor moves yet"
      end

    text =
      "grove#{cluster(name)}: #{world.entities} entities (#{now.actors.counts.joined} actors joined#{failed(now.actors.counts)}) | " <>
        "#{round(total / seconds)} moves/s#{if shares != "", do: ": " <> shares, else: ""} | " <>
        acts(world, since.world, seconds) <>
        kinds(now.kinds, since.kinds, seconds, Histogram.count(resident) > 0) <>
        "#{latency} | zone mailbox max #{world.zone_mailbox_max} | " <>
        "#{div(:erlang.memory(:total), 1_000_000)} MB"

    {text, now}
  end

  # Actors the world had no cell for (the herds logged why, once each).
  defp failed(%{join_failed: 0}), do: ""
  defp failed(%{join_failed: n}), do: ", #{n} could not join"

  # A game's actions, by outcome; nothing in a world that has none.
  defp acts(world, since, seconds) do
    keys = [
      acts_ok: "done",
      acts_refused: "refused",
      acts_rejected: "rejected",
      acts_interrupted: "interrupted"
    ]

    counts = for {key, label} <- keys, do: {label, world[key] - since[key]}
    total = Enum.reduce(counts, 0, fn {_, n}, acc -> acc + n end)

    if total == 0 do
      ""
    else
      shares =
        for({label, n} <- counts, n > 0, do: "#{round(100 * n / total)}% #{label}")
        |> Enum.join(", ")

      "#{round(total / seconds)} acts/s: #{shares} | "
    end
  end

  # Each kind: how many are in the world, their moves answered per second
  # and the share that went through, and the steps they chose not to take;
  # a kind whose herds send nothing while zones step residents lives in
  # its zones, whose steps are the world's, counted above.
  defp kinds(now, since, seconds, residents?) do
    earlier = Map.new(since, &{&1.name, &1.counts})

    parts =
      for kind <- now do
        was = Map.get(earlier, kind.name, kind.counts)
        diff = fn key -> kind.counts[key] - was[key] end
        answered = Enum.reduce(Actors.Stats.outcomes(), 0, &(&2 + diff.(&1)))
        ok = if answered > 0, do: " #{round(100 * diff.(:ok) / answered)}% ok", else: ""
        stays = if diff.(:stayed) > 0, do: ", #{round(diff.(:stayed) / seconds)} stay/s", else: ""

        stays =
          if diff.(:rested) > 0,
            do: stays <> ", #{round(diff.(:rested) / seconds)} rest/s unseen",
            else: stays

        acted = diff.(:acted) + diff.(:refused)

        acts =
          if acted > 0,
            do: ", #{round(acted / seconds)} acts/s #{round(100 * diff.(:acted) / acted)}% done",
            else: ""

        if answered == 0 and acted == 0 and residents?,
          do: "#{kind.name} #{kind.actors || "?"}: in their zones",
          else:
            "#{kind.name} #{kind.actors || "?"}: #{round(answered / seconds)} moves/s#{ok}#{stays}#{acts}"
      end

    if parts == [], do: "", else: Enum.join(parts, "; ") <> " | "
  end

  defp reading(name) do
    %{
      at: System.monotonic_time(:millisecond),
      world: Grove.World.stats(Grove.world(name)),
      resident: Histogram.snapshot(Grove.World.fetch!(Grove.world(name)).resident_lateness),
      actors: Actors.Stats.read(Actors.stats(Grove.actors(name))),
      kinds: Actors.by_kind(Grove.actors(name))
    }
  end

  # A distributed node names itself and its cluster's size.
  defp cluster(name) do
    if Node.alive?(),
      do: " #{node()} (cluster of #{length(Grove.Cluster.members(name))})",
      else: ""
  end

  defp ms(nil), do: "-"
  defp ms(micros), do: "#{Float.round(micros / 1000, 1)} ms"

  @impl true
  def init(opts) do
    status = %__MODULE__{
      name: Keyword.fetch!(opts, :name),
      interval: Keyword.get(opts, :interval, 10_000)
    }

    {:ok, status, {:continue, :first}}
  end

  @impl true
  def handle_continue(:first, status) do
    world = Grove.World.fetch!(Grove.world(status.name))

    Logger.info(
      "grove: world #{world.grid.width}x#{world.grid.height} in #{Grove.World.Grid.zone_count(world.grid)} zones; " <>
        "a status line every #{div(status.interval, 1000)} s"
    )

    {_text, now} = line(status.name)
    {:noreply, schedule(%{status | last: now})}
  end

  @impl true
  def handle_info(:report, status) do
    {text, now} = line(status.name, status.last)
    Logger.info(text)
    {:noreply, schedule(%{status | last: now})}
  end

  defp schedule(status),
    do: %{status | timer: Process.send_after(self(), :report, status.interval)}
end
