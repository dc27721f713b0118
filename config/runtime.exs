import Config

# Environment variables for the usual knobs, so `make run` needs no file edits:
#   GROVE_ACTORS=50000 GROVE_SEED=7 GROVE_PORT=8080 GROVE_LISTEN=all make run
#   GROVE_ACTOR_KINDS=walker:15000,wanderer:3000,sheep:2000,MyGame.Hare:500
#     (which kinds of actors run, and how many of each: walker, wanderer,
#     sheep, and the orchard's grazer and picker, or a module's name;
#     GROVE_ACTORS then scales them to its total)
#   GROVE_GAME=orchard (the game the world runs: orchard, off for none, or
#     a module's name with its options left at their defaults; with off,
#     the orchard's grazers flock as plain sheep and its pickers wander)
#   GROVE_SPAWN=blob:500,500,20 (the actors start around a point, about
#     20 cells from it, growing outward as it fills; GROVE_SPAWN=uniform,
#     the default, spreads them over the whole world)
#   GROVE_PLAYER_SPAWN=400,400,600,600 (where new players start, X0,Y0,X1,Y1
#     with the upper bounds exclusive; default anywhere; see Grove.Gateway)
#   GROVE_VIEW_MS=250 GROVE_VIEW_MS_MAX=1000 (how often a player who does not
#     move is sent views: the first while the server has room, up to the
#     second under load; see Grove.Gateway)
#   GROVE_DATA=/var/lib/grove (the SQLite file and the token key; default ./data)
#   GROVE_UNREADY_MS=5000 (how long a graceful stop answers /readyz with 503
#     before it tells the players goodbye; default 2000)
#   GROVE_LOGIN_RATE=1000 (logins per second per address; default 10)
#   GROVE_STORE_BATCH=1 (requests the store commits together; default 500)
#   GROVE_ACCEPT_PRIORITY=normal (accept connections at normal priority, as
#     Yaws does on its own, instead of high; for comparing the two)
#   GROVE_LIFE=off (no bacteria; off by default with GROVE_ZONES=on_demand)
#   GROVE_LIFE_RULE=B36/S23 GROVE_LIFE_MS=500 (the bacteria's rule and the
#     milliseconds between their generations; see Grove.World.Life)
#   GROVE_RESIDENT=on GROVE_RESIDENT_BEAT_MS=500 GROVE_RESIDENT_PHASES=4
#     (actors that live in their zones, stepped by them on beats this many
#     ms apart, spread over this many phases; see Grove.Actors, :resident)
#   GROVE_UNSEEN_EVERY=1 (herds' actors where nobody watches take one turn in
#     this many; 1 rests none; see Grove.Actors, :unseen_every)
#   GROVE_DATABASE_URL=postgres://USER:PASSWORD@HOST:PORT/DATABASE (instead of SQLite)
#   GROVE_NODE=grove1@10.0.0.5 GROVE_COOKIE_FILE=/etc/grove/cookie
#     GROVE_PEERS=grove2@10.0.0.6,grove3@10.0.0.7 (or GROVE_PEERS_DNS=grove.internal):
#     a cluster; see docs/operations.md, "A cluster"
#   GROVE_CLUSTER_SIZE=3 (the nodes the cluster is meant to have, for its
#     quorum; default: this node and its peers, and any other seen since)
# Keyword lists given to `config` are merged into config/config.exs's.
integer = fn name ->
  case System.get_env(name) do
    nil ->
      nil

    value ->
      case Integer.parse(value) do
        {n, ""} -> n
        _ -> raise ArgumentError, "#{name} must be an integer, got: #{inspect(value)}"
      end
  end
end

set = fn pairs -> for {key, value} <- pairs, value != nil, do: {key, value} end

positive = fn name ->
  case integer.(name) do
    n when n == nil or n > 0 -> n
    n -> raise ArgumentError, "#{name} must be a positive integer, got: #{n}"
  end
end

# Where the embedded database and the token key live.
data = System.get_env("GROVE_DATA", "data")

