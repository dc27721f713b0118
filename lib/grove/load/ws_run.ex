defmodule Grove.Load.WsRun do
  @moduledoc """
  A load run of real players over WebSocket (`mix grove.load ws`), meant to
  run in its own OS process against a server elsewhere.

  Bots (`Grove.Load.Bot`) connect at `:ramp` per second up to `:players`,
  join with view updates on, move every `:move_every` ms and check what they
  receive. A progress line every `:every` seconds; at the end a report with
  connect times and failures, the move round trip, views received,
  disconnects by reason, protocol errors and correctness failures.

  Without `:players`, a ramp keeps adding players until the p99 round trip
  over the last progress window passes `:limit_ms` or errors appear, and
  reports the knee: the players connected at the last window that passed.

  When `:report_url` is given (the server's base URL) the run posts each
  progress line to `/api/load/report` there, so the server's dashboard shows
  the run and its knee.
  """

  import Grove.Load.Report, only: [figure: 1]
  import Grove.Metrics.Histogram, only: [to_ms: 1]

  alias Grove.Load.{Bot, Stats}
  alias Grove.Metrics.Histogram

  @defaults [
    url: "ws://127.0.0.1:4000/ws",
    players: nil,
    ramp: nil,
    duration: 60,
    move_every: 1000,
    encoding: :json,
    every: 5,
    limit_ms: 100,
    max_players: 200_000,
    report_url: nil,
    token: nil,
    server_pid: nil,
    out: &IO.puts/1
  ]

  @doc "Runs the load; returns the report (a map with at least the keys the JSON needs)."
  @spec run(keyword()) :: map()
  def run(opts) do
    opts = Keyword.validate!(opts, @defaults)
    %URI{host: host, port: port, path: path, query: query} = URI.parse(opts[:url])

    path =
      (path || "/ws") <>
        "?" <>
        URI.encode_query(
          Map.merge(URI.decode_query(query || ""), %{"encoding" => to_string(opts[:encoding])})
        )

    terrain = fetch_terrain(host, port)
    stats = Stats.new()

    {:ok, bots} =
      DynamicSupervisor.start_link(strategy: :one_for_one, max_children: opts[:max_players])

    bot_opts = [
      host: host,
      port: port,
      path: path,
      encoding: opts[:encoding],
      stats: stats,
      terrain: terrain,
      move_every: opts[:move_every]
    ]

    target = opts[:players]
    ramp = opts[:ramp] || if(target, do: max(div(target, 10), 100), else: 100)
    started = System.monotonic_time(:millisecond)

    run = %{
      opts: opts,
      stats: stats,
      bots: bots,
      bot_opts: bot_opts,
      target: target,
      ramp: ramp,
      started: started,
      cpu: cpu_now(opts[:server_pid]),
      windows: [],
      knee: nil,
      spawned: 0
    }

    opts[:out].(
      "load: #{if target, do: "#{target} players", else: "ramping to the knee"} at #{ramp}/s on #{opts[:url]} (#{opts[:encoding]}), moves every #{opts[:move_every]} ms"
    )

    run = loop(run, Stats.read(stats), started)
    stop_bots(bots)
    finish(run)
  end

  # Every 100 ms: spawn the players due; every `every` seconds: a progress
  # window, and the stop conditions.
  defp loop(run, window_start, window_at) do
    now = System.monotonic_time(:millisecond)
    elapsed = now - run.started
    run = spawn_due(run, elapsed)

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
      receive do
      after
        100 -> loop(run, window_start, window_at)
      end
    end
  end

  defp spawn_due(run, elapsed) do
    due = min(div(elapsed * run.ramp, 1000) + 1, run.target || run.opts[:max_players])

    if due > run.spawned do
      for _ <- (run.spawned + 1)..due do
        DynamicSupervisor.start_child(run.bots, %{
          id: Bot,
          start: {Bot, :start_link, [run.bot_opts]},
          restart: :temporary
        })
      end

      %{run | spawned: due}
    else
      run
    end
  end

  defp stop?(%{target: nil} = run, window, _elapsed) do
    passed = window.p99_ms != nil and window.p99_ms <= run.opts[:limit_ms] and window.errors == 0

    cond do
      passed and run.spawned < run.opts[:max_players] ->
        {%{run | knee: window.players}, false}

      passed ->
        {%{run | knee: window.players}, true}

      true ->
        {run, true}
    end
  end

  defp stop?(run, _window, elapsed) do
    ramp_ms = div(run.target * 1000, run.ramp)
    {run, elapsed >= ramp_ms + run.opts[:duration] * 1000}
  end

  defp window(run, diff, seconds, elapsed) do
    counts = diff.counts
    reading = Stats.read(run.stats)

    %{
      t: round(elapsed / 1000),
      players: reading.counts.joined - Enum.sum(Map.values(reading.disconnects)),
      moves_per_s: round(counts.outcomes / seconds),
      views_per_s: round(counts.view_frames / seconds),
      bytes_in_per_s: round(counts.bytes_in / seconds),
      bytes_out_per_s: round(counts.bytes_out / seconds),
      p50_ms: to_ms(Histogram.percentile(diff.latency, 50)),
      p99_ms: to_ms(Histogram.percentile(diff.latency, 99)),
      errors: errors(counts),
      correctness_failures: counts.correctness_failures
    }
  end

  defp errors(counts),
    do: counts.connect_failures + counts.protocol_errors + counts.timeouts + counts.disconnects

  defp progress(run, w) do
    run.opts[:out].(
      "load #{pad(w.t, 5)} s  #{pad(w.players, 6)} players  #{pad(w.moves_per_s, 6)} moves/s  " <>
        "#{pad(w.views_per_s, 7)} views/s  in #{kb(w.bytes_in_per_s)} KB/s  out #{kb(w.bytes_out_per_s)} KB/s  " <>
        "p50 #{figure(w.p50_ms)} ms  p99 #{figure(w.p99_ms)} ms  errors #{w.errors}  failures #{w.correctness_failures}"
    )
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

  defp stop_bots(bots) do
    for {_, pid, _, _} <- DynamicSupervisor.which_children(bots),
        is_pid(pid),
        do: send(pid, :stop)

    DynamicSupervisor.stop(bots, :normal, :infinity)
  end

  defp finish(run) do
    total = Stats.read(run.stats)
    counts = total.counts
    seconds = (System.monotonic_time(:millisecond) - run.started) / 1000
    steady = steady_windows(run)
    latency = total.latency
    cpu = cpu_used(run.cpu, cpu_now(run.opts[:server_pid]), seconds)

    report = %{
      players: if(run.target, do: run.target, else: run.knee || 0),
      knee: run.knee,
      encoding: run.opts[:encoding],
      seconds: round(seconds),
      moves_per_s: average(steady, :moves_per_s),
      views_per_s: average(steady, :views_per_s),
      bytes_in_per_s: average(steady, :bytes_in_per_s),
      bytes_out_per_s: average(steady, :bytes_out_per_s),
      p50_ms: to_ms(Histogram.percentile(latency, 50)),
      p95_ms: to_ms(Histogram.percentile(latency, 95)),
      p99_ms: to_ms(Histogram.percentile(latency, 99)),
      max_ms: to_ms(Histogram.max(latency)),
      connect_p50_ms: to_ms(Histogram.percentile(total.connect, 50)),
      connect_p99_ms: to_ms(Histogram.percentile(total.connect, 99)),
      connect_max_ms: to_ms(Histogram.max(total.connect)),
      connected: counts.connected,
      connect_failures: counts.connect_failures,
      timeouts: counts.timeouts,
      protocol_errors: counts.protocol_errors,
      disconnects: Map.put(total.disconnects, :total, counts.disconnects),
      correctness_failures: Map.put(total.failures, :total, counts.correctness_failures),
      errors: errors(counts),
      cpu: cpu,
      windows: run.windows
    }

    print(run.opts[:out], report)
    report
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

    out.(
      "connects       #{r.connected} ok, #{r.connect_failures} failed; p50 #{figure(r.connect_p50_ms)} ms, p99 #{figure(r.connect_p99_ms)} ms, max #{figure(r.connect_max_ms)} ms"
    )

    out.(
      "moves          #{r.moves_per_s}/s; round trip p50 #{figure(r.p50_ms)} ms, p95 #{figure(r.p95_ms)} ms, p99 #{figure(r.p99_ms)} ms, max #{figure(r.max_ms)} ms"
    )

    out.(
      "views          #{r.views_per_s}/s; bytes in #{kb(r.bytes_in_per_s)} KB/s, out #{kb(r.bytes_out_per_s)} KB/s"
    )

    out.("disconnects    #{inspect(r.disconnects)}")

    out.(
      "errors         #{r.errors} (protocol #{r.protocol_errors}, timeouts #{r.timeouts}, failed connects #{r.connect_failures})"
    )

    out.("correctness    #{inspect(r.correctness_failures)}")
    out.("cpu            #{inspect(r.cpu)}")
  end

  ## CPU of this process and the server's, from /proc

  defp cpu_now(server_pid) do
    %{
      load: proc_ticks(System.pid()),
      server: if(server_pid, do: proc_ticks(to_string(server_pid)))
    }
  end

  defp cpu_used(before, now, seconds) do
    per = fn a, b ->
      if a && b, do: Float.round((b - a) / ticks_per_second() / seconds * 100, 1)
    end

    %{load_percent: per.(before.load, now.load), server_percent: per.(before.server, now.server)}
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

  ## The terrain, for the bots' check that nobody stands on a tree

  defp fetch_terrain(host, port) do
    {:ok, _} = Application.ensure_all_started(:inets)
    url = ~c"http://#{host}:#{port}/terrain"

    case :httpc.request(:get, {url, []}, [timeout: 30_000], body_format: :binary) do
      {:ok, {{_, 200, _}, headers, cells}} ->
        width = headers |> List.keyfind(~c"x-grove-width", 0) |> elem(1) |> List.to_integer()
        %{width: width, cells: cells}

      other ->
        raise "could not fetch the terrain from #{url}: #{inspect(other, limit: 5)}"
    end
  end

  defp kb(bytes), do: round(bytes / 1024)

  defp pad(value, width), do: String.pad_leading(to_string(value), width)
end
