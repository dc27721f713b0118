defmodule Grove.Gateway.LifeTest do
  # Yaws runs one server per node, so these tests run alone.
  use ExUnit.Case, async: false

  import Grove.WorldCase, only: [eventually: 1]
  import Grove.WsConn, only: [connect: 2, push: 2, expect: 2, expect: 3]

  alias Grove.{Protocol, World}

  @moduletag :gateway

  # A world of its own per test, so one test's bacteria are not in the next one's way.
  setup do
    Grove.TestInstance.start!("life",
      world: [
        # One zone, so that a pattern seeded anywhere lies inside it.
        width: 40,
        height: 40,
        zone_size: 40,
        tick: 50,
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
        life: [interval: :manual, soup: 0.0]
      ],
      actors: [count: 0],
      gateway: [port: 0, seed_rate: 1, seed_burst: 2, density_interval: 100]
    )
  end

  # Reads views until every cell of `cells` was shown with a bacterium:
  # an area's own frame (`area`) or a part of several (`areas`, version 4).
  defp until_bacteria(conn, cells) do
    if MapSet.size(cells) == 0 do
      conn
    else
      {view, conn} = expect(conn, [:area, :areas])
      shown = for {_id, x, y, 2} <- entities(view), into: MapSet.new(), do: {x, y}
      until_bacteria(conn, MapSet.difference(cells, shown))
    end
  end

  defp entities(%{type: :area, entities: entities}), do: entities

  defp entities(%{type: :areas, areas: parts}),
    do: Enum.flat_map(parts, fn {_area, _full, entities, _gone} -> entities end)

  for encoding <- [:json, :binary] do
    test "a player seeds a pattern, sees it live, and is refused with reasons (#{encoding})",
         %{port: port, world: world} do
      conn = connect(port, unquote(encoding))
      push(conn, %{type: :join, protocol: Protocol.version()})
      {welcome, conn} = expect(conn, :welcome)
      dir = if welcome.x < 20, do: :e, else: :w
      step = if dir == :e, do: 1, else: -1
      cells = for k <- 1..3, do: {welcome.x + k * step, welcome.y}

      push(conn, %{type: :seed, seq: 1, pattern: :blinker, dir: dir})
      {seeded, conn} = expect(conn, :seeded)
      assert seeded == %{type: :seeded, seq: 1, result: :ok}

      push(conn, %{type: :seed, seq: 2, pattern: :blinker, dir: dir})
      {seeded, conn} = expect(conn, :seeded)
      assert seeded == %{type: :seeded, seq: 2, result: :occupied}

      # Two a second at most (the burst here): the third at once is refused.
      push(conn, %{type: :seed, seq: 3, pattern: :block, dir: dir})
      {seeded, conn} = expect(conn, :seeded)
      assert seeded == %{type: :seeded, seq: 3, result: :rate_limited}

      World.step_life(world)

      # The blinker's cells come into the player's areas (view tiles, one
      # or two of them) as bacteria (kind 2).
      conn = until_bacteria(conn, MapSet.new(cells))

      # A step into the blinker is refused: the cell is occupied.
      push(conn, %{type: :move, seq: 9, dir: dir})
      {outcome, conn} = expect(conn, :outcome)
      assert outcome.result == :occupied

      # The minimap's layer of bacteria shows them.
      {colonies, _conn} =
        expect(conn, fn message ->
          message.type == :colonies and :binary.bin_to_list(message.cells) |> Enum.any?(&(&1 > 0))
        end)

      assert colonies.cols > 0
    end
  end

  test "a seed whose zone dies holding it is answered: interrupted", %{port: port, world: world} do
    conn = connect(port, :json)
    push(conn, %{type: :join, protocol: Protocol.version()})
    {welcome, conn} = expect(conn, :welcome)
    id = welcome.id
    zone = World.zone_of(world, id)
    :ok = :sys.suspend(zone)
    push(conn, %{type: :seed, seq: 1, pattern: :block, dir: if(welcome.x < 20, do: :e, else: :w)})

    # The seed waits in the suspended zone's mailbox; the zone dies with it.
    eventually(fn ->
      {:messages, mail} = Process.info(zone, :messages)
      assert Enum.any?(mail, &match?({:"$gen_cast", {:seed, ^id, _, _, _, {:seed, 1}, _}}, &1))
    end)

    Process.exit(zone, :kill)

    assert {%{type: :seeded, seq: 1, result: :interrupted}, _conn} =
             expect(conn, :seeded, timeout: 15_000)
  end
end
