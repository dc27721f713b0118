defmodule Grove.Actors.Herd.WindowTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.Actors.Herd.Window

  # Outcomes of moves sent at these times.
  defp times(sent_ats), do: for(sent_at <- sent_ats, do: {0, sent_at, {:ok, {0, 0}}})

  # Times in plain integers: the window never reads a clock.
  defp window(max \\ 16), do: Window.new(max, 100, 1000, 0)

  test "batches fill the window; answers free it, once each" do
    window = window(4) |> Window.sent(10, 3)
    refute Window.full?(window)
    assert Window.unanswered?(window, 10)
    window = Window.sent(window, 20, 1)
    assert Window.full?(window)

    {window, 2} = Window.answered(window, times([10, 10]), 50)
    assert window.in_flight == 2 and Window.unanswered?(window, 10)
    {window, 1} = Window.answered(window, times([10, 10]), 60)
    refute Window.unanswered?(window, 10)
    # A batch no longer counted: its late answer changes nothing.
    {^window, 0} = Window.answered(window, times([10]), 70)
  end

  test "answers counted by batch free the window as the answers themselves do" do
    window = window(16) |> Window.sent(10, 3) |> Window.sent(20, 2)
    # Batch 10 answered once too often, in two runs; batch 20 once.
    answers = times([10, 10, 20, 10, 10])

    assert Window.answered_counts(window, [{10, 2}, {20, 1}, {10, 2}], 500) ==
             Window.answered_runs(window, answers, 500)

    {window, runs} = Window.answered_counts(window, [{10, 2}, {20, 1}, {10, 2}], 500)
    assert runs == [{10, 1}, {20, 1}, {10, 2}]
    assert window.in_flight == 1 and window.pending == %{20 => 1}
  end

  test "late answers halve the window at the next beat, timely ones grow it back to its bound" do
    window = window(16) |> Window.sent(10, 8)
    {window, 8} = Window.answered(window, times(List.duplicate(10, 8)), 500)
    window = Window.adapt(window, 600)
    assert window.size == 8 and window.decreased_at == 600

    # Sent before it halved: late for a window already cut for them.
    window = Window.sent(window, 550, 1) |> Window.sent(700, 1)
    {window, 1} = Window.answered(window, times([550]), 900)
    assert Window.adapt(window, 950).size == 8

    {window, 1} = Window.answered(window, times([700]), 750)
    window = Window.adapt(window, 800)
    assert window.size == 10
    # No answer: nothing says there is room.
    assert Window.adapt(window, 900).size == 10
  end

  test "batches unanswered past the timeout are given up on" do
    window = window() |> Window.sent(0, 3) |> Window.sent(500, 2)
    assert {^window, 0} = Window.expire(window, 999)
    {window, 3} = Window.expire(window, 1000)
    assert window.in_flight == 2 and not Window.unanswered?(window, 0)
  end

  test "whatever is sent, answered (late, twice or not at all) and given up on, in flight is what is sent and unanswered, within the bound" do
    check(
      forall(:proper_types.list(event()), fn events ->
        {window, model, _now} =
          Enum.reduce(events, {window(8), %{}, 0}, fn event, {window, model, now} ->
            now = now + 10
            step(event, window, model, now)
          end)

        assert window.in_flight == model |> Map.values() |> Enum.sum()
        assert window.pending == Map.reject(model, fn {_, left} -> left == 0 end)
        assert window.size in 1..8
      end),
      numtests: 300
    )
  end

  defp event do
    :proper_types.oneof([
      {:send, :proper_types.integer(0, 4)},
      {:answer, :proper_types.integer(0, 5)},
      :expire,
      :beat
    ])
  end

  # The herd sends no more than the window allows.
  defp step({:send, count}, window, model, now) do
    count = min(count, max(window.size - window.in_flight, 0))
    window = Window.sent(window, now, count)
    model = if count > 0, do: Map.put(model, now, count), else: model
    {window, model, now}
  end

  # Answers to a batch picked by number, even one already answered or given up on.
  defp step({:answer, pick}, window, model, now) do
    batches = model |> Map.keys() |> Enum.sort()

    case batches do
      [] ->
        {window, model, now}

      _ ->
        batch = Enum.at(batches, rem(pick, length(batches)))
        {window, answered} = Window.answered(window, times([batch]), now)
        left = model[batch]
        assert answered == if(left > 0, do: 1, else: 0)
        {window, %{model | batch => max(left - 1, 0)}, now}
    end
  end

  defp step(:expire, window, model, now) do
    {window, expired} = Window.expire(window, now)
    old = for {sent, left} <- model, sent <= now - 1000, do: {sent, left}
    assert expired == old |> Enum.map(&elem(&1, 1)) |> Enum.sum()
    {window, Map.merge(model, Map.new(old, fn {sent, _} -> {sent, 0} end)), now}
  end

  defp step(:beat, window, model, now), do: {Window.adapt(window, now), model, now}
end
