defmodule Grove.Actors.Metrics do
  @moduledoc """
  The actors' metrics (a `Grove.Metrics.Source`; its argument is the
  actors' name, `Grove.actors/1`): their moves as they saw them, by kind and
  outcome, what they sent, skipped and gave up on, their round trip; and
  for the dashboard, each kind's rates and the round trip's percentiles.
  """

  @behaviour Grove.Metrics.Source

  import Grove.Metrics.Histogram, only: [to_ms: 1]
  import Grove.Metrics.Source, only: [per_second: 3]

  alias Grove.Actors
  alias Grove.Actors.Stats
  alias Grove.Metrics.Histogram

  @impl true
  def metrics(name) do
    stats = Actors.stats(name)
    counts = Stats.read(stats).counts
    kinds = Actors.by_kind(name)

    [
      {"grove_actor_move_round_trip_seconds", :histogram,
       "Round trip of actors' moves, send to outcome.",
       [{[], Histogram.export(stats.latency, 1_000_000)}]},
      {"grove_actors_of_kind", :gauge, "Actors of each kind in the world.",
       for(kind <- kinds, kind.actors != nil, do: {[kind: kind.name], kind.actors})},
      {"grove_actors_share", :gauge,
       "Actors of each kind this node owes: its share of a cluster's total, or all of them alone.",
       for(kind <- kinds, do: {[kind: kind.name], kind.share})},
      {"grove_actors_retired_total", :counter,
       "Actors this node retired (they left the world) since the cluster's members changed.",
       for(kind <- kinds, do: {[kind: kind.name], kind.counts.left})},
      {"grove_actor_moves_total", :counter,
       "Actors' moves by kind and outcome, as the actors received them.",
       for(
         kind <- kinds,
         outcome <- Stats.outcomes(),
         do: {[kind: kind.name, outcome: outcome], kind.counts[outcome]}
       )},
      {"grove_actor_stays_total", :counter,
       "Steps actors of each kind chose to stand still (nothing sent).",
       for(kind <- kinds, do: {[kind: kind.name], kind.counts.stayed})},
      {"grove_actor_rests_total", :counter,
       "Turns actors of each kind let pass where nobody watches (nothing sensed, decided or sent).",
       for(kind <- kinds, do: {[kind: kind.name], kind.counts.rested})},
      {"grove_actor_moves_sent_total", :counter, "Moves the actors sent.", [{[], counts.sent}]},
      {"grove_actor_moves_sent_remote_total", :counter,
       "Moves the actors sent to zones another node of the cluster runs (none on a node alone).",
       [{[], counts.sent_remote}]},
      {"grove_actor_moves_skipped_total", :counter,
       "Moves the actors skipped rather than queue: the previous one unanswered, " <>
         "the herd's moves in flight at their limit, or the herd late.",
       for(reason <- Stats.skip_reasons(), do: {[reason: reason], counts[:"skipped_#{reason}"]})},
      {"grove_actor_moves_in_flight", :gauge, "Actors' moves sent and not yet answered.",
       [{[], counts.in_flight}]},
      {"grove_actor_moves_expired_total", :counter,
       "Actors' moves given up on for want of an outcome.", [{[], counts.expired}]},
      {"grove_actor_joins_retried_total", :counter,
       "Actors' joins refused busy or timed out, tried again later.", [{[], counts.join_retried}]}
    ]
  end

  @impl true
  def reading(name), do: %{stats: Stats.read(Actors.stats(name)), kinds: Actors.by_kind(name)}

  @impl true
  def sample(_name, before, now, seconds) do
    latency = Histogram.diff(now.stats.latency, before.stats.latency)
    skipped = Stats.skipped(now.stats.counts) - Stats.skipped(before.stats.counts)

    fields = %{
      actor_p50_ms: to_ms(Histogram.percentile(latency, 50)),
      actor_p99_ms: to_ms(Histogram.percentile(latency, 99)),
      actor_skipped_per_s: round(skipped / seconds),
      kinds: kind_rates(before.kinds, now.kinds, seconds)
    }

    {fields, %{}}
  end

  # Each kind's actors and, over the sample, its moves, those that went
  # through, and its stays, per second.
  defp kind_rates(before, now, seconds) do
    earlier = Map.new(before, &{&1.name, &1.counts})
    answered = fn counts -> Enum.reduce(Stats.outcomes(), 0, &(&2 + counts[&1])) end

    for kind <- now do
      was = Map.get(earlier, kind.name, kind.counts)

      %{
        name: kind.name,
        emoji: kind.emoji,
        actors: kind.actors,
        moves_per_s: per_second(answered.(kind.counts), answered.(was), seconds),
        ok_per_s: per_second(kind.counts.ok, was.ok, seconds),
        stayed_per_s: per_second(kind.counts.stayed, was.stayed, seconds)
      }
    end
  end
end
