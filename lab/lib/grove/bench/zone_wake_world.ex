defmodule Grove.Bench.ZoneWakeWorld do
  @moduledoc """
  The world zones wake and sleep in, for the benches that wake them
  (`bench/zone_wake.exs`, `bench/zone_wake_parts.exs`,
  `bench/zone_watched_idle.exs`) and the zone soak (`Grove.Bench.ZoneSoak`):
  a million cells a side in zones of 50, on demand, put to sleep only
  when told, with the orchard and the default ground (seed 1), no store,
  its moves never throttled; a zone's last run lingers 50 ms after it
  sleeps, not a pile of them. And the zones of a round, spread over it.
  """

  alias Grove.World

  @doc "The world's options (`Grove.World.start_link/1`), with `more` over them."
  @spec options(atom(), keyword()) :: keyword()
  def options(name, more \\ []) do
    Grove.MillionWorld.options(
      name,
      Keyword.merge(
        [
          handoff_timeout: 50,
          game: {Grove.Games.Orchard, tick: :manual},
          rules: [move_rate: nil]
        ],
        more
      )
    )
  end

  @doc "Starts the world as `name`: `{supervisor, world}`."
  @spec start(atom()) :: {pid(), World.t()}
  def start(name) do
    {:ok, sup} = World.start_link(options(name))
    {sup, World.fetch!(name)}
  end

  @doc "`count` zones spread over the world's grid, others for each `round`."
  @spec zones(Grove.World.Grid.t(), non_neg_integer(), pos_integer()) :: [non_neg_integer()]
  def zones(grid, round, count) do
    for k <- 0..(count - 1),
        do:
          rem((round * 1000 + k) * 37, grid.zones_y) * grid.zones_x +
            rem(k * 7919, grid.zones_x)
  end
end