if Application.get_env(:grove, :store) do
  config :grove, accounts: [secret_path: Path.join(data, "secret")]

  # PostgreSQL instead of the embedded SQLite:
  #   GROVE_DATABASE_URL=postgres://USER:PASSWORD@HOST:PORT/DATABASE
  case System.get_env("GROVE_DATABASE_URL") do
    nil ->
      config :grove, store: [path: Path.join(data, "grove.db")]

    url ->
      uri = URI.parse(url)

      unless uri.scheme in ["postgres", "postgresql"] and uri.host != nil and uri.path != nil,
        do:
          raise(
            ArgumentError,
            "GROVE_DATABASE_URL must be postgres://USER:PASSWORD@HOST:PORT/DATABASE"
          )

      {username, password} =
        case String.split(uri.userinfo || "", ":", parts: 2) do
          [user, password] -> {URI.decode(user), URI.decode(password)}
          [user] -> {URI.decode(user), ""}
        end

      config :grove,
        store: [
          adapter: :postgres,
          host: uri.host,
          port: uri.port || 5432,
          database: String.trim_leading(uri.path, "/"),
          username: username,
          password: password
        ]
  end

  # The key tokens are signed with, from a file of its own: every node of a
  # cluster must read the same one.
  if path = System.get_env("GROVE_TOKEN_KEY_FILE") do
    config :grove, accounts: [secret_path: path]
  end

  # Requests the store takes from its queue at once, their writes in one
  # transaction (default 500; 1 commits every write alone, as Grove once did).
  if batch = integer.("GROVE_STORE_BATCH") do
    config :grove, store: [max_batch: batch]
  end

  # Logins per second from one address (bursts of twice as many). A load
  # test from one machine is one address: raise it there.
  if rate = integer.("GROVE_LOGIN_RATE") do
    config :grove, accounts: [ip_rate: rate, ip_burst: 2 * rate]
  end
end

# Actor kinds: GROVE_ACTOR_KINDS names them with their counts, and
# GROVE_ACTORS gives the total, shared among the kinds in proportion to
# their counts (all walkers when no kinds are configured). In a cluster
# these are the cluster's totals, each node running its share.
kind_module = fn
  "walker" ->
    Grove.Actors.Walker

  "wanderer" ->
    Grove.Actors.Wanderer

  "sheep" ->
    Grove.Actors.Sheep

  "grazer" ->
    Grove.Games.Orchard.Grazer

  "picker" ->
    Grove.Games.Orchard.Picker

  name ->
    if name =~ ~r/^[A-Z][A-Za-z0-9_]*(\.[A-Z][A-Za-z0-9_]*)*$/,
      do: Module.concat([name]),
      else:
        raise(
          ArgumentError,
          "GROVE_ACTOR_KINDS: #{inspect(name)} is not walker, wanderer, sheep, grazer, picker or a module's name"
        )
end

kinds =
  case System.get_env("GROVE_ACTOR_KINDS") do
    nil ->
      Keyword.get(Application.get_env(:grove, :actors, []), :kinds)

    spec ->
      for part <- String.split(spec, ",", trim: true) do
        with [name, count] <- String.split(String.trim(part), ":"),
             {count, ""} when count >= 0 <- Integer.parse(count) do
          {kind_module.(name), count}
        else
          _ ->
            raise ArgumentError,
                  "GROVE_ACTOR_KINDS must be name:count pairs separated by commas " <>
                    "(e.g. walker:15000,sheep:2000), got: #{inspect(spec)}"
        end
      end
  end

kinds =
  case {integer.("GROVE_ACTORS"), kinds} do
    {nil, kinds} ->
      kinds

    {total, nil} ->
      [{Grove.Actors.Walker, total}]

    {total, kinds} ->
      # Largest remainder, so that the counts add up to the total exactly.
      weight = max(Enum.sum(Enum.map(kinds, &elem(&1, 1))), 1)
      shares = Enum.map(kinds, fn kind -> total * elem(kind, 1) / weight end)
      left = total - Enum.sum(Enum.map(shares, &trunc/1))

      bonus =
        shares
        |> Enum.with_index()
        |> Enum.sort_by(fn {share, _} -> trunc(share) - share end)
        |> Enum.take(left)
        |> MapSet.new(&elem(&1, 1))

      for {{kind, share}, index} <- Enum.with_index(Enum.zip(kinds, shares)) do
        extra = if MapSet.member?(bonus, index), do: 1, else: 0
        put_elem(kind, 1, trunc(share) + extra)
      end
  end

