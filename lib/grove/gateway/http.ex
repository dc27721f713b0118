defmodule Grove.Gateway.HTTP do
  @moduledoc false
  # Plain HTTP endpoints of the gateway (a Yaws appmod). `/terrain` is the
  # world's ground, one byte per cell, compressed once when the gateway
  # starts: clients fetch it once and draw any viewport from it. `/kinds`
  # is the legend of the entity kind codes views carry: each kind's name
  # and emoji. `/game`, the world's game: its actions and its legend.

  import Grove.Gateway.Records

  def out(arg) do
    case collect(arg, Grove.Gateway.config().max_body) do
      {:more, so_far} -> {:get_more, :undefined, {:grove_body, so_far}}
      {:ok, arg} -> route(arg)
      {:error, status, code, message} -> error(status, code, message)
    end
  end

  # A body that comes in pieces (chunked, or longer than Yaws's
  # partial_post_size) is gathered across calls, up to the limit; the
  # handlers then see it whole. Yaws passes what we return in `state`.
  defp collect(arg, limit) do
    so_far =
      case arg(arg, :state) do
        {:grove_body, so_far} -> so_far
        _ -> nil
      end

    case {so_far, arg(arg, :clidata)} do
      {_, {:partial, piece}} ->
        within(so_far, piece, limit, &{:more, &1})

      {so_far, piece} when is_binary(so_far) and is_binary(piece) ->
        within(so_far, piece, limit, &{:ok, arg(arg, clidata: &1)})

      _ ->
        {:ok, arg}
    end
  end

  defp within(so_far, piece, limit, next) do
    body = (so_far || "") <> piece

    if byte_size(body) <= limit,
      do: next.(body),
      else: {:error, 413, "too_large", "request bodies are limited to #{limit} bytes"}
  end

  defp route(arg) do
    request = arg(arg, :req)

    case {http_request(request, :method), arg(arg, :server_path)} do
      {:GET, ~c"/terrain"} -> terrain(arg)
      {:HEAD, ~c"/terrain"} -> terrain(arg)
      {_method, ~c"/terrain"} -> error(405, "method_not_allowed", "use GET")
      {method, ~c"/assets/fonts/" ++ name} when method in [:GET, :HEAD] -> font(arg, name)
      {_method, ~c"/assets/fonts/" ++ _} -> error(405, "method_not_allowed", "use GET")
      {:GET, ~c"/kinds"} -> kinds()
      {_method, ~c"/kinds"} -> error(405, "method_not_allowed", "use GET")
      {:GET, ~c"/game"} -> game()
      {_method, ~c"/game"} -> error(405, "method_not_allowed", "use GET")
      {:GET, ~c"/game/board"} -> board()
      {_method, ~c"/game/board"} -> error(405, "method_not_allowed", "use GET")
      {_method, ~c"/metrics"} -> Grove.Gateway.Admin.out(arg, Grove.Gateway.config())
      {_method, ~c"/dashboard" ++ _} -> Grove.Gateway.Admin.out(arg, Grove.Gateway.config())
      {_method, ~c"/api/load/" ++ _} -> Grove.Gateway.Admin.out(arg, Grove.Gateway.config())
      {_method, ~c"/api/admin/" ++ _} -> Grove.Gateway.Admin.out(arg, Grove.Gateway.config())
      {_method, ~c"/api/" ++ _} -> Grove.Gateway.Api.out(arg, Grove.Gateway.config())
      _ -> error(404, "not_found", "no such page")
    end
  end

  defp terrain(arg) do
    case Grove.Gateway.terrain() do
      nil ->
        error(
          404,
          "not_found",
          "this world is too large to send whole; each area's ground comes with it (docs/protocol.md)"
        )

      terrain ->
        whole_terrain(arg, terrain)
    end
  end

  defp whole_terrain(arg, %{width: w, height: h, raw: raw, gzip: gzip}) do
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

  # The board's emoji font (see assets/README.md), built under a name with
  # its content's hash: it never changes under that name, so browsers
  # keep it for a year without asking again.
  defp font(arg, name) do
    with true <- font_name?(name),
         {:ok, body} <- File.read(Path.join([arg(arg, :docroot), "assets", "fonts", name])) do
      [
        {:status, 200},
        {:header, {~c"Cache-Control", ~c"public, max-age=31536000, immutable"}},
        {:content, ~c"font/woff2", body}
      ]
    else
      _ -> error(404, "not_found", "no such font")
    end
  end

  defp font_name?(name), do: to_string(name) =~ ~r/\A[A-Za-z0-9_-]+\.woff2\z/

  # Codes 0, 1 and 2 are a plain actor, a player and a bacterium (the
  # world's Game of Life); each kind of the instance's actors has its own
  # from 3 on (see Grove.Actors).
  defp kinds do
    actors =
      try do
        Grove.Actors.kinds(Grove.Gateway.config().actors)
      rescue
        ArgumentError -> []
      end

    kinds =
      [
        %{"code" => 0, "name" => "actor", "emoji" => ""},
        %{"code" => 1, "name" => "player", "emoji" => ""},
        %{"code" => 2, "name" => "bacterium", "emoji" => "🦠"}
      ] ++
        for kind <- actors,
            do: %{"code" => kind.code, "name" => kind.name, "emoji" => kind.emoji}

    [{:header, {~c"Cache-Control", ~c"no-cache"}} | json(200, %{"kinds" => kinds})]
  end

  # The world's game: its actions and its legend (docs/protocol.md, "Games").
  defp game do
    world = Grove.World.fetch!(Grove.Gateway.config().world)
    described = Grove.World.Game.Spec.describe(world.game, world.tally != nil)
    [{:header, {~c"Cache-Control", ~c"no-cache"}} | json(200, described)]
  end

  # The game's leaderboard: the best of its board's tally, by name.
  defp board do
    world = Grove.World.fetch!(Grove.Gateway.config().world)
    [{:header, {~c"Cache-Control", ~c"no-cache"}} | json(200, Grove.World.Game.board(world))]
  end

  @doc false
  # After a 413 the rest of the body is still on the wire: close the connection.
  def error(413, code, message),
    do: [
      {:header, {:connection, ~c"close"}} | json(413, %{"error" => code, "message" => message})
    ]

  def error(status, code, message), do: json(status, %{"error" => code, "message" => message})

  @doc false
  def json(status, body) do
    [
      {:status, status},
      {:header, {~c"Cache-Control", ~c"no-store"}}
      | closing([{:content, ~c"application/json", :jiffy.encode(body)}])
    ]
  end

  # A stopping server closes kept-alive connections after each answer: a
  # client (a load balancer's health check) connects again, and is refused
  # once the port closes, instead of holding a connection the stop must cut.
  defp closing(rest) do
    if Grove.Gateway.draining?(), do: [{:header, {:connection, ~c"close"}} | rest], else: rest
  end

  # The request body, gathered whole (and within the limit) by out/1.
  @doc false
  def body(arg) do
    case arg(arg, :clidata) do
      body when is_binary(body) -> {:ok, body}
      :undefined -> {:ok, ""}
    end
  end

  # A query parameter's value, `{:ok, value}` or `:undefined`, decoded
  # leniently: an escape that is not one is kept as it stands, where Yaws's
  # own `queryvar/2` crashes the request (a 500) on it.
  @doc false
  def query(arg, name) do
    case arg(arg, :querydata) do
      query when is_list(query) or is_binary(query) ->
        case URI.decode_query(:erlang.iolist_to_binary(query)) do
          %{^name => value} -> {:ok, value}
          _ -> :undefined
        end

      _ ->
        :undefined
    end
  end

  @doc false
  def decode_json(body) do
    {:ok, :jiffy.decode(body, [:return_maps])}
  rescue
    _ -> {:error, 400, "bad_json", "the body is not valid JSON"}
  catch
    _, _ -> {:error, 400, "bad_json", "the body is not valid JSON"}
  end
end
