defmodule Grove.Gateway.PacerTest do
  use ExUnit.Case, async: true
  doctest Grove.Gateway.Pacer

  alias Grove.Gateway.Pacer

  test "the pace never leaves its bounds and slows as the schedulers get busier" do
    paces = for u <- 0..100, do: Pacer.pace(u / 100, {100, 900}, {0.4, 0.9})
    assert Enum.min(paces) == 100 and Enum.max(paces) == 900
    assert paces == Enum.sort(paces)
  end

  test "the pace starts at the fastest and is read without a message" do
    pace = Pacer.new(250)
    assert Pacer.interval(pace) == 250
  end

  # Limits at which a measure sets the base paces too: what sets them
  # here is the pacer's start, restart or stop.
  @config %{view_ms: 250, view_ms_max: 1000, pace_low: 1.0, pace_high: 1.0}

  test "a pacer that starts, restarts after a crash or stops sets the zones' ticks and the views back to the base" do
    world = :"pacer_world_#{System.unique_integer([:positive])}"

    start_supervised!(
      {Grove.World, name: world, width: 20, height: 20, zone_size: 10, tick: 20, tick_max: 1000}
    )

    config = Map.merge(@config, %{world: world, view_pace: Pacer.new(250)})

    stretch = fn ->
      :ok = Grove.World.pace_ticks(world, 1.0)
      :atomics.put(config.view_pace, 1, 1000)
      assert Grove.World.tick_interval(world) == 1000
    end

    base? = fn ->
      Grove.World.tick_interval(world) == 20 and Pacer.interval(config.view_pace) == 250
    end

    # Under a supervisor of its own, as the gateway keeps it.
    stretch.()

    pacers =
      start_supervised!(%{
        id: :pacers,
        type: :supervisor,
        start: {Supervisor, :start_link, [[{Pacer, config}], [strategy: :one_for_one]]}
      })

    assert base?.()

    stretch.()
    [{Pacer, pacer, _, _}] = Supervisor.which_children(pacers)
    ref = Process.monitor(pacer)
    Process.exit(pacer, :kill)
    assert_receive {:DOWN, ^ref, :process, ^pacer, :killed}

    # Its restart has run its init once its supervisor lists it.
    Grove.WorldCase.eventually(fn ->
      assert [{Pacer, restarted, _, _}] = Supervisor.which_children(pacers)
      assert is_pid(restarted) and restarted != pacer
    end)

    assert base?.()

    # Stopped as the gateway stops it: by its supervisor, as that stops.
    stretch.()
    :ok = stop_supervised(:pacers)
    assert base?.()
  end

  describe "when a player's views are due without an outcome" do
    import Grove.PropCase

    @limits %{view_ms_max: 1000, view_wait_ms: 250, lost_move_ms: 2000}

    test "never before the interval; at it for a player who has not moved for view_ms_max; " <>
           "no later than the wait, or than a move in flight's settling" do
      maybe = fn type -> :proper_types.union([:proper_types.exactly(nil), type]) end

      check(
        forall(
          {:proper_types.integer(0, 10_000), maybe.(:proper_types.integer(0, 3000)),
           maybe.(:proper_types.integer(0, 3000)), :proper_types.integer(0, 3000)},
          fn {view_at, sent_ago, moved_ago, now} ->
            awaiting = sent_ago && now - sent_ago
            moved = moved_ago && now - moved_ago
            due = Pacer.views_due(view_at, awaiting, moved, now, @limits)

            assert due >= view_at
            if awaiting == nil and (moved == nil or moved_ago >= 1000), do: assert(due == view_at)
            if awaiting == nil, do: assert(due <= view_at + 250)
            if awaiting, do: assert(due <= max(view_at, awaiting + 2001))
            # A move in flight is waited for until it could be lost.
            if awaiting, do: assert(due > awaiting + 2000)
          end
        )
      )
    end

    test "view_wait_ms 0 sends a moving player's views at the interval" do
      limits = %{@limits | view_wait_ms: 0}
      assert Pacer.views_due(700, nil, 100, 300, limits) == 700
    end
  end

  test "the gateway refuses a pace that makes no sense, naming the options" do
    assert_raise ArgumentError, ~r/view_ms_max/, fn ->
      Grove.Gateway.start_link(instance: :nowhere, view_ms: 500, view_ms_max: 100)
    end

    assert_raise ArgumentError, ~r/pace_low/, fn ->
      Grove.Gateway.start_link(instance: :nowhere, pace_low: 0.9, pace_high: 0.5)
    end

    assert_raise ArgumentError, ~r/view_wait_ms/, fn ->
      Grove.Gateway.start_link(instance: :nowhere, view_wait_ms: -1)
    end

    assert_raise ArgumentError, ~r/connection_heap/, fn ->
      Grove.Gateway.start_link(instance: :nowhere, connection_heap: 0)
    end
  end
end
