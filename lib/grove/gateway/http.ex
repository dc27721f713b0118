defmodule Grove.Gateway.HTTP do
  @moduledoc false
  # Plain HTTP endpoints of the gateway (a Yaws appmod). `/terrain` is the
  # world's ground, one byte per cell, compressed once when the gateway
  # starts: clients fetch it once and draw any viewport from it.

  import Grove.Gateway.Records

  def out(arg) do
    request = arg(arg, :req)

    case {http_request(request, :method), arg(arg, :server_path)} do
      {:GET, ~c"/terrain"} -> terrain(arg)
      {:HEAD, ~c"/terrain"} -> terrain(arg)
      {_method, ~c"/terrain"} -> error(405, "method_not_allowed", "use GET")
      _ -> error(404, "not_found", "no such page")
    end
  end

  defp terrain(arg) do
    %{width: w, height: h, raw: raw, gzip: gzip} = Grove.Gateway.terrain()

    accepts_gzip =
      arg |> arg(:headers) |> :yaws_api.get_header("accept-encoding", "") |> to_string() =~ "gzip"

    {body, encoding} =
      if accepts_gzip, do: {gzip, [{:header, {~c"Content-Encoding", ~c"gzip"}}]}, else: {raw, []}

    [
      {:status, 200},
      {:header, {~c"x-grove-width", to_charlist(w)}},
      {:header, {~c"x-grove-height", to_charlist(h)}},
      {:header, {~c"Cache-Control", ~c"no-cache"}},
      {:header, {~c"Vary", ~c"Accept-Encoding"}}
      | encoding
    ] ++ [{:content, ~c"application/octet-stream", body}]
  end

  @doc false
  def error(status, code, message) do
    body = :jiffy.encode(%{"error" => code, "message" => message})
    [{:status, status}, {:content, ~c"application/json", body}]
  end
end
