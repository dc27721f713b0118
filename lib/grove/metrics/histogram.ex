defmodule Grove.Metrics.Histogram do
  @moduledoc """
  A log-bucketed histogram of non-negative integers on `:counters`: recording
  is one array update with no process hop, so any process may record on a
  hot path.

  Each power of two is split into 8 buckets and a percentile is read back as
  the upper edge of its bucket: never below the true value, at most 12.5 %
  above it, so a limit checked against it is checked conservatively. Values from 0 up to 2^40 are kept; larger
  ones land in the last bucket.

  ## Examples

      iex> h = Grove.Metrics.Histogram.new()
      iex> for v <- 1..100, do: Grove.Metrics.Histogram.record(h, v)
      iex> Grove.Metrics.Histogram.count(h)
      100
      iex> p50 = Grove.Metrics.Histogram.percentile(h, 50)
      iex> p50 >= 46 and p50 <= 55
      true
  """

  import Bitwise

  @sub_bits 3
  @sub 1 <<< @sub_bits
  @max_power 40
  @size (@max_power + 1) * @sub + 1

  @type t :: :counters.counters_ref()
  @typedoc "Bucket counts read at one moment; see `snapshot/1` and `diff/2`."
  @type snapshot :: [non_neg_integer()]

  # The slot after the buckets holds the sum of the values, for exporters.
  @sum_slot @size + 1

  @doc "A new, empty histogram."
  @spec new() :: t()
  def new, do: :counters.new(@size + 1, [:write_concurrency])

  @doc "Records one value."
  @spec record(t(), non_neg_integer()) :: :ok
  def record(histogram, value) when is_integer(value) do
    :counters.add(histogram, bucket(value) + 1, 1)
    :counters.add(histogram, @sum_slot, value)
  end

  @doc "Records the same value `count` times."
  @spec record(t(), non_neg_integer(), pos_integer()) :: :ok
  def record(histogram, value, count) when is_integer(value) and is_integer(count) do
    :counters.add(histogram, bucket(value) + 1, count)
    :counters.add(histogram, @sum_slot, value * count)
  end

  @doc "The sum of the values recorded (what Prometheus calls `_sum`)."
  @spec sum(t()) :: integer()
  def sum(histogram), do: :counters.get(histogram, @sum_slot)

  @doc "Empties the histogram."
  @spec reset(t()) :: :ok
  def reset(histogram), do: for(i <- 1..(@size + 1), do: :counters.put(histogram, i, 0)) && :ok

  @doc "A copy of the bucket counts, to diff against a later snapshot."
  @spec snapshot(t()) :: snapshot()
  def snapshot(histogram), do: for(i <- 1..@size, do: :counters.get(histogram, i))

  @doc "The counts recorded between two snapshots (or since an empty one)."
  @spec diff(snapshot(), snapshot()) :: snapshot()
  def diff(later, earlier), do: Enum.zip_with(later, earlier, &(&1 - &2))

  @doc "Two snapshots as one, as if every value had been recorded in one histogram."
  @spec merge(snapshot(), snapshot()) :: snapshot()
  def merge(a, b), do: Enum.zip_with(a, b, &(&1 + &2))

  @doc "How many values were recorded, in a histogram or a snapshot."
  @spec count(t() | snapshot()) :: non_neg_integer()
  def count(snapshot) when is_list(snapshot), do: Enum.sum(snapshot)
  def count(histogram), do: count(snapshot(histogram))

  @doc """
  The value below which `p` percent of the recorded values fall (the upper
  edge of the bucket that holds it); `nil` when nothing was recorded.
  """
  @spec percentile(t() | snapshot(), number()) :: non_neg_integer() | nil
  def percentile(histogram, p) when not is_list(histogram),
    do: percentile(snapshot(histogram), p)

  def percentile(snapshot, p) when is_list(snapshot) and p >= 0 and p <= 100 do
    total = count(snapshot)

    if total == 0 do
      nil
    else
      rank = max(1, ceil(total * p / 100))

      snapshot
      |> Enum.with_index()
      |> Enum.reduce_while(0, fn {n, i}, seen ->
        if seen + n >= rank, do: {:halt, upper_edge(i)}, else: {:cont, seen + n}
      end)
    end
  end

  @doc "The largest value's bucket edge; `nil` when nothing was recorded."
  @spec max(t() | snapshot()) :: non_neg_integer() | nil
  def max(histogram) when not is_list(histogram), do: __MODULE__.max(snapshot(histogram))

  def max(snapshot) do
    case snapshot |> Enum.with_index() |> Enum.filter(fn {n, _} -> n > 0 end) |> List.last() do
      nil -> nil
      {_, i} -> upper_edge(i)
    end
  end

  @doc """
  Cumulative counts at every power of two from 1 up to `2^max_power`: the
  number of values at or below each edge, exact, since each power of two is
  a bucket boundary. For exporters that want a short, fixed set of buckets.
  """
  @spec cumulative_powers(t() | snapshot(), pos_integer()) :: [
          {non_neg_integer(), non_neg_integer()}
        ]
  def cumulative_powers(histogram, max_power) when not is_list(histogram),
    do: cumulative_powers(snapshot(histogram), max_power)

  def cumulative_powers(snapshot, max_power) do
    counts = List.to_tuple(snapshot)

    {edges, _running, _i} =
      Enum.reduce(0..max_power, {[], 0, 0}, fn power, {edges, running, i} ->
        edge = (1 <<< power) - 1
        # Add every bucket whose values all lie at or below the edge.
        {running, i} = take_until(counts, i, edge, running)
        {[{edge, running} | edges], running, i}
      end)

    Enum.reverse(edges)
  end

  defp take_until(counts, i, edge, running) when i < tuple_size(counts) do
    if upper_edge(i) <= edge,
      do: take_until(counts, i + 1, edge, running + elem(counts, i)),
      else: {running, i}
  end

  defp take_until(_counts, i, _edge, running), do: {running, i}

  @doc "Buckets that hold values, as `{upper_edge, count}`, for exporters."
  @spec buckets(t() | snapshot()) :: [{non_neg_integer(), non_neg_integer()}]
  def buckets(histogram) when not is_list(histogram), do: buckets(snapshot(histogram))

  def buckets(snapshot) do
    for {n, i} <- Enum.with_index(snapshot), n > 0, do: {upper_edge(i), n}
  end

  # Values below 2^@sub_bits get a bucket each; above, each power of two is
  # split into @sub buckets by the bits that follow the leading one.
  @doc false
  @spec bucket(non_neg_integer()) :: non_neg_integer()
  def bucket(value) when value < @sub, do: max(value, 0)

  def bucket(value) do
    power = bit_length(value) - 1

    if power > @max_power do
      @size - 1
    else
      (power - @sub_bits + 1) * @sub + (value >>> (power - @sub_bits) &&& @sub - 1)
    end
  end

  @doc false
  @spec upper_edge(non_neg_integer()) :: non_neg_integer()
  def upper_edge(index) when index < @sub, do: index

  def upper_edge(index) do
    power = div(index, @sub) + @sub_bits - 1
    sub = rem(index, @sub)
    (1 <<< power) + (sub + 1) * (1 <<< (power - @sub_bits)) - 1
  end

  # A few comparisons instead of a loop: this runs once per recorded value.
  @nibble_bits List.to_tuple(for v <- 0..15, do: length(Integer.digits(v, 2)) * min(v, 1))

  defp bit_length(value) when value >= 1 <<< 32, do: 32 + bit_length(value >>> 32)
  defp bit_length(value) when value >= 1 <<< 16, do: 16 + bit_length16(value >>> 16)
  defp bit_length(value), do: bit_length16(value)

  defp bit_length16(value) when value >= 256, do: 8 + bit_length8(value >>> 8)
  defp bit_length16(value), do: bit_length8(value)

  defp bit_length8(value) when value >= 16, do: 4 + elem(@nibble_bits, value >>> 4)
  defp bit_length8(value), do: elem(@nibble_bits, value)

  @doc """
  A histogram as exporters take it: cumulative buckets at powers of two up
  to `2^max_power`, their edges, and the sum, divided by `per_second`
  (1_000_000 for a histogram of microseconds), with the count.
  """
  @spec export(t(), pos_integer(), pos_integer()) :: %{
          buckets: [{number(), non_neg_integer()}],
          sum: float(),
          count: non_neg_integer()
        }
  def export(histogram, per_second, max_power \\ 34) do
    %{
      buckets:
        for(
          {edge, count} <- cumulative_powers(histogram, max_power),
          do: {edge / per_second, count}
        ),
      sum: sum(histogram) / per_second,
      count: count(histogram)
    }
  end

  @doc """
  A value read back from a histogram of microseconds (a percentile, the max)
  in milliseconds, to two decimals; `nil` (nothing recorded) stays `nil`.

      iex> Grove.Metrics.Histogram.to_ms(1234)
      1.23
  """
  @spec to_ms(non_neg_integer() | nil) :: float() | nil
  def to_ms(nil), do: nil
  def to_ms(micros), do: Float.round(micros / 1000, 2)
end
