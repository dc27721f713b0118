defmodule Grove.Load.WsRunTest do
  use ExUnit.Case, async: true

  alias Grove.Load.WsRun

  doctest WsRun

  test "players spread round-robin over the URLs, whatever the steps of the ramp" do
    for urls <- 1..4, steps <- [[1, 1, 1, 1, 1, 1, 1], [3, 5, 2], [10], [0, 4, 0, 9]] do
      {totals, spawned} =
        Enum.reduce(steps, {List.duplicate(0, urls), 0}, fn count, {totals, from} ->
          counts = WsRun.spread(from, count, urls)
          assert Enum.sum(counts) == count
          {Enum.zip_with(totals, counts, &(&1 + &2)), from + count}
        end)

      # Player n went to URL rem(n, urls): shares differ by one at most, the first URLs first.
      assert totals ==
               Enum.map(0..(urls - 1), fn i ->
                 Enum.count(0..(spawned - 1), &(rem(&1, urls) == i))
               end)
    end
  end

  test "URLs are given again or separated by commas; a URL without a host is refused" do
    # Nothing is reached at them: any port will do.
    port = Grove.Ports.free()
    assert WsRun.urls!("ws://127.0.0.1:#{port}/ws") == ["ws://127.0.0.1:#{port}/ws"]
    assert WsRun.urls!(["http://a:1,http://b:2"]) == ["http://a:1", "http://b:2"]

    assert_raise ArgumentError, ~r/not a server's URL/, fn -> WsRun.urls!("a:#{port}") end
    assert_raise ArgumentError, ~r/no server's URL/, fn -> WsRun.urls!([" , "]) end
  end
end
