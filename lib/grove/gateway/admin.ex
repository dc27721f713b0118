defmodule Grove.Gateway.Admin do
  @moduledoc false
  # The operator's endpoints: Prometheus text at /metrics, the dashboard
  # page and its data, and the load lab's progress reports. All of them are
  # behind the gateway's `admin_token` when one is set (as a bearer token or
  # a `token` query parameter).

  import Grove.Gateway.Records

  alias Grove.Gateway.HTTP
  alias Grove.Metrics
  alias Grove.Metrics.{Collector, Prometheus}

  def out(arg, config) do
    if authorized?(arg, config.admin_token) do
      route(http_request(arg(arg, :req), :method), arg(arg, :server_path), arg, config)
    else
      HTTP.error(
        401,
        "unauthorized",
        "this page needs the admin token (Authorization: Bearer TOKEN or ?token=TOKEN)"
      )
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
      case :yaws_api.queryvar(arg, ~c"since") do
        {:ok, value} -> parse_integer(value, 0)
        :undefined -> 0
      end

    world = Grove.World.fetch!(Grove.world(config.instance))

    body = %{
      "now" => System.system_time(:millisecond),
      "samples" => Enum.map(Collector.history(config.instance, since), &json_sample/1),
      "zones" => %{
        "cols" => world.grid.zones_x,
        "rows" => world.grid.zones_y,
        "zone_size" => world.grid.zone_size,
        "moves_per_s" => Collector.zone_heat(config.instance),
        "mailbox" => Enum.map(Grove.World.zone_loads(world), & &1.mailbox)
      },
      "world" => %{"width" => world.grid.width, "height" => world.grid.height}
    }

    HTTP.json(200, body)
  end

  defp route(:POST, ~c"/api/load/report", arg, _config) do
    with {:ok, body} <- HTTP.body(arg),
         {:ok, %{} = report} <- HTTP.decode_json(body) do
      numbers =
        for key <- ["players", "moves_per_s", "p50_ms", "p99_ms", "errors"],
            is_number(report[key]),
            into: %{},
            do: {String.to_atom(key), report[key]}

      knee = if is_number(report["knee"]), do: round(report["knee"])
      phase = if is_binary(report["phase"]), do: String.slice(report["phase"], 0, 40)
      Metrics.execute([:grove, :load, :report], numbers, %{knee: knee, phase: phase})
      HTTP.json(202, %{"accepted" => true})
    else
      {:error, status, code, message} -> HTTP.error(status, code, message)
      {:ok, _other} -> HTTP.error(400, "bad_field", "a report is a JSON object")
    end
  end

  defp route(_method, _path, _arg, _config), do: HTTP.error(404, "not_found", "no such page")

  defp json_sample(sample) do
    Map.new(sample, fn
      {:load_run, nil} ->
        {"load_run", :null}

      {:load_run, run} ->
        {"load_run", Map.new(run, fn {k, v} -> {Atom.to_string(k), v || :null} end)}

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

    is_binary(given) and Grove.Secret.equal?(token, given)
  end

  defp query_token(arg) do
    case :yaws_api.queryvar(arg, ~c"token") do
      {:ok, value} -> to_string(value)
      :undefined -> nil
    end
  end

  defp parse_integer(chars, default) do
    case Integer.parse(to_string(chars)) do
      {n, ""} -> n
      _ -> default
    end
  end
end
