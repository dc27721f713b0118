defmodule Grove.Gateway.Admin do
  @moduledoc false
  # The operator's endpoints: Prometheus text at /metrics, the dashboard
  # page and its data, and the load lab's progress reports. All of them are
  # behind the gateway's `admin_token` when one is set: as a bearer token
  # (programs), the dashboard's cookie (people), or a `token` query
  # parameter (scrapers that can send nothing else).
  #
  # A person logs in on the dashboard's form, which posts the token; the
  # answer is a cookie (HttpOnly, SameSite=Strict, Secure behind TLS) that
  # holds not the token but a signature made with it that expires, and a
  # redirect to the dashboard: the token is never in the page's address,
  # where it would stay in the browser's history, in copied links and in
  # proxies' logs. A dashboard address that still carries `?token=` (an
  # old bookmark) is answered the same way, without it.
  #
  # What acts on the players or reads what they said (/api/admin/: the
  # announcements, the recent chat) needs the token, always, and in the
  # Authorization header only: a URL ends up in logs and histories.

  import Grove.Gateway.Records

  alias Grove.Gateway.HTTP
  alias Grove.Metrics
  alias Grove.Metrics.{Collector, Prometheus}

  @cookie "grove_admin"
  # How long a login lasts, in seconds.
  @session_s 12 * 3600
  @dashboard [~c"/dashboard", ~c"/dashboard/"]

  def out(arg, config) do
    method = http_request(arg(arg, :req), :method)
    path = arg(arg, :server_path)

    cond do
      match?(~c"/api/admin/" ++ _, path) ->
        case header_token(arg) do
          _given when config.admin_token == nil ->
            HTTP.error(
              403,
              "no_admin_token",
              "this server has no admin token: start it with GROVE_ADMIN_TOKEN to use /api/admin/"
            )

          given when is_binary(given) ->
            if Grove.Secret.equal?(config.admin_token, given),
              do: route(method, path, arg, config),
              else: unauthorized_header()

          nil ->
            unauthorized_header()
        end

      method == :POST and path == ~c"/dashboard/login" ->
        login(arg, config.admin_token, form_token(arg))

      method == :GET and path in @dashboard and query_token(arg) != nil ->
        login(arg, config.admin_token, query_token(arg))

      authorized?(arg, config.admin_token) ->
        route(method, path, arg, config)

      # A person opening the dashboard gets a page that asks for the token.
      method == :GET and path in @dashboard ->
        token_page(false)

      true ->
        unauthorized()
    end
  end

  defp unauthorized_header,
    do:
      HTTP.error(
        401,
        "unauthorized",
        "this endpoint needs the admin token in a header: Authorization: Bearer TOKEN"
      )

  defp unauthorized do
    HTTP.error(
      401,
      "unauthorized",
      "this needs the admin token (Authorization: Bearer TOKEN, or log in at /dashboard)"
    )
  end

  # The right token: a session cookie, and the dashboard at its bare
  # address. A wrong one: the form again, saying so.
  defp login(_arg, nil, _given), do: to_dashboard([])

  defp login(arg, token, given) do
    if is_binary(given) and Grove.Secret.equal?(token, given),
      do: to_dashboard([{:header, {:set_cookie, session_cookie(arg, token)}}]),
      else: token_page(given != nil)
  end

  defp to_dashboard(headers) do
    [{:status, 303}, {:header, {:location, ~c"/dashboard"}}, no_store() | headers] ++
      [{:html, ""}]
  end

  defp no_store, do: {:header, {~c"Cache-Control", ~c"no-store"}}

  # A form that posts the token: it travels in the request's body.
  defp token_page(wrong?) do
    wrong =
      if wrong?,
        do: ~s(<p class="wrong">That token is not the one this server was given.</p>),
        else: ""

    page = """
    <!doctype html>
    <html lang="en"><head><meta charset="utf-8"><title>Grove dashboard</title>
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <style>body{font-family:sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}
    input{font-size:1rem;padding:.4rem;width:100%;box-sizing:border-box}
    button{margin-top:.8rem;font-size:1rem;padding:.4rem 1rem}.wrong{color:#b00020}</style>
    </head><body>
    <h1>Grove dashboard</h1>
    <p>This server protects its dashboard with an admin token (the
    <code>GROVE_ADMIN_TOKEN</code> it was started with).</p>
    #{wrong}
    <form method="post" action="/dashboard/login">
    <label for="token">Admin token</label>
    <input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
    <button type="submit">Open the dashboard</button>
    </form>
    </body></html>
    """

    [{:status, 401}, no_store(), {:html, page}]
  end

  # `expires.signature`: the token itself never leaves the server again.
  defp session_cookie(arg, token) do
    expires = System.system_time(:second) + @session_s

    secure =
      if arg |> arg(:headers) |> :yaws_api.get_header("x-forwarded-proto", ~c"") |> to_string() ==
           "https",
         do: "; Secure",
         else: ""

    to_charlist(
      "#{@cookie}=#{expires}.#{signature(token, expires)}; Path=/; Max-Age=#{@session_s}; " <>
        "HttpOnly; SameSite=Strict" <> secure
    )
  end

  defp signature(token, expires) do
    :crypto.mac(:hmac, :sha256, Grove.Secret.reveal(token), "grove dashboard #{expires}")
    |> Base.url_encode64(padding: false)
  end

  defp session?(arg, token) do
    with [_ | _] = value <- :yaws_api.find_cookie_val(to_charlist(@cookie), arg),
         [expires, given] <- String.split(to_string(value), ".", parts: 2),
         {expires, ""} <- Integer.parse(expires),
         true <- expires > System.system_time(:second) do
      expected = signature(token, expires)
      byte_size(given) == byte_size(expected) and :crypto.hash_equals(given, expected)
    else
      _ -> false
    end
  end

  defp route(:GET, ~c"/metrics", _arg, config) do
    [
      {:status, 200},
      {:header, {~c"Cache-Control", ~c"no-store"}},
      {:content, ~c"text/plain; version=0.0.4",
       IO.iodata_to_binary(Prometheus.render(config.instance))}
    ]
  end

  defp route(:GET, path, _arg, config) when path in [~c"/dashboard", ~c"/dashboard/"] do
    case File.read(Path.join(config.docroot, "dashboard.html")) do
      {:ok, page} ->
        [
          {:status, 200},
          {:header, {~c"Cache-Control", ~c"no-cache"}},
          {:content, ~c"text/html", page}
        ]

      {:error, _} ->
        HTTP.error(404, "not_found", "the dashboard page is not built; run make")
    end
  end

  defp route(:GET, ~c"/dashboard/data", arg, config) do
    since =
      case HTTP.query(arg, "since") do
        {:ok, value} -> parse_integer(value, 0)
        :undefined -> 0
      end

    world = Grove.World.fetch!(config.world)
    # Every zone's load, read where it runs.
    {module, function} = config.summary
    cluster = apply(module, function, [config.instance])

    body = %{
      "now" => System.system_time(:millisecond),
      "samples" => Enum.map(Collector.history(config.instance, since), &json_sample/1),
      # A world of more zones than could all run is not pictured zone by
      # zone (its summary places none): no grid to draw.
      "zones" => %{
        "cols" => if(cluster.placement == [], do: 0, else: world.grid.zones_x),
        "rows" => if(cluster.placement == [], do: 0, else: world.grid.zones_y),
        "zone_size" => world.grid.zone_size,
        "moves_per_s" => cluster.zone_moves_per_s,
        "mailbox" => cluster.zone_mailbox
      },
      "world" => %{"width" => world.grid.width, "height" => world.grid.height},
      "cluster" => json_cluster(cluster)
    }

    HTTP.json(200, body)
  end

  defp route(:POST, ~c"/api/load/report", arg, config) do
    with {:ok, body} <- HTTP.body(arg),
         {:ok, %{} = report} <- HTTP.decode_json(body) do
      numbers =
        for key <- ["players", "moves_per_s", "p50_ms", "p99_ms", "errors"],
            is_number(report[key]),
            into: %{},
            do: {String.to_atom(key), report[key]}

      knee = if is_number(report["knee"]), do: round(report["knee"])
      phase = if is_binary(report["phase"]), do: String.slice(report["phase"], 0, 40)

      Metrics.execute([:grove, :load, :report], numbers, %{
        knee: knee,
        phase: phase,
        instance: config.instance
      })

      :ets.insert(
        config.load_report,
        {:latest, System.monotonic_time(:millisecond),
         Map.merge(numbers, %{knee: knee, phase: phase})}
      )

      HTTP.json(202, %{"accepted" => true})
    else
      {:error, status, code, message} -> HTTP.error(status, code, message)
      {:ok, _other} -> HTTP.error(400, "bad_field", "a report is a JSON object")
    end
  end

  # An announcement to every player: `{"text": "..."}`, a line like a
  # said one (at most 500 characters).
  defp route(:POST, ~c"/api/admin/announce", arg, _config) do
    with {:ok, body} <- HTTP.body(arg),
         {:ok, %{"text" => text}} when is_binary(text) <- HTTP.decode_json(body),
         :ok <- Grove.Gateway.announce(text) do
      HTTP.json(202, %{"announced" => true})
    else
      {:error, status, code, message} -> HTTP.error(status, code, message)
      {:error, code, why} -> HTTP.error(400, Atom.to_string(code), "text: " <> why)
      {:ok, _other} -> HTTP.error(400, "bad_field", ~s(an announcement is {"text": "..."}))
    end
  end

  # What was said last (the world's recent log, in memory), oldest first.
  defp route(:GET, ~c"/api/admin/chat", arg, config) do
    limit =
      case HTTP.query(arg, "limit") do
        {:ok, value} -> parse_integer(value, 100)
        :undefined -> 100
      end

    lines =
      for line <- Grove.World.recent_chat(config.world, max(limit, 0)),
          do: Map.new(line, fn {key, value} -> {Atom.to_string(key), value} end)

    HTTP.json(200, %{"lines" => lines})
  end

  defp route(_method, ~c"/api/admin/" ++ _, _arg, _config),
    do:
      HTTP.error(
        404,
        "not_found",
        "no such endpoint: POST /api/admin/announce, GET /api/admin/chat"
      )

  defp route(_method, _path, _arg, _config), do: HTTP.error(404, "not_found", "no such page")

  defp json_cluster(summary) do
    %{
      "node" => Atom.to_string(summary.node),
      "zone_count" => summary.zone_count,
      "placement" => Enum.map(summary.placement, &Atom.to_string/1),
      "members" =>
        for member <- summary.members do
          Map.new(member, fn
            {:node, node} -> {"node", Atom.to_string(node)}
            {key, nil} -> {Atom.to_string(key), :null}
            {key, value} -> {Atom.to_string(key), value}
          end)
        end
    }
  end

  defp json_sample(sample) do
    Map.new(sample, fn
      {:load_run, nil} ->
        {"load_run", :null}

      {:load_run, run} ->
        {"load_run", Map.new(run, fn {k, v} -> {Atom.to_string(k), v || :null} end)}

      {:kinds, kinds} ->
        {"kinds",
         for(kind <- kinds, do: Map.new(kind, fn {k, v} -> {Atom.to_string(k), v || :null} end))}

      {key, nil} ->
        {Atom.to_string(key), :null}

      {key, value} ->
        {Atom.to_string(key), value}
    end)
  end

  defp authorized?(_arg, nil), do: true

  defp authorized?(arg, token) do
    # Yaws parses the header into {user, password, raw}; a bearer token is in raw.
    given =
      case headers(arg(arg, :headers), :authorization) do
        {_user, _password, ~c"Bearer " ++ value} -> to_string(value)
        _ -> query_token(arg)
      end

    (is_binary(given) and Grove.Secret.equal?(token, given)) or session?(arg, token)
  end

  defp header_token(arg) do
    case headers(arg(arg, :headers), :authorization) do
      {_user, _password, ~c"Bearer " ++ value} -> to_string(value)
      _ -> nil
    end
  end

  defp query_token(arg) do
    case HTTP.query(arg, "token") do
      {:ok, value} -> to_string(value)
      :undefined -> nil
    end
  end

  defp form_token(arg) do
    with {:ok, body} <- HTTP.body(arg),
         %{"token" => token} <- URI.decode_query(body) do
      token
    else
      _ -> ""
    end
  rescue
    ArgumentError -> ""
  end

  defp parse_integer(chars, default) do
    case Integer.parse(to_string(chars)) do
      {n, ""} -> n
      _ -> default
    end
  end
end
