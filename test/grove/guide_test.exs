# docs/guide.md cannot rot: its Elixir blocks, one after the other, are the
# guide's game, and its last block is the game's test. They are compiled
# here as this file loads (so the guide's test module is one of the
# suite's, and runs with it: `TreasureHuntTest`), each from the guide's
# own text with every other line blanked, so that errors name the lines
# of docs/guide.md.
guide_path = Path.expand("../../docs/guide.md", __DIR__)
lines = guide_path |> File.read!() |> String.split("\n")

# Each line's block: the number of the ```elixir block it is in, or nil.
{owners, _} =
  Enum.map_reduce(lines, {nil, 0}, fn
    "```elixir", {nil, count} -> {nil, {count + 1, count + 1}}
    "```", {block, count} when block != nil -> {nil, {nil, count}}
    _line, {block, count} -> {block, {block, count}}
  end)

blocks = owners |> Enum.reject(&is_nil/1) |> Enum.uniq()
last = List.last(blocks)

source = fn keep ->
  lines
  |> Enum.zip(owners)
  |> Enum.map_join("\n", fn {line, block} ->
    if block != nil and keep.(block), do: line, else: ""
  end)
end

Code.compile_string(source.(&(&1 != last)), guide_path)
Code.compile_string(source.(&(&1 == last)), guide_path)

defmodule Grove.GuideTest do
  use ExUnit.Case, async: true

  test "the guide's blocks make a game a world accepts, and a test of it" do
    spec = Grove.World.Game.Spec.new!({TreasureHunt, chests: 10})
    assert spec.actions == %{open: []}

    assert Map.keys(spec.hooks) |> Enum.sort() ==
             [:blocks, :cell, :enter, :join, :leave, :look, :show, :tick]

    assert Grove.World.Game.Spec.describe(spec)["title"] == "Treasure hunt"
    assert function_exported?(TreasureHuntTest, :__ex_unit__, 0)
  end
end
