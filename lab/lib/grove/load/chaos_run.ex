defmodule Grove.Load.ChaosRun do
  @moduledoc """
  The chaos lab (`mix grove.chaos`): players against a server while faults
  are injected into it, then the invariants that must hold whatever
  happened.

  It starts the server itself, as `make run` does but in a temporary folder
  and as a distributed node (a random cookie, in a file only the server
  reads), and reaches into it with `Grove.Chaos` over distributed Erlang.
  Players (`Grove.Load.ChaosBot`, one process each) log in with accounts
  of their own, join with their tokens, move every `:move_every` ms, check
  every outcome (and a sample of them their views), and connect again
  whenever their connection closes.

  Every `:fault_every` ms one fault, chosen at random among `:faults`:

    * `:zone`, `:session`, `:broadcaster`, `:saver` - a process of that
      kind killed (`Grove.Chaos.inject/3`);
    * `:store` - the store's database locked from outside for
      `:store_stall` ms, longer than the store's deadline (SQLite: an
      exclusive transaction from this OS process);

  and once, at `:restart_at` seconds, `:restart`: the server stopped with
  SIGTERM (its exit status must be 0) and started again on the same data.

  When `:fuzz_every` is set, the HTTP and WebSocket front doors are also
  fuzzed that often (`Grove.Load.Fuzz`), and every input must be refused
  cleanly.

  At the end the players stop moving, and it checks:

    * every move got exactly one outcome, or its connection closed (with a
      `bye` and its reason, a close code, or, for a killed session, a
      reset): no move left without an answer on an open connection, no
      outcome twice, none that contradicts the moves acknowledged before;
    * views never showed two entities on a cell or one on a blocked cell;
    * the world's audit (`Grove.World.audit/2`): every entity in exactly
      one zone and the directory, no cell shared, none on blocked ground;
    * every connected player's entity is where its last acknowledged
      outcome put it;
    * a player that reconnects after a goodbye (a drain, the restart) comes
      back where it stood (or next to it when someone took the cell); after
      an abrupt close, on a cell it stood on before (the positions are
      saved every few seconds, and what a killed session could not hand
      over is the loss the design accepts);
    * every account the server acknowledged still logs in, as itself;
    * every player is back in the game (a join refused while the store is
      busy is tried again, as a client would).

  Any violation is listed in the report, and `run/1` returns it with
  `violations` > 0 so that the task exits non-zero.
  """

  import Grove.Load.Report, only: [figure: 1]
  import Grove.Metrics.Histogram, only: [to_ms: 1]

  alias Grove.Load.{ChaosBot, Server, Stats, WsRun}
  alias Grove.Ports
  alias Grove.Metrics.Histogram

  @defaults [
    players: 200,
    duration: 600,
    fault_every: 2000,
    faults: [:zone, :session, :broadcaster, :saver, :store, :restart],
    store_stall: 4000,
    restart_at: nil,
    fuzz_every: nil,
    fuzz_count: 20,
    move_every: 1000,
    encoding: :json,
    check_views: 50,
    ramp: 50,
    actors: 20_000,
    width: nil,
    height: nil,
    seed: nil,
    every: 10,
    server_log: nil,
    out: &IO.puts/1
  ]

  # The server running now, for the lab's last word if it fails midway.
  @server_key {__MODULE__, :server}

  @doc "Runs the lab; returns the report, whose `:violations` is the count that fails it."
  @spec run(keyword()) :: map()
  def run(opts) do
    opts = Keyword.validate!(opts, @defaults)
    seed = opts[:seed] || :rand.uniform(1_000_000)
    :rand.seed(:exsss, seed)
    {:ok, _} = Application.ensure_all_started(:inets)

    dir =
      Path.join(
        System.tmp_dir!(),
        "grove-chaos-#{System.pid()}-#{System.unique_integer([:positive])}"
      )

    File.mkdir_p!(dir)
    out = opts[:out]

    epmd_before = epmd_running?()

    try do
      lab(opts, seed, dir, out)
    after
      # Whatever happened, the server started last does not outlive the lab.
      if server = Process.delete(@server_key), do: Server.stop(server, 30_000)
      File.rm_rf(dir)
      # The server's node started the name server: leave none behind.
      unless epmd_before, do: stop_epmd()
    end
  end

  defp epmd_running? do
    match?({_, 0}, System.cmd("epmd", ["-names"], stderr_to_stdout: true))
  end

  defp stop_epmd do
    Node.stop()
    System.cmd("epmd", ["-kill"], stderr_to_stdout: true)
  end

  defp lab(opts, seed, dir, out) do
    port = Ports.free()
    nonce = Base.encode16(:crypto.strong_rand_bytes(4), case: :lower)
    name = "grove_chaos_#{nonce}"
    cookie = Base.url_encode64(:crypto.strong_rand_bytes(24), padding: false)
    log = File.open!(opts[:server_log] || Path.join(dir, "server.log"), [:write, :utf8])

    server_opts = [
      env:
        [
          {"GROVE_PORT", to_string(port)},
          {"GROVE_DATA", Path.join(dir, "data")},
          {"GROVE_ACTORS", to_string(opts[:actors])},
          # Every player logs in from this one address.
          {"GROVE_LOGIN_RATE", "100000"},
          {"MIX_ENV", to_string(Mix.env())}
        ] ++
          for(
            {key, var} <- [width: "GROVE_WIDTH", height: "GROVE_HEIGHT"],
            opts[key] != nil,
            do: {var, to_string(opts[key])}
          ),
      label: "server",
      node: name,
      cookie: cookie,
      home: Path.join(dir, "home")
    ]

    duration = opts[:duration]
    restart_at = if :restart in opts[:faults], do: opts[:restart_at] || div(duration, 2)

    out.(
      "chaos: #{opts[:players]} players for #{duration} s, a fault every #{opts[:fault_every]} ms " <>
        "of #{Enum.join(opts[:faults] -- [:restart], ", ")}" <>
        if(restart_at, do: ", a SIGTERM restart at #{restart_at} s", else: "") <>
        if(opts[:fuzz_every], do: ", fuzzing every #{opts[:fuzz_every]} s", else: "") <>
        " (seed #{seed})"
    )

    server = start_server(server_opts, port, log, out)
    node = connect_node(name, cookie)

    run = %{
      opts: opts,
      node: node,
      host: "127.0.0.1",
      port: port,
      path: "/ws?encoding=#{opts[:encoding]}",
      encoding: opts[:encoding],
      move_every: opts[:move_every],
      nonce: nonce,
      stats: Stats.new(),
      terrain: WsRun.fetch_terrain("127.0.0.1", port),
      store_path: Path.join([dir, "data", "grove.db"]),
      # Stalls begun: a player placed at random during one is excused.
      stalls: :atomics.new(1, []),
      # Whether one is on (1), and when the last one ended (2, monotonic ms).
      stalling: stalling()
    }

    state = %{
      run: run,
      server: server,
      server_opts: server_opts,
      log: log,
      bots: [],
      faults: %{},
      fault_log: [],
      server_errors: 0,
      violations: [],
      restart_at: restart_at,
      restarted: false,
      fuzz: %{rounds: 0, violations: []},
      started: now(),
      next_fault: if(opts[:faults] -- [:restart] != [], do: now() + 5000),
      next_fuzz: if(opts[:fuzz_every], do: now() + opts[:fuzz_every] * 1000),
      fuzzing: nil,
      stall: nil
    }

    state = loop(state, Stats.read(run.stats), now())

    try do
      finish(state)
    after
      for bot <- state.bots, do: Process.exit(bot, :kill)
      Process.delete(@server_key)
      Server.stop(state.server, 30_000, &log_line(log, &1))
      File.close(log)
    end
  end

  defp stalling do
    stalling = :atomics.new(2, signed: true)
    # No stall yet: the last one ended long ago.
    :atomics.put(stalling, 2, System.monotonic_time(:millisecond) - 86_400_000)
    stalling
  end

  ## The server

  defp start_server(server_opts, port, log, out) do
    server = Server.start(server_opts)
    Process.put(@server_key, server)
    pid = Server.await(server, port, &log_line(log, &1), 1200)
    out.("chaos: server up on port #{port} (OS pid #{pid})")
    server
  end

  defp connect_node(name, cookie) do
    unless Node.alive?() do
      {:ok, _} = Node.start(:"grove_chaos_lab_#{System.pid()}", :shortnames)
    end

    [_, host] = node() |> to_string() |> String.split("@")
    node = :"#{name}@#{host}"
    Node.set_cookie(node, String.to_atom(cookie))
    await_node(node, 100)
  end

  defp await_node(node, tries) do
    cond do
      Node.ping(node) == :pong and world_ready?(node) ->
        node

      tries > 0 ->
        Process.sleep(100)
        await_node(node, tries - 1)

      true ->
        raise "the server's node #{node} did not answer"
    end
  end

  @doc false
  # Calls `Grove.Chaos` in the server's node. The faults and the audit run
  # inside the server, which is Grove alone (a release has no Grove.Chaos):
  # the lab loads its own there when the node, just started, lacks it. Two
  # callers loading it at once are harmless: the later load is refused or
  # makes the earlier code old, which runs on.
  @spec chaos(node(), atom(), [term()], timeout()) :: term()
  def chaos(node, function, args, timeout) do
    :erpc.call(node, Grove.Chaos, function, args, timeout)
  catch
    :error, {:exception, :undef, [{Grove.Chaos, _, _, _} | _]} ->
      {module, binary, file} = :code.get_object_code(Grove.Chaos)
      _ = :erpc.call(node, :code, :load_binary, [module, file, binary], timeout)
      :erpc.call(node, Grove.Chaos, function, args, timeout)
  end

  defp world_ready?(node) do
    :erpc.call(node, Grove.World, :ready?, [Grove.world()], 5000)
  catch
    _, _ -> false
  end

  defp log_line(log, line) do
    IO.write(log, [line, ?\n])
    line
  end

  ## The run

  defp loop(state, window_start, window_at) do
    run = state.run
    opts = run.opts
    now = now()
    elapsed = now - state.started

    state =
      state
      |> spawn_bots(min(div(elapsed * opts[:ramp], 1000) + 1, opts[:players]))
      |> maybe_fault(now)
      |> maybe_restart(elapsed)
      |> maybe_fuzz(now)

    {window_start, window_at} =
      if now - window_at >= opts[:every] * 1000 do
        reading = Stats.read(run.stats)
        progress(state, Stats.diff(reading, window_start), (now - window_at) / 1000, elapsed)
        {reading, now}
      else
        {window_start, window_at}
      end

    if elapsed >= opts[:duration] * 1000 do
      state |> stop_stall() |> await_fuzz()
    else
      state = relay(state, 100)
      loop(state, window_start, window_at)
    end
  end

  # The server's lines go to its log; an exit we did not cause is a violation.
  defp relay(%{server: %Server{port: port}} = state, wait) do
    receive do
      {^port, {:data, {_eol, line}}} ->
        log_line(state.log, line)
        errors = if String.contains?(line, "[error]"), do: 1, else: 0
        relay(%{state | server_errors: state.server_errors + errors}, 0)

      {^port, {:exit_status, status}} ->
        raise "the server exited on its own (status #{status}); see its log"

      {:stall_done, result} ->
        relay(%{state | stall: nil} |> note_fault(:store, result), 0)

      {:fuzz_done, report} ->
        relay(fuzzed(state, report), 0)
    after
      wait -> state
    end
  end

  defp spawn_bots(state, due) do
    have = length(state.bots)

    if due > have do
      checks = state.run.opts[:check_views]

      bots =
        for n <- (have + 1)..due do
          {:ok, bot} = ChaosBot.start(state.run, n, n <= checks)
          bot
        end

      %{state | bots: state.bots ++ bots}
    else
      state
    end
  end

  ## Faults

  defp maybe_fault(%{next_fault: at} = state, now) when at == nil or now < at, do: state

  defp maybe_fault(state, now) do
    opts = state.run.opts
    state = %{state | next_fault: now + opts[:fault_every]}

    case Enum.random(opts[:faults] -- [:restart]) do
      :store -> stall_store(state)
      kind -> inject(state, kind)
    end
  end

  defp inject(state, kind) do
    result =
      try do
        chaos(state.run.node, :inject, [Grove, kind, :rand.uniform(1_073_741_824)], :infinity)
      catch
        class, reason -> {:skipped, "#{class}: #{inspect(reason, limit: 5)}"}
      end

    note_fault(state, kind, result)
  end

  defp note_fault(state, kind, {:ok, what}) do
    t = div(now() - state.started, 1000)

    %{
      state
      | faults: Map.update(state.faults, kind, 1, &(&1 + 1)),
        fault_log: [{t, kind, what} | state.fault_log]
    }
  end

  defp note_fault(state, kind, {:skipped, _why}),
    do: %{state | faults: Map.update(state.faults, {:skipped, kind}, 1, &(&1 + 1))}

  # The lock is held by a process of this VM (another OS process than the
  # server's: in the server's VM it would wait behind the store on the
  # SQLite driver's one thread).
  defp stall_store(%{stall: nil, fuzzing: nil} = state) do
    run = state.run
    lab = self()
    :atomics.add(run.stalls, 1, 1)
    :atomics.put(run.stalling, 1, 1)

    holder =
      spawn_link(fn ->
        result = hold_lock(run.store_path, run.opts[:store_stall])
        :atomics.put(run.stalling, 2, System.monotonic_time(:millisecond))
        :atomics.put(run.stalling, 1, 0)
        send(lab, {:stall_done, result})
      end)

    %{state | stall: holder}
  end

  # One stall at a time, and none while the front doors are fuzzed; a stall
  # due then is another kind's turn.
  defp stall_store(state), do: inject(state, Enum.random([:zone, :session]))

  defp hold_lock(path, ms) do
    name = :"grove_chaos_lock_#{System.unique_integer([:positive])}"

    with {:ok, _} <- :sqlite3.open(name, file: String.to_charlist(path)),
         :ok <- :sqlite3.sql_exec(name, "BEGIN EXCLUSIVE") do
      Process.sleep(ms)
      :sqlite3.sql_exec(name, "ROLLBACK")
      :sqlite3.close(name)
      {:ok, "the store's database locked for #{ms} ms"}
    else
      other ->
        catch_close(name)
        {:skipped, inspect(other)}
    end
  end

  defp catch_close(name) do
    :sqlite3.close(name)
  catch
    _, _ -> :ok
  end

  defp stop_stall(%{stall: nil} = state), do: state

  defp stop_stall(state) do
    receive do
      {:stall_done, result} -> note_fault(%{state | stall: nil}, :store, result)
    after
      state.run.opts[:store_stall] + 10_000 -> state
    end
  end

  ## The restart

  defp maybe_restart(%{restart_at: at, restarted: false} = state, elapsed)
       when at != nil and elapsed >= at * 1000 do
    out = state.run.opts[:out]
    # A fuzz cut off by the restart would count the refused connections.
    state = await_fuzz(state)
    out.("chaos: SIGTERM to the server")
    stopped_at = now()
    status = Server.stop(state.server, 60_000, &log_line(state.log, &1))
    down = now() - stopped_at

    state =
      if status == 0,
        do: state,
        else: violation(state, "the server's graceful stop exited with #{inspect(status)}")

    server = start_server(state.server_opts, state.run.port, state.log, out)
    await_node(state.run.node, 600)

    out.(
      "chaos: server stopped in #{down} ms (exit status #{inspect(status)}), up again after #{now() - stopped_at} ms"
    )

    %{
      state
      | server: server,
        restarted: true,
        faults: Map.update(state.faults, :restart, 1, &(&1 + 1)),
        fault_log: [{div(elapsed, 1000), :restart, "SIGTERM, exit #{status}"} | state.fault_log]
    }
  end

  defp maybe_restart(state, _elapsed), do: state

  ## Fuzzing the front doors

  defp maybe_fuzz(%{next_fuzz: nil} = state, _now), do: state
  defp maybe_fuzz(%{next_fuzz: at} = state, now) when now < at, do: state

  # One fuzz at a time, in a process of its own so that faults go on; never
  # while the store is stalled or just after (a valid login may then get
  # 503, the right answer, which the fuzzer would count against it).
  defp maybe_fuzz(%{fuzzing: pid} = state, _now) when pid != nil, do: state

  defp maybe_fuzz(state, now) do
    run = state.run
    stall_over = now - :atomics.get(run.stalling, 2) > 3000

    if state.stall == nil and stall_over do
      lab = self()
      opts = [count: run.opts[:fuzz_count], seed: :rand.uniform(1_000_000_000)]

      pid =
        spawn_link(fn ->
          send(lab, {:fuzz_done, Grove.Load.Fuzz.run(run.host, run.port, opts)})
        end)

      %{state | fuzzing: pid, next_fuzz: now + run.opts[:fuzz_every] * 1000}
    else
      state
    end
  end

  defp fuzzed(state, report) do
    fuzz = %{
      rounds: state.fuzz.rounds + report.rounds,
      violations: Enum.take(state.fuzz.violations ++ report.violations, 50)
    }

    %{state | fuzz: fuzz, fuzzing: nil}
  end

  defp await_fuzz(%{fuzzing: nil} = state), do: state

  defp await_fuzz(state) do
    receive do
      {:fuzz_done, report} -> fuzzed(state, report)
    end
  end

  ## Progress and the end

  defp progress(state, diff, seconds, elapsed) do
    counts = diff.counts
    faults = state.faults |> Enum.reject(&match?({{:skipped, _}, _}, &1)) |> Map.new()

    state.run.opts[:out].(
      "chaos #{pad(div(elapsed, 1000), 5)} s  #{pad(length(state.bots), 5)} players  " <>
        "#{pad(round(counts.outcomes / seconds), 5)} moves/s  " <>
        "p99 #{figure(to_ms(Histogram.percentile(diff.latency, 99)))} ms  " <>
        "timeouts #{counts.timeouts}  failures #{counts.correctness_failures}  " <>
        "faults #{inspect(faults)}"
    )
  end

  defp finish(state) do
    run = state.run
    out = run.opts[:out]
    out.("chaos: faults stop; the players stop moving and the invariants are checked")

    # Players whose connection closed last come back before the checks.
    state = await_players(state, now() + 30_000)

    frozen =
      state.bots
      |> Task.async_stream(&freeze/1, max_concurrency: 100, timeout: :infinity)
      |> Enum.count(fn {:ok, result} -> result == :stuck end)

    summaries = Enum.map(state.bots, &ChaosBot.summary/1)

    state =
      if frozen > 0,
        do: violation(state, "#{frozen} players' last moves got no outcome"),
        else: state

    state = state |> check_moves() |> check_positions(summaries) |> check_audit()
    state = check_accounts(state, summaries)
    state = check_returns(state, summaries)
    state = check_fuzz(state)

    total = Stats.read(run.stats)
    tallies = Enum.reduce(summaries, %{}, &merge_tally(&2, &1.tally))

    report = %{
      players: length(state.bots),
      seconds: div(now() - state.started, 1000),
      faults: state.faults,
      moves_sent: total.counts.moves_sent,
      outcomes: total.counts.outcomes,
      p50_ms: to_ms(Histogram.percentile(total.latency, 50)),
      p99_ms: to_ms(Histogram.percentile(total.latency, 99)),
      max_ms: to_ms(Histogram.max(total.latency)),
      views_checked: total.counts.views_checked,
      closes: for({{:closed, reason}, n} <- tallies, into: %{}, do: {reason, n}),
      in_flight_at_close: for({{:in_flight_at_close, r}, n} <- tallies, into: %{}, do: {r, n}),
      kept: for({{:kept, kept, how}, n} <- tallies, into: %{}, do: {{kept, how}, n}),
      placed: for({{:placed, placed}, n} <- tallies, into: %{}, do: {placed, n}),
      logins: Map.get(tallies, :logins, 0),
      login_failures: for({{:login_failed, r}, n} <- tallies, into: %{}, do: {r, n}),
      connect_failures: Map.get(tallies, :connect_failed, 0),
      join_refusals: for({{:join_refused, code}, n} <- tallies, into: %{}, do: {code, n}),
      joins_unanswered: Map.get(tallies, :join_unanswered, 0),
      server_error_lines: state.server_errors,
      fuzz_rounds: state.fuzz.rounds,
      violations: length(state.violations),
      violation_list: Enum.reverse(state.violations)
    }

    print(out, report)
    report
  end

  defp await_players(state, deadline) do
    out = Enum.count(state.bots, &(not ChaosBot.summary(&1).connected))

    cond do
      out == 0 ->
        state

      now() > deadline ->
        violation(state, "#{out} players could not get back into the game")

      true ->
        Process.sleep(500)
        await_players(state, deadline)
    end
  end

  defp freeze(bot) do
    ChaosBot.freeze(bot, 15_000)
  catch
    :exit, _ -> :stuck
  end

  defp merge_tally(acc, tally), do: Map.merge(acc, tally, fn _k, a, b -> a + b end)

  defp check_moves(state) do
    counts = Stats.read(state.run.stats)

    state =
      if counts.counts.timeouts > 0,
        do:
          violation(
            state,
            "#{counts.counts.timeouts} moves got no outcome within 5 s on an open connection"
          ),
        else: state

    Enum.reduce(counts.failures, state, fn
      {_kind, 0}, state -> state
      {kind, n}, state -> violation(state, "#{n} correctness failures: #{kind}")
    end)
  end

  defp check_positions(state, summaries) do
    connected = for s <- summaries, s.connected and s.entity != nil and not s.unsure, do: s
    ids = Enum.map(connected, & &1.entity)
    positions = chaos(state.run.node, :positions, [Grove, ids], 30_000)

    wrong =
      for s <- connected, positions[s.entity] != s.acked do
        "entity #{s.entity}: acknowledged at #{inspect(s.acked)}, in the world at #{inspect(positions[s.entity])}"
      end

    state.run.opts[:out].(
      "chaos: #{length(connected)} connected players' entities checked against their last outcomes"
    )

    if wrong == [],
      do: state,
      else:
        violation(
          state,
          "#{length(wrong)} entities not where their outcomes put them: #{Enum.join(Enum.take(wrong, 5), "; ")}"
        )
  end

  # The audit asks the zones one after another: with 20,000 actors walking,
  # an entity handed from a zone not yet asked to one already asked is seen
  # in none. So the actors stop first (the players have), and handoffs in
  # flight get a few tries to settle; what is still wrong then is wrong.
  defp check_audit(state) do
    :ok = chaos(state.run.node, :quiesce, [Grove], 60_000)
    audit(state, 5)
  end

  defp audit(state, tries) do
    case chaos(state.run.node, :audit, [Grove], 120_000) do
      :ok ->
        state

      {:error, _problems} when tries > 1 ->
        Process.sleep(1000)
        audit(state, tries - 1)

      {:error, problems} ->
        violation(state, "the world's audit: #{Enum.join(Enum.take(problems, 5), "; ")}")
    end
  end

  # Every account the server acknowledged logs in with its token and with
  # its device, as itself.
  defp check_accounts(state, summaries) do
    run = state.run

    failed =
      summaries
      |> Enum.filter(& &1.token)
      |> Task.async_stream(&account_ok?(run, &1), max_concurrency: 20, timeout: 60_000)
      |> Enum.count(fn {:ok, ok} -> not ok end)

    if failed == 0,
      do: state,
      else: violation(state, "#{failed} acknowledged accounts no longer log in as themselves")
  end

  defp account_ok?(run, summary) do
    url = ~c"http://#{run.host}:#{run.port}/api/me"
    headers = [{~c"authorization", String.to_charlist("Bearer " <> summary.token)}]

    case :httpc.request(:get, {url, headers}, [timeout: 10_000], body_format: :binary) do
      {:ok, {{_, 200, _}, _, body}} ->
        match?(%{"id" => id} when id == summary.account_id, me(body))

      _ ->
        false
    end
  end

  defp me(body) do
    case :jiffy.decode(body, [:return_maps]) do
      %{"account" => account} -> account
      other -> other
    end
  end

  defp check_returns(state, summaries) do
    tallies = Enum.reduce(summaries, %{}, &merge_tally(&2, &1.tally))
    notes = summaries |> Enum.flat_map(& &1.notes) |> Enum.take(3)

    Enum.reduce(tallies, state, fn
      {{:kept, :elsewhere, how}, n}, state ->
        violation(
          state,
          "#{n} players' kept positions were cells they never stood on, after an #{how} close " <>
            "(came back at, kept, last acknowledged, close: #{inspect(notes)})"
        )

      {{:kept, :earlier, :goodbye}, n}, state ->
        violation(state, "#{n} players' kept positions were steps behind after a goodbye")

      {{:placed, :astray}, n}, state ->
        violation(
          state,
          "#{n} players were placed away from their kept positions with the store answering " <>
            "(came back at, kept, last acknowledged, close: #{inspect(notes)})"
        )

      _, state ->
        state
    end)
  end

  defp check_fuzz(%{fuzz: %{violations: []}} = state), do: state

  defp check_fuzz(state) do
    violation(
      state,
      "the front doors' fuzz: #{length(state.fuzz.violations)} inputs not refused cleanly: " <>
        inspect(Enum.take(state.fuzz.violations, 3), limit: 20, printable_limit: 200)
    )
  end

  defp violation(state, text), do: %{state | violations: [text | state.violations]}

  defp print(out, r) do
    out.("")
    out.("== chaos: #{r.players} players, #{r.seconds} s ==")
    out.("faults         #{inspect(r.faults)}")

    out.(
      "moves          #{r.moves_sent} sent, #{r.outcomes} outcomes; round trip p50 #{figure(r.p50_ms)} ms, " <>
        "p99 #{figure(r.p99_ms)} ms, max #{figure(r.max_ms)} ms; #{r.views_checked} views checked"
    )

    out.("closes         #{inspect(r.closes)}")

    out.(
      "in flight      #{inspect(r.in_flight_at_close)} (moves answered by their connection's close)"
    )

    out.("kept           #{inspect(r.kept)} (where the server kept players who came back)")
    out.("placed         #{inspect(r.placed)} (where their joins put them)")

    out.(
      "logins         #{r.logins} ok, failed #{inspect(r.login_failures)}; #{r.connect_failures} connects refused or failed"
    )

    out.("server         #{r.server_error_lines} [error] lines in its log")

    if r.fuzz_rounds > 0, do: out.("fuzz           #{r.fuzz_rounds} hostile inputs")

    if r.violations == 0 do
      out.("invariants     all held")
    else
      out.("VIOLATIONS     #{r.violations}")
      for v <- r.violation_list, do: out.("  - " <> v)
    end
  end

  defp now, do: System.monotonic_time(:millisecond)
  defp pad(value, width), do: String.pad_leading(to_string(value), width)
end
