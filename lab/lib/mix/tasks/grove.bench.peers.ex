defmodule Mix.Tasks.Grove.Bench.Peers do
  @shortdoc "Grove and the same game on Colyseus, under the same load, in one run"

  @moduledoc """
  Runs the same game on Grove and on Colyseus (`bench/peers/colyseus`), one
  after the other on the same machine, drives both with the same players
  and measures both with the same code (`bench/peers/runner.mjs`), then
  prints one table with the ratios Grove / Colyseus.

  The same game: the world's terrain is exported from the seed
  (`mix grove.export.terrain`) into a file the Colyseus room builds its
  world from and the runner checks every outcome against (and, for Grove,
  against the server's own `GET /terrain`); the same rules, 17 x 17
  viewports, 100 ms tick and `--actors` random walkers moving once a second
  inside the server. The same load: players join, move once a second in a
  random direction, count the views they receive; stages of players as in
  `mix grove.bench.players` (ramp, settle, measure), each stopping at its
  first stage past the knee (p99 > 100 ms or any error).

  Pinning, as in "Players per core" (docs/benchmarks.md): each server on
  core 0 alone (Grove with one scheduler, `+S 1:1`; Node does its work on
  its main thread), the runner on core 1. Both servers' CPU comes from
  `/proc/PID/stat`, their memory from `/proc/PID/status` (resident set).

      make bench-peers-setup        # once: installs the Colyseus packages
      mix grove.bench.peers
      mix grove.bench.peers --stages 250,500,1000,2000 --stage-seconds 20

  Options:

    * `--stages N,N,...` - player counts (default `250,500,1000,2000,3000,4000,5000`)
    * `--stage-seconds S`, `--settle S`, `--baseline-seconds S`, `--ramp N` -
      as for the runner (defaults 20, 5, 10, 500)
    * `--warmup S` - seconds between a server answering and its baseline,
      for its world to fill (default 10)
    * `--actors N` - actors in each server's world (default 20000)
    * `--seed N` - the world's seed (default 1)
    * `--cores SERVER,LOAD` - the cores to pin them to (default `0,1`)
    * `--only grove|colyseus` - run one of the two
    * `--encoding json|binary` - the encoding Grove's players speak (default
      `json`; Colyseus's are binary whatever this says)
    * `--minimap on|off` - whether Grove's players ask for the minimap
      (default `on`; Colyseus's game has none)
    * `--protocol 2|3|4|5|6|7` - the version of the protocol Grove's players speak
      (default 7, the newest; `docs/protocol.md`, "Versions")
    * `--sample PATH` - writes there every frame one Grove player in 20
      reads while a stage is measured, a line each (`OPCODE SIZE BASE64`):
      what the bytes are made of
    * `--nice N` - run both servers and the runner at this niceness (for
      example `-10`, as root), so that other work on a shared machine
      disturbs them less; the same for both (default: unchanged)
    * `--json PATH` - both reports and the ratios as JSON
    * `--report PATH` - the tables as Markdown

  Needs Node (`node` on the PATH), the Colyseus packages (it says how to
  install them and stops otherwise), Linux's `taskset` and two cores.
  """

  use Mix.Task

  alias Grove.Load.Server

  @switches [
    stages: :string,
    stage_seconds: :integer,
    settle: :integer,
    baseline_seconds: :integer,
    ramp: :integer,
    warmup: :integer,
    actors: :integer,
    seed: :integer,
    cores: :string,
    only: :string,
    nice: :integer,
    json: :string,
    report: :string,
    encoding: :string,
    minimap: :string,
    protocol: :integer,
    sample: :string
  ]

  # The lab's bench/peers, wherever the task runs from (its servers run
  # in Grove's own directory).
  @peers Path.expand("../../../bench/peers", __DIR__)
  @install "make bench-peers-setup (npm ci --prefix lab/bench/peers/colyseus --omit=optional --ignore-scripts)"

  @impl true
  def run(args) do
    opts = Mix.Grove.parse!(args, @switches, "grove.bench.peers")

    servers =
      case opts[:only] do
        nil -> [:grove, :colyseus]
        "grove" -> [:grove]
        "colyseus" -> [:colyseus]
        other -> Mix.raise("--only takes grove or colyseus, not #{inspect(other)}")
      end

    System.find_executable("node") || Mix.raise("needs Node (node on the PATH)")
    System.find_executable("taskset") || Mix.raise("needs taskset (util-linux)")

    if :colyseus in servers and not colyseus_installed?(),
      do: Mix.raise("the Colyseus packages are not installed; install them with: #{@install}")

    if System.schedulers_online() < 2,
      do: Mix.raise("needs two cores, one for the server and one for the load")

    cores = cores(opts[:cores] || "0,1")
    Mix.Task.run("compile")

    dir =
      Path.join(
        System.tmp_dir!(),
        "grove-bench-peers-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    File.mkdir_p!(dir)
    terrain = Path.join(dir, "terrain.bin")
    seed = opts[:seed] || 1

    try do
      Mix.Task.run("grove.export.terrain", ~w(--seed #{seed} --out #{terrain}))
      versions = versions(servers)
      info("peers: #{Enum.map_join(versions, ", ", fn {k, v} -> "#{k} #{v}" end)}")

      reports =
        for server <- servers, into: %{} do
          {server, measure(server, opts, cores, terrain, dir)}
        end

      summary = summary(reports, opts)
      Enum.each(table(reports, summary, versions), &IO.puts/1)

      if path = opts[:report],
        do: File.write!(path, Enum.join(table(reports, summary, versions), "\n") <> "\n")

      if path = opts[:json] do
        File.mkdir_p!(Path.dirname(path))

        File.write!(
          path,
          :jiffy.encode(
            %{reports: reports, summary: summary, versions: Map.new(versions)},
            [:pretty]
          )
        )
      end
    after
      File.rm_rf(dir)
    end
  end

  defp colyseus_installed? do
    Enum.all?(~w(core sdk schema ws-transport), fn package ->
      File.exists?(
        Path.join([@peers, "colyseus/node_modules/@colyseus", package, "package.json"])
      )
    end)
  end

  defp cores(text) do
    case String.split(text, ",") |> Enum.map(&Integer.parse/1) do
      [{a, ""}, {b, ""}] when a != b -> {a, b}
      _ -> Mix.raise("--cores takes two different core numbers, like 0,1")
    end
  end

  ## One server, then its load

  defp measure(server, opts, {server_core, load_core}, terrain, dir) do
    port = Grove.Ports.free()
    actors = to_string(opts[:actors] || 20_000)
    info("peers: #{server} on core #{server_core} (port #{port}), runner on core #{load_core}")

    nice = nice(opts)

    started =
      case server do
        :grove ->
          Server.start(
            core: server_core,
            label: "grove",
            command: nice ++ ["mix", "run", "--no-halt"],
            env: [
              {"GROVE_PORT", to_string(port)},
              {"GROVE_DATA", Path.join(dir, "data")},
              # The same game as the Colyseus room: random walkers, no
              # bacteria, and no game of Grove's on top (the default world
              # plays the orchard, which the room does not); every walker
              # takes every turn, seen or not, as the room's do.
              {"GROVE_ACTOR_KINDS", "walker:#{actors}"},
              {"GROVE_LIFE", "off"},
              {"GROVE_GAME", "off"},
              {"GROVE_UNSEEN_EVERY", "1"},
              {"GROVE_SEED", to_string(opts[:seed] || 1)},
              {"ELIXIR_ERL_OPTIONS", Server.one_core_erl_options()},
              {"MIX_ENV", to_string(Mix.env())}
            ]
          )

        :colyseus ->
          Server.start(
            core: server_core,
            label: "colyseus",
            command: nice ++ ["node", Path.join(@peers, "colyseus/server.mjs")],
            env: [{"PORT", to_string(port)}, {"TERRAIN", terrain}, {"ACTORS", actors}]
          )
      end

    try do
      # Colyseus answers on its port before its room is made: its own line
      # says when it is ready. Read first, or waiting for the port would
      # take that line with the others.
      if server == :colyseus, do: await_line(started, "listening on")
      pid = Server.await(started, port, &relay_error(server, &1))
      warmup = opts[:warmup] || 10
      info("peers: #{server} up (OS pid #{pid}); its world fills for #{warmup} s")
      Process.sleep(warmup * 1000)
      json = Path.join(dir, "#{server}.json")

      runner =
        Server.start(
          core: load_core,
          label: "runner",
          command: runner_command(opts, server, port, terrain, pid, json)
        )

      status = relay(server, runner, started)
      if status != 0, do: Mix.raise("the #{server} run failed (exit status #{status})")
      :jiffy.decode(File.read!(json), [:return_maps])
    after
      Server.stop(started)
    end
  end

  # The runner's command line: at the servers' niceness (`--nice`), the
  # runner's own options from the task's.
  @doc false
  def runner_command(opts, server, port, terrain, pid, json) do
    nice(opts) ++
      [
        "node",
        Path.join(@peers, "runner.mjs"),
        "--server",
        to_string(server),
        "--url",
        "http://127.0.0.1:#{port}",
        "--terrain",
        terrain,
        "--server-pid",
        to_string(pid),
        "--stages",
        opts[:stages] || "250,500,1000,2000,3000,4000,5000",
        "--json",
        json
      ] ++
      Enum.flat_map(
        [
          :stage_seconds,
          :settle,
          :baseline_seconds,
          :ramp,
          :encoding,
          :minimap,
          :protocol,
          :sample
        ],
        fn key ->
          case opts[key] do
            nil -> []
            value -> ["--#{String.replace(to_string(key), "_", "-")}", to_string(value)]
          end
        end
      )
  end

  defp nice(opts), do: if(n = opts[:nice], do: ["nice", "-n", to_string(n)], else: [])

  defp await_line(%Server{port: port} = server, text) do
    receive do
      {^port, {:data, {_eol, line}}} ->
        unless String.contains?(line, text), do: await_line(server, text)

      {^port, {:exit_status, status}} ->
        Mix.raise("the #{server.label} stopped (exit status #{status})")
    after
      60_000 -> Mix.raise("the #{server.label} did not say #{inspect(text)} within a minute")
    end
  end

  # Prints the runner's lines as they come (and the server's errors) until it ends.
  defp relay(name, %Server{port: runner} = running, %Server{port: server} = serving) do
    receive do
      {^runner, {:data, {_eol, line}}} ->
        IO.puts("#{name}: #{line}")
        relay(name, running, serving)

      {^server, {:data, {_eol, line}}} ->
        relay_error(name, line)
        relay(name, running, serving)

      {^runner, {:exit_status, status}} ->
        status
    end
  end

  defp relay_error(name, line) do
    if String.contains?(line, "[error]") or String.contains?(line, "Error"),
      do: info("#{name} server: " <> line)
  end

  ## The table

  defp versions(servers) do
    node = System.cmd("node", ["--version"]) |> elem(0) |> String.trim()

    grove = [
      {"grove", Mix.Project.config()[:version]},
      {"otp", System.otp_release()},
      {"elixir", System.version()},
      {"node", node}
    ]

    colyseus =
      if :colyseus in servers do
        for package <- ~w(core schema ws-transport sdk) do
          file = Path.join([@peers, "colyseus/node_modules/@colyseus", package, "package.json"])
          {"@colyseus/#{package}", :jiffy.decode(File.read!(file), [:return_maps])["version"]}
        end
      else
        []
      end

    grove ++ colyseus
  end

  # The headline figures: the knees, and at equal load (the largest stage
  # both passed, else the first) CPU, memory and p99.
  defp summary(reports, _opts) do
    grove = reports[:grove]
    colyseus = reports[:colyseus]

    if grove && colyseus do
      both =
        for g <- grove["stages"],
            c <- colyseus["stages"],
            g["players_wanted"] == c["players_wanted"],
            g["passed"] and c["passed"],
            do: {g, c}

      {g, c} =
        case List.last(both) do
          nil -> {hd(grove["stages"]), hd(colyseus["stages"])}
          pair -> pair
        end

      %{
        equal_load: g["players_wanted"],
        both_passed: both != [],
        grove_p99_lower_everywhere:
          both != [] and Enum.all?(both, fn {g, c} -> g["p99_ms"] < c["p99_ms"] end),
        knee: [grove["knee"], colyseus["knee"]],
        us_per_player_s: [g["server_us_per_player_s"], c["server_us_per_player_s"]],
        us_per_player_s_gross: [
          g["server_us_per_player_s_gross"],
          c["server_us_per_player_s_gross"]
        ],
        memory_per_player: [g["memory_per_player"], c["memory_per_player"]],
        p99_ms: [g["p99_ms"], c["p99_ms"]],
        p50_ms: [g["p50_ms"], c["p50_ms"]],
        views_per_player_s: [
          per(g["views_per_s"], g["players"]),
          per(c["views_per_s"], c["players"])
        ],
        in_per_player_s: [g["in_per_player_s"], c["in_per_player_s"]],
        views_in_per_player_s: [views_in(g), views_in(c)],
        baseline_percent: [
          base(grove, "server_percent"),
          base(colyseus, "server_percent")
        ],
        baseline_rss: [base(grove, "rss"), base(colyseus, "rss")]
      }
    end
  end

  # Grove's views alone (its bytes in less broadcasts and replies); all of
  # Colyseus's bytes in are its state patches but for the move replies.
  defp views_in(%{"views_in_per_player_s" => views}) when is_integer(views) and views > 0,
    do: views

  defp views_in(stage), do: stage["in_per_player_s"]

  defp base(report, key) do
    case report["baseline"] do
      %{} = baseline -> baseline[key]
      _none -> nil
    end
  end

  defp per(n, players) when is_number(n) and is_integer(players) and players > 0,
    do: Float.round(n / players, 1)

  defp per(_n, _players), do: nil

  defp table(reports, summary, versions) do
    header = [
      "",
      "== peers: #{Enum.map_join(versions, ", ", fn {k, v} -> "#{k} #{v}" end)} ==",
      ""
    ]

    stages =
      for {server, report} <- Enum.sort_by(reports, fn {k, _} -> k != :grove end) do
        [
          "#{server}: knee #{figure(report["knee"])} players; " <>
            "world alone #{figure(base(report, "server_percent"))} % of a core, " <>
            "#{mb(base(report, "rss"))} MB",
          "",
          "| players | moves/s | p50 ms | p99 ms | max ms | views/s | B/player/s in | of which views | of which broadcasts (minimap) | out | server CPU % | us per player-s (gross) | KB per player | load CPU % | errors | failures | passed |",
          "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
        ] ++
          for s <- report["stages"] do
            "| #{s["players"]} | #{s["moves_per_s"]} | #{figure(s["p50_ms"])} | #{figure(s["p99_ms"])} | " <>
              "#{figure(s["max_ms"])} | #{s["views_per_s"]} | #{s["in_per_player_s"]} | " <>
              "#{figure(s["views_in_per_player_s"])} | #{figure(s["broadcasts_in_per_player_s"])} " <>
              "(#{figure(s["minimap_in_per_player_s"])}) | #{s["out_per_player_s"]} | " <>
              "#{figure(s["server_percent"])} | #{figure(s["server_us_per_player_s"])} (#{figure(s["server_us_per_player_s_gross"])}) | " <>
              "#{kb(s["memory_per_player"])} | #{figure(s["load_percent"])} | #{s["errors"]} | " <>
              "#{s["correctness_failures"]} | #{if s["passed"], do: "yes", else: "no"} |"
          end ++ [""]
      end

    header ++ List.flatten(stages) ++ ratios(summary)
  end

  defp ratios(nil), do: []

  defp ratios(s) do
    at = "at #{s.equal_load} players#{if s.both_passed, do: "", else: " (not held by both)"}"

    rows = [
      {"knee on one core (players)", s.knee, &figure/1, :higher},
      {"server CPU per player-second beyond the world, #{at} (us)", s.us_per_player_s, &figure/1,
       :lower},
      {"server CPU per player-second all told, #{at} (us)", s.us_per_player_s_gross, &figure/1,
       :lower},
      {"memory per player, #{at} (KB)", s.memory_per_player, &kb/1, :lower},
      {"move round trip p99, #{at} (ms)", s.p99_ms, &figure/1, :lower},
      {"move round trip p50, #{at} (ms)", s.p50_ms, &figure/1, :lower},
      {"views per player-second, #{at}", s.views_per_player_s, &figure/1, nil},
      {"bytes in per player-second, #{at}", s.in_per_player_s, &figure/1, nil},
      {"bytes of views per player-second, #{at}", s.views_in_per_player_s, &figure/1, nil},
      {"world alone: server CPU (% of a core)", s.baseline_percent, &figure/1, :lower},
      {"world alone: server memory (MB)", s.baseline_rss, &mb/1, :lower}
    ]

    [
      "| figure | Grove | Colyseus | Grove / Colyseus | ahead |",
      "| --- | ---: | ---: | ---: | --- |"
    ] ++
      for {name, [g, c], format, better} <- rows do
        "| #{name} | #{format.(g)} | #{format.(c)} | #{ratio(g, c)} | #{ahead(g, c, better)} |"
      end ++
      [
        "",
        "Grove's p99 lower at every load both hold: #{if s.grove_p99_lower_everywhere, do: "yes", else: "no"}"
      ]
  end

  defp ratio(g, c) when is_number(g) and is_number(c) and c != 0,
    do: :erlang.float_to_binary(g / c, decimals: 2)

  defp ratio(_g, _c), do: "-"

  defp ahead(g, c, :higher) when is_number(g) and is_number(c),
    do: if(g > c, do: "Grove", else: if(g < c, do: "Colyseus", else: "even"))

  defp ahead(g, c, :lower) when is_number(g) and is_number(c),
    do: if(g < c, do: "Grove", else: if(g > c, do: "Colyseus", else: "even"))

  defp ahead(_g, _c, _better), do: ""

  # Figures from the runner's JSON: a missing one is `:null`.
  defp figure(value) when is_number(value), do: to_string(value)
  defp figure(_missing), do: "-"

  defp kb(bytes) when is_number(bytes), do: to_string(round(bytes / 1024))
  defp kb(_missing), do: "-"

  defp mb(bytes) when is_number(bytes), do: to_string(round(bytes / 1_000_000))
  defp mb(_missing), do: "-"

  defp info(line), do: Mix.shell().info(line)
end
