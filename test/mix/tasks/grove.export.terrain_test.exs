defmodule Mix.Tasks.Grove.Export.TerrainTest do
  use ExUnit.Case, async: true

  alias Grove.World.Terrain

  @moduletag :tmp_dir

  test "writes the terrain of the seed, as /terrain serves it, behind a header", %{tmp_dir: dir} do
    out = Path.join(dir, "terrain.bin")

    ExUnit.CaptureIO.capture_io(fn ->
      Mix.Tasks.Grove.Export.Terrain.run(~w(--seed 7 --width 60 --height 40 --out #{out}))
    end)

    data = File.read!(out)
    expected = Terrain.generate(60, 40, seed: 7)
    assert "grove-terrain 1 60 40 7\n" <> cells = data
    assert cells == expected.cells
    assert {:ok, %Terrain{width: 60, height: 40, cells: ^cells}} = Terrain.from_file(data)
  end

  test "another seed, another file; a file that is not one is refused", %{tmp_dir: dir} do
    out = Path.join(dir, "terrain.bin")

    ExUnit.CaptureIO.capture_io(fn ->
      Mix.Tasks.Grove.Export.Terrain.run(~w(--seed 8 --width 60 --height 40 --out #{out}))
    end)

    {:ok, terrain} = Terrain.from_file(File.read!(out))
    refute terrain.cells == Terrain.generate(60, 40, seed: 7).cells
    assert {:error, _} = Terrain.from_file("grove-terrain 1 60 40 7\nshort")
    assert {:error, _} = Terrain.from_file("something else")
  end

  test "says how to use it without --out" do
    assert_raise Mix.Error, ~r/--out FILE/, fn -> Mix.Tasks.Grove.Export.Terrain.run([]) end
  end
end
