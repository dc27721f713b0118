defmodule Grove.Load.SoakTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.Load.Soak

  test "reads the watched gauges from Prometheus text" do
    text = """
    # TYPE grove_beam_memory_bytes gauge
    grove_beam_memory_bytes{kind="total"} 123456789
    grove_beam_memory_bytes{kind="ets"} 2048
    grove_beam_processes 431
    grove_beam_ports 12
    grove_beam_mailbox_max 0
    grove_sessions 3
    """

    assert Soak.parse(text) == %{
             memory: 123_456_789.0,
             ets_memory: 2048.0,
             processes: 431.0,
             ports: 12.0,
             mailbox_max: 0.0
           }
  end

  test "a steady rise is growth; a flat gauge is not; the warm-up does not count" do
    rising = for t <- 0..120, do: {t * 5, %{memory: 100_000_000 + t * 500_000}}
    assert %{memory: %{grows: true, rise: rise}} = Soak.trends(rising)
    assert rise > 0.3

    flat = for t <- 0..120, do: {t * 5, %{processes: 400}}
    assert %{processes: %{grows: false, per_hour: +0.0}} = Soak.trends(flat)

    # Memory filling up while players connect, then level: not a leak.
    warming = for t <- 0..120, do: {t * 5, %{memory: min(t, 20) * 10_000_000 + 1}}
    assert %{memory: %{grows: false}} = Soak.trends(warming)
  end

  defp noise, do: :proper_types.vector(100, :proper_types.integer(-1000, 1000))

  test "noise around a level is not growth" do
    property =
      forall(noise(), fn noise ->
        samples = for {n, t} <- Enum.with_index(noise), do: {t * 5, %{memory: 1_000_000 + n}}
        Soak.trends(samples).memory.grows == false
      end)

    check(property, numtests: 200)
  end

  test "a rise of a tenth of the level over the run is growth, whatever the noise" do
    property =
      forall(noise(), fn noise ->
        samples =
          for {n, t} <- Enum.with_index(noise), do: {t * 5, %{memory: 1_000_000 + t * 1_500 + n}}

        assert Soak.trends(samples).memory.grows
      end)

    check(property, numtests: 200)
  end
end
