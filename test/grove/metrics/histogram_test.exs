defmodule Grove.Metrics.HistogramTest do
  use ExUnit.Case, async: true
  doctest Grove.Metrics.Histogram

  import Grove.PropCase

  alias Grove.Metrics.Histogram

  test "a percentile is never below the true value and at most 12.5 % above it" do
    property =
      forall(
        :proper_types.non_empty(:proper_types.list(:proper_types.integer(0, 10_000_000))),
        fn values ->
          h = Histogram.new()
          Enum.each(values, &Histogram.record(h, &1))
          sorted = Enum.sort(values)

          for p <- [50, 90, 99, 100] do
            exact = Enum.at(sorted, max(ceil(length(sorted) * p / 100) - 1, 0))
            read = Histogram.percentile(h, p)

            assert read >= exact and read <= exact * 1.125 + 1,
                   "p#{p}: read #{read}, exact #{exact}"
          end

          assert Histogram.count(h) == length(values)
        end
      )

    check(property, numtests: 200)
  end

  test "buckets are contiguous and ordered" do
    edges = for i <- 0..300, do: Histogram.upper_edge(i)
    assert edges == Enum.sort(edges)

    for v <- [0, 1, 7, 8, 9, 100, 1023, 1024, 123_456_789] do
      b = Histogram.bucket(v)
      assert v <= Histogram.upper_edge(b)
      assert b == 0 or v > Histogram.upper_edge(b - 1)
    end
  end

  test "snapshots diff into what happened between them" do
    h = Histogram.new()
    Histogram.record(h, 5)
    before = Histogram.snapshot(h)
    Histogram.record(h, 500)
    Histogram.record(h, 500)
    between = Histogram.diff(Histogram.snapshot(h), before)
    assert Histogram.count(between) == 2
    assert Histogram.percentile(between, 50) >= 500
    assert Histogram.percentile(Histogram.snapshot(Histogram.new()), 50) == nil
  end
end
