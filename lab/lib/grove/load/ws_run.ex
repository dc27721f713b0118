defmodule Grove.Load.WsRun do
  @moduledoc """
  A load run of real players over WebSocket (`mix grove.load ws`), meant to
  run in its own OS process against a server elsewhere.

  Players (`Grove.Load.Player`, hosted a few hundred to a process by
  `Grove.Load.Swarm`) connect at `:ramp` per second, join, move every
  `:move_every` ms and check every outcome; `:check_views` of them (or
  `:all`) also assemble the areas they receive and check them. A progress
  line every `:every` seconds; at the end a report with connect times and
  failures, the move round trip, views received, disconnects by reason,
  protocol errors and correctness failures.

  A player whose upgrade the server refuses with a `Retry-After` (`503
  server_busy`: too busy to start a player in time, in a join storm)
  tries again after it, with a random jitter of up to as much again, up to
  `:retries` times (3 by default): the report counts each try again apart
  (`connect_retries`), a player as failed only once its retries ran out,
  and its connect time from its first try, so that a storm's late joins
  count as late, not failed. A Retry-After is waited for 30 s at most; a
  player still waiting to try again when the run ends is reported as
  pending (`connect_pending`), neither connected nor failed.

  Three shapes of run:

    * `:players` - ramp to that many and hold them `:duration` seconds;
    * neither `:players` nor `:stages` - ramp until the p99 round trip over
      a progress window passes `:limit_ms` or errors appear, and report
      the knee: the players connected at the last window that passed;
    * `:stages` - a list of player counts: for each, ramp to it, let it
      settle (`:settle` s) and measure it for `:stage_seconds`; stop at the
      first stage that fails. Before the first, the server is measured
      alone for `:baseline_seconds`, so that each stage can say what the
      players cost beyond the world itself. The knee is the last stage
      that passed.

  With `:server_pid` (an OS pid on this machine) the report adds the
  server's CPU, read from `/proc`, and with it the server's CPU per
  player-second; and, when the server is pinned to some of the cores,
  what else ran on them (in per cent of one): the server's figures are its
  own only while that stays near 0. From the server's `/metrics` (`:metrics_url`, by default
  next to `:url`) come its memory and the p99 of players' moves as the
  server itself saw them (from the move read off the socket to its outcome
  written): set beside the p99 the players saw, it tells the server's part
  of the round trip from the network's and the load generator's.

  With `:act_every` N (0, none, by default), one step in N of each player
  is instead an action of the world's game (`:action`, `"pick"` by
  default) toward a random neighbouring cell, one in flight at most: the
  progress lines and stages add the actions answered a second and their
  round trip (`act_p99_ms`), apart from moves', and a stage passes only
  when both p99s are within `:limit_ms`.

  With `:say_every` MS (0, none, by default) each player also says a line
  every MS milliseconds (nearby chat): the progress lines and stages add
  the lines answered a second, their round trip (`say_p99_ms`), the lines
  refused and the chat lines the players heard a second; a stage passes
  only when that p99 is within `:limit_ms` too. With a crowd (below) the
  lines are said in it: chat where ExVenture's crowded room broke.

  Each progress line also gives the moves players skipped (a player sends
  no move while its previous one is unanswered) and, from the server's
  `/metrics`, its memory, run queue and scheduler utilization. With `:hog`
  (a number of OS processes that spin, pinned to cores, `Grove.Load.Hog`)
  the hogs run from `:hog_from` seconds after the start for `:hog_for`
  seconds (to the end without it), so a run shows the server before, under
  and after the pressure; they are stopped at the end whatever happens.
  The report ends with the progress lines as a Markdown table.

  `:url` may name several servers (a list, or URLs separated by commas),
  such as the nodes of one cluster: player n connects to URL n modulo
  their number, so each gets its share throughout a ramp, and the report
  adds each URL's players, connects, moves, round trip and errors
  (`:by_url`). They must serve the same world (the run checks their
  terrain); the servers' gauges are read from the first. A player whose
  entity a lost node took with it and whose server placed it again is
  welcomed again under its id: the report counts these as `restored`, not
  as errors, and the player's checks go on from where it stands now.

  With `:crowd` (`:press` or `:mill`) the players gather: each walks to
  one point (`:crowd_at`: `:corner`, where four zones of `:zone_size`
  cells meet near the world's centre, `:middle`, the middle of the zone
  at the centre, or a cell `{x, y}`) at a move every `:crowd_approach_ms`,
  then presses in toward it or mills about within `:crowd_radius` cells
  of it at the run's pace (`Grove.Load.Crowd`). Give the crowd time to
  form before measuring (`:settle`).

  With `:walk` `:straight` each player walks straight instead
  (`Grove.Load.Walk`): along a heading of its own, drawn when it joins,
  turning where a step is refused and bouncing off the world's edges;
  with the server's players placed anywhere on a big world of zones on
  demand, they wake the zones ahead of them and leave those behind to
  sleep. The progress lines then add the server's zones awake and the
  zones woken and put to sleep so far (from its `/metrics`), and each
  window's slowest move.

  A world too large to send whole has no `GET /terrain`: the players then
  check their views for stacked entities and their own, not for entities
  on blocked cells.

  When `:report_url` is given (the server's base URL) the run posts each
  progress line to `/api/load/report` there, so the server's dashboard shows
  the run and its knee.
  """

  import Grove.Load.Report, only: [figure: 1]
  import Grove.Metrics.Histogram, only: [to_ms: 1]

  alias Grove.Load.{Crowd, Hog, Soak, Stats, Swarm}
  alias Grove.Metrics.Histogram

  @defaults [
    url: "ws://127.0.0.1:4000/ws",
    players: nil,
    stages: nil,
    ramp: nil,
    duration: 60,
    stage_seconds: 30,
    settle: 5,
    baseline_seconds: 10,
    move_every: 1000,
    act_every: 0,
    action: "pick",
    say_every: 0,
    encoding: :json,
    check_views: 100,
    per_swarm: 500,
    every: 5,
    limit_ms: 100,
    max_players: 200_000,
    report_url: nil,
    metrics_url: nil,
    sample_every: nil,
    token: nil,
    server_pid: nil,
    hog: 0,
    hog_from: 0,
    hog_for: nil,
    crowd: nil,
    crowd_at: :corner,
    crowd_radius: 12,
    crowd_approach_ms: 100,
    zone_size: 50,
    walk: nil,
    retries: 3,
    out: &IO.puts/1
  ]

  @doc "Runs the load; returns the report (a map with at least the keys the JSON needs)."
  @spec run(keyword()) :: map()
  def run(opts) do
    opts = Keyword.validate!(opts, @defaults)
    urls = urls!(opts[:url])
    targets = Enum.map(urls, &target(&1, opts[:encoding]))
    [first | _] = targets
    terrain = same_terrain!(targets)
    crowd = crowd(opts, terrain)
    target = opts[:players]
    stages = opts[:stages]
    last = if stages, do: List.last(stages), else: target
    ramp = opts[:ramp] || if(last, do: max(div(last, 10), 100), else: 100)

    run = %{
      opts: opts,
      # Read as one (`Stats.read/1` of the list); each URL's alone for the breakdown.
      stats: Enum.map(targets, & &1.stats),
      targets: targets,
      swarm_opts: [
        encoding: opts[:encoding],
        terrain: terrain,
        move_every: opts[:move_every],
        crowd: crowd,
        walk: opts[:walk],
        act_every: opts[:act_every],
        action: opts[:action],
        say_every: opts[:say_every],
        retries: opts[:retries]
      ],
      target: target,
      ramp: ramp,
      started: System.monotonic_time(:millisecond),
      metrics_url: opts[:metrics_url] || metrics_url(first.host, first.port),
      cpu: cpu_now(opts[:server_pid]),
      windows: [],
      stages: [],
      baseline: nil,
      knee: nil,
      spawned: 0,
      checking: checking(opts[:check_views]),
      sampler: nil,
      hog: nil
    }

    opts[:out].(
      "load: #{describe(run)} at #{ramp}/s on #{Enum.join(urls, ", ")} (#{opts[:encoding]}), " <>
        "moves every #{opts[:move_every]} ms#{describe_acts(opts)}#{describe_says(opts)}, " <>
        "views checked by #{describe_checks(opts[:check_views])}" <>
        describe_crowd(crowd) <> describe_walk(opts[:walk]) <> describe_terrain(terrain)
    )

    run =
      if every = opts[:sample_every],
        do: %{run | sampler: Soak.start(run.metrics_url, opts[:token], every)},
        else: run

    hog =
      if opts[:hog] > 0,
        do: Hog.plan(opts[:hog], from: opts[:hog_from], for: opts[:hog_for])

    try do
      run =
        if stages,
          do: %{run | hog: hog} |> baseline() |> stages(stages),
          else: loop(%{run | hog: hog}, Stats.read(run.stats), run.started)

      if hog, do: Hog.cancel(hog)
      for target <- run.targets, swarm <- target.swarms, do: Swarm.stop(swarm)
      finish(run)
    after
      if hog, do: Hog.cancel(hog)
    end
  end

  defp describe(%{target: nil, opts: opts}) do
    case opts[:stages] do
      nil -> "ramping to the knee"
      stages -> "stages of #{Enum.join(stages, ", ")} players"
    end
  end

  defp describe(%{target: target}), do: "#{target} players"

  defp describe_walk(nil), do: ""
  defp describe_walk(:straight), do: ", each walking straight (a heading each)"

  defp describe_terrain(nil), do: " (no whole terrain from this world: no blocked-cell check)"
  defp describe_terrain(_terrain), do: ""

  defp describe_crowd(nil), do: ""

  defp describe_crowd(%Crowd{} = crowd) do
    {x, y} = crowd.at
    verb = if crowd.mode == :press, do: "pressing in toward", else: "milling about"

    ", in a crowd #{verb} {#{x}, #{y}} (within #{crowd.radius} cells; " <>
      "a move every #{crowd.approach_ms} ms on the way there)"
  end

  # The crowd the players gather in, with its point on this world.
  defp crowd(opts, terrain) do
    case opts[:crowd] do
      nil ->
        nil

      _mode when terrain == nil ->
        raise ArgumentError, "a crowd needs the world's size: this world sends no whole terrain"

      mode ->
        height = div(byte_size(terrain.cells), terrain.width)
        at = Crowd.place(opts[:crowd_at], terrain.width, height, opts[:zone_size])

        Crowd.new(mode, at,
          radius: opts[:crowd_radius],
          approach_ms: opts[:crowd_approach_ms]
        )
    end
  end

  defp describe_checks(:all), do: "every player"
  defp describe_checks(n), do: "a sample of #{n} players"

  defp checking(:all), do: :infinity
  defp checking(n) when is_integer(n) and n >= 0, do: n

  ## Ramp to a target, or to the knee

  # Every 100 ms: spawn the players due; every `every` seconds: a progress
  # window, and the stop conditions.
  defp loop(run, window_start, window_at) do
    now = System.monotonic_time(:millisecond)
    elapsed = now - run.started
    cap = run.target || run.opts[:max_players]
    run = spawn_due(run, min(div(elapsed * run.ramp, 1000) + 1, cap))

    {run, window_start, window_at, done?} =
      if now - window_at >= run.opts[:every] * 1000 do
        reading = Stats.read(run.stats)
        window = window(run, Stats.diff(reading, window_start), (now - window_at) / 1000, elapsed)
        progress(run, window)
        report_progress(run, window)
        run = %{run | windows: run.windows ++ [window]}
        {run, done?} = stop?(run, window, elapsed)
        {run, reading, now, done?}
      else
        {run, window_start, window_at, false}
      end

    if done? do
      run
    else
      Process.sleep(100)
      loop(run, window_start, window_at)
    end
  end

  defp stop?(%{target: nil} = run, window, _elapsed) do
    if passed?(run, window) do
      {%{run | knee: window.players}, run.spawned >= run.opts[:max_players]}
    else
      {run, true}
    end
  end

  defp stop?(run, _window, elapsed) do
    ramp_ms = div(run.target * 1000, run.ramp)
    {run, elapsed >= ramp_ms + run.opts[:duration] * 1000}
  end

  defp passed?(run, window),
    do:
      window.p99_ms != nil and window.p99_ms <= run.opts[:limit_ms] and window.errors == 0 and
        (run.opts[:act_every] == 0 or
           (window.act_p99_ms != nil and window.act_p99_ms <= run.opts[:limit_ms])) and
        (run.opts[:say_every] == 0 or
           (window.say_p99_ms != nil and window.say_p99_ms <= run.opts[:limit_ms]))

  defp describe_says(%{say_every: 0}), do: ""

  defp describe_says(opts), do: ", a line said every #{opts[:say_every]} ms"

  defp describe_acts(%{act_every: 0}), do: ""

  defp describe_acts(opts),
    do: " (one step in #{opts[:act_every]} an action, #{inspect(opts[:action])})"

  ## Stages

  # The server with nobody connected: what the world costs by itself.
  defp baseline(run) do
    seconds = run.opts[:baseline_seconds]
    cpu = cpu_now(run.opts[:server_pid])
    Process.sleep(seconds * 1000)
    server = cpu_used(cpu, cpu_now(run.opts[:server_pid]), seconds).server_percent
    memory = server_metrics(run.metrics_url, run.opts[:token]).memory

    run.opts[:out].(
      "baseline: nobody connected for #{seconds} s: server cpu #{figure(server)} % of a core, " <>
        "memory #{mb(memory)} MB"
    )

    %{run | baseline: %{server_percent: server, memory: memory}}
  end

  defp stages(run, []), do: run

  defp stages(run, [count | rest]) do
    run = ramp_to(run, count)
    Process.sleep(run.opts[:settle] * 1000)
    seconds = run.opts[:stage_seconds]
    before = Stats.read(run.stats)
    metrics = server_metrics(run.metrics_url, run.opts[:token])
    cpu = cpu_now(run.opts[:server_pid])
    at = System.monotonic_time(:millisecond)
    run = hold(run, at + seconds * 1000, before, at)
    now = System.monotonic_time(:millisecond)
    measured = (now - at) / 1000
    diff = Stats.diff(Stats.read(run.stats), before)
    window = window(run, diff, measured, now - run.started)
    used = cpu_used(cpu, cpu_now(run.opts[:server_pid]), measured)
    later = server_metrics(run.metrics_url, run.opts[:token])
    stage = stage(run, window, diff, used, later.memory, server_p99(metrics.moves, later.moves))
    run.opts[:out].(stage_line(stage))
    run = %{run | stages: run.stages ++ [stage]}

    if stage.passed,
      do: stages(%{run | knee: stage.players}, rest),
      else: run
  end

  # Progress lines while a stage is measured, so a long stage shows life.
  defp hold(run, until, window_start, window_at) do
    now = System.monotonic_time(:millisecond)

    cond do
      now >= until ->
        run

      now - window_at >= run.opts[:every] * 1000 ->
        reading = Stats.read(run.stats)
        diff = Stats.diff(reading, window_start)
        window = window(run, diff, (now - window_at) / 1000, now - run.started)
        progress(run, window)
        report_progress(run, window)
        hold(%{run | windows: run.windows ++ [window]}, until, reading, now)

      true ->
        Process.sleep(min(100, until - now))
        hold(run, until, window_start, window_at)
    end
  end

  defp ramp_to(run, count) do
    if run.spawned >= count do
      run
    else
      started = System.monotonic_time(:millisecond)
      from = run.spawned
      ramp_loop(run, count, from, started)
    end
  end

  defp ramp_loop(run, count, from, started) do
    elapsed = System.monotonic_time(:millisecond) - started
    run = spawn_due(run, min(from + div(elapsed * run.ramp, 1000) + 1, count))

    if run.spawned >= count do
      # Wait until they are in (or failed), up to the connect timeout.
      await_joined(run, count, System.monotonic_time(:millisecond) + 15_000)
    else
      Process.sleep(100)
      ramp_loop(run, count, from, started)
    end
  end

  defp await_joined(run, count, deadline) do
    counts = Stats.read(run.stats).counts
    settled = counts.joined + counts.connect_failures

    if settled >= count or System.monotonic_time(:millisecond) > deadline do
      run
    else
      Process.sleep(100)
      await_joined(run, count, deadline)
    end
  end

  defp stage(run, window, diff, used, memory, server_p99_ms) do
    players = window.players
    base = run.baseline
    server = used.server_percent

    cpu_us = fn percent ->
      if percent && players > 0, do: round(percent / 100 * 1_000_000 / players)
    end

    %{
      players: players,
      moves_per_s: window.moves_per_s,
      p50_ms: window.p50_ms,
      p99_ms: window.p99_ms,
      max_ms: to_ms(Histogram.max(diff.latency)),
      server_p99_ms: server_p99_ms,
      acts_per_s: window.acts_per_s,
      act_p99_ms: window.act_p99_ms,
      says_per_s: window.says_per_s,
      say_p99_ms: window.say_p99_ms,
      says_refused_per_s: window.says_refused_per_s,
      heard_per_s: window.heard_per_s,
      views_per_s: window.views_per_s,
      in_per_player_s: per_player(window.bytes_in_per_s, players),
      out_per_player_s: per_player(window.bytes_out_per_s, players),
      server_percent: server,
      load_percent: used.load_percent,
      others_percent: used.others_percent,
      # What each player adds to the server beyond the world alone, and
      # what the server spends per player all told.
      server_us_per_player_s:
        cpu_us.(server && base.server_percent && server - base.server_percent),
      server_us_per_player_s_gross: cpu_us.(server),
      memory: memory,
      memory_per_player:
        if(memory && base.memory && players > 0, do: div(memory - base.memory, players)),
      errors: window.errors,
      correctness_failures: window.correctness_failures,
      passed: passed?(run, window)
    }
  end

  defp acts_part(%{acts_per_s: 0, act_p99_ms: nil}), do: ""
  defp acts_part(s), do: "#{s.acts_per_s} acts/s p99 #{figure(s.act_p99_ms)} ms  "

  defp says_part(%{says_per_s: 0, say_p99_ms: nil}), do: ""

  defp says_part(s),
    do:
      "#{s.says_per_s} says/s p99 #{figure(s.say_p99_ms)} ms (#{s.says_refused_per_s} refused/s, " <>
        "#{s.heard_per_s} heard/s)  "

  defp per_player(_bytes, 0), do: 0
  defp per_player(bytes, players), do: round(bytes / players)

  defp stage_line(s) do
    "stage #{pad(s.players, 6)} players  #{pad(s.moves_per_s, 6)} moves/s  " <>
      "p50 #{figure(s.p50_ms)} p99 #{figure(s.p99_ms)} max #{figure(s.max_ms)} ms " <>
      "(server p99 #{figure(s.server_p99_ms)})  " <>
      acts_part(s) <>
      says_part(s) <>
      "#{s.views_per_s} views/s  in #{s.in_per_player_s} out #{s.out_per_player_s} B/player/s  " <>
      "server #{figure(s.server_percent)} % (#{figure(s.server_us_per_player_s)} us/player-s)  " <>
      "#{kb(s.memory_per_player)} KB/player  load #{figure(s.load_percent)} %  " <>
      "others on the server's core #{figure(s.others_percent)} %  " <>
      "errors #{s.errors}  failures #{s.correctness_failures} -> " <>
      if(s.passed, do: "pass", else: "past the knee")
  end

  ## Players

  # Connects players up to `due`, filling each swarm to `per_swarm` first.
  defp spawn_due(run, due) do
    if due > run.spawned,
      do: add_players(run, due - run.spawned),
      else: run
  end

  # Player number n goes to URL rem(n, urls): round-robin, so every URL
  # gets its share at every point of a ramp.
  defp add_players(run, count) do
    counts = spread(run.spawned, count, length(run.targets))

    {targets, checking} =
      run.targets
      |> Enum.zip(counts)
      |> Enum.map_reduce(run.checking, fn {target, n}, checking ->
        add_players(target, n, checking, run)
      end)

    %{run | targets: targets, checking: checking, spawned: run.spawned + count}
  end

  defp add_players(target, 0, checking, _run), do: {target, checking}

  defp add_players(target, count, checking, run) do
    per_swarm = run.opts[:per_swarm]
    {swarm, room, target} = swarm_with_room(target, per_swarm, run.swarm_opts)
    n = min(count, room)
    checks = if checking == :infinity, do: n, else: min(n, checking)
    Swarm.add(swarm, n, checks)
    checking = if checking == :infinity, do: :infinity, else: checking - checks
    add_players(%{target | spawned: target.spawned + n}, count - n, checking, run)
  end

  defp swarm_with_room(target, per_swarm, swarm_opts) do
    used = rem(target.spawned, per_swarm)

    if target.swarms != [] and used != 0 do
      {hd(target.swarms), per_swarm - used, target}
    else
      opts =
        swarm_opts ++
          [host: target.host, port: target.port, path: target.path, stats: target.stats]

      {:ok, swarm} = Swarm.start_link(opts)
      {swarm, per_swarm, %{target | swarms: [swarm | target.swarms]}}
    end
  end

  @doc """
  How many of the players numbered `from` to `from + count - 1` go to each
  of `urls` URLs, when player n goes to URL `rem(n, urls)`.

      iex> Grove.Load.WsRun.spread(0, 5, 2)
      [3, 2]
      iex> Grove.Load.WsRun.spread(5, 5, 2)
      [2, 3]
      iex> Grove.Load.WsRun.spread(7, 1, 3)
      [0, 1, 0]
  """
  @spec spread(non_neg_integer(), non_neg_integer(), pos_integer()) :: [non_neg_integer()]
  def spread(from, count, urls) do
    # Numbers below n that are i modulo urls.
    below = fn n, i -> div(n - i + urls - 1, urls) end
    for i <- 0..(urls - 1), do: below.(from + count, i) - below.(from, i)
  end

  ## The servers' URLs

  @doc """
  The URLs a run plays on, from `:url`: one, a list, or URLs separated by
  commas (each `ws://host:port/ws` or a server's base `http://host:port`).
  Raises `ArgumentError` for none, or one without a host and port.

      iex> Grove.Load.WsRun.urls!(["http://a:4000, http://b:4001", "ws://c:4002/ws"])
      ["http://a:4000", "http://b:4001", "ws://c:4002/ws"]
  """
  @spec urls!(String.t() | [String.t()]) :: [String.t(), ...]
  def urls!(url) do
    urls =
      url
      |> List.wrap()
      |> Enum.flat_map(&String.split(&1, ",", trim: true))
      |> Enum.map(&String.trim/1)
      |> Enum.reject(&(&1 == ""))

    for url <- urls do
      case URI.parse(url) do
        %URI{host: host, port: port} when is_binary(host) and host != "" and is_integer(port) ->
          :ok

        _ ->
          raise ArgumentError,
                "--url: #{inspect(url)} is not a server's URL, like ws://HOST:PORT/ws"
      end
    end

    if urls == [], do: raise(ArgumentError, "--url: no server's URL given")
    urls
  end

  defp target(url, encoding) do
    %URI{host: host, port: port, path: path, query: query} = URI.parse(url)
    # A server's base URL (http://host:port) means its WebSocket endpoint.
    path = if path in [nil, "", "/"], do: "/ws", else: path

    path =
      path <>
        "?" <>
        URI.encode_query(
          Map.merge(URI.decode_query(query || ""), %{"encoding" => to_string(encoding)})
        )

    %{url: url, host: host, port: port, path: path, stats: Stats.new(), swarms: [], spawned: 0}
  end

  # The players check what they see against the terrain: every URL must
  # serve the same world (nodes of one cluster do).
  # A world too large to send whole has none: nil.
  defp same_terrain!([first | rest]) do
    terrain = fetch_terrain(first.host, first.port)

    for target <- rest, fetch_terrain(target.host, target.port) != terrain do
      raise ArgumentError,
            "#{target.url} serves another world than #{first.url}: " <>
              "the URLs of one run must be nodes of one cluster"
    end

    terrain
  end

  ## Windows and reports

  defp window(run, diff, seconds, elapsed) do
    counts = diff.counts
    reading = Stats.read(run.stats)
    server = server_gauges(run.metrics_url, run.opts[:token])

    %{
      t: round(elapsed / 1000),
      hog: hog_on?(run.opts, elapsed / 1000 - seconds, elapsed / 1000),
      skipped_per_s: round(counts.moves_skipped / seconds),
      server_memory: server.memory,
      server_run_queue: server.run_queue,
      server_utilization: server.utilization,
      players: reading.counts.joined - Enum.sum(Map.values(reading.disconnects)),
      moves_per_s: round(counts.outcomes / seconds),
      views_per_s: round(counts.view_frames / seconds),
      bytes_in_per_s: round(counts.bytes_in / seconds),
      bytes_out_per_s: round(counts.bytes_out / seconds),
      p50_ms: to_ms(Histogram.percentile(diff.latency, 50)),
      p99_ms: to_ms(Histogram.percentile(diff.latency, 99)),
      max_ms: to_ms(Histogram.max(diff.latency)),
      refused_per_s: round((counts.outcomes - counts.outcomes_ok) / seconds),
      zones_awake: server.zones_awake,
      zone_wakes: server.zone_wakes,
      zone_sleeps: server.zone_sleeps,
      acts_per_s: round(counts.acted / seconds),
      act_p99_ms: to_ms(Histogram.percentile(diff.act_latency, 99)),
      says_per_s: round(counts.said / seconds),
      say_p99_ms: to_ms(Histogram.percentile(diff.say_latency, 99)),
      says_refused_per_s: round(counts.says_refused / seconds),
      heard_per_s: round(counts.chat_heard / seconds),
      errors: errors(counts),
      correctness_failures: counts.correctness_failures
    }
  end

  defp errors(counts),
    do: counts.connect_failures + counts.protocol_errors + counts.timeouts + counts.disconnects

  defp progress(run, w) do
    run.opts[:out].(
      "load #{pad(w.t, 5)} s  #{pad(w.players, 6)} players  #{pad(w.moves_per_s, 6)} moves/s  " <>
        "#{pad(w.skipped_per_s, 5)} skipped/s  " <>
        "#{pad(w.views_per_s, 7)} views/s  in #{kb(w.bytes_in_per_s)} KB/s  out #{kb(w.bytes_out_per_s)} KB/s  " <>
        "p50 #{figure(w.p50_ms)} ms  p99 #{figure(w.p99_ms)} ms  " <>
        acts_part(w) <>
        says_part(w) <>
        "errors #{w.errors}  failures #{w.correctness_failures}  " <>
        "server #{mb(w.server_memory)} MB, run queue #{figure(w.server_run_queue)}, " <>
        "busy #{percent(w.server_utilization)} %#{if w.hog, do: "  HOG", else: ""}" <>
        zones_part(w)
    )
  end

  defp zones_part(%{zones_awake: nil}), do: ""

  defp zones_part(w),
    do:
      "  max #{figure(w.max_ms)} ms, refused #{w.refused_per_s}/s, zones awake #{w.zones_awake} " <>
        "(woken #{w.zone_wakes}, slept #{w.zone_sleeps} so far)"

  # Whether the hog ran at any time between `from` and `to` seconds of the
  # run, from the plan.
  defp hog_on?(opts, from, to) do
    opts[:hog] > 0 and to > opts[:hog_from] and
      (opts[:hog_for] == nil or from < opts[:hog_from] + opts[:hog_for])
  end

  defp percent(nil), do: "-"
  defp percent(share), do: round(share * 100)

  # The server's memory, run queue and scheduler utilization now, from its
  # /metrics; nils when it cannot be read.
  defp server_gauges(url, token) do
    case Soak.scrape(url, token) do
      nil ->
        %{
          memory: nil,
          run_queue: nil,
          utilization: nil,
          zones_awake: nil,
          zone_wakes: nil,
          zone_sleeps: nil
        }

      body ->
        value = fn name ->
          case Regex.run(~r/^#{Regex.escape(name)} ([-0-9.e+]+)$/m, body) do
            [_, number] -> number |> Float.parse() |> elem(0)
            nil -> nil
          end
        end

        whole = fn
          nil -> nil
          number -> round(number)
        end

        %{
          memory: if(m = value.(~s(grove_beam_memory_bytes{kind="total"})), do: round(m)),
          run_queue: if(q = value.("grove_beam_run_queue"), do: round(q)),
          utilization: value.("grove_beam_scheduler_utilization"),
          # Zones on demand: counted only by a world of them.
          zones_awake: whole.(value.("grove_zones_awake")),
          zone_wakes: whole.(value.("grove_zone_wakes_total")),
          zone_sleeps: whole.(value.("grove_zone_sleeps_total"))
        }
    end
  end

  defp report_progress(%{opts: opts} = run, w) do
    if opts[:report_url] do
      body =
        :jiffy.encode(%{
          "players" => w.players,
          "moves_per_s" => w.moves_per_s,
          "p50_ms" => w.p50_ms || 0,
          "p99_ms" => w.p99_ms || 0,
          "errors" => w.errors,
          "knee" => run.knee || :null,
          "phase" => if(run.target, do: "steady", else: "ramp")
        })

      url =
        String.to_charlist(
          opts[:report_url] <>
            "/api/load/report" <> if(opts[:token], do: "?token=#{opts[:token]}", else: "")
        )

      # Best effort: a dashboard that cannot be reached must not stop the run.
      _ = :httpc.request(:post, {url, [], ~c"application/json", body}, [timeout: 2000], [])
    end

    :ok
  end

  defp finish(run) do
    total = Stats.read(run.stats)
    counts = total.counts
    seconds = (System.monotonic_time(:millisecond) - run.started) / 1000
    steady = steady_windows(run)
    latency = total.latency
    cpu = cpu_used(run.cpu, cpu_now(run.opts[:server_pid]), seconds)
    samples = if run.sampler, do: Soak.stop(run.sampler), else: []

    report = %{
      players: run.target || run.knee || 0,
      knee: run.knee,
      encoding: run.opts[:encoding],
      seconds: round(seconds),
      views_checked_by: describe_checks(run.opts[:check_views]),
      moves_per_s: average(steady, :moves_per_s),
      views_per_s: average(steady, :views_per_s),
      bytes_in_per_s: average(steady, :bytes_in_per_s),
      bytes_out_per_s: average(steady, :bytes_out_per_s),
      p50_ms: to_ms(Histogram.percentile(latency, 50)),
      p95_ms: to_ms(Histogram.percentile(latency, 95)),
      p99_ms: to_ms(Histogram.percentile(latency, 99)),
      max_ms: to_ms(Histogram.max(latency)),
      moves: counts.outcomes,
      moves_refused: counts.outcomes - counts.outcomes_ok,
      refused: for({reason, n} <- total.refused, n > 0, into: %{}, do: {reason, n}),
      acts_per_s: average(steady, :acts_per_s),
      act_p99_ms: to_ms(Histogram.percentile(total.act_latency, 99)),
      says_per_s: average(steady, :says_per_s),
      say_p50_ms: to_ms(Histogram.percentile(total.say_latency, 50)),
      say_p99_ms: to_ms(Histogram.percentile(total.say_latency, 99)),
      says_refused: counts.says_refused,
      heard_per_s: average(steady, :heard_per_s),
      connect_p50_ms: to_ms(Histogram.percentile(total.connect, 50)),
      connect_p99_ms: to_ms(Histogram.percentile(total.connect, 99)),
      connect_max_ms: to_ms(Histogram.max(total.connect)),
      connected: counts.connected,
      connect_retries: counts.connect_retries,
      connect_pending: counts.connect_pending,
      connect_failures: counts.connect_failures,
      timeouts: counts.timeouts,
      restored: counts.restored,
      protocol_errors: counts.protocol_errors,
      error_codes: for({code, n} <- total.errors, n > 0, into: %{}, do: {code, n}),
      error_texts: total.error_texts,
      views_checked: counts.views_checked,
      disconnects: Map.put(total.disconnects, :total, counts.disconnects),
      correctness_failures: Map.put(total.failures, :total, counts.correctness_failures),
      errors: errors(counts),
      moves_skipped: counts.moves_skipped,
      hog:
        if(run.opts[:hog] > 0,
          do: %{processes: run.opts[:hog], from_s: run.opts[:hog_from], for_s: run.opts[:hog_for]}
        ),
      cpu: cpu,
      windows: run.windows,
      stages: run.stages,
      baseline: run.baseline,
      samples: Enum.map(samples, fn {t, values} -> Map.put(values, :t, t) end),
      growth: Soak.trends(samples),
      by_url: by_url(run.targets, seconds)
    }

    print(run.opts[:out], report)
    report
  end

  # Each URL's part of the run, when there are several: over the whole
  # run, ramp included.
  defp by_url([_], _seconds), do: []

  defp by_url(targets, seconds) do
    for target <- targets do
      reading = Stats.read(target.stats)
      counts = reading.counts

      %{
        url: target.url,
        players: counts.joined - Enum.sum(Map.values(reading.disconnects)),
        connected: counts.connected,
        connect_failures: counts.connect_failures,
        connect_retries: counts.connect_retries,
        connect_pending: counts.connect_pending,
        moves_per_s: round(counts.outcomes / max(seconds, 1.0e-3)),
        p50_ms: to_ms(Histogram.percentile(reading.latency, 50)),
        p99_ms: to_ms(Histogram.percentile(reading.latency, 99)),
        errors: errors(counts),
        correctness_failures: counts.correctness_failures
      }
    end
  end

  # The windows after the ramp, when every player was connected; all of them when ramping to the knee.
  defp steady_windows(%{target: nil, windows: windows}), do: windows

  defp steady_windows(%{windows: windows, target: target}) do
    case Enum.filter(windows, &(&1.players >= target)) do
      [] -> windows
      steady -> steady
    end
  end

  defp average([], _key), do: 0

  defp average(windows, key),
    do: round(Enum.sum(Enum.map(windows, &Map.fetch!(&1, key))) / length(windows))

  defp print(out, r) do
    out.("")
    out.("== load: #{r.players} players over WebSocket (#{r.encoding}), #{r.seconds} s ==")
    if r.knee, do: out.("knee           #{r.knee} players")
    if r.stages != [], do: print_stages(out, r)

    out.(
      "connects       #{r.connected} ok, #{r.connect_failures} failed, #{r.connect_pending} pending (waiting to try again), #{r.connect_retries} tried again after Retry-After; p50 #{figure(r.connect_p50_ms)} ms, p99 #{figure(r.connect_p99_ms)} ms, max #{figure(r.connect_max_ms)} ms"
    )

    out.(
      "moves          #{r.moves_per_s}/s; round trip p50 #{figure(r.p50_ms)} ms, p95 #{figure(r.p95_ms)} ms, p99 #{figure(r.p99_ms)} ms, max #{figure(r.max_ms)} ms; " <>
        "#{r.moves} answered, #{r.moves_refused} of them refused"
    )

    if r.moves_refused > 0, do: out.("refused        #{inspect(r.refused)}")

    if r.says_per_s > 0 or r.say_p99_ms != nil do
      out.(
        "says           #{r.says_per_s}/s; round trip p50 #{figure(r.say_p50_ms)} ms, p99 #{figure(r.say_p99_ms)} ms; " <>
          "#{r.says_refused} refused; lines heard #{r.heard_per_s}/s"
      )
    end

    out.(
      "views          #{r.views_per_s}/s; bytes in #{kb(r.bytes_in_per_s)} KB/s, out #{kb(r.bytes_out_per_s)} KB/s; checked by #{r.views_checked_by} (#{r.views_checked} checks)"
    )

    out.("disconnects    #{inspect(r.disconnects)}")

    if r.restored > 0,
      do: out.("restored       #{r.restored} players welcomed again, their node lost")

    out.(
      "errors         #{r.errors} (protocol #{r.protocol_errors}, timeouts #{r.timeouts}, failed connects #{r.connect_failures})"
    )

    if r.protocol_errors > 0 do
      out.("error codes    #{inspect(r.error_codes)}")

      for {code, text} <- Enum.sort(r.error_texts),
          do: out.("               the first #{code}: #{inspect(text)}")
    end

    out.("correctness    #{inspect(r.correctness_failures)}")
    out.("cpu            #{inspect(r.cpu)}")
    if r.by_url != [], do: print_by_url(out, r.by_url)
    if r.growth != %{}, do: print_growth(out, r)
    print_windows(out, r.windows)
  end

  defp print_by_url(out, by_url) do
    out.("")

    out.(
      "| URL | players | connects ok | failed | pending | tried again | moves/s | p50 ms | p99 ms | errors | failures |"
    )

    out.("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")

    for u <- by_url do
      out.(
        "| #{u.url} | #{u.players} | #{u.connected} | #{u.connect_failures} | #{u.connect_pending} | " <>
          "#{u.connect_retries} | #{u.moves_per_s} | " <>
          "#{figure(u.p50_ms)} | #{figure(u.p99_ms)} | #{u.errors} | #{u.correctness_failures} |"
      )
    end
  end

  defp print_windows(_out, []), do: :ok

  defp print_windows(out, windows) do
    out.("")
    zones? = Enum.any?(windows, &(&1.zones_awake != nil))

    out.(
      "| t s | hog | players | moves/s | skipped/s | p50 ms | p99 ms | errors | server MB | run queue | schedulers busy |" <>
        if(zones?,
          do: " max ms | refused/s | zones awake | woken so far | slept so far |",
          else: ""
        )
    )

    out.(
      "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" <>
        if(zones?, do: " ---: | ---: | ---: | ---: | ---: |", else: "")
    )

    for w <- windows do
      out.(
        "| #{w.t} | #{if w.hog, do: "on", else: ""} | #{w.players} | #{w.moves_per_s} | #{w.skipped_per_s} | " <>
          "#{figure(w.p50_ms)} | #{figure(w.p99_ms)} | #{w.errors} | #{mb(w.server_memory)} | " <>
          "#{figure(w.server_run_queue)} | #{percent(w.server_utilization)} % |" <>
          if(zones?,
            do:
              " #{figure(w.max_ms)} | #{w.refused_per_s} | #{w.zones_awake || "-"} | " <>
                "#{w.zone_wakes || "-"} | #{w.zone_sleeps || "-"} |",
            else: ""
          )
      )
    end
  end

  # The server's gauges over the run, and which of them grow (Grove.Load.Soak).
  defp print_growth(out, r) do
    out.("")

    out.(
      "server gauges, #{length(r.samples)} samples (growth: t > 3 and a rise over 5 % after the first fifth)"
    )

    out.("| gauge | first | last | min | max | per hour | t | rise | grows |")
    out.("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")

    for key <- Soak.gauges(), trend = r.growth[key], trend != nil do
      out.(
        "| #{key} | #{amount(trend.first)} | #{amount(trend.last)} | #{amount(trend.min)} | " <>
          "#{amount(trend.max)} | #{amount(trend.per_hour)} | #{t_figure(trend.t)} | " <>
          "#{Float.round(trend.rise * 100, 1)} % | #{if trend.grows, do: "GROWS", else: "no"} |"
      )
    end

    grown = for {key, %{grows: true}} <- r.growth, do: key
    out.("growth         #{if grown == [], do: "none", else: Enum.join(grown, ", ")}")
  end

  defp amount(value) when abs(value) >= 1_000_000, do: "#{Float.round(value / 1_000_000, 1)} M"
  defp amount(value) when abs(value) >= 10_000, do: "#{Float.round(value / 1000, 1)} k"
  defp amount(value) when is_float(value), do: "#{Float.round(value, 1)}"
  defp amount(value), do: "#{value}"

  defp t_figure(t) when is_float(t), do: "#{Float.round(t, 1)}"
  defp t_figure(t), do: "#{t}"

  defp print_stages(out, r) do
    out.("")

    out.(
      "| players | moves/s | p50 ms | p99 ms | max ms | server p99 ms | views/s | B/player/s in | out | " <>
        "server CPU % | us per player-s (gross) | KB per player | load CPU % | " <>
        "others on the server's core % | errors | failures |"
    )

    out.(
      "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )

    for s <- r.stages do
      out.(
        "| #{s.players} | #{s.moves_per_s} | #{figure(s.p50_ms)} | #{figure(s.p99_ms)} | #{figure(s.max_ms)} | " <>
          "#{figure(s.server_p99_ms)} | " <>
          "#{s.views_per_s} | #{s.in_per_player_s} | #{s.out_per_player_s} | #{figure(s.server_percent)} | " <>
          "#{figure(s.server_us_per_player_s)} (#{figure(s.server_us_per_player_s_gross)}) | " <>
          "#{kb(s.memory_per_player)} | #{figure(s.load_percent)} | #{figure(s.others_percent)} | " <>
          "#{s.errors} | #{s.correctness_failures} |"
      )
    end

    if r.baseline do
      out.(
        "baseline (nobody connected): server #{figure(r.baseline.server_percent)} % of a core, #{mb(r.baseline.memory)} MB"
      )
    end

    out.("")
  end

  ## CPU of this process and the server's, from /proc

  defp cpu_now(server_pid) do
    server = if server_pid, do: proc_ticks(to_string(server_pid))

    %{
      load: proc_ticks(System.pid()),
      server: server,
      cores: if(server, do: core_ticks(server_cores(to_string(server_pid)))),
      at: System.monotonic_time(:millisecond)
    }
  end

  defp cpu_used(before, now, seconds) do
    per = fn a, b ->
      if a && b, do: Float.round((b - a) / ticks_per_second() / seconds * 100, 1)
    end

    %{
      load_percent: per.(before.load, now.load),
      server_percent: per.(before.server, now.server),
      others_percent: others(before, now)
    }
  end

  # What else ran on the cores the server is pinned to, in per cent of
  # one: their busy time less the server's own, and less the load's when
  # the server has every core (the load then runs beside it). A figure
  # is the server's only while this stays near 0 (the machine may be
  # shared).
  defp others(%{cores: {busy0, total0, n}} = before, %{cores: {busy1, total1, n}} = now)
       when total1 > total0 do
    load = if n == online_cores(), do: now.load - before.load, else: 0
    busy = busy1 - busy0 - (now.server - before.server) - load
    Float.round(max(busy, 0) / ((total1 - total0) / n) * 100, 1)
  end

  defp others(_before, _now), do: nil

  # The cores the server may run on.
  defp server_cores(pid) do
    with {:ok, status} <- File.read("/proc/#{pid}/status"),
         [_, list] <- Regex.run(~r/^Cpus_allowed_list:\s*(\S+)$/m, status) do
      parse_cores(list)
    else
      _ -> nil
    end
  end

  defp parse_cores(list) do
    for part <- String.split(list, ","),
        core <-
          (case String.split(part, "-") do
             [a, b] -> String.to_integer(a)..String.to_integer(b)
             [a] -> [String.to_integer(a)]
           end),
        do: core
  end

  defp online_cores do
    case File.read("/proc/stat") do
      {:ok, stat} -> length(Regex.scan(~r/^cpu\d+ /m, stat))
      _ -> 0
    end
  end

  # Busy and total ticks of those cores, summed, from /proc/stat.
  defp core_ticks(nil), do: nil

  defp core_ticks(cores) do
    {:ok, stat} = File.read("/proc/stat")
    wanted = MapSet.new(cores, &"cpu#{&1}")

    {busy, total} =
      for line <- String.split(stat, "\n"),
          [name | fields] <- [String.split(line)],
          name in wanted,
          reduce: {0, 0} do
        {busy, total} ->
          ticks = Enum.map(fields, &String.to_integer/1)
          # idle and iowait are the 4th and 5th fields.
          idle = Enum.at(ticks, 3) + Enum.at(ticks, 4)
          {busy + Enum.sum(ticks) - idle, total + Enum.sum(ticks)}
      end

    {busy, total, length(cores)}
  end

  defp proc_ticks(pid) do
    case File.read("/proc/#{pid}/stat") do
      {:ok, stat} ->
        # Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
        [_, rest] = String.split(stat, ") ", parts: 2)
        fields = String.split(rest, " ")
        String.to_integer(Enum.at(fields, 11)) + String.to_integer(Enum.at(fields, 12))

      {:error, _} ->
        nil
    end
  end

  defp ticks_per_second do
    case System.cmd("getconf", ["CLK_TCK"], stderr_to_stdout: true) do
      {value, 0} -> value |> String.trim() |> String.to_integer()
      _ -> 100
    end
  end

  ## The server's memory and its own view of players' moves, from its /metrics

  defp metrics_url(host, port), do: "http://#{host}:#{port}/metrics"

  # The server's total memory and its histogram of players' moves.
  defp server_metrics(url, token) do
    case Soak.scrape(url, token) do
      nil ->
        %{memory: nil, moves: []}

      body ->
        memory = if bytes = Soak.parse(body)[:memory], do: round(bytes)

        moves =
          for [_, le, count] <-
                Regex.scan(~r/^grove_player_move_seconds_bucket\{le="([^"]+)"\} (\d+)/m, body),
              le != "+Inf",
              do: {String.to_float(le), String.to_integer(count)}

        %{memory: memory, moves: moves}
    end
  end

  # The p99 between two readings of a cumulative histogram: the first bucket
  # edge that holds 99 % of the moves in between (in ms, conservative).
  defp server_p99([], _later), do: nil
  defp server_p99(_earlier, []), do: nil

  defp server_p99(earlier, later) do
    buckets = Enum.zip_with(later, earlier, fn {le, b}, {le, a} -> {le, b - a} end)

    case List.last(buckets) do
      {_, total} when total > 0 ->
        Enum.find_value(buckets, fn {le, count} ->
          if count >= 0.99 * total, do: Float.round(le * 1000, 1)
        end)

      _ ->
        nil
    end
  end

  ## The terrain, for the checks that nobody stands on a tree

  @doc false
  # Also the chaos lab's: the server's terrain as `Grove.Load.Player` checks
  # it, or nil for a world too large to send whole.
  def fetch_terrain(host, port) do
    {:ok, _} = Application.ensure_all_started(:inets)
    url = ~c"http://#{host}:#{port}/terrain"

    case :httpc.request(:get, {url, []}, [timeout: 30_000], body_format: :binary) do
      {:ok, {{_, 200, _}, headers, cells}} ->
        width = headers |> List.keyfind(~c"x-grove-width", 0) |> elem(1) |> List.to_integer()
        %{width: width, cells: cells}

      # A world too large to send whole: each area's ground comes with it.
      {:ok, {{_, 404, _}, _headers, _body}} ->
        nil

      other ->
        raise "could not fetch the terrain from #{url}: #{inspect(other, limit: 5)}"
    end
  end

  defp kb(nil), do: "-"
  defp kb(bytes), do: round(bytes / 1024)

  defp mb(nil), do: "-"
  defp mb(bytes), do: round(bytes / 1_000_000)

  defp pad(value, width), do: String.pad_leading(to_string(value), width)
end
