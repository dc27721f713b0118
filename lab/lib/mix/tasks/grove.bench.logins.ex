defmodule Mix.Tasks.Grove.Bench.Logins do
  @shortdoc "A login storm against the store, one commit per write and group commit side by side"

  @moduledoc """
  Account creations per second and a launch-day arrival, with the store
  committing every write on its own (`GROVE_STORE_BATCH=1`, as Grove did)
  and in groups (the default), side by side in one run, on SQLite and,
  given `--postgres URL`, on PostgreSQL.

  The server (`mix run`, no actors, the per-address login limit raised) is
  pinned to one core with one scheduler; this task, which runs the load
  (`Grove.Load.HttpRun`), pins itself to the other. For each engine and
  each way of committing it starts a fresh server and runs:

    * `storm`: `--storm-users` users logging in back to back as new
      devices for `--storm-seconds` (each login creates an account):
      creations per second, the p99 of a login;
    * `arrival`: `--users` users arriving at `--ramp` a second, each
      logging in then reading `GET /api/me` ten times a second apart (the
      Gamend flow): success, the p99 of a login and of a read.

  Refused logins are not tried again (`retries: 0`): every 503 counts.

  With `--stages N,N,...` it then looks for the knee of the Gamend flow
  on the group-commit server: each stage keeps N users going for
  `--stage-seconds` (each logs in as a new device, reads `me` ten times a
  second apart, and starts again on its kept-alive connection; users
  connect from `--sources` loopback addresses in turn, default 8), ramping
  at a tenth of N a second, and
  prints the reads' p99, the success rate, requests per second and the CPU
  the server and the load each used (a share of one core). The knee is the
  last stage with reads p99 <= 50 ms and 100 % success. With `--perf`,
  the server runs with the JIT's perf map (`+JPperf true`) and each stage
  samples it with `perf record` for five seconds half-way through, then
  prints where the server core went (the top of `perf report`).

      mix grove.bench.logins
      scripts/scratch-postgres start /tmp/grove-pg-bench 5544
      mix grove.bench.logins --postgres postgres://grove@127.0.0.1:5544/postgres

  Options: `--storm-users N` (default 200), `--storm-seconds S` (10),
  `--users N` (4000), `--ramp N` (400), `--modes 1,500` (the batch sizes
  to compare), `--cores SERVER,LOAD` (`0,1`), `--postgres URL`,
  `--skip-arrival`, `--stages N,N,...`, `--stage-seconds S` (30), `--perf`,
  `--life off` (the world without its bacteria, `GROVE_LIFE=off`),
  `--accept high,normal` (the priorities to accept connections at,
  `GROVE_ACCEPT_PRIORITY`; default `high`).
  """

  use Mix.Task

  alias Grove.Load.{HttpRun, Server}

  @switches [
    storm_users: :integer,
    storm_seconds: :integer,
    users: :integer,
    ramp: :integer,
    modes: :string,
    cores: :string,
    postgres: :string,
    skip_arrival: :boolean,
    stages: :string,
    stage_seconds: :integer,
    perf: :boolean,
    life: :string,
    accept: :string,
    sources: :integer
  ]

  @impl true
  def run(args) do
    opts = Mix.Grove.parse!(args, @switches, "grove.bench.logins")
    System.find_executable("taskset") || Mix.raise("needs taskset (util-linux)")
    [server_core, load_core] = opts |> Keyword.get(:cores, "0,1") |> String.split(",")
    Mix.Task.run("compile")
    Application.ensure_all_started(:crypto)

    # The load: this VM, every thread of it, on its own core.
    {_, 0} =
      System.cmd("taskset", ["-a", "-pc", load_core, List.to_string(:os.getpid())],
        stderr_to_stdout: true
      )

    engines =
      [{"sqlite", []}] ++
        if(opts[:postgres],
          do: [{"postgres", [{"GROVE_DATABASE_URL", opts[:postgres]}]}],
          else: []
        )

    modes = opts |> Keyword.get(:modes, "1,500") |> String.split(",")
    accepts = opts |> Keyword.get(:accept, "high") |> String.split(",")

    info(
      "bench logins: server on core #{server_core} (one scheduler), load on core #{load_core}; " <>
        "commit #{Enum.join(modes, " and ")} requests at once"
    )

    rows =
      for {engine, env} <- engines, batch <- modes, accept <- accepts do
        measure(engine, batch, [{"GROVE_ACCEPT_PRIORITY", accept} | env], server_core, opts)
        |> Map.put(:accept, accept)
      end

    info("")

    info(
      "| engine | batch | accept | creations/s | storm p99 | arrival success | login p99 | me p99 |"
    )

    info("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")

    for row <- rows do
      info(
        "| #{row.engine} | #{row.batch} | #{row.accept} | #{row.creations} | #{row.storm_p99} ms | " <>
          "#{row.success} | #{row.login_p99} | #{row.me_p99} |"
      )
    end

    if opts[:stages], do: knee(opts, server_core)
  end

  defp knee(opts, core) do
    stages = opts[:stages] |> String.split(",") |> Enum.map(&String.to_integer/1)
    seconds = opts[:stage_seconds] || 30
    files = open_file_limit()

    # A user holds a connection, and so a file in the load and one in the
    # server (which runs under the same limit).
    if Enum.max(stages) + 1000 > files do
      Mix.raise(
        "a stage of #{Enum.max(stages)} users needs as many open files in the load and in " <>
          "the server, and this machine allows a process #{files} (ulimit -n)"
      )
    end

    port = Grove.Ports.free()

    data =
      Path.join(
        System.tmp_dir!(),
        "grove-bench-knee-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    server =
      Server.start(
        core: core,
        label: "server",
        env: [
          {"GROVE_PORT", to_string(port)},
          {"GROVE_DATA", data},
          {"GROVE_ACTORS", "0"},
          {"GROVE_LOGIN_RATE", "1000000"},
          {"GROVE_LIFE", opts[:life] || "on"},
          {"ELIXIR_ERL_OPTIONS",
           Server.one_core_erl_options() <> if(opts[:perf], do: " +JPperf true", else: "")},
          {"MIX_ENV", to_string(Mix.env())}
        ]
      )

    try do
      server_pid = Server.await(server, port, fn _ -> :ok end)
      info("")
      info("| users | req/s | success | login p99 | me p99 | server CPU | load CPU |")
      info("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")

      passed =
        for users <- stages do
          server_before = cpu_ticks(server_pid)
          load_before = cpu_ticks(List.to_string(:os.getpid()))
          started = System.monotonic_time(:millisecond)
          profile = if opts[:perf], do: Task.async(fn -> perf(server_pid, div(seconds, 2)) end)

          report =
            HttpRun.run(
              url: "http://127.0.0.1:#{port}",
              users: users,
              ramp: max(div(users, 10), 400),
              reads: 10,
              pause_ms: 1000,
              duration: seconds,
              retries: 0,
              sources: opts[:sources] || 8,
              every: 3600,
              out: fn _ -> :ok end
            )

          wall = (System.monotonic_time(:millisecond) - started) / 1000
          server_cpu = (cpu_ticks(server_pid) - server_before) / 100 / wall
          load_cpu = (cpu_ticks(List.to_string(:os.getpid())) - load_before) / 100 / wall

          info(
            "| #{users} | #{report.req_per_s} | #{report.success_rate} % | " <>
              "#{report.endpoints.device_login.p99_ms} ms | #{report.endpoints.me.p99_ms} ms | " <>
              "#{round(server_cpu * 100)} % | #{round(load_cpu * 100)} % |"
          )

          if profile, do: info(Task.await(profile, :infinity))
          {users, report.success_rate == 100.0 and report.endpoints.me.p99_ms <= 50}
        end

      knee =
        passed
        |> Enum.take_while(fn {_users, ok} -> ok end)
        |> Enum.map(&elem(&1, 0))
        |> List.last()

      info(
        "knee: #{if knee, do: "#{knee} users", else: "below the first stage"} " <>
          "(the last stage with reads p99 <= 50 ms and 100 % success)"
      )
    after
      Server.stop(server)
      File.rm_rf(data)
    end
  end

  # Samples the server for five seconds once `after_s` have passed; the
  # top of the report, as text.
  defp perf(pid, after_s) do
    receive do
    after
      after_s * 1000 -> :ok
    end

    data = Path.join(System.tmp_dir!(), "grove-bench-perf-#{pid}.data")

    {_, _} =
      System.cmd(
        "perf",
        ["record", "-F", "499", "-p", to_string(pid), "-o", data, "--", "sleep", "5"],
        stderr_to_stdout: true
      )

    {report, _} =
      System.cmd(
        "perf",
        ["report", "-i", data, "--stdio", "--sort", "symbol", "--percent-limit", "1.5"],
        stderr_to_stdout: true
      )

    File.rm(data)

    report
    |> String.split("\n")
    |> Enum.reject(&(String.starts_with?(&1, "#") or String.trim(&1) == ""))
    |> Enum.take(25)
    |> Enum.map_join("\n", &("    perf " <> &1))
  end

  # The open files this process may have (its soft limit); the server,
  # started from here, raises its own to the hard limit, no higher.
  defp open_file_limit do
    {limit, 0} = System.cmd("sh", ["-c", "ulimit -n"])

    case String.trim(limit) do
      "unlimited" -> 1_000_000_000
      n -> String.to_integer(n)
    end
  end

  # User and system CPU of an OS process so far, in clock ticks (1/100 s).
  defp cpu_ticks(pid) do
    stat = File.read!("/proc/#{pid}/stat")
    [_, after_name] = String.split(stat, ") ", parts: 2)
    fields = String.split(after_name, " ")
    String.to_integer(Enum.at(fields, 11)) + String.to_integer(Enum.at(fields, 12))
  end

  defp measure(engine, batch, env, core, opts) do
    port = Grove.Ports.free()

    data =
      Path.join(
        System.tmp_dir!(),
        "grove-bench-logins-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    server =
      Server.start(
        core: core,
        label: "server",
        env:
          [
            {"GROVE_PORT", to_string(port)},
            {"GROVE_DATA", data},
            {"GROVE_ACTORS", "0"},
            {"GROVE_LOGIN_RATE", "1000000"},
            {"GROVE_STORE_BATCH", batch},
            {"GROVE_LIFE", opts[:life] || "on"},
            {"ELIXIR_ERL_OPTIONS", Server.one_core_erl_options()},
            {"MIX_ENV", to_string(Mix.env())}
          ] ++ env
      )

    try do
      Server.await(server, port, fn _ -> :ok end)
      url = "http://127.0.0.1:#{port}"
      quiet = fn _ -> :ok end
      seconds = opts[:storm_seconds] || 10

      storm =
        HttpRun.run(
          url: url,
          users: opts[:storm_users] || 200,
          ramp: 100_000,
          reads: 0,
          duration: seconds,
          retries: 0,
          every: 3600,
          out: quiet
        )

      created = storm.endpoints.device_login.requests - Enum.sum(Map.values(storm.errors))
      creations = round(created / storm.seconds)

      info(
        "#{engine}, batch #{batch}: storm #{creations} creations/s, login p99 " <>
          "#{storm.endpoints.device_login.p99_ms} ms, errors #{inspect(storm.errors)}"
      )

      row = %{
        engine: engine,
        batch: batch,
        creations: creations,
        storm_p99: storm.endpoints.device_login.p99_ms,
        success: "-",
        login_p99: "-",
        me_p99: "-"
      }

      if opts[:skip_arrival] do
        row
      else
        arrival =
          HttpRun.run(
            url: url,
            users: opts[:users] || 4000,
            ramp: opts[:ramp] || 400,
            reads: 10,
            pause_ms: 1000,
            retries: 0,
            every: 3600,
            out: quiet
          )

        info(
          "#{engine}, batch #{batch}: arrival #{arrival.success_rate} % success, login p99 " <>
            "#{arrival.endpoints.device_login.p99_ms} ms, me p99 #{arrival.endpoints.me.p99_ms} ms, " <>
            "errors #{inspect(arrival.errors)}"
        )

        %{
          row
          | success: "#{arrival.success_rate} %",
            login_p99: "#{arrival.endpoints.device_login.p99_ms} ms",
            me_p99: "#{arrival.endpoints.me.p99_ms} ms"
        }
      end
    after
      Server.stop(server)
      File.rm_rf(data)
    end
  end

  defp info(line), do: IO.puts(line)
end
