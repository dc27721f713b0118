defmodule Grove.Metrics.BEAMTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.Metrics.BEAM

  doctest BEAM

  # A process that holds every message it is sent until told to stop.
  defp holding(messages) do
    pid =
      spawn_link(fn ->
        receive do
          :stop -> :ok
        end
      end)

    for _ <- 1..messages//1, do: send(pid, :held)
    on_exit(fn -> send(pid, :stop) end)
    pid
  end

  test "a scrape that may look at every process finds the longest mailbox" do
    holding(500)
    assert {longest, looked_at} = BEAM.longest_mailbox(10_000_000)
    assert longest >= 500
    assert looked_at >= 1
  end

  test "named processes are looked at whatever the sample" do
    pid = holding(300)
    name = :"beam_test_#{System.unique_integer([:positive])}"
    Process.register(pid, name)
    assert {longest, looked_at} = BEAM.longest_mailbox(0)
    assert longest >= 300
    # The named ones alone, and far fewer than every process.
    assert looked_at < :erlang.system_info(:process_count)
  end

  test "a sample looks at no more than the named processes and the sample" do
    for _ <- 1..50, do: holding(0)
    named = length(Process.registered())
    {_longest, looked_at} = BEAM.longest_mailbox(10)
    # Processes named meanwhile by other tests may add a few.
    assert looked_at <= named + 10 + 5
  end

  test "spread: at most `count` items, distinct, evenly spaced from `start`, all when few" do
    generator =
      :proper_types.tuple([
        :proper_types.range(0, 300),
        :proper_types.range(0, 300),
        :proper_types.range(0, 10_000)
      ])

    check(
      forall(generator, fn {size, count, start} ->
        items = List.to_tuple(Enum.to_list(0..(size - 1)//1))
        start = if size > 0, do: rem(start, size), else: 0
        picked = BEAM.spread(items, count, start)

        assert length(picked) == min(size, count)
        assert picked == Enum.uniq(picked)
        assert Enum.all?(picked, &(&1 in 0..(size - 1)//1))

        cond do
          size <= count ->
            assert picked == Tuple.to_list(items)

          count == 0 ->
            assert picked == []

          true ->
            # The offsets from the start, and the gaps between them round the
            # tuple, each within one item of size / count.
            offsets = picked |> Enum.map(&rem(&1 - start + size, size)) |> Enum.sort()
            gaps = Enum.zip_with(offsets, tl(offsets) ++ [hd(offsets) + size], &(&2 - &1))
            assert Enum.all?(gaps, &(&1 in div(size, count)..(div(size, count) + 1)))
        end
      end),
      numtests: 300
    )
  end
end
