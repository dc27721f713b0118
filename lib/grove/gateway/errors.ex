defmodule Grove.Gateway.Errors do
  @moduledoc false
  # Yaws's error pages, as JSON: its default crash page would show a stack
  # trace to the client.

  require Logger

  def out404(_arg, _gconf, _sconf) do
    [
      {:status, 404},
      {:content, ~c"application/json", ~s({"error":"not_found","message":"no such page"})}
    ]
  end

  def crashmsg(_arg, _sconf, report) do
    Logger.error("gateway: a request crashed: #{without_queries(report)}")

    {:content, ~c"application/json",
     ~s({"error":"internal","message":"the server failed on this request"})}
  end

  # Yaws's report prints the request, whose target may carry a secret in
  # its query (`?token=`): the log gets the path alone.
  @doc false
  def without_queries(report) do
    report
    |> IO.chardata_to_string()
    |> String.replace(~r/(\{abs_path,\s*"[^"?]*)\?[^"]*"/, "\\1?(query left out)\"")
  end
end
