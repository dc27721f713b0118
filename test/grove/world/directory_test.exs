defmodule Grove.World.DirectoryTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.World.Directory

  @chunk 65_536

  setup do
    world = :"directory_test_#{System.unique_integer([:positive])}"
    on_exit(fn -> Directory.erase(world) end)
    {:ok, world: world}
  end

  test "a reader answers as a lookup does, for ids in its chunks, past them and in chunks made since",
       %{world: world} do
    # Chunks 0 and 1, then a gap (chunk 2 missing), then chunk 3: the
    # reader holds the first two and looks the others up.
    for id <- [0, @chunk, 3 * @chunk], do: Directory.ensure_chunk(world, id)
    reader = Directory.reader(world)

    Directory.ensure_chunk(world, 2 * @chunk)

    check(
      forall(
        :proper_types.list(
          {:proper_types.integer(0, 5 * @chunk),
           :proper_types.oneof([nil, :proper_types.integer(0, 999)])}
        ),
        fn entries ->
          for {id, zone} <- entries, Directory.ready?(world, id) do
            if zone,
              do: Directory.assign(world, id, zone),
              else: Directory.release(world, id, Directory.lookup(world, id) || 0)
          end

          for {id, _zone} <- entries,
              do: assert(Directory.read(reader, id) == Directory.lookup(world, id))
        end
      )
    )
  end

  test "a reader of a world with no chunk yet finds nothing, and then what was assigned",
       %{world: world} do
    reader = Directory.reader(world)
    assert Directory.read(reader, 5) == nil

    Directory.ensure_chunk(world, 5)
    Directory.assign(world, 5, 42)
    assert Directory.read(reader, 5) == 42
    assert Directory.read(Directory.reader(world), 5) == 42
  end
end
