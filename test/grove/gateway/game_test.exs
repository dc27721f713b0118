defmodule Grove.Gateway.GameTest do
  @moduledoc "A game over the WebSocket: `act` and `acted`, the areas' game fields, `GET /game`."
  # Yaws runs one server per node, so these tests share one gateway and run alone.
  use ExUnit.Case, async: false

  import Grove.WsConn, only: [connect: 2, push: 2, expect: 2, expect: 3]

  alias Grove.{Walk, World, WsClient}

  @moduletag :gateway

  setup_all do
    Grove.TestInstance.start!("gateway_game",
      world: [
        width: 40,
        height: 40,
        zone_size: 10,
        tick: 50,
        terrain: [tree_density: 0.0, water_density: 0.0, rock_density: 0.0],
        rules: [move_rate: nil],
        game: {Grove.AppleGame, trees: [{9, 5}, {10, 5}], baskets: [{5, 5}], tick: :manual}
      ],
      actors: [count: 0],
      gateway: [
        port: 0,
        act_rate: 10,
        act_burst: 5,
        max_errors: 1000,
        move_rate: 10_000,
        move_burst: 10_000
      ]
    )
  end

  # A player joined anywhere, then walked to a cell.
  defp player_at(port, encoding, cell), do: Walk.player_at(port, encoding, cell, 8)

  defp act(conn, seq, action, dir, args \\ %{}) do
    push(conn, %{type: :act, seq: seq, action: action, dir: dir, args: args})
    expect(conn, :acted, where: &(&1.seq == seq))
  end

  # Each encoding at a tree of its own.
  for {encoding, stand, {tx, ty}, dir} <- [
        {:json, {8, 5}, {9, 5}, :e},
        {:binary, {11, 5}, {10, 5}, :w}
      ] do
    test "a player picks an apple and sees it go (#{encoding})", %{port: port, world: world} do
      {id, conn} = player_at(port, unquote(encoding), unquote(stand))
      # On its way it may have picked up apples another test's player dropped.
      {%{carrying: carried}, _look} = World.attrs(world, id)

      {acted, conn} = act(conn, 1, "pick", unquote(dir))

      assert acted == %{
               type: :acted,
               seq: 1,
               result: :ok,
               data: %{"carrying" => carried + 1},
               reason: ""
             }

      # The area tells of the tree (its code back to 0), the picker's look and the event.
      {area, conn} = expect(conn, :area, where: &(&1.events != []))
      assert {unquote(tx), unquote(ty), 0} in area.cells
      assert {id, carried + 1} in area.looks
      assert [{^id, unquote(tx), unquote(ty), "picked", %{"left" => 0}}] = area.events

      {acted, _conn} = act(conn, 2, "pick", unquote(dir))
      assert %{result: :refused, reason: "no_apples", data: %{}} = acted
    end
  end

  test "unknown actions, bad arguments and floods are answered with a reason; nothing changes",
       %{port: port, world: world} do
    {id, conn} = player_at(port, :json, {20, 20})
    before = World.attrs(world, id)

    {acted, conn} = act(conn, 1, "fly", :here)
    assert acted.result == :unknown_action
    assert acted.reason =~ ~s(no action "fly") and acted.reason =~ "pick"

    {acted, conn} = act(conn, 2, "drop", :here, %{"count" => 7})
    assert %{result: :bad_args, reason: "count: expected an integer in 1..3"} = acted

    {acted, conn} = act(conn, 3, "shout", :here, %{"text" => 5})
    assert %{result: :bad_args, reason: "text: expected a string of at most 16 bytes"} = acted

    {acted, conn} = act(conn, 4, "shout", :here, %{"text" => "hi", "volume" => 11})
    assert %{result: :bad_args, reason: "volume: not an argument of this action"} = acted

    # A field the protocol cannot read is an error naming it, as for any message.
    {client, :json} = conn

    :ok =
      WsClient.send_frame(client, {:text, ~s({"type":"act","seq":5,"action":"pick","dir":"up"})})

    {error, conn} = expect(conn, :error)
    assert error.code == :bad_field and error.message =~ "dir:"

    # A flood: every action answered, those past the rate `rate_limited`.
    for seq <- 10..39, do: push(conn, %{type: :act, seq: seq, action: "pick", dir: :here})

    # Those past the rate are answered at once, the others by the zone: in any order.
    {results, _conn} =
      Enum.reduce(10..39, {%{}, conn}, fn _, {results, conn} ->
        {acted, conn} = expect(conn, :acted)
        {Map.put(results, acted.seq, acted.result), conn}
      end)

    assert Map.keys(results) |> Enum.sort() == Enum.to_list(10..39)
    results = Map.values(results)
    assert :rate_limited in results
    assert Enum.all?(results, &(&1 in [:refused, :rate_limited]))
    assert World.attrs(world, id) == before
  end

  test "an action before joining is refused", %{port: port} do
    conn = connect(port, :json)
    push(conn, %{type: :act, seq: 1, action: "pick"})
    {error, _conn} = expect(conn, :error)
    assert error.code == :not_joined
  end

  test "GET /game describes the game's actions and legend", %{port: port} do
    {:ok, {{_, 200, _}, _headers, body}} =
      :httpc.request(:get, {~c"http://127.0.0.1:#{port}/game", []}, [], body_format: :binary)

    game = :jiffy.decode(body, [:return_maps])
    assert game["game"] == "apple_game"
    assert game["title"] == "Apples"
    assert game["actions"]["drop"]["args"] == [["count", "optional integer 1 3"]]
    assert game["actions"]["slow"]["args"] == [["kind", "one of a b"]]
    assert game["cells"]["1"] == %{"name" => "apples", "emoji" => "🍎"}
    # No tally in this world: no board, JSON's null.
    assert game["board"] == :null
    assert body =~ ~s("board":null)

    {:ok, {{_, 200, _}, _headers, body}} =
      :httpc.request(:get, {~c"http://127.0.0.1:#{port}/game/board", []}, [], body_format: :binary)

    assert :jiffy.decode(body, [:return_maps]) == %{"board" => :null, "top" => []}
    # And a world without a game says so with JSON's null.
    assert IO.iodata_to_binary(:jiffy.encode(Grove.World.Game.Spec.describe(nil))) ==
             ~s({"game":null})
  end
end
