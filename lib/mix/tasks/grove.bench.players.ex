defmodule Mix.Tasks.Grove.Bench.Players do
  @shortdoc "What a player costs the server: server and load pinned to cores of their own"

  @moduledoc """
  Measures what players cost the server, with the server and the load
  generator each pinned to a core of its own, so that the figures are the
  server's and not the load's.

  It starts two OS processes and relays what they print:

    * the server, as `make run` starts it (the default 1000 x 1000 world
      with its 20,000 actors), on core 0 with one scheduler
      (`taskset -c 0`, `+S 1:1`, schedulers that do not spin when idle);
    * the load lab, `mix grove.load ws --stages ...`, on core 1 with one
      scheduler, reading the server's CPU from `/proc` and its memory from
      `/metrics`.

  The load measures the server alone first, then each stage of players in
  turn (ramp, settle, measure), and prints a table: moves/s, the move round
  trip, views/s, bytes per player per second each way, the server's CPU in
  microseconds per player-second beyond the world alone (and all told),
  its memory per player, the load generator's own CPU, and the knee: the
  last stage with p99 <= 100 ms and no error.

      mix grove.bench.players
      mix grove.bench.players --encoding binary --stages 2000,4000,8000 --stage-seconds 60

  Options:

    * `--stages N,N,...` - player counts (default `1000,2000,4000,6000,8000,10000,12000`)
    * `--encoding json|binary` (default json)
    * `--stage-seconds S`, `--settle S`, `--baseline-seconds S`, `--ramp N`,
      `--check-views N|all` - passed to the load (defaults 30, 5, 15, 1000, 100)
    * `--actors N` - actors in the server's world (default 20000, as `make run`)
    * `--cores SERVER,LOAD` - the cores to pin them to (default `0,1`)
    * `--json PATH`, `--report PATH` - the load's reports, as for `mix grove.load`
    * `--sample-every S` - a soak: sample the server's gauges every S seconds
      and report which grow (see `mix help grove.load`); for example half
      the knee for thirty minutes:
      `mix grove.bench.players --stages 2000 --stage-seconds 1800 --sample-every 5`

  Needs Linux's `taskset` and two cores; it says so and stops otherwise.
  The server's data (its SQLite file) goes to a temporary folder.
  """

  use Mix.Task

  @switches [
    stages: :string,
    encoding: :string,
    stage_seconds: :integer,
    settle: :integer,
    baseline_seconds: :integer,
    ramp: :integer,
    check_views: :string,
    actors: :integer,
    cores: :string,
    json: :string,
    report: :string,
    sample_every: :integer
  ]

  @erl_options "+S 1:1 +sbwt none +sbwtdcpu none +sbwtdio none"

  @impl true
  def run(args) do
    {opts, rest, invalid} = OptionParser.parse(args, strict: @switches)

    if rest != [] or invalid != [],
      do:
        Mix.raise(
          "unexpected arguments #{inspect(rest ++ invalid)}; see `mix help grove.bench.players`"
        )

    taskset = System.find_executable("taskset") || Mix.raise("needs taskset (util-linux)")

    if System.schedulers_online() < 2,
      do: Mix.raise("needs two cores, one for the server and one for the load")

    {server_core, load_core} = cores(opts[:cores] || "0,1")
    Mix.Task.run("compile")

    port = Grove.Load.Ports.free()

    data =
      Path.join(System.tmp_dir!(), "grove-bench-players-#{System.unique_integer([:positive])}")

    server_env = [
      {"GROVE_PORT", to_string(port)},
      {"GROVE_DATA", data},
      {"GROVE_ACTORS", to_string(opts[:actors] || 20_000)},
      {"ELIXIR_ERL_OPTIONS", @erl_options},
      {"MIX_ENV", to_string(Mix.env())}
    ]

    info("bench: server on core #{server_core} (port #{port}), load on core #{load_core}")
    server = spawn_pinned(taskset, server_core, ["mix", "run", "--no-halt"], server_env, "server")

    try do
      server_pid = wait_for_server(server, port)
      info("bench: server up (OS pid #{server_pid}); the world fills before the baseline")

      load_args =
        [
          "mix",
          "grove.load",
          "ws",
          "--url",
          "ws://127.0.0.1:#{port}/ws",
          "--server-pid",
          to_string(server_pid),
          "--stages",
          opts[:stages] || "1000,2000,4000,6000,8000,10000,12000",
          "--encoding",
          opts[:encoding] || "json",
          "--stage-seconds",
          to_string(opts[:stage_seconds] || 30),
          "--settle",
          to_string(opts[:settle] || 5),
          "--baseline-seconds",
          to_string(opts[:baseline_seconds] || 15),
          "--ramp",
          to_string(opts[:ramp] || 1000),
          "--check-views",
          opts[:check_views] || "100"
        ] ++
          if(opts[:json], do: ["--json", opts[:json]], else: []) ++
          if(opts[:sample_every], do: ["--sample-every", to_string(opts[:sample_every])], else: []) ++
          if(opts[:report], do: ["--report", opts[:report]], else: [])

      load =
        spawn_pinned(
          taskset,
          load_core,
          load_args,
          [
            {"ELIXIR_ERL_OPTIONS", @erl_options},
            {"MIX_ENV", to_string(Mix.env())}
          ],
          "load"
        )

      status = relay(load)
      if status != 0, do: Mix.raise("the load run failed (exit status #{status})")
    after
      stop(server)
      File.rm_rf(data)
    end
  end

  defp cores(text) do
    case String.split(text, ",") |> Enum.map(&Integer.parse/1) do
      [{a, ""}, {b, ""}] when a != b -> {a, b}
      _ -> Mix.raise("--cores takes two different core numbers, like 0,1")
    end
  end

  # Raises the open-file limit as far as it goes: a socket per player.
  defp spawn_pinned(taskset, core, command, env, label) do
    script = ~S[ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$@"]

    port =
      Port.open({:spawn_executable, taskset}, [
        :binary,
        :exit_status,
        :stderr_to_stdout,
        {:line, 4096},
        env: Enum.map(env, fn {k, v} -> {to_charlist(k), to_charlist(v)} end),
        args: ["-c", to_string(core), "sh", "-c", script, label | command]
      ])

    {port, label}
  end

  defp wait_for_server({port, _label} = server, http_port, tries \\ 600) do
    receive do
      {^port, {:data, {_eol, line}}} ->
        if String.contains?(line, "[error]") or String.contains?(line, "listening"),
          do: info("server: " <> line)

        wait_for_server(server, http_port, tries)

      {^port, {:exit_status, status}} ->
        Mix.raise("the server stopped before it answered (exit status #{status})")
    after
      100 ->
        cond do
          answers?(http_port) -> server_os_pid(port)
          tries > 0 -> wait_for_server(server, http_port, tries - 1)
          true -> Mix.raise("the server did not answer on port #{http_port} within a minute")
        end
    end
  end

  # The shell and taskset exec, so the port's OS process is the BEAM itself.
  defp server_os_pid(port) do
    {:os_pid, pid} = Port.info(port, :os_pid)
    pid
  end

  defp answers?(http_port) do
    case :gen_tcp.connect(~c"127.0.0.1", http_port, [], 200) do
      {:ok, socket} -> :gen_tcp.close(socket) == :ok
      {:error, _} -> false
    end
  end

  # Prints the load's lines as they come (and the server's errors) until the load ends.
  defp relay({port, label}) do
    receive do
      {^port, {:data, {_eol, line}}} ->
        IO.puts(line)
        relay({port, label})

      {_server, {:data, {_eol, line}}} ->
        if String.contains?(line, "[error]"), do: info("server: " <> line)
        relay({port, label})

      {^port, {:exit_status, status}} ->
        status
    end
  end

  defp stop({port, _label}) do
    case Port.info(port, :os_pid) do
      {:os_pid, pid} ->
        System.cmd("kill", ["-TERM", to_string(pid)], stderr_to_stdout: true)
        await_exit(port)

      nil ->
        :ok
    end
  end

  defp await_exit(port) do
    receive do
      {^port, {:exit_status, _}} -> :ok
      {^port, {:data, _}} -> await_exit(port)
    after
      15_000 -> Port.close(port)
    end
  end

  defp info(line), do: Mix.shell().info(line)
end
