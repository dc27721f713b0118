import Config

# What `make run` starts: a 1000 x 1000 world with 20,000 actors of four
# kinds (random walkers, wanderers that turn at obstacles, sheep that flock
# and graze the flowers, pickers that play the orchard), bacteria living by
# the Game of Life, and a game: the orchard (Grove.Games.Orchard).
# Every key is documented in Grove.Config; config/runtime.exs reads the
# environment variables that override them.
config :grove,
  start: true,
  # Bacteria: a Game of Life the zones compute, a generation a second, from
  # soups on a tenth of the world (see Grove.World.Life).
  world: [
    width: 1000,
    height: 1000,
    zone_size: 50,
    seed: 1,
    life: [rule: "B3/S23", interval: 1000, soup: 0.1],
    # The zones tick every 100 ms, stretching to 250 as the server gets busy
    # (Grove.World.pace_ticks/2, by the gateway's pacer); GROVE_TICK_MAX_MS.
    tick_max: 250,
    # GROVE_GAME picks another, or none (config/runtime.exs).
    game: {Grove.Games.Orchard, []}
  ],
  actors: [
    kinds: [
      {Grove.Actors.Walker, 13_000},
      {Grove.Actors.Wanderer, 3_000},
      {Grove.Games.Orchard.Grazer, 2_000},
      {Grove.Games.Orchard.Picker, 2_000}
    ],
    # Where nobody watches, an actor takes one turn in four (docs/decisions.md).
    unseen_every: 4
  ],
  gateway: [port: 4000, listen: :loopback],
  # Accounts in an embedded SQLite file; see config/runtime.exs for GROVE_DATA.
  # Guests may play: the browser logs in with a device id anyway, and load
  # tests can join without accounts. Turn them off where accounts matter.
  store: [adapter: :sqlite],
  accounts: [guests: true],
  status_interval: 10_000

config :logger, :console, format: "$time [$level] $message\n"

import_config "#{config_env()}.exs"
