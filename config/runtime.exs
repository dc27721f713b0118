import Config

# Environment variables for the usual knobs, so `make run` needs no file edits:
#   GROVE_ACTORS=50000 GROVE_SEED=7 GROVE_PORT=8080 GROVE_LISTEN=all make run
#   GROVE_VIEW_MS=250 GROVE_VIEW_MS_MAX=1000 (how often a player who does not
#     move is sent views: the first while the server has room, up to the
#     second under load; see Grove.Gateway)
#   GROVE_DATA=/var/lib/grove (the SQLite file and the token key; default ./data)
#   GROVE_LOGIN_RATE=1000 (logins per second per address; default 10)
#   GROVE_LIFE_RULE=B36/S23 GROVE_LIFE_MS=500 (the bacteria's rule and the
#     milliseconds between their generations; see Grove.World.Life)
#   GROVE_DATABASE_URL=postgres://USER:PASSWORD@HOST:PORT/DATABASE (instead of SQLite)
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

  # Logins per second from one address (bursts of twice as many). A load
  # test from one machine is one address: raise it there.
  if rate = integer.("GROVE_LOGIN_RATE") do
    config :grove, accounts: [ip_rate: rate, ip_burst: 2 * rate]
  end
end

config :grove,
  world:
    set.(
      width: integer.("GROVE_WIDTH"),
      height: integer.("GROVE_HEIGHT"),
      seed: integer.("GROVE_SEED"),
      life:
        set.(
          rule: System.get_env("GROVE_LIFE_RULE"),
          interval: integer.("GROVE_LIFE_MS")
        )
    ),
  actors: set.(count: integer.("GROVE_ACTORS")),
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
      view_ms_max: integer.("GROVE_VIEW_MS_MAX")
    )
