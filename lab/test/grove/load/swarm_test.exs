defmodule Grove.Load.SwarmTest do
  # A swarm's players against a stand-in server that refuses upgrades with
  # `503 server_busy` and a `Retry-After`, as a gateway too busy to start a
  # player in time does: each player tries again after it, and counts as
  # failed only once its retries have run out. Its wait before a try
  # again is the test's to give (`:back_off`), not a real second's.
  use ExUnit.Case, async: true

  import Grove.WorldCase, only: [eventually: 1]

  alias Grove.BusyServer
  alias Grove.Load.{Stats, Swarm}
  alias Grove.Metrics.Histogram

  @terrain %{width: 20, cells: :binary.copy(<<0>>, 400)}

  test "an upgrade refused with Retry-After is tried again after it: late, not failed" do
    port = busy_server(2)
    stats = Stats.new()
    swarm = swarm(port, stats, 3)
    Swarm.add(swarm, 1)

    eventually(fn -> assert Stats.read(stats).counts.connected == 1 end)
    reading = Stats.read(stats)
    assert %{started: 1, connect_retries: 2, connect_failures: 0} = reading.counts
    # One connect time, the player's, from its first try: none for the tries refused.
    assert Histogram.count(reading.connect) == 1
    Swarm.stop(swarm)
  end

  test "a player whose retries run out is counted as failed once, its retries apart" do
    assert %{connected: 0, connect_retries: 1, connect_failures: 1} = refused_always(1)
  end

  # A player waiting to try again is neither connected nor failed: a run
  # that ends meanwhile reports it pending.
  test "a player waiting to try again after Retry-After counts as pending until it tries" do
    port = busy_server(1)
    stats = Stats.new()
    me = self()

    back_off = fn seconds ->
      send(me, {:backing_off, self(), seconds})
      receive do: (:go -> :ok)
    end

    swarm = swarm(port, stats, 3, back_off)
    Swarm.add(swarm, 1)

    assert_receive {:backing_off, player, 1}, 60_000
    # A failed test leaves no player waiting.
    on_exit(fn -> send(player, :go) end)
    assert %{connect_pending: 1, connected: 0, connect_failures: 0} = Stats.read(stats).counts
    send(player, :go)

    eventually(fn -> assert Stats.read(stats).counts.connected == 1 end)
    assert %{connect_pending: 0, connect_retries: 1} = Stats.read(stats).counts
    Swarm.stop(swarm)
  end

  # A server that asks for an hour does not park a run's players for it.
  test "a Retry-After is waited for 30 s at most, with a jitter of up to as much again" do
    for _ <- 1..100 do
      assert Swarm.backoff_ms(3600) in 30_001..60_000
      assert Swarm.backoff_ms(0) in 1001..2000
      assert Swarm.backoff_ms(2) in 2001..4000
    end
  end

  test "with no retries a refusal is a failure at once" do
    assert %{connected: 0, connect_retries: 0} = refused_always(0)
  end

  # The counts of a run of one player refused every time, once it has
  # failed: after its `retries` have run out.
  defp refused_always(retries) do
    stats = Stats.new()
    swarm = swarm(busy_server(:always), stats, retries)
    Swarm.add(swarm, 1)

    eventually(fn -> assert Stats.read(stats).counts.connect_failures == 1 end)
    counts = Stats.read(stats).counts
    Swarm.stop(swarm)
    counts
  end

  # The tries again wait for nothing but the test: no real second goes by.
  defp swarm(port, stats, retries, back_off \\ fn _seconds -> :ok end) do
    {:ok, swarm} =
      Swarm.start_link(
        host: "127.0.0.1",
        port: port,
        path: "/ws",
        encoding: :json,
        move_every: 1000,
        stats: stats,
        terrain: @terrain,
        retries: retries,
        back_off: back_off
      )

    swarm
  end

  # Refuses the first `refusals` upgrades (or all of them), then answers
  # the handshake and holds the socket, saying nothing.
  defp busy_server(refusals) do
    BusyServer.start(refusals, fn socket, head ->
      [_, key] = Regex.run(~r/sec-websocket-key: *([^\r\n]+)/i, head)
      :ok = :gen_tcp.send(socket, Grove.Gateway.WebSocket.handshake(String.trim(key)))
    end)
  end
end
