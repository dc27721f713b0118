import Config

# Tests start their own private worlds.
config :grove, start: false
config :logger, level: :warning
