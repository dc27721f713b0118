defmodule Grove.World.Zone.ViewsGroundTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.Gateway.Frames
  alias Grove.World.{Entity, Grid, Rules, Terrain}
  alias Grove.World.Zone.{State, Views}

  # The gateway's format without `encode_ground/3`: it gets each tile's
  # ground itself in every snapshot, as every format did before.
  defmodule GroundEachTime do
    @moduledoc false
    @behaviour Grove.World.ViewFormat

    @impl true
    def tiled?(_name), do: true

    @impl true
    def encode_view(name, what, tile, entries, departed),
      do: Frames.encode_view(name, what, tile, entries, departed)

    @impl true
    def encode_view(name, what, tile, entries, departed, extra),
      do: Frames.encode_view(name, what, tile, entries, departed, extra)
  end

  # A 90 x 90 world of generated ground cut into nine 30 x 30 zones, each
  # into nine 10 x 10 tiles; the zone is the middle one, cells 30 to 59.
  @grid Grid.new(90, 90, 30, 10)
  @index 4
  @tiles for(y <- 3..5, x <- 3..5, do: y * 9 + x)

  defp core(cells) do
    terrain = Terrain.generate(90, 90, seed: 3)

    cells
    |> Enum.with_index(1)
    |> Enum.reduce(State.new(@index, @grid, terrain, Rules.new(move_rate: nil)), fn {cell, id},
                                                                                    core ->
      label = if rem(id, 2) == 0, do: {"p#{id}", "🙂"}

      case State.place(core, %Entity{id: id, owner: self(), kind: 1, label: label}, [cell]) do
        {:ok, _entity, core} -> core
        {:rejected, _reason, core} -> core
      end
    end)
  end

  defp tiles(views, core, format, tiles) do
    case Views.snapshot_tiles(views, core, self(), format, tiles) do
      {[{:count, :snapshots_sent}, {:tell, _, {:grove_view, @index, :tiles, _seq, data}}], views} ->
        {data, views}
    end
  end

  test "a tile's ground, encoded once and kept, reads as the ground encoded in each snapshot, in every version" do
    cell = {:proper_types.integer(30, 59), :proper_types.integer(30, 59)}

    asks =
      :proper_types.list(
        :proper_types.non_empty(:proper_types.list(:proper_types.elements(@tiles)))
      )

    check(
      forall({:proper_types.list(cell), asks, :proper_types.elements([:binary, :json])}, fn {at,
                                                                                             asks,
                                                                                             encoding} ->
        core = core(at)

        for version <- 5..Grove.Protocol.version() do
          {Frames, name} = kept = Frames.view_format(encoding, version, @grid)
          each_time = {GroundEachTime, name}
          {_, views} = Views.subscribe(Views.new(@index, @grid, node(), 0), core, self(), 1, kept)
          {_, views} = Views.subscribe(views, core, self(), 2, each_time)

          Enum.reduce(asks, views, fn tiles, views ->
            {data, views} = tiles(views, core, kept, tiles)
            {expected, views} = tiles(views, core, each_time, tiles)
            assert data == expected
            views
          end)
        end

        true
      end),
      numtests: 100
    )
  end
end
