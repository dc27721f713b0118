defmodule Grove.Gateway.SpawnTest do
  # Yaws runs one server per node, so these tests run alone.
  use ExUnit.Case, async: false

  import Grove.WsConn, only: [connect: 1, push: 2, expect: 2]

  alias Grove.{Gateway, Protocol}

  @moduletag :gateway

  setup do
    Grove.TestInstance.start!("spawn",
      world: [
        width: 40,
        height: 40,
        zone_size: 20,
        tick: 50,
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0]
      ],
      actors: [count: 0],
      gateway: [port: 0, spawn: {30, 32, 33, 34}]
    )
  end

  test "new players start in the spawn area while it has room, then anywhere", %{port: port} do
    cells =
      for _ <- 1..8 do
        conn = connect(port)

        push(conn, %{
          type: :join,
          protocol: Protocol.version(),
          view_radius: 2,
          name: "",
          token: ""
        })

        {%{x: x, y: y}, _conn} = expect(conn, :welcome)
        {x, y}
      end

    {inside, outside} = Enum.split(cells, 6)
    # Six cells in the area, one player each.
    assert Enum.sort(inside) == for(x <- 30..32, y <- 32..33, do: {x, y})
    assert Enum.all?(outside, fn {x, y} -> x in 0..39 and y in 0..39 end)
    refute Enum.any?(outside, &(&1 in inside))
  end

  test "a spawn area that is not a rectangle is refused" do
    for bad <- [{1, 1, 1, 5}, {5, 1, 2, 9}, {-1, 0, 3, 3}, :center] do
      assert_raise ArgumentError, ~r/:spawn must be nil or a rectangle/, fn ->
        Gateway.start_link(instance: :nowhere, port: 0, spawn: bad)
      end
    end
  end
end
