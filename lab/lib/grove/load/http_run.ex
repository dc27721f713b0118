defmodule Grove.Load.HttpRun do
  @moduledoc """
  The HTTP flow runner (`mix grove.load http`): the flow of the Gamend stress
  test, against a running server. Each virtual user opens a kept-alive
  connection, logs in with a new device id (creating an account), then reads
  `GET /api/me` `:reads` times with `:pause_ms` between, and is done. With
  `:duration` (seconds), each user starts the flow again, as a new device
  on the same connection, until that long after the run began: the Gamend
  test kept its users going for ten minutes.

  With `:sources` N above 1, users connect from the loopback addresses
  127.0.0.1 to 127.0.0.N in turn (Linux answers all of 127.0.0.0/8), so
  that the connections of a large load, and those closed and waiting out
  `TIME_WAIT`, are spread over N times the ephemeral ports of one address.

  Users start at `:ramp` per second up to `:users`. A progress line every
  `:every` seconds; at the end, requests per second, p50/p95/p99/max per
  endpoint, the success rate and the errors by status.

  A login answered `503` or `429` is tried again, up to `:retries` times,
  as a well-behaved client does: after the `Retry-After` the server sent
  (one second when it sent none) plus a random jitter of up to as much
  again, so that a storm of refused clients spreads out instead of coming
  back at once. Every attempt counts as a request (a refused one as an
  error); the report says how many logins were tried again and how many
  users never logged in.

  The run's schedule (the ramp, the progress lines, the end of `:duration`)
  reads `:clock`, a function that returns the time in milliseconds (the
  VM's monotonic clock by default); the requests' latencies are timed
  with the monotonic clock whatever it is.

  With `:record`, every device id whose login the server acknowledged is
  appended to that file as it happens, so that after killing the server
  (`kill -9`) and restarting it, `verify/1` can check that every one of them
  still logs in to the account it made.
  """

  import Grove.Load.Report, only: [figure: 1]
  import Grove.Metrics.Histogram, only: [to_ms: 1]

  alias Grove.Load.HttpClient
  alias Grove.Metrics.Histogram

  @defaults [
    url: "http://127.0.0.1:4000",
    users: 100,
    ramp: nil,
    reads: 10,
    pause_ms: 1000,
    duration: nil,
    every: 5,
    record: nil,
    retries: 3,
    sources: 1,
    out: &IO.puts/1,
    clock: &__MODULE__.now/0
  ]

  @endpoints [:device_login, :me]

  @doc "The run's default clock: the VM's monotonic time in milliseconds."
  @spec now() :: integer()
  def now, do: System.monotonic_time(:millisecond)

  @doc "Runs the flow; returns the report."
  @spec run(keyword()) :: map()
  def run(opts) do
    opts = Keyword.validate!(opts, @defaults)
    %URI{host: host, port: port} = URI.parse(opts[:url])
    stats = new_stats()
    ramp = opts[:ramp] || max(div(opts[:users], 10), 50)
    recorder = if opts[:record], do: start_recorder(opts[:record])
    run_id = Base.url_encode64(:crypto.strong_rand_bytes(6), padding: false)

    repeat = if opts[:duration], do: ", again as new devices for #{opts[:duration]} s", else: ""

    opts[:out].(
      "load http: #{opts[:users]} users at #{ramp}/s on #{opts[:url]}: device login, then #{opts[:reads]} x GET /api/me every #{opts[:pause_ms]} ms#{repeat}"
    )

    started = opts[:clock].()
    until = if opts[:duration], do: started + opts[:duration] * 1000
    parent = self()

    user = fn n ->
      spawn_link(fn ->
        connect = {:connect, source(opts[:sources], n)}
        flows(connect, host, port, "load-#{run_id}-#{n}", opts, stats, recorder, until, 0)
        send(parent, {:done, self()})
      end)
    end

    users =
      spawn_users(user, opts[:users], ramp, started, stats, opts, [], 0, read(stats), started)

    for pid <- users, do: receive(do: ({:done, ^pid} -> :ok))
    if recorder, do: stop_recorder(recorder)
    finish(stats, opts, started)
  end

  # Starts users on the ramp's schedule while printing progress; then waits
  # for them, still printing.
  defp spawn_users(user, total, ramp, started, stats, opts, pids, spawned, window, window_at) do
    now = opts[:clock].()
    due = min(div((now - started) * ramp, 1000) + 1, total)
    pids = if due > spawned, do: Enum.map((spawned + 1)..due, user) ++ pids, else: pids
    spawned = max(due, spawned)

    {window, window_at} =
      if now - window_at >= opts[:every] * 1000 do
        reading = read(stats)

        progress(
          opts,
          diff(reading, window),
          (now - window_at) / 1000,
          round((now - started) / 1000),
          spawned
        )

        {reading, now}
      else
        {window, window_at}
      end

    alive = Enum.count(pids, &Process.alive?/1)

    if spawned >= total and alive == 0 do
      pids
    else
      receive do
      after
        100 ->
          spawn_users(user, total, ramp, started, stats, opts, pids, spawned, window, window_at)
      end
    end
  end

  # A user's flows, one after another on its one kept-alive connection (as
  # an app that stays open would); a connection lost is opened again.
  defp flows(conn, host, port, prefix, opts, stats, recorder, until, flow) do
    conn = user(conn, host, port, "#{prefix}-#{flow}", opts, stats, recorder)

    if until != nil and opts[:clock].() < until,
      do: flows(conn, host, port, prefix, opts, stats, recorder, until, flow + 1),
      else: close(conn)
  end

  defp close(nil), do: :ok
  defp close(conn), do: HttpClient.close(conn)

  # The local address of user `n`: users take the `sources` loopback
  # addresses in turn, so that each address holds a share of the ports.
  defp source(1, _n), do: nil
  defp source(sources, n), do: {127, 0, 0, rem(n, sources) + 1}

  defp user({:connect, source}, host, port, device_id, opts, stats, recorder) do
    case HttpClient.connect(host, port, source: source) do
      {:ok, conn} ->
        user(conn, host, port, device_id, opts, stats, recorder)

      {:error, _reason} ->
        count(stats, :device_login, :connect_error)
        count(stats, :flow, :no_login)
        {:connect, source}
    end
  end

  defp user(conn, _host, _port, device_id, opts, stats, recorder) do
    case login(conn, device_id, stats, opts[:retries]) do
      {:ok, status, _headers, response, conn} when status in [200, 201] ->
        if recorder, do: send(recorder, {:acknowledged, device_id})
        %{"token" => token} = :jiffy.decode(response, [:return_maps])
        reads(conn, token, opts[:reads], opts[:pause_ms], stats)

      {:ok, _status, _headers, _body, conn} ->
        count(stats, :flow, :no_login)
        conn

      {:error, _reason, conn} ->
        count(stats, :flow, :no_login)
        lost(conn)
    end
  end

  # A connection whose answer did not come (in time) may still deliver it
  # later, where the next request would read it: it is closed, and the
  # next request opens another.
  defp lost(conn) do
    HttpClient.close(conn)
    %{conn | socket: nil}
  end

  defp login(conn, device_id, stats, retries) do
    body = :jiffy.encode(%{"device_id" => device_id})
    headers = [{"content-type", "application/json"}]

    case timed(stats, :device_login, fn ->
           HttpClient.request(conn, "POST", "/api/device_login", headers, body)
         end) do
      {:ok, status, response_headers, _body, conn} when status in [429, 503] and retries > 0 ->
        count(stats, :flow, :retried)

        receive do
        after
          backoff_ms(response_headers) -> login(conn, device_id, stats, retries - 1)
        end

      other ->
        other
    end
  end

  @doc """
  How long to wait before trying again after a refusal with these response
  headers: the `Retry-After` in seconds (1 when missing or not a number of
  seconds), plus a uniformly random jitter of up to as much again.
  """
  @spec backoff_ms([{String.t(), String.t()}]) :: pos_integer()
  def backoff_ms(headers) do
    seconds =
      with {_, value} <- List.keyfind(headers, "retry-after", 0),
           {seconds, ""} when seconds > 0 <- Integer.parse(value) do
        seconds
      else
        _ -> 1
      end

    seconds * 1000 + :rand.uniform(seconds * 1000)
  end

  defp reads(conn, _token, 0, _pause, _stats), do: conn

  defp reads(conn, token, left, pause, stats) do
    receive do
    after
      pause -> :ok
    end

    case timed(stats, :me, fn ->
           HttpClient.request(conn, "GET", "/api/me", [{"authorization", "Bearer " <> token}])
         end) do
      {:ok, _status, _headers, _body, conn} -> reads(conn, token, left - 1, pause, stats)
      {:error, _reason, conn} -> reads(lost(conn), token, left - 1, pause, stats)
    end
  end

  defp timed(stats, endpoint, fun) do
    started = System.monotonic_time(:microsecond)
    result = fun.()
    Histogram.record(stats.latency[endpoint], System.monotonic_time(:microsecond) - started)

    case result do
      {:ok, status, _, _, _} -> count(stats, endpoint, status)
      {:error, reason, _} -> count(stats, endpoint, error_kind(reason))
    end

    result
  end

  defp error_kind(:timeout), do: :timeout
  defp error_kind(_), do: :connection_error

  ## Stats: per endpoint, counts by status in an ETS table, latency histograms

  defp new_stats do
    %{
      counts: :ets.new(:grove_http_load, [:set, :public, write_concurrency: true]),
      latency: Map.new(@endpoints, &{&1, Histogram.new()})
    }
  end

  defp count(stats, endpoint, status),
    do: :ets.update_counter(stats.counts, {endpoint, status}, 1, {{endpoint, status}, 0})

  defp read(stats) do
    %{
      counts: Map.new(:ets.tab2list(stats.counts)),
      latency: Map.new(stats.latency, fn {k, h} -> {k, Histogram.snapshot(h)} end)
    }
  end

  defp diff(later, earlier) do
    %{
      counts: Map.new(later.counts, fn {k, v} -> {k, v - Map.get(earlier.counts, k, 0)} end),
      latency: Map.new(later.latency, fn {k, s} -> {k, Histogram.diff(s, earlier.latency[k])} end)
    }
  end

  defp progress(opts, diff, seconds, t, users) do
    counts = Map.reject(diff.counts, &match?({{:flow, _}, _}, &1))
    diff = %{diff | counts: counts}
    requests = Enum.sum(Map.values(diff.counts))

    ok =
      for({{_, status}, n} <- diff.counts, is_integer(status) and status < 400, do: n)
      |> Enum.sum()

    latency = Enum.reduce(Map.values(diff.latency), &Histogram.merge/2)

    opts[:out].(
      "load http #{String.pad_leading(to_string(t), 4)} s  #{String.pad_leading(to_string(users), 6)} users  " <>
        "#{String.pad_leading(to_string(round(requests / seconds)), 6)} req/s  p50 #{figure(to_ms(Histogram.percentile(latency, 50)))} ms  " <>
        "p99 #{figure(to_ms(Histogram.percentile(latency, 99)))} ms  errors #{requests - ok}"
    )
  end

  defp finish(stats, opts, started) do
    seconds = (opts[:clock].() - started) / 1000
    total = read(stats)
    {flows, counts} = Enum.split_with(total.counts, &match?({{:flow, _}, _}, &1))
    {flows, counts} = {Map.new(flows), Map.new(counts)}
    total = %{total | counts: counts}
    requests = Enum.sum(Map.values(total.counts))

    ok =
      for({{_, status}, n} <- total.counts, is_integer(status) and status < 400, do: n)
      |> Enum.sum()

    all = Enum.reduce(Map.values(total.latency), &Histogram.merge/2)

    per_endpoint =
      Map.new(@endpoints, fn endpoint ->
        latency = total.latency[endpoint]

        {endpoint,
         %{
           requests: Histogram.count(latency),
           p50_ms: to_ms(Histogram.percentile(latency, 50)),
           p95_ms: to_ms(Histogram.percentile(latency, 95)),
           p99_ms: to_ms(Histogram.percentile(latency, 99)),
           max_ms: to_ms(Histogram.max(latency))
         }}
      end)

    errors =
      for {{endpoint, status}, n} <- total.counts,
          not (is_integer(status) and status < 400),
          into: %{} do
        {"#{endpoint} #{status}", n}
      end

    report = %{
      users: opts[:users],
      requests: requests,
      seconds: Float.round(seconds, 1),
      req_per_s: round(requests / max(seconds, 0.001)),
      p50_ms: to_ms(Histogram.percentile(all, 50)),
      p99_ms: to_ms(Histogram.percentile(all, 99)),
      max_ms: to_ms(Histogram.max(all)),
      success_rate: if(requests > 0, do: Float.round(ok / requests * 100, 3), else: 0.0),
      endpoints: per_endpoint,
      errors: errors,
      logins_retried: Map.get(flows, {:flow, :retried}, 0),
      users_without_login: Map.get(flows, {:flow, :no_login}, 0)
    }

    out = opts[:out]
    out.("")

    out.(
      "== load http: #{report.users} users, #{report.requests} requests in #{report.seconds} s =="
    )

    out.("throughput     #{report.req_per_s} req/s; success #{report.success_rate} %")

    for {endpoint, e} <- per_endpoint do
      out.(
        "#{String.pad_trailing(to_string(endpoint), 14)} #{e.requests} requests; p50 #{figure(e.p50_ms)} ms, p95 #{figure(e.p95_ms)} ms, p99 #{figure(e.p99_ms)} ms, max #{figure(e.max_ms)} ms"
      )
    end

    out.("errors         #{inspect(errors)}")

    out.(
      "backoff        #{report.logins_retried} logins tried again after Retry-After; " <>
        "#{report.users_without_login} users never logged in"
    )

    report
  end

  ## Recording acknowledged logins, and checking them after a restart

  defp start_recorder(path) do
    File.mkdir_p!(Path.dirname(path))
    {:ok, file} = File.open(path, [:append, :utf8])

    spawn_link(fn -> recorder_loop(file) end)
  end

  defp recorder_loop(file) do
    receive do
      {:acknowledged, device_id} ->
        # Written as it happens: the server may be killed at any moment.
        IO.write(file, device_id <> "\n")
        recorder_loop(file)

      {:stop, from} ->
        File.close(file)
        send(from, :stopped)
    end
  end

  defp stop_recorder(recorder) do
    send(recorder, {:stop, self()})
    receive(do: (:stopped -> :ok))
  end

  @doc """
  Logs in with every device id in the file `record` and counts how many
  found their account (`200`, not created anew).
  """
  @spec verify(keyword()) :: map()
  def verify(opts) do
    opts = Keyword.validate!(opts, url: "http://127.0.0.1:4000", record: nil, out: &IO.puts/1)
    %URI{host: host, port: port} = URI.parse(opts[:url])
    device_ids = opts[:record] |> File.read!() |> String.split("\n", trim: true) |> Enum.uniq()
    {:ok, conn} = HttpClient.connect(host, port)

    {found, missing, _conn} =
      Enum.reduce(device_ids, {0, [], conn}, fn device_id, {found, missing, conn} ->
        case login_existing(conn, device_id, 20) do
          {:found, conn} -> {found + 1, missing, conn}
          {:missing, conn} -> {found, [device_id | missing], conn}
        end
      end)

    report = %{acknowledged: length(device_ids), found: found, missing: length(missing)}

    opts[:out].(
      "verify: #{found} of #{length(device_ids)} acknowledged accounts log in to the account they made; #{length(missing)} missing"
    )

    report
  end

  # 200 means the account was there; 201 that it had to be made anew. Rate
  # limits and a busy server are waited out.
  defp login_existing(conn, device_id, tries) do
    body = :jiffy.encode(%{"device_id" => device_id})
    headers = [{"content-type", "application/json"}]

    case HttpClient.request(conn, "POST", "/api/device_login", headers, body) do
      {:ok, 200, _, _, conn} ->
        {:found, conn}

      {:ok, status, _, _, conn} when status in [429, 503] and tries > 1 ->
        receive do
        after
          200 -> login_existing(conn, device_id, tries - 1)
        end

      {:ok, _status, _, _, conn} ->
        {:missing, conn}

      {:error, _, conn} ->
        {:missing, conn}
    end
  end
end
