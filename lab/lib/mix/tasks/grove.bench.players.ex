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
    * `--act-every N` - one step in N of each player an action of the
      game (`make run`'s: the orchard's `pick`) instead of a move; the
      stages give the actions' round trip beside the moves' (default none)
    * `--say-every MS` - each player also says a line every MS
      milliseconds (nearby chat); the stages give the lines' round trip
      beside the moves' (default none); with `--crowd`, chat in a crowd
    * `--cores SERVER,LOAD` - the cores to pin them to (default `0,1`)
    * `--shared` - for a load one core cannot hold: the server on both
      cores with two schedulers, and the load, still an OS process of its
      own with one scheduler, on both cores beside it (the load's own CPU
      is printed, so what the server had is known)
    * `--json PATH`, `--report PATH` - the load's reports, as for `mix grove.load`
    * `--sample-every S` - a soak: sample the server's gauges every S seconds
      and report which grow (see `mix help grove.load`); for example half
      the knee for thirty minutes:
      `mix grove.bench.players --stages 2000 --stage-seconds 1800 --sample-every 5`
    * `--crowd press|mill`, `--crowd-at corner|middle|X,Y`, `--crowd-radius N`,
      `--crowd-approach-ms MS`, `--crowd-spawn N` - the players gather in a crowd (see
      `mix help grove.load`); for example 1,000 binary players pressing in
      at the middle of a zone, given 90 s to get there:
      `mix grove.bench.players --encoding binary --stages 1000 --crowd press --crowd-at middle --settle 90`;
      with a crowd the server's new players start within `--crowd-spawn N`
      cells of its point (default 40: `GROVE_PLAYER_SPAWN`), and walk the rest

  The world is `make run`'s unless told otherwise:

    * `--world WIDTHxHEIGHT` - its size in cells (`GROVE_WIDTH`, `GROVE_HEIGHT`)
    * `--zones always|on_demand`, `--zone-idle-ms MS` - whether zones
      start on demand and sleep after MS idle (`GROVE_ZONES`,
      `GROVE_ZONE_IDLE_MS`)
    * `--game NAME|off` - its game (`GROVE_GAME`)

  and the players may walk otherwise:

    * `--walk straight`, `--move-every MS`, `--every S`, `--retries N` -
      passed to the load (see `mix help grove.load`); for example 2,000 players walking
      straight at five steps a second for ten minutes across a world of
      zones on demand that sleep after 20 s, its memory read each minute:
      `mix grove.bench.players --encoding binary --actors 0 --world 15000x15000 --zones on_demand --zone-idle-ms 20000 --walk straight --move-every 200 --stages 2000 --stage-seconds 600 --every 60 --sample-every 5`

  Needs Linux's `taskset` and two cores; it says so and stops otherwise.
  The server's data (its SQLite file) goes to a temporary folder.
  """

  use Mix.Task

  alias Grove.Load.Server

  @switches [
    stages: :string,
    encoding: :string,
    stage_seconds: :integer,
    settle: :integer,
    baseline_seconds: :integer,
    ramp: :integer,
    check_views: :string,
    actors: :integer,
    act_every: :integer,
    say_every: :integer,
    cores: :string,
    shared: :boolean,
    json: :string,
    report: :string,
    sample_every: :integer,
    crowd: :string,
    crowd_at: :string,
    crowd_radius: :integer,
    crowd_approach_ms: :integer,
    crowd_spawn: :integer,
    world: :string,
    zones: :string,
    zone_idle_ms: :integer,
    game: :string,
    walk: :string,
    move_every: :integer,
    every: :integer,
    retries: :integer
  ]

  @impl true
  def run(args) do
    opts = Mix.Grove.parse!(args, @switches, "grove.bench.players")

    System.find_executable("taskset") || Mix.raise("needs taskset (util-linux)")

    if System.schedulers_online() < 2,
      do: Mix.raise("needs two cores, one for the server and one for the load")

    {server_core, load_core} =
      if opts[:shared], do: {"0,1", "0,1"}, else: cores(opts[:cores] || "0,1")

    server_erl =
      if opts[:shared], do: two_cores_erl_options(), else: Server.one_core_erl_options()

    Mix.Task.run("compile")

    port = Grove.Ports.free()

    data =
      Path.join(
        System.tmp_dir!(),
        "grove-bench-players-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    server_env =
      [
        {"GROVE_PORT", to_string(port)},
        {"GROVE_DATA", data},
        {"GROVE_ACTORS", to_string(opts[:actors] || 20_000)},
        {"ELIXIR_ERL_OPTIONS", server_erl},
        {"MIX_ENV", to_string(Mix.env())}
      ] ++ crowd_spawn(opts) ++ world_env(opts)

    info(
      "bench: server on core#{if opts[:shared], do: "s"} #{server_core} (port #{port}), " <>
        "load on core#{if opts[:shared], do: "s"} #{load_core}"
    )

    server = Server.start(core: server_core, env: server_env, label: "server")

    try do
      server_pid = Server.await(server, port, &relay_error/1)
      info("bench: server up (OS pid #{server_pid}); the world fills before the baseline")

      load_args = load_args(opts, port, server_pid)

      load =
        Server.start(
          core: load_core,
          command: load_args,
          # The load is the lab's own task: it runs here, not in Grove's directory.
          cd: File.cwd!(),
          env: [
            {"ELIXIR_ERL_OPTIONS", Server.one_core_erl_options()},
            {"MIX_ENV", to_string(Mix.env())}
          ],
          label: "load"
        )

      status = relay(load, server)
      if status != 0, do: Mix.raise("the load run failed (exit status #{status})")
    after
      Server.stop(server)
      File.rm_rf(data)
    end
  end

  # A crowd forms in seconds when the players start near its point rather
  # than anywhere on the world (a thousand players walking 500 cells would
  # cost the server more than the crowd): the server's spawn area is the
  # square of `--crowd-spawn` cells around it. The bench's world is the
  # default one, 1000 x 1000 cells in zones of 50.
  defp crowd_spawn(opts) do
    if opts[:crowd] do
      at =
        case opts[:crowd_at] || "corner" do
          "corner" -> :corner
          "middle" -> :middle
          cell -> cell |> String.split(",") |> Enum.map(&String.to_integer/1) |> List.to_tuple()
        end

      {x, y} = Grove.Load.Crowd.place(at, 1000, 1000, 50)
      reach = opts[:crowd_spawn] || 40

      area = [
        max(x - reach, 0),
        max(y - reach, 0),
        min(x + reach + 1, 1000),
        min(y + reach + 1, 1000)
      ]

      [{"GROVE_PLAYER_SPAWN", Enum.join(area, ",")}]
    else
      []
    end
  end

  # The world's size, zones and game, when not `make run`'s.
  defp world_env(opts) do
    size =
      case opts[:world] do
        nil ->
          []

        text ->
          case String.split(text, "x") |> Enum.map(&Integer.parse/1) do
            [{w, ""}, {h, ""}] when w > 0 and h > 0 ->
              [{"GROVE_WIDTH", to_string(w)}, {"GROVE_HEIGHT", to_string(h)}]

            _ ->
              Mix.raise("--world takes WIDTHxHEIGHT, like 15000x15000, got #{inspect(text)}")
          end
      end

    size ++
      for {key, name} <- [
            zones: "GROVE_ZONES",
            zone_idle_ms: "GROVE_ZONE_IDLE_MS",
            game: "GROVE_GAME"
          ],
          value = opts[key],
          do: {name, to_string(value)}
  end

  # As `make run` would run on both cores, without idle schedulers spinning.
  defp two_cores_erl_options, do: "+S 2:2 +sbwt none +sbwtdcpu none +sbwtdio none"

  defp cores(text) do
    case String.split(text, ",") |> Enum.map(&Integer.parse/1) do
      [{a, ""}, {b, ""}] when a != b -> {a, b}
      _ -> Mix.raise("--cores takes two different core numbers, like 0,1")
    end
  end

  # Prints the load's lines as they come (and the server's errors) until the load ends.
  defp relay(%Server{port: load} = loading, %Server{port: server} = serving) do
    receive do
      {^load, {:data, {_eol, line}}} ->
        IO.puts(line)
        relay(loading, serving)

      {^server, {:data, {_eol, line}}} ->
        relay_error(line)
        relay(loading, serving)

      {^load, {:exit_status, status}} ->
        status
    end
  end

  defp relay_error(line),
    do: if(String.contains?(line, "[error]"), do: info("server: " <> line))

  defp info(line), do: Mix.shell().info(line)

  @doc false
  # The load's command line: `mix grove.load ws`, with the options that are its own.
  @spec load_args(keyword(), :inet.port_number(), non_neg_integer()) :: [String.t()]
  def load_args(opts, port, server_pid) do
    ([
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
       if(opts[:act_every], do: ["--act-every", to_string(opts[:act_every])], else: []) ++
       if(opts[:say_every], do: ["--say-every", to_string(opts[:say_every])], else: []) ++
       if(opts[:sample_every],
         do: ["--sample-every", to_string(opts[:sample_every])],
         else: []
       ) ++
       if(opts[:report], do: ["--report", opts[:report]], else: []) ++
       for(
         key <- [
           :crowd,
           :crowd_at,
           :crowd_radius,
           :crowd_approach_ms,
           :walk,
           :move_every,
           :every,
           :retries
         ],
         value = opts[key],
         do: ["--#{String.replace(to_string(key), "_", "-")}", to_string(value)]
       ))
    |> List.flatten()
  end
end
