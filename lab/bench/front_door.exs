# What the gateway's front door (Grove.Gateway.FrontDoor) costs a request
# head: Yaws's own reads of a head (the request line in `http` mode, then
# each header line in `httph` mode, as yaws:http_get_headers/2 does them)
# from a socket opened with the front door as its TCP module, and from a
# plain one, in turns in one run. Clients in the same VM send small
# kept-alive requests; the server side answers each with a fixed response.
# The figure is the VM's CPU time per request, read from /proc (clients
# and server: the clients' share is the same in both, so the difference
# is the front door's), which a busy machine disturbs less than the rate.
#
#   mix run --no-start bench/front_door.exs [REQUESTS] [HEADERS] [CLIENTS]     (in lab/)
#
# (with ELIXIR_ERL_OPTIONS="+sbwt none +sbwtdcpu none +sbwtdio none", so
# that schedulers spinning while idle do not count as CPU)
#
# defaults: 20000 requests per client and turn, 9 headers, 4 clients.

cpu_us = fn ->
  fields = File.read!("/proc/self/stat") |> String.split(") ") |> Enum.at(1) |> String.split(" ")
  (String.to_integer(Enum.at(fields, 11)) + String.to_integer(Enum.at(fields, 12))) * 10_000
end

[requests, headers, clients] =
  case System.argv() do
    [] -> [20_000, 9, 4]
    args -> Enum.map(args, &String.to_integer/1)
  end

# The front door reads its limits from the running gateway's settings.
:persistent_term.put(Grove.Gateway, %{
  max_uri: 8192,
  max_headers: 32_768,
  max_body: 65_536,
  stats: Grove.Gateway.Stats.new()
})

request =
  IO.iodata_to_binary([
    "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n",
    for(n <- 2..headers//1, do: "X-Header-#{n}: some value of a usual length\r\n"),
    "\r\n"
  ])

response = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

# Yaws's reads of one head, as in yaws.erl (2.1.1).
read_head = fn socket ->
  :ok = :inet.setopts(socket, packet: :http, packet_size: 16_384)
  {:ok, {:http_request, _, _, _}} = :gen_tcp.recv(socket, 0, 5000)

  Stream.repeatedly(fn ->
    :ok = :inet.setopts(socket, packet: :httph, packet_size: 16_384)
    :gen_tcp.recv(socket, 0, 5000)
  end)
  |> Enum.find(&(&1 == {:ok, :http_eoh}))
end

serve = fn listener ->
  {:ok, socket} = :gen_tcp.accept(listener)

  Enum.each(1..requests, fn _ ->
    read_head.(socket)
    :ok = :inet.setopts(socket, packet: :raw)
    :ok = :gen_tcp.send(socket, response)
  end)
end

run = fn label, extra ->
  opts = [:binary, active: false, ip: {127, 0, 0, 1}, backlog: 64] ++ extra
  {:ok, listener} = :gen_tcp.listen(0, opts)
  {:ok, port} = :inet.port(listener)
  started = System.monotonic_time(:microsecond)
  cpu = cpu_us.()
  servers = for _ <- 1..clients, do: Task.async(fn -> serve.(listener) end)

  senders =
    for _ <- 1..clients do
      Task.async(fn ->
        {:ok, socket} = :gen_tcp.connect(~c"127.0.0.1", port, [:binary, active: false])

        Enum.each(1..requests, fn _ ->
          :ok = :gen_tcp.send(socket, request)
          {:ok, _} = :gen_tcp.recv(socket, byte_size(response), 5000)
        end)
      end)
    end

  Enum.each(senders ++ servers, &Task.await(&1, :infinity))
  per_request = (cpu_us.() - cpu) / (clients * requests)
  seconds = (System.monotonic_time(:microsecond) - started) / 1_000_000
  :gen_tcp.close(listener)
  rate = round(clients * requests / seconds)

  IO.puts(
    "#{label}: #{Float.round(per_request, 1)} µs of CPU a request, " <>
      "#{rate} requests/s (#{clients} clients, #{headers} headers)"
  )

  per_request
end

for round <- 1..3 do
  plain = run.("plain :inet_tcp", [])
  door = run.("front door     ", tcp_module: Grove.Gateway.FrontDoor)
  IO.puts("round #{round}: the front door adds #{Float.round(door - plain, 1)} µs a request\n")
end
