defmodule Grove.World.Zone.ChatTest do
  @moduledoc "A said line on a zone's pure core: an event at the speaker's cell, or why not."
  use ExUnit.Case, async: true

  alias Grove.World.{Entity, Grid, Rules, Terrain}
  alias Grove.World.Zone.{Chat, State}

  @grid Grid.new(8, 8, 4)

  defp zone(index) do
    terrain = %Terrain{width: 8, height: 8, cells: :binary.copy(<<0>>, 64)}
    State.new(index, @grid, terrain, Rules.new(move_rate: nil))
  end

  defp join(state, id, cell) do
    {:ok, _entity, state} = State.place(state, %Entity{id: id, owner: self()}, [cell], %{})
    state
  end

  test "a line is an event at the speaker's cell, for the next delta" do
    state = zone(0) |> State.watch(true) |> join(1, {2, 3})
    assert {:said, {2, 3}, state} = Chat.say(state, 1, "hello", self(), 0, fn _ -> nil end)
    {_changes, _departed, labels, state} = State.flush(state)
    {extra, _state} = State.flush_extra(state, labels)
    assert extra.events == [{1, 2, 3, :chat, %{text: "hello"}}]
  end

  test "nobody watching, nobody told: the line is said all the same" do
    state = zone(0) |> join(1, {2, 3})
    assert {:said, {2, 3}, state} = Chat.say(state, 1, "hello", self(), 0, fn _ -> nil end)
    assert state.events == []
  end

  test "only the entity's owner speaks for it" do
    state = zone(0) |> State.watch(true) |> join(1, {2, 3})
    other = spawn(fn -> :ok end)
    assert {:rejected, :not_owner, state} = Chat.say(state, 1, "hi", other, 0, fn _ -> nil end)
    assert state.events == []
  end

  test "a speaker that moved on is followed to its zone, a few hops at most; else unknown" do
    state = zone(0)
    assert {:forward, 1, _} = Chat.say(state, 9, "hi", self(), 0, fn 9 -> 1 end)
    assert {:rejected, :unknown_entity, _} = Chat.say(state, 9, "hi", self(), 0, fn _ -> nil end)
    assert {:rejected, :unknown_entity, _} = Chat.say(state, 9, "hi", self(), 0, fn _ -> 0 end)
    assert {:rejected, :unknown_entity, _} = Chat.say(state, 9, "hi", self(), 5, fn 9 -> 1 end)
  end
end
