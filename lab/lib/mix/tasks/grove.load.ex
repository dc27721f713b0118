defmodule Mix.Tasks.Grove.Load do
  @shortdoc "Load lab: real players over WebSocket against a running server"

  @moduledoc """
  Runs load against a Grove server from this OS process (start the server
  elsewhere, e.g. `make run`).

      mix grove.load ws --url ws://127.0.0.1:4000/ws --players 10000 --ramp 500 --duration 300
      mix grove.load ws --ramp 200 --encoding binary --json knee.json
      mix grove.load ws --url http://10.0.0.5:4000 --url http://10.0.0.6:4000 --players 6000
      mix grove.load ws --players 3000 --duration 120 --hog 1 --hog-from 40 --hog-for 40

  ## ws

  Bots are real WebSocket clients (gen_tcp and cowlib framing), a few
  hundred to a process, that join, move on their schedule and check every
  outcome; a sample of them also checks the views. A progress line every
  5 s, then a report; see `Grove.Load.WsRun`.

    * `--url URL` - the server's WebSocket endpoint (default `ws://127.0.0.1:4000/ws`),
      or its base URL (`http://127.0.0.1:4000`). Give it again, or give
      URLs separated by commas, to spread the players over several nodes
      of a cluster: player n goes to URL n modulo their number, and the
      report adds a table per URL. The servers' gauges are read from the
      first URL's node (or `--metrics-url`)
    * `--players N` - players to run; without it (and without `--stages`),
      ramp until the knee
    * `--stages N,N,...` - measure each of these player counts in turn
      (ramp, settle, measure) and print a table of what each costs; stops
      at the first that fails
    * `--stage-seconds S`, `--settle S`, `--baseline-seconds S` - how long
      each stage is measured, how long it settles first, and how long the
      server is measured alone before the first (defaults 30, 5, 10)
    * `--ramp PER_SECOND` - players added per second (default a tenth of
      `--players` or of the last stage, at least 100)
    * `--duration S` - seconds to hold all players after the ramp (default 60)
    * `--check-views N|all` - how many players assemble and check their
      views (default 100); all of them check every outcome
    * `--per-swarm N` - players per load-generator process (default 500)
    * `--every S` - seconds between progress lines (default 5)
    * `--move-every MS` - milliseconds between a player's moves (default 1000)
    * `--act-every N` - one step in N of each player an action of the
      world's game instead of a move (`--action NAME`, default `pick`),
      toward a random neighbouring cell; their round trip is reported
      apart, and a stage passes only when both p99s do (default none)
    * `--say-every MS` - each player also says a line every MS
      milliseconds (nearby chat); the lines' round trip, those refused and
      the lines heard are reported apart (default none); with `--crowd`,
      chat in a crowd
    * `--encoding json|binary` (default json)
    * `--retries N` - an upgrade refused with a Retry-After (`503
      server_busy`, a server too busy to start a player in time) is tried
      again up to N times, after its Retry-After plus a random jitter;
      the report counts the tries again apart from the failed connects
      (default 3; 0 counts every refusal as failed)
    * `--limit-ms MS` - the p99 that marks the knee (default 100)
    * `--json PATH` - write the report as JSON
    * `--report PATH` - write a Markdown report with an SVG chart next to it
    * `--dashboard URL` - post progress to that server's dashboard (e.g.
      `http://127.0.0.1:4000`), with `--token TOKEN` if it needs one
    * `--server-pid PID` - also report the server's CPU, read from /proc,
      and, when the server is pinned to some of the cores, what else ran
      on them ("others on the server's core": a shared machine)
    * `--metrics-url URL` - where the server's memory is read (default the
      `/metrics` of the server in `--url`)
    * `--hog N` - N other OS processes that spin, each pinned to a core of
      its own (`Grove.Load.Hog`), to take CPU from the server (and from this
      runner, on a shared machine): from `--hog-from S` seconds after the
      start (default 0) for `--hog-for S` seconds (default to the end);
      always stopped at the end
    * `--crowd press|mill` - the players gather instead of walking at
      random: each walks to one point, then presses in toward it (most
      moves refused `occupied`) or mills about near it; see
      `Grove.Load.Crowd`. Give the crowd time to form with `--settle`
    * `--crowd-at corner|middle|X,Y` - where: the zone corner nearest the
      world's centre (four zones share the crowd), the middle of the zone
      at the centre (one zone holds it), or a cell (default corner)
    * `--crowd-radius N` - cells around the point where players mill, and
      from where they move at `--move-every` (default 12)
    * `--crowd-approach-ms MS` - ms between moves on the way there (default 100)
    * `--zone-size N` - the server's zone size, for `corner` and `middle`
      (default 50, the default world's)
    * `--walk straight` - each player walks straight instead of at random:
      along a heading of its own (drawn when it joins), turning where
      a step is refused and bouncing off the world's edges; see
      `Grove.Load.Walk`. With `--move-every 200`, five steps a second. The
      progress lines then add the slowest move of each window and, from
      the server's `/metrics`, its zones awake and the zones woken and put
      to sleep so far
    * `--sample-every S` - a soak: read the server's gauges (memory,
      processes, ports, ETS tables, the longest mailbox) every S seconds and
      report which of them grow (`Grove.Load.Soak` says how that is judged)

  ## http

  The flow of the Gamend stress test: each virtual user logs in with a new
  device id (creating an account), then reads `GET /api/me` `--reads` times
  with `--pause-ms` between; see `Grove.Load.HttpRun`.

      mix grove.load http --url http://127.0.0.1:4000 --users 4000 --ramp 400 --reads 10 --pause-ms 1000

    * `--users N` (default 100), `--ramp PER_SECOND` (default a tenth of the users)
    * `--reads N` (default 10), `--pause-ms MS` (default 1000)
    * `--duration S` - users start the flow again, as new devices on the
      same connection, until S seconds after the start; without it each
      user runs it once
    * `--sources N` - connect from the loopback addresses 127.0.0.1 to
      127.0.0.N in turn, for N times the ports of one address (default 1)
    * `--json PATH`, `--report PATH` - as for ws
    * `--record PATH` - append every device id whose login the server
      acknowledged, as it happens
    * `--retries N` - a login refused 503 or 429 is tried again up to N
      times, after its Retry-After plus a random jitter (default 3; 0
      counts every refusal as final)

  ## fuzz

  Hostile and mutated inputs to the server's HTTP and WebSocket front
  doors, each checked against what the server must answer, and
  `/healthz` after each; prints what the server answered per case and
  every violation, and exits non-zero if there is any. See
  `Grove.Load.Fuzz`.

      mix grove.load fuzz --url http://127.0.0.1:4000 --count 2000 --seed 42

    * `--url URL` - the server (default `http://127.0.0.1:4000`)
    * `--count N` - rounds (default 1000)
    * `--seed N` - the random stream's seed, to repeat a run (default a
      random one, printed)
    * `--deadline MS` - how long the server has to answer each input
      (default 5000)
    * `--only N` - send round N alone (the rounds before it are drawn but
      not sent): with the `--seed` and `--count N` a violation prints, its
      input again; it needs `--seed`, and N at most `--count` (which is N
      if not given)
    * `--json PATH` - write the report as JSON

  ## verify

  After a crash and a restart, checks that every recorded device id still
  logs in to the account it made; exits non-zero if any is missing.

      mix grove.load verify --url http://127.0.0.1:4000 --record acked.txt
  """

  use Mix.Task

  alias Grove.Load.{HttpRun, Report, WsRun}

  @ws_switches [
    url: :keep,
    players: :integer,
    ramp: :integer,
    duration: :integer,
    move_every: :integer,
    act_every: :integer,
    action: :string,
    say_every: :integer,
    encoding: :string,
    limit_ms: :integer,
    json: :string,
    report: :string,
    dashboard: :string,
    token: :string,
    server_pid: :integer,
    max_players: :integer,
    stages: :string,
    stage_seconds: :integer,
    settle: :integer,
    baseline_seconds: :integer,
    check_views: :string,
    per_swarm: :integer,
    metrics_url: :string,
    sample_every: :integer,
    every: :integer,
    hog: :integer,
    hog_from: :integer,
    hog_for: :integer,
    crowd: :string,
    crowd_at: :string,
    crowd_radius: :integer,
    crowd_approach_ms: :integer,
    zone_size: :integer,
    walk: :string,
    retries: :integer
  ]

  @http_switches [
    url: :string,
    users: :integer,
    ramp: :integer,
    reads: :integer,
    pause_ms: :integer,
    duration: :integer,
    json: :string,
    report: :string,
    record: :string,
    retries: :integer,
    sources: :integer
  ]

  @impl true
  def run(["ws" | args]) do
    opts = Mix.Grove.parse!(args, @ws_switches, "grove.load")

    encoding =
      case Keyword.get(opts, :encoding, "json") do
        "json" -> :json
        "binary" -> :binary
        other -> Mix.raise("--encoding must be json or binary, got #{inspect(other)}")
      end

    positive!(opts)

    opts =
      opts
      |> parse_urls()
      |> parse_stages()
      |> parse_check_views()
      |> parse_crowd()
      |> parse_walk()

    start_client()

    {json, opts} = Keyword.pop(opts, :json)
    {markdown, opts} = Keyword.pop(opts, :report)
    {dashboard, opts} = Keyword.pop(opts, :dashboard)

    run_opts =
      opts
      |> Keyword.put(:encoding, encoding)
      |> Keyword.put(:report_url, dashboard)

    report = WsRun.run(run_opts)

    if json, do: write(json, :jiffy.encode(Report.to_json(report), [:pretty]))

    if markdown do
      Report.write(markdown, "WebSocket load", report, ["mix", "grove.load", "ws" | args])
      Mix.shell().info("written #{Path.expand(markdown)}")
    end
  end

  def run(["http" | args]) do
    opts = Mix.Grove.parse!(args, @http_switches, "grove.load")

    positive!(opts)
    start_client()
    {json, opts} = Keyword.pop(opts, :json)
    {markdown, opts} = Keyword.pop(opts, :report)
    report = HttpRun.run(opts)
    if json, do: write(json, :jiffy.encode(Report.to_json(report), [:pretty]))

    if markdown,
      do: Report.write(markdown, "HTTP load", report, ["mix", "grove.load", "http" | args])
  end

  def run(["fuzz" | args]) do
    switches = [
      url: :string,
      count: :integer,
      seed: :integer,
      deadline: :integer,
      only: :integer,
      json: :string
    ]

    opts = Mix.Grove.parse!(args, switches, "grove.load")

    positive!(opts)
    replay!(opts)
    start_client()
    url = URI.parse(Keyword.get(opts, :url, "http://127.0.0.1:4000"))

    report =
      Grove.Load.Fuzz.run(
        url.host,
        url.port,
        opts
        |> Keyword.take([:count, :seed, :deadline])
        |> Keyword.put_new(:count, opts[:only] || 1000)
        |> then(&if(opts[:only], do: Keyword.put(&1, :only, [opts[:only]]), else: &1))
      )

    Mix.shell().info("fuzz: #{report.rounds} rounds, seed #{report.seed}")

    for {name, outcomes} <- Enum.sort(report.outcomes) do
      answers = outcomes |> Enum.sort() |> Enum.map_join(", ", fn {got, n} -> "#{got} x#{n}" end)
      Mix.shell().info("  #{name}: #{answers}")
    end

    # Where the server is, and nothing more: a URL's user and password
    # would reach the logs that keep what this prints.
    url = URI.to_string(%URI{scheme: url.scheme, host: url.host, port: url.port})

    for violation <- report.violations do
      %{seed: seed, count: count} = violation.replay

      Mix.shell().error(
        "violation in round #{violation.round} (#{violation.case}): #{violation.got}\n" <>
          "  input: #{violation.input}\n" <>
          "  again: mix grove.load fuzz --url #{url} --seed #{seed} --count #{count} --only #{count}"
      )
    end

    if opts[:json], do: write(opts[:json], :jiffy.encode(report, [:pretty]))

    if report.violations != [] do
      Mix.shell().error("fuzz: #{length(report.violations)} violations (seed #{report.seed})")
      exit({:shutdown, 1})
    end
  end

  def run(["verify" | args]) do
    {opts, rest, invalid} = OptionParser.parse(args, strict: [url: :string, record: :string])

    if rest != [] or invalid != [] or opts[:record] == nil,
      do: Mix.raise("usage: mix grove.load verify --record PATH [--url URL]")

    start_client()
    report = HttpRun.verify(opts)
    if report.missing > 0, do: exit({:shutdown, 1})
  end

  def run(_args),
    do:
      Mix.raise("usage: mix grove.load ws|http|fuzz|verify [options] (see `mix help grove.load`)")

  # --url again, or URLs separated by commas: players go to them in turn.
  defp parse_urls(opts) do
    case Keyword.get_values(opts, :url) do
      [] ->
        opts

      given ->
        urls =
          try do
            WsRun.urls!(given)
          rescue
            error in ArgumentError -> Mix.raise(error.message)
          end

        opts |> Keyword.delete(:url) |> Keyword.put(:url, urls)
    end
  end

  defp parse_stages(opts) do
    case Keyword.fetch(opts, :stages) do
      :error ->
        opts

      {:ok, text} ->
        stages =
          for part <- String.split(text, ",", trim: true) do
            case Integer.parse(String.trim(part)) do
              {n, ""} when n > 0 -> n
              _ -> Mix.raise("--stages takes positive player counts, like 1000,2000,4000")
            end
          end

        if stages != Enum.sort(stages) or stages == [],
          do: Mix.raise("--stages must grow, like 1000,2000,4000")

        Keyword.put(opts, :stages, stages)
    end
  end

  defp parse_check_views(opts) do
    case Keyword.fetch(opts, :check_views) do
      :error ->
        opts

      {:ok, "all"} ->
        Keyword.put(opts, :check_views, :all)

      {:ok, text} ->
        case Integer.parse(text) do
          {n, ""} when n >= 0 -> Keyword.put(opts, :check_views, n)
          _ -> Mix.raise("--check-views takes a number of players or all, got #{inspect(text)}")
        end
    end
  end

  defp parse_crowd(opts) do
    opts =
      case Keyword.fetch(opts, :crowd) do
        :error -> opts
        {:ok, "press"} -> Keyword.put(opts, :crowd, :press)
        {:ok, "mill"} -> Keyword.put(opts, :crowd, :mill)
        {:ok, other} -> Mix.raise("--crowd must be press or mill, got #{inspect(other)}")
      end

    case Keyword.fetch(opts, :crowd_at) do
      :error ->
        opts

      {:ok, "corner"} ->
        Keyword.put(opts, :crowd_at, :corner)

      {:ok, "middle"} ->
        Keyword.put(opts, :crowd_at, :middle)

      {:ok, text} ->
        case text |> String.split(",") |> Enum.map(&Integer.parse/1) do
          [{x, ""}, {y, ""}] when x >= 0 and y >= 0 -> Keyword.put(opts, :crowd_at, {x, y})
          _ -> Mix.raise("--crowd-at takes corner, middle or a cell X,Y, got #{inspect(text)}")
        end
    end
  end

  defp parse_walk(opts) do
    case {Keyword.fetch(opts, :walk), opts[:crowd]} do
      {:error, _crowd} -> opts
      {{:ok, "straight"}, nil} -> Keyword.put(opts, :walk, :straight)
      {{:ok, "straight"}, _crowd} -> Mix.raise("--walk and --crowd go apart: choose one")
      {{:ok, other}, _crowd} -> Mix.raise("--walk must be straight, got #{inspect(other)}")
    end
  end

  # Counts that may be zero: when a hog starts, how often to retry.
  @zero_allowed [:hog_from, :retries]

  # A round sent alone is a round of a run that a seed repeats, and one
  # that the run has: else it sends nothing, and looks like a run that
  # found nothing.
  defp replay!(opts) do
    cond do
      opts[:only] == nil ->
        :ok

      opts[:seed] == nil ->
        Mix.raise("--only replays a round of a run: give its --seed too")

      opts[:only] > Keyword.get(opts, :count, opts[:only]) ->
        Mix.raise("--only #{opts[:only]} is past --count #{opts[:count]}")

      true ->
        :ok
    end
  end

  defp positive!(opts) do
    for {key, value} <- opts,
        is_integer(value) and value <= 0,
        key not in @zero_allowed or value < 0 do
      Mix.raise("--#{String.replace(to_string(key), "_", "-")} must be positive, got #{value}")
    end
  end

  # The load lab is a client: it starts no world of its own.
  defp start_client do
    Application.put_env(:grove, :start, false)
    Mix.Task.run("app.start")
    Logger.configure(level: :warning)
  end

  defp write(path, content) do
    File.mkdir_p!(Path.dirname(path))
    File.write!(path, content)
    Mix.shell().info("written #{Path.expand(path)}")
  end
end
