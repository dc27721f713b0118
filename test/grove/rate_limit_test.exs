defmodule Grove.RateLimitTest do
  use ExUnit.Case, async: true
  doctest Grove.RateLimit

  import Grove.PropCase

  alias Grove.RateLimit

  test "never allows more than the burst plus the rate over any stretch of time" do
    property =
      forall(
        {:proper_types.integer(1, 50), :proper_types.integer(1, 20),
         :proper_types.list(:proper_types.integer(0, 200))},
        fn {rate, burst, gaps} ->
          limit = RateLimit.new(rate, burst)
          times = Enum.scan(gaps, -1_000_000, &(&1 + &2))

          {allowed, _booked} =
            Enum.reduce(times, {[], nil}, fn now, {allowed, booked} ->
              case RateLimit.allow(limit, booked, now) do
                {:ok, booked} -> {[now | allowed], booked}
                :limited -> {allowed, booked}
              end
            end)

          allowed = Enum.reverse(allowed)

          for {from, i} <- Enum.with_index(allowed) do
            within = Enum.count(Enum.drop(allowed, i), &(&1 - from < 1000))
            assert within <= burst + rate
          end
        end
      )

    check(property, numtests: 300)
  end

  test "a steady pace at the rate is always allowed" do
    limit = RateLimit.new(10, 1)

    Enum.reduce(0..50, nil, fn n, booked ->
      assert {:ok, booked} = RateLimit.allow(limit, booked, n * 100)
      booked
    end)
  end
end