spawn =
  case System.get_env("GROVE_SPAWN") do
    nil ->
      nil

    "uniform" ->
      :uniform

    "blob:" <> where = spec ->
      with [x, y, spread] <- String.split(where, ","),
           {x, ""} <- Integer.parse(String.trim(x)),
           {y, ""} <- Integer.parse(String.trim(y)),
           {spread, ""} when spread > 0 <- Integer.parse(String.trim(spread)) do
        {:blob, {x, y}, spread}
      else
        _ ->
          raise ArgumentError,
                "GROVE_SPAWN must be uniform or blob:X,Y,SPREAD (e.g. blob:500,500,20), got: #{inspect(spec)}"
      end

    other ->
      raise ArgumentError,
            "GROVE_SPAWN must be uniform or blob:X,Y,SPREAD (e.g. blob:500,500,20), got: #{inspect(other)}"
  end

# The game: GROVE_GAME names it, or turns it off.
game =
  case System.get_env("GROVE_GAME") do
    nil ->
      nil

    off when off in ["off", "none", "false", "0"] ->
      false

    "orchard" ->
      {Grove.Games.Orchard, []}

    name ->
      if name =~ ~r/^[A-Z][A-Za-z0-9_]*(\.[A-Z][A-Za-z0-9_]*)*$/,
        do: {Module.concat([name]), []},
        else:
          raise(
            ArgumentError,
            "GROVE_GAME must be orchard, off or a module's name, got: #{inspect(name)}"
          )
  end

# Kinds that play the orchard need it: without it they walk as their plain
# cousins do, counted with those cousins when they are listed too.
kinds =
  if game == false and kinds do
    cousins = %{
      Grove.Games.Orchard.Grazer => Grove.Actors.Sheep,
      Grove.Games.Orchard.Picker => Grove.Actors.Wanderer
    }

    kinds
    |> Enum.map(fn kind -> put_elem(kind, 0, Map.get(cousins, elem(kind, 0), elem(kind, 0))) end)
    |> Enum.reduce([], fn kind, merged ->
      case List.keyfind(merged, elem(kind, 0), 0) do
        nil ->
          merged ++ [kind]

        same ->
          List.keyreplace(
            merged,
            elem(kind, 0),
            0,
            put_elem(same, 1, elem(same, 1) + elem(kind, 1))
          )
      end
    end)
  else
    kinds
  end

# As `{module, count, options}`: a list of pairs would look like a keyword
# list, which Config merges into config.exs's key by key instead of replacing.
kinds =
  kinds &&
    Enum.map(kinds, fn
      {module, count} -> {module, count, []}
      {_module, _count, _options} = kind -> kind
    end)

zones =
  case System.get_env("GROVE_ZONES") do
    nil ->
      nil

    "always" ->
      :always

    "on_demand" ->
      :on_demand

    other ->
      raise ArgumentError, "GROVE_ZONES must be always or on_demand, got: #{inspect(other)}"
  end

# A world with more zones than can all run at once (100,000, the most a
# world of zones that always run may have) starts them on demand, unless
# GROVE_ZONES says which; its start says so in its log line.
zones =
  zones ||
    with world when is_list(world) <- Application.get_env(:grove, :world),
         width = integer.("GROVE_WIDTH") || world[:width] || 1000,
         height = integer.("GROVE_HEIGHT") || world[:height] || 1000,
         size = world[:zone_size] || 50,
         true <- div(width + size - 1, size) * div(height + size - 1, size) > 100_000 do
      :on_demand
    else
      _ -> nil
    end

# The most the zones' ticks stretch to under load: at least their tick
# (the world's `:tick`, 100 ms unless config.exs sets another). Checked
# here, so that a bad one names its variable where the world would name
# its option.
zone_tick = Keyword.get(Application.get_env(:grove, :world, []), :tick, 100)

tick_max =
  with text when text != nil <- System.get_env("GROVE_TICK_MAX_MS") do
    case Integer.parse(text) do
      {n, ""} when n > 0 and (zone_tick == :manual or n >= zone_tick) ->
        n

      _ ->
        raise ArgumentError,
              "GROVE_TICK_MAX_MS must be an integer of at least the zones' tick " <>
                "(#{zone_tick} ms), got: #{inspect(text)}"
    end
  end

