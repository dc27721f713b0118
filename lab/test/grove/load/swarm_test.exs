defmodule Grove.Load.SwarmTest do
  # A swarm's players against a stand-in server that refuses upgrades with
  # `503 server_busy` and a `Retry-After`, as a gateway too busy to start a
  # player in time does: each player tries again after it, and counts as
  # failed only once its retries have run out.
  use ExUnit.Case, async: true

  import Grove.WorldCase, only: [eventually: 1]

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
    port = busy_server(:always)
    stats = Stats.new()
    swarm = swarm(port, stats, 1)
    Swarm.add(swarm, 1)

    eventually(fn -> assert Stats.read(stats).counts.connect_failures == 1 end)
    assert %{connected: 0, connect_retries: 1, connect_failures: 1} = Stats.read(stats).counts
    Swarm.stop(swarm)
  end

  test "with no retries a refusal is a failure at once" do
    port = busy_server(:always)
    stats = Stats.new()
    swarm = swarm(port, stats, 0)
    Swarm.add(swarm, 1)

    eventually(fn -> assert Stats.read(stats).counts.connect_failures == 1 end)
    assert %{connected: 0, connect_retries: 0} = Stats.read(stats).counts
    Swarm.stop(swarm)
  end

  defp swarm(port, stats, retries) do
    {:ok, swarm} =
      Swarm.start_link(
        host: "127.0.0.1",
        port: port,
        path: "/ws",
        encoding: :json,
        move_every: 1000,
        stats: stats,
        terrain: @terrain,
        retries: retries
      )

    swarm
  end

  # Refuses the first `refusals` upgrades (or all of them), then answers
  # the handshake and holds the socket, saying nothing.
  defp busy_server(refusals) do
    {:ok, listener} = :gen_tcp.listen(0, [:binary, active: false, reuseaddr: true])
    {:ok, port} = :inet.port(listener)
    server = spawn_link(fn -> serve(listener, refusals, []) end)
    on_exit(fn -> Process.exit(server, :kill) end)
    port
  end

  defp serve(listener, refusals, held) do
    {:ok, socket} = :gen_tcp.accept(listener)
    head = read_head(socket, <<>>)

    if refusals == :always or refusals > 0 do
      body = ~s({"error":"server_busy","message":"try again shortly"})

      :ok =
        :gen_tcp.send(socket, [
          "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\n",
          "content-length: #{byte_size(body)}\r\nconnection: close\r\n\r\n",
          body
        ])

      :gen_tcp.close(socket)
      serve(listener, if(refusals == :always, do: :always, else: refusals - 1), held)
    else
      [_, key] = Regex.run(~r/sec-websocket-key: *([^\r\n]+)/i, head)
      :ok = :gen_tcp.send(socket, Grove.Gateway.WebSocket.handshake(String.trim(key)))
      serve(listener, 0, [socket | held])
    end
  end

  defp read_head(socket, acc) do
    if String.contains?(acc, "\r\n\r\n") do
      acc
    else
      {:ok, data} = :gen_tcp.recv(socket, 0)
      read_head(socket, acc <> data)
    end
  end
end
