defmodule Grove.Gateway.PacerTest do
  use ExUnit.Case, async: true
  doctest Grove.Gateway.Pacer

  alias Grove.Gateway.Pacer

  test "the pace never leaves its bounds and slows as the schedulers get busier" do
    paces = for u <- 0..100, do: Pacer.pace(u / 100, {100, 900}, {0.4, 0.9})
    assert Enum.min(paces) == 100 and Enum.max(paces) == 900
    assert paces == Enum.sort(paces)
  end

  test "the pace starts at the fastest and is read without a message" do
    pace = Pacer.new(250)
    assert Pacer.interval(pace) == 250
  end

  test "the gateway refuses a pace that makes no sense, naming the options" do
    assert_raise ArgumentError, ~r/view_ms_max/, fn ->
      Grove.Gateway.start_link(instance: :nowhere, view_ms: 500, view_ms_max: 100)
    end

    assert_raise ArgumentError, ~r/pace_low/, fn ->
      Grove.Gateway.start_link(instance: :nowhere, pace_low: 0.9, pace_high: 0.5)
    end
  end
end
