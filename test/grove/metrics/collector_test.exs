defmodule Grove.Metrics.CollectorTest do
  use ExUnit.Case, async: true

  import Grove.WorldCase, only: [eventually: 1]

  alias Grove.Metrics.{Collector, Prometheus, StatsD}

  setup do
    name = :"collector_#{System.unique_integer([:positive])}"

    start_supervised!(
      {Grove,
       name: name,
       world: [width: 40, height: 40, zone_size: 20, tick: 20],
       actors: [kinds: [{Grove.Actors.Walker, 20}, {Grove.Actors.Sheep, 10}], interval: 100],
       gateway: false,
       metrics: [interval: 20, history: 5],
       status_interval: false}
    )

    %{instance: name}
  end

  test "samples every interval, keeping a bounded history", %{instance: instance} do
    eventually(fn -> assert length(Collector.history(instance)) == 5 end)
    [first | _] = samples = Collector.history(instance)
    assert Enum.map(samples, & &1.t) == Enum.sort(Enum.map(samples, & &1.t))
    assert Collector.history(instance, first.t) == tl(samples)

    eventually(fn ->
      sample = Collector.latest(instance)
      assert sample.entities == 30 and sample.actors == 30
      assert sample.moves_per_s > 0
      # Each kind apart, with its emoji, for the dashboard.
      assert [
               %{name: "walker", emoji: "", actors: 20, moves_per_s: walking},
               %{name: "sheep", emoji: "🐑", actors: 10}
             ] = sample.kinds

      assert walking > 0
      assert is_float(sample.scheduler_utilization)
    end)

    assert length(Collector.current(instance, :zone_heat)) == 4
  end

  test "exports Prometheus text: every family with help and type, histograms complete", %{
    instance: instance
  } do
    # (A missing sample must not pass: nil > 0 is true in Erlang's term order.)
    eventually(fn ->
      assert %{moves_per_s: moves, entities: 30} = Collector.latest(instance)
      assert moves > 0
    end)

    text = IO.iodata_to_binary(Prometheus.render(instance))
    lines = String.split(text, "\n", trim: true)

    for line <- lines do
      assert line =~
               ~r/^(# (HELP|TYPE) [a-z_]+ .+|[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [-0-9.e+NaInf]+)$/,
             "not Prometheus text: #{inspect(line)}"
    end

    assert text =~ ~s(grove_moves_total{outcome="ok"})
    assert text =~ "grove_entities 30"
    assert text =~ ~s(grove_zone_tick_duration_seconds_bucket{le="+Inf"})
    assert text =~ "grove_zone_tick_duration_seconds_count"
    assert text =~ "grove_beam_processes"
    assert text =~ "grove_beam_mailbox_max"
    assert text =~ "grove_beam_mailbox_sampled"
    # What the actors shed is exported, by reason, beside what they sent.
    assert text =~ ~s(grove_actor_moves_skipped_total{reason="unanswered"})
    assert text =~ ~s(grove_actor_moves_skipped_total{reason="late"})
    assert text =~ "grove_actor_moves_in_flight"
    assert text =~ "grove_actor_moves_sent_total"
    # Per kind: how many, and their moves by outcome.
    assert text =~ ~s(grove_actors_of_kind{kind="walker"} 20)
    assert text =~ ~s(grove_actors_of_kind{kind="sheep"} 10)
    # Alone, a node owes every actor it is configured with.
    assert text =~ ~s(grove_actors_share{kind="walker"} 20)
    assert text =~ ~s(grove_actors_retired_total{kind="walker"} 0)
    assert text =~ ~s(grove_actor_moves_total{kind="walker",outcome="ok"})
    # The zones' moves above may not have reached their herds yet.
    eventually(fn ->
      assert IO.iodata_to_binary(Prometheus.render(instance)) =~
               ~r/grove_actor_moves_total\{kind="walker",outcome="ok"\} [1-9]/
    end)

    assert text =~ ~s(grove_actor_moves_total{kind="sheep",outcome="blocked"})
    assert text =~ ~s(grove_actor_stays_total{kind="sheep"})
  end

  test "the tick histogram counts the ticks of watched zones", %{instance: instance} do
    # Zones nobody watches have no tick: a viewer makes its zones tick.
    {:ok, _id, _cell} = Grove.World.join(Grove.world(instance), updates: :view, view_radius: 30)

    eventually(fn ->
      {_, :histogram, _, [{[], tick}]} =
        List.keyfind(Collector.metrics(instance), "grove_zone_tick_duration_seconds", 0)

      assert tick.count > 0
      assert {_, cumulative} = List.last(tick.buckets)
      assert cumulative == tick.count
    end)
  end

  # A part's source, as a test double: its metrics and its share of a
  # sample come from its argument, a counter.
  defmodule Part do
    @behaviour Grove.Metrics.Source

    @impl true
    def metrics({name, counter}),
      do: [
        {"part_total", :counter, "Counted by the parts.",
         [{[part: name], :counters.get(counter, 1)}]},
        {"part_#{name}", :gauge, "This part alone.", [{[], 1}]}
      ]

    @impl true
    def reading({_name, counter}), do: :counters.get(counter, 1)

    @impl true
    def sample({name, _counter}, before, now, _seconds),
      do: {%{:"#{name}_counted" => now - before}, %{:"#{name}_now" => now}}
  end

  test "gathers what each source says, a family several export under its one name" do
    instance = :"gathered_#{System.unique_integer([:positive])}"
    [a, b] = for _ <- 1..2, do: :counters.new(1, [])
    :counters.add(a, 1, 3)
    :counters.add(b, 1, 5)
    sources = [{Part, {:a, a}}, {Part, {:b, b}}]

    start_supervised!(
      {Collector, instance: instance, sources: sources, interval: 10, history: 100_000}
    )

    assert [
             {"part_total", :counter, "Counted by the parts.",
              [{[part: :a], 3}, {[part: :b], 5}]},
             {"part_a", :gauge, _, [{[], 1}]},
             {"part_b", :gauge, _, [{[], 1}]}
           ] = Collector.metrics(instance)

    # Each sample holds every part's share; what a part keeps for the latest
    # sample alone is out of the history.
    eventually(fn -> assert Collector.current(instance, :a_now) == 3 end)
    :counters.add(a, 1, 4)

    eventually(fn -> assert Collector.current(instance, :a_now) == 7 end)
    samples = Collector.history(instance)
    assert Enum.sum(for sample <- samples, do: sample.a_counted) == 4
    assert Enum.all?(samples, &(Map.keys(&1) == [:a_counted, :b_counted, :t]))
  end

  test "StatsD lines: counters as increases, gauges as values", %{instance: instance} do
    metrics = Collector.metrics(instance)
    {lines, last} = StatsD.lines(metrics, "grove", %{})
    assert Enum.any?(lines, &(&1 =~ ~r/^grove\.entities:\d+\|g$/))
    assert Enum.any?(lines, &(&1 =~ ~r/^grove\.moves\.ok:\d+\|c$/))

    {again, _} = StatsD.lines(metrics, "grove", last)
    assert "grove.handoffs:0|c" in again
  end

  test "StatsD pushes over UDP", %{instance: instance} do
    {:ok, socket} = :gen_udp.open(0, [:binary, active: true])
    {:ok, port} = :inet.port(socket)
    start_supervised!({StatsD, instance: instance, port: port, interval: 20, prefix: "g"})
    assert_receive {:udp, ^socket, _, _, datagram}, 2000
    assert datagram =~ ~r/^g\.[a-z_.]+:[0-9.]+\|(c|g)/m
    assert byte_size(datagram) <= 1400
  end
end
