defmodule Grove.MillionWorld do
  @moduledoc """
  A world a million cells a side in zones of 50, which start on demand and
  sleep only when told (`zone_idle: :manual`): 400 million zones, none
  running until one is needed. The tests' and the lab's (the lab compiles
  this folder too).
  """

  @doc "Its options (`Grove.World.start_link/1`) as `name`, with `more` over them."
  @spec options(atom(), keyword()) :: keyword()
  def options(name, more \\ []) do
    Keyword.merge(
      [
        name: name,
        width: 1_000_000,
        height: 1_000_000,
        zone_size: 50,
        zones: :on_demand,
        zone_idle: :manual
      ],
      more
    )
  end
end
