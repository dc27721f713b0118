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
    Logger.error("gateway: a request crashed: #{report}")

    {:content, ~c"application/json",
     ~s({"error":"internal","message":"the server failed on this request"})}
  end
end