config :grove,
  world:
    set.(
      width: integer.("GROVE_WIDTH"),
      height: integer.("GROVE_HEIGHT"),
      seed: integer.("GROVE_SEED"),
      game: game,
      zones: zones,
      zone_idle: integer.("GROVE_ZONE_IDLE_MS"),
      tick_max: tick_max,
      view_tile: integer.("GROVE_VIEW_TILE"),
      resident_beat: positive.("GROVE_RESIDENT_BEAT_MS"),
      resident_phases: positive.("GROVE_RESIDENT_PHASES"),
      life:
        case System.get_env("GROVE_LIFE") do
          off when off in ["off", "false", "0"] ->
            false

          # Bacteria stand still in a zone on demand that sleeps: such a
          # world runs without them unless asked, alone or in a cluster.
          nil when zones == :on_demand ->
            false

          on when on in [nil, "on", "true", "1"] ->
            set.(rule: System.get_env("GROVE_LIFE_RULE"), interval: integer.("GROVE_LIFE_MS"))

          other ->
            raise ArgumentError, "GROVE_LIFE must be on or off, got: #{inspect(other)}"
        end
    ),
  actors:
    set.(
      kinds: kinds,
      spawn: spawn,
      unseen_every: positive.("GROVE_UNSEEN_EVERY"),
      resident:
        case System.get_env("GROVE_RESIDENT") do
          nil -> nil
          on when on in ["on", "true", "1"] -> true
          off when off in ["off", "false", "0"] -> false
          other -> raise ArgumentError, "GROVE_RESIDENT must be on or off, got: #{inspect(other)}"
        end
    ),
  gateway:
    set.(
      port: integer.("GROVE_PORT"),
      listen:
        case System.get_env("GROVE_LISTEN") do
          nil ->
            nil

          "all" ->
            :all

          "loopback" ->
            :loopback

          other ->
            raise ArgumentError, "GROVE_LISTEN must be all or loopback, got: #{inspect(other)}"
        end,
      admin_token: System.get_env("GROVE_ADMIN_TOKEN"),
      view_ms: integer.("GROVE_VIEW_MS"),
      view_ms_max: integer.("GROVE_VIEW_MS_MAX"),
      view_wait_ms: integer.("GROVE_VIEW_WAIT_MS"),
      connection_heap: integer.("GROVE_CONNECTION_HEAP"),
      unready_ms: integer.("GROVE_UNREADY_MS"),
      minimap_zones: integer.("GROVE_MINIMAP_ZONES"),
      spawn:
        case System.get_env("GROVE_PLAYER_SPAWN") do
          nil ->
            nil

          text ->
            case text |> String.split(",") |> Enum.map(&Integer.parse/1) do
              [{x0, ""}, {y0, ""}, {x1, ""}, {y1, ""}] ->
                {x0, y0, x1, y1}

              _ ->
                raise ArgumentError,
                      "GROVE_PLAYER_SPAWN must be X0,Y0,X1,Y1 (a rectangle of cells), got: #{inspect(text)}"
            end
        end,
      accept_priority:
        case System.get_env("GROVE_ACCEPT_PRIORITY") do
          nil ->
            nil

          priority when priority in ["high", "normal"] ->
            String.to_atom(priority)

          other ->
            raise ArgumentError,
                  "GROVE_ACCEPT_PRIORITY must be high or normal, got: #{inspect(other)}"
        end
    )

# A cluster: this node's name, its cookie (never defaulted) and its peers.
cookie =
  case {System.get_env("GROVE_COOKIE"), System.get_env("GROVE_COOKIE_FILE")} do
    {nil, nil} ->
      nil

    {nil, path} ->
      case File.read(path) do
        {:ok, cookie} ->
          String.trim(cookie)

        {:error, reason} ->
          raise ArgumentError, "GROVE_COOKIE_FILE #{path}: #{:file.format_error(reason)}"
      end

    {cookie, _} ->
      cookie
  end

config :grove,
  cluster:
    set.(
      node: System.get_env("GROVE_NODE"),
      cookie: cookie,
      peers:
        case System.get_env("GROVE_PEERS") do
          nil -> nil
          peers -> peers |> String.split(",", trim: true) |> Enum.map(&String.trim/1)
        end,
      dns: System.get_env("GROVE_PEERS_DNS"),
      size: integer.("GROVE_CLUSTER_SIZE")
    )
