defmodule Grove.Load.PlayerTest do
  use ExUnit.Case, async: true

  alias Grove.Load.{Player, Stats}
  alias Grove.Protocol

  # A 20 x 20 meadow with one tree at {5, 5}.
  @terrain %{
    width: 20,
    cells: :binary.copy(<<0>>, 20 * 5 + 5) <> <<1>> <> :binary.copy(<<0>>, 294)
  }

  setup do
    %{env: %{stats: Stats.new(), terrain: @terrain, now: 1_000_000}}
  end

  defp frame(message, encoding), do: IO.iodata_to_binary(Protocol.encode(message, encoding))

  defp welcome(encoding, checks, env) do
    message = %{
      type: :welcome,
      protocol: 3,
      id: 7,
      x: 10,
      y: 10,
      width: 20,
      height: 20,
      view_radius: 8,
      tick_ms: 100,
      view_ms: 400,
      name: "",
      avatar: "x"
    }

    Player.receive_frame(Player.new(encoding, checks), frame(message, encoding), env)
  end

  defp failures(env), do: Stats.read(env.stats).failures

  defp outcome(player, seq, result, {x, y}, env) do
    message = %{type: :outcome, seq: seq, result: result, x: x, y: y}
    Player.receive_frame(player, frame(message, player.encoding), env)
  end

  for encoding <- [:json, :binary] do
    test "every outcome is checked against the move it answers (#{encoding})", %{env: env} do
      player = welcome(unquote(encoding), false, env)
      {player, payload} = Player.move(player, :e, env)
      assert {:ok, %{type: :move, seq: 1, dir: :e}} = Protocol.decode(payload, unquote(encoding))
      # One move in flight at a time.
      assert {_, nil} = Player.move(player, :w, env)

      player = outcome(player, 1, :ok, {11, 10}, env)
      assert failures(env).position == 0
      assert Stats.read(env.stats).counts.outcomes == 1

      {player, _} = Player.move(player, :n, env)
      player = outcome(player, 2, :blocked, {11, 9}, env)
      assert failures(env).position == 1

      _player = outcome(player, 9, :ok, {11, 8}, env)
      assert failures(env).unexpected_outcome == 1
    end
  end

  test "a move with no answer for five seconds is a timeout; its late answer is no failure", %{
    env: env
  } do
    player = welcome(:binary, false, env)
    {player, _} = Player.move(player, :e, env)
    later = %{env | now: env.now + 6_000_000}
    {player, payload} = Player.move(player, :e, later)
    assert payload != nil
    assert Stats.read(env.stats).counts.timeouts == 1
    player = outcome(player, 1, :ok, {11, 10}, later)
    assert failures(env).unexpected_outcome == 0
    _player = outcome(player, 2, :ok, {12, 10}, later)
    assert failures(env).position == 0
  end

  test "a checking player sees two entities on one cell, or one on a tree", %{env: env} do
    player = welcome(:json, true, env)
    area = %{type: :area, area: 0, full: true, entities: [{1, 2, 2, 0}, {2, 3, 3, 0}], gone: []}
    player = Player.receive_frame(player, frame(area, :json), env)
    Player.check_view(player, env)
    assert failures(env).stacked_view == 0 and failures(env).entity_on_blocked_cell == 0

    stacked = %{area | full: false, entities: [{2, 2, 2, 0}]}
    player = Player.receive_frame(player, frame(stacked, :json), env)
    Player.check_view(player, env)
    assert failures(env).stacked_view == 1

    on_tree = %{area | full: false, entities: [{2, 5, 5, 0}]}
    player = Player.receive_frame(player, frame(on_tree, :json), env)
    Player.check_view(player, env)
    assert failures(env).entity_on_blocked_cell == 1
  end

  test "a checking player checks what it assembled as it is about to move", %{env: env} do
    player = welcome(:json, true, env)
    area = %{type: :area, area: 0, full: true, entities: [{1, 2, 2, 0}, {2, 2, 2, 0}], gone: []}
    player = Player.receive_frame(player, frame(area, :json), env)
    assert failures(env).stacked_view == 0

    {_player, payload} = Player.move(player, :e, env)
    assert payload != nil
    assert failures(env).stacked_view == 1
  end

  test "a checking player's own entity must be shown where its outcomes put it", %{env: env} do
    player = welcome(:binary, true, env)
    own = %{type: :area, area: 0, full: true, entities: [{7, 10, 10, 1}], gone: []}
    player = Player.receive_frame(player, frame(own, :binary), env)
    {player, _} = Player.move(player, :e, env)
    player = outcome(player, 1, :ok, {11, 10}, env)

    # Soon after the outcome the view may lag: not checked yet.
    {player, _} = Player.move(player, :e, %{env | now: env.now + 100_000})
    player = outcome(player, 2, :ok, {12, 10}, env)
    assert failures(env).stale_own_entity == 0

    # A second later it must show the player at {12, 10}; it still shows {10, 10}.
    {_player, _} = Player.move(player, :e, %{env | now: env.now + 1_100_000})
    assert failures(env).stale_own_entity == 1
  end

  test "a second welcome for its id is a restore: counted, no error, outcomes checked from the new cell",
       %{env: env} do
    player = welcome(:binary, true, env)
    {player, _} = Player.move(player, :e, env)

    # Its node lost, the entity is placed next to where it stood; the move
    # in flight is answered after that, from wherever it stands now.
    player = welcome_again(player, 7, {10, 11}, env)
    assert player.cell == {10, 11}
    player = outcome(player, 1, :interrupted, {10, 11}, env)

    {player, _} = Player.move(player, :e, env)
    player = outcome(player, 2, :ok, {11, 11}, env)

    counts = Stats.read(env.stats).counts
    assert counts.restored == 1 and counts.joined == 1
    assert counts.protocol_errors == 0
    assert failures(env) |> Map.values() |> Enum.sum() == 0

    # Checked from the new cell: an outcome that ignores it is caught.
    {player, _} = Player.move(player, :e, env)
    _player = outcome(player, 3, :ok, {12, 10}, env)
    assert failures(env).position == 1
  end

  for encoding <- [:json, :binary] do
    test "the server's errors are counted by their code, what does not decode apart (#{encoding})",
         %{env: env} do
      player = Player.new(unquote(encoding), false)
      refused = %{type: :error, code: :server_busy, message: "full"}
      player = Player.receive_frame(player, frame(refused, unquote(encoding)), env)
      _player = Player.receive_frame(player, frame(refused, unquote(encoding)), env)

      reading = Stats.read(env.stats)
      assert reading.counts.protocol_errors == 2
      assert reading.errors.server_busy == 2
      assert reading.errors |> Map.values() |> Enum.sum() == 2
      assert reading.error_texts == %{server_busy: "full"}
    end
  end

  test "a frame that does not decode is an error of its own", %{env: env} do
    _player = Player.receive_frame(Player.new(:json, false), "{not json", env)
    reading = Stats.read(env.stats)
    assert reading.counts.protocol_errors == 1
    assert reading.errors.undecodable == 1
  end

  test "a welcome under another id, once joined, is a failure: the player would be two entities",
       %{env: env} do
    player = welcome(:json, false, env)
    player = welcome_again(player, 8, {3, 3}, env)
    assert failures(env).identity == 1
    assert player.id == 7 and player.cell == {10, 10}
    assert Stats.read(env.stats).counts.restored == 0
  end

  defp welcome_again(player, id, {x, y}, env) do
    message = %{
      type: :welcome,
      protocol: 3,
      id: id,
      x: x,
      y: y,
      width: 20,
      height: 20,
      view_radius: 8,
      tick_ms: 100,
      view_ms: 400,
      name: "",
      avatar: "x"
    }

    Player.receive_frame(player, frame(message, player.encoding), env)
  end

  for encoding <- [:json, :binary] do
    test "every said answers a line sent; refusals counted; chat lines heard (#{encoding})", %{
      env: env
    } do
      player = welcome(unquote(encoding), false, env) |> Map.put(:chats, true)
      {player, payload} = Player.say(player, env)
      assert {:ok, %{type: :say, seq: 1, text: _}} = Protocol.decode(payload, unquote(encoding))
      # One line in flight at a time.
      assert {_, nil} = Player.say(player, env)

      said = %{type: :said, seq: 1, result: :ok, reason: ""}
      player = Player.receive_frame(player, frame(said, unquote(encoding)), env)
      {player, _payload} = Player.say(player, env)
      said = %{type: :said, seq: 2, result: :rate_limited, reason: "at most 1 lines a second"}
      player = Player.receive_frame(player, frame(said, unquote(encoding)), env)
      counts = Stats.read(env.stats).counts
      assert {counts.said, counts.says_refused} == {2, 1}
      assert failures(env).unexpected_outcome == 0

      # An answer to no line sent is a failure.
      said = %{type: :said, seq: 9, result: :ok, reason: ""}
      player = Player.receive_frame(player, frame(said, unquote(encoding)), env)
      assert failures(env).unexpected_outcome == 1

      area = %{
        type: :area,
        area: 0,
        full: false,
        entities: [],
        gone: [],
        events: [{7, 10, 10, "chat", %{"text" => "hi"}}, {8, 9, 9, "chat", %{"text" => "yo"}}]
      }

      _player = Player.receive_frame(player, frame(area, unquote(encoding)), env)
      assert Stats.read(env.stats).counts.chat_heard == 2
    end
  end
end
