defmodule Grove.World.ChatLogTest do
  @moduledoc "The world's recent chat log: the last lines, bounded, nothing more."
  use ExUnit.Case, async: true

  alias Grove.World.ChatLog

  test "keeps the last `size` lines, oldest first" do
    log = ChatLog.new(3)
    assert ChatLog.recent(log, 10) == []
    for n <- 1..5, do: :ok = ChatLog.record(log, n, {n, 2 * n}, "line #{n}")

    assert [%{id: 3, x: 3, y: 6, text: "line 3"}, %{id: 4}, %{id: 5, text: "line 5"}] =
             ChatLog.recent(log, 10)

    assert Enum.map(ChatLog.recent(log, 2), & &1.id) == [4, 5]
    assert ChatLog.usage(log) == {3, 3}
  end

  test "a log of size 0 keeps nothing" do
    log = ChatLog.new(0)
    :ok = ChatLog.record(log, 1, {0, 0}, "gone")
    assert ChatLog.recent(log, 10) == []
    assert ChatLog.usage(log) == {0, 0}
  end
end
