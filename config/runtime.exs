import Config

# Environment variables for the usual knobs, so `make run` needs no file edits:
#   GROVE_ACTORS=50000 GROVE_SEED=7 GROVE_PORT=8080 GROVE_LISTEN=all make run
#   GROVE_DATA=/var/lib/grove (the SQLite file and the token key; default ./data)
#   GROVE_LOGIN_RATE=1000 (logins per second per address; default 10)
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
  config :grove,
    store: [path: Path.join(data, "grove.db")],
    accounts: [secret_path: Path.join(data, "secret")]

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
      seed: integer.("GROVE_SEED")
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
      admin_token: System.get_env("GROVE_ADMIN_TOKEN")
    )
