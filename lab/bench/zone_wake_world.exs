# The world `zone_wake.exs` and `zone_wake_parts.exs` wake zones in, each
# requiring this script: a million cells a side in zones of 50, on demand,
# with the orchard and the default ground (seed 1), no store, nothing
# ticking by itself; and the zones of a round, spread over it.
defmodule Grove.Bench.ZoneWakeWorld do
  @moduledoc false

  alias Grove.World

  @doc "Starts the world as `name`: `{supervisor, world}`."
  def start(name) do
    {:ok, sup} =
      World.start_link(
        name: name,
        width: 1_000_000,
        height: 1_000_000,
        zone_size: 50,
        zones: :on_demand,
        zone_idle: :manual,
        handoff_timeout: 50,
        game: {Grove.Games.Orchard, tick: :manual},
        rules: [move_rate: nil]
      )

    {sup, World.fetch!(name)}
  end

  @doc "`count` zones spread over the world's grid, others for each `round`."
  def zones(grid, round, count) do
    for k <- 0..(count - 1),
        do:
          rem((round * 1000 + k) * 37, grid.zones_y) * grid.zones_x +
            rem(k * 7919, grid.zones_x)
  end
end
