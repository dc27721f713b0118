defmodule Grove.Bench.Meadow do
  @moduledoc """
  A terrain generator (`Grove.World.Terrain`) whose ground is meadow
  everywhere, made at once: for benches of what zones cost, where making
  each zone's ground (the default generator's noise) would be most of
  the time measured. The ground it makes is the same size as any other.
  """

  @behaviour Grove.World.Terrain

  @impl true
  def init(_width, _height, _opts), do: nil

  @impl true
  def cells(nil, {x0, y0, x1, y1}), do: :binary.copy(<<0>>, (x1 - x0) * (y1 - y0))
end
