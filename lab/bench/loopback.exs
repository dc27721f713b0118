# What a loopback socket write and read cost the core that makes them: the
# floor under any per-player cost. Two OS processes, each on a core of its
# own; the measuring side reads its CPU time from /proc.
#
#   taskset -c 0 elixir bench/loopback.exs writer 5555 500 10 200 30 &   # measures
#   taskset -c 1 elixir bench/loopback.exs reader 5555 500
#
#   taskset -c 0 elixir bench/loopback.exs receiver 5556 500 30 &        # measures
#   taskset -c 1 elixir bench/loopback.exs sender 5556 500 10
#
# writer PORT SOCKETS HZ BYTES SECONDS: accepts SOCKETS connections, writes
# BYTES to each HZ times a second (one port_command each), prints the CPU
# per write. receiver PORT SOCKETS SECONDS: accepts, reads (active, 100 at a
# time), prints the CPU per packet read. reader and sender are the other ends.

cpu_us = fn ->
  fields = File.read!("/proc/self/stat") |> String.split(") ") |> Enum.at(1) |> String.split(" ")
  (String.to_integer(Enum.at(fields, 11)) + String.to_integer(Enum.at(fields, 12))) * 10_000
end

accept = fn port, n, active ->
  opts = [:binary, active: false, reuseaddr: true, nodelay: true, backlog: 4096]
  {:ok, listen} = :gen_tcp.listen(port, opts)

  for _ <- 1..n,
      do:
        (
          {:ok, s} = :gen_tcp.accept(listen)
          :ok = :inet.setopts(s, active: active)
          s
        )
end

connect = fn port, n ->
  for _ <- 1..n do
    {:ok, s} = :gen_tcp.connect(~c"127.0.0.1", port, [:binary, active: 100, nodelay: true])
    s
  end
end

# Keeps a process's sockets read, forever.
swallow = fn swallow ->
  receive do
    {:tcp_passive, s} -> :inet.setopts(s, active: 100)
    _ -> :ok
  end

  swallow.(swallow)
end

case System.argv() do
  ["writer" | args] ->
    [port, n, hz, bytes, seconds] = Enum.map(args, &String.to_integer/1)
    sockets = accept.(port, n, false)
    data = :binary.copy("x", bytes)
    {cpu0, t0} = {cpu_us.(), System.monotonic_time(:millisecond)}

    for _ <- 1..(hz * seconds) do
      started = System.monotonic_time(:millisecond)
      for s <- sockets, do: :erlang.port_command(s, data)
      Process.sleep(max(div(1000, hz) - (System.monotonic_time(:millisecond) - started), 0))
    end

    writes = n * hz * seconds
    cpu = cpu_us.() - cpu0
    elapsed = System.monotonic_time(:millisecond) - t0

    IO.puts(
      "writes #{writes} of #{bytes} B in #{elapsed} ms: CPU #{div(cpu, 1000)} ms, " <>
        "#{Float.round(cpu / writes, 1)} us a write"
    )

  ["reader", port, n] ->
    _ = connect.(String.to_integer(port), String.to_integer(n))
    swallow.(swallow)

  ["receiver" | args] ->
    [port, n, seconds] = Enum.map(args, &String.to_integer/1)
    _ = accept.(port, n, 100)
    {cpu0, deadline} = {cpu_us.(), System.monotonic_time(:millisecond) + seconds * 1000}

    count = fn count, k ->
      left = deadline - System.monotonic_time(:millisecond)

      receive do
        {:tcp, _s, _data} -> count.(count, k + 1)
        {:tcp_passive, s} -> :inet.setopts(s, active: 100) && count.(count, k)
      after
        max(left, 0) -> k
      end
    end

    packets = count.(count, 0)
    cpu = cpu_us.() - cpu0

    IO.puts(
      "reads #{packets}: CPU #{div(cpu, 1000)} ms, #{Float.round(cpu / max(packets, 1), 1)} us a packet read"
    )

  ["sender" | args] ->
    [port, n, hz] = Enum.map(args, &String.to_integer/1)
    sockets = connect.(port, n)
    data = :binary.copy("m", 20)

    Stream.repeatedly(fn ->
      started = System.monotonic_time(:millisecond)
      for s <- sockets, do: :gen_tcp.send(s, data)
      Process.sleep(max(div(1000, hz) - (System.monotonic_time(:millisecond) - started), 0))
    end)
    |> Stream.run()
end
