defmodule Grove.Gateway.Health do
  @moduledoc false
  # Probes for load balancers and orchestrators, open without a token:
  #
  #   * GET /healthz - the node answers HTTP: 200 and {"status": "ok"};
  #   * GET /readyz - the node can take players: 200 when the world's zones
  #     run, the store has a connection to its database (when there is a
  #     store) and the gateway is not draining; 503 otherwise. The body says
  #     which check failed: {"ready": false, "checks": {"store": "unreachable", ...}}.
  #
  # A drain (a graceful stop, SIGTERM included) turns /readyz to 503 before
  # any session is told goodbye.

  import Grove.Gateway.Records

  alias Grove.Gateway.HTTP

  def out(arg) do
    method = http_request(arg(arg, :req), :method)

    case {method, arg(arg, :server_path)} do
      {method, ~c"/healthz"} when method in [:GET, :HEAD] ->
        HTTP.json(200, %{"status" => "ok"})

      {method, ~c"/readyz"} when method in [:GET, :HEAD] ->
        checks = checks(Grove.Gateway.config())
        ready = Enum.all?(checks, fn {_check, result} -> result in ["ok", "none"] end)
        HTTP.json(if(ready, do: 200, else: 503), %{"ready" => ready, "checks" => Map.new(checks)})

      {_method, path} when path in [~c"/healthz", ~c"/readyz"] ->
        HTTP.error(405, "method_not_allowed", "use GET")

      _ ->
        HTTP.error(404, "not_found", "no such page")
    end
  end

  @doc false
  def checks(config) do
    [
      {"world", if(Grove.World.ready?(config.world), do: "ok", else: "starting")},
      {"store", store(config.accounts)},
      {"gateway", if(Grove.Gateway.draining?(), do: "draining", else: "ok")}
    ]
  end

  defp store(nil), do: "none"

  defp store(accounts) do
    case Grove.Store.stats(Grove.Accounts.fetch!(accounts).store) do
      %{connected: connected} when connected > 0 -> "ok"
      _ -> "unreachable"
    end
  end
end
