defmodule Grove.Actors.Herd.WheelTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.Actors.Herd.Wheel

  doctest Wheel
  doctest Grove.Actors, only: [default_resolution: 1]

  test "slots are counted from the phase, rounding down also before zero" do
    wheel = Wheel.new(100, 7)
    assert Wheel.slot_at(wheel, 307) == 3
    assert Wheel.slot_at(wheel, 306) == 2
    assert Wheel.slot_at(wheel, 6) == -1
    assert Wheel.slot_at(wheel, -94) == -2
    assert Wheel.due_ms(wheel, 3) == 307
    assert Wheel.slots(wheel, 1000) == 10 and Wheel.slots(wheel, 1001) == 11
    assert Wheel.slots(wheel, 1) == 1
  end

  test "an actor is found where it was put, taken from its slot or dropped anywhere" do
    wheel =
      Wheel.new(100, 0) |> Wheel.add(3, {:a, 0}) |> Wheel.add(3, {:b, 0}) |> Wheel.add(9, {:c, 0})

    assert Wheel.size(wheel) == 3
    assert Wheel.next_due(wheel, 0, 5) == 3
    assert Wheel.next_due(wheel, 4, 10) == 9
    # Past the horizon, the earliest of all.
    assert Wheel.next_due(wheel, 4, 6) == 3

    {due, wheel} = Wheel.pop(wheel, 3)
    assert Enum.sort(due) == [{:a, 0}, {:b, 0}]
    assert {nil, ^wheel} = Wheel.pop(wheel, 3)
    assert Wheel.drop(wheel, :a) == nil
    assert Wheel.empty?(Wheel.drop(wheel, :c))
    assert Wheel.next_due(Wheel.drop(wheel, :c), 0, 5) == nil
  end

  test "actors put in a slot at once are where one by one, in the reverse order, would put them" do
    wheel = Wheel.new(100, 0) |> Wheel.add(3, {:a, 0})
    one_by_one = wheel |> Wheel.add(3, {:b, 0}) |> Wheel.add(3, {:c, 0}) |> Wheel.add(4, {:d, 0})
    at_once = wheel |> Wheel.add_all(3, [{:c, 0}, {:b, 0}]) |> Wheel.add_all(4, [{:d, 0}])
    assert at_once == one_by_one
    assert Wheel.add_all(wheel, 5, []) == wheel
  end

  test "a wheel of lanes gives a slot's actors back a run a lane, however they were put" do
    wheel =
      Wheel.new(100, 0, 3)
      |> Wheel.add_all(3, [{:a, 0}, {:b, 0}], 0)
      |> Wheel.add_all(3, [{:c, 2}], 2)
      |> Wheel.add_all(3, [{:d, 0}], 0)
      |> Wheel.add(3, {:e, 2}, 2)
      |> Wheel.add(4, {:f, 1}, 1)

    assert Wheel.size(wheel) == 6
    assert Wheel.next_due(wheel, 0, 10) == 3
    assert {[[{:d, 0}, {:a, 0}, {:b, 0}], [{:e, 2}, {:c, 2}]], rest} = Wheel.pop_runs(wheel, 3)
    assert {[{:f, 1}], _} = Wheel.pop(rest, 4)
    assert {nil, _} = Wheel.pop_runs(rest, 3)

    # Dropped from whichever lane, changed in place, taken across lanes.
    assert {{:c, 2}, dropped} = Wheel.drop_entry(wheel, :c)
    assert {[[{:d, 0}, {:a, 0}, {:b, 0}], [{:e, 2}]], _} = Wheel.pop_runs(dropped, 3)
    assert Wheel.drop(wheel, :y) == nil
    assert Wheel.empty?(Wheel.new(100, 0, 2) |> Wheel.add(1, {:x, 1}, 1) |> Wheel.drop(:x))
    doubled = Wheel.map(wheel, fn {id, n} -> {id, 2 * n} end)
    assert Enum.sort(Wheel.entries(doubled)) == [a: 0, b: 0, c: 4, d: 0, e: 4, f: 2]
    {taken, left} = Wheel.take_entries(wheel, 4)
    assert length(taken) == 4 and Wheel.size(left) == 2
    assert Enum.sort(taken ++ Wheel.entries(left)) == Enum.sort(Wheel.entries(wheel))
    {all, none} = Wheel.take(wheel, 10)
    assert length(all) == 6 and Wheel.empty?(none)
  end

  test "actors in a group are found, dropped, taken and changed as those alone are" do
    group = {:group, 3, 0, [{:b, 1}, {:c, 2}, {:d, 3}], :zone}

    wheel =
      Wheel.new(100, 0, 2)
      |> Wheel.add(3, {:a, 0}, 0)
      |> Wheel.add(3, group, 0)
      |> Wheel.add(4, {:group, 2, 1, [{:e, 4}, {:f, 5}], :zone}, 1)

    assert Wheel.size(wheel) == 6
    assert Enum.sort(Wheel.entries(wheel)) == [a: 0, b: 1, c: 2, d: 3, e: 4, f: 5]
    # A slot is taken as it was put.
    assert {[[^group, {:a, 0}]], _} = Wheel.pop_runs(wheel, 3)

    # Out of its group, which is one less, or the one left.
    assert {{:c, 2}, dropped} = Wheel.drop_entry(wheel, :c)

    assert {[[{:group, 2, 0, [{:b, 1}, {:d, 3}], :zone}, {:a, 0}]], _} =
             Wheel.pop_runs(dropped, 3)

    assert {{:e, 4}, dropped} = Wheel.drop_entry(wheel, :e)
    assert {[{:f, 5}], _} = Wheel.pop(dropped, 4)
    assert Wheel.size(dropped) == 5 and Wheel.drop(dropped, :e) == nil

    doubled = Wheel.map(wheel, fn {id, n} -> {id, 2 * n} end)
    assert Enum.sort(Wheel.entries(doubled)) == [a: 0, b: 2, c: 4, d: 6, e: 8, f: 10]

    assert {[[{:group, 3, 0, [{:b, 2}, {:c, 4}, {:d, 6}], :zone}, {:a, 0}]], _} =
             Wheel.pop_runs(doubled, 3)

    {taken, left} = Wheel.take_entries(wheel, 2)
    assert length(taken) == 2 and Wheel.size(left) == 4
    assert Enum.sort(taken ++ Wheel.entries(left)) == Enum.sort(Wheel.entries(wheel))
    assert {ids, none} = Wheel.take(wheel, 10)
    assert Enum.sort(ids) == [:a, :b, :c, :d, :e, :f] and Wheel.empty?(none)
  end

  test "every entry can be changed where it is, and listed" do
    wheel =
      Wheel.new(100, 0) |> Wheel.add(3, {:a, 1}) |> Wheel.add(3, {:b, 2}) |> Wheel.add(9, {:c, 3})

    doubled = Wheel.map(wheel, fn {id, n} -> {id, 2 * n} end)
    assert Enum.sort(Wheel.entries(doubled)) == [{:a, 2}, {:b, 4}, {:c, 6}]
    assert {[{:c, 6}], _} = Wheel.pop(doubled, 9)
  end

  # Every offset of the span is as likely (the herd draws it uniformly),
  # so the mean wait is the mean over all of them.
  defp mean_wait(interval, jitter_percent, resolution) do
    jitter_ms = round(interval * jitter_percent / 100)
    wheel = Wheel.new(resolution, 0)
    span = Wheel.wait_span(wheel, jitter_ms)
    waits = for offset <- 0..(span - 1), do: Wheel.wait_slots(wheel, interval, jitter_ms, offset)
    assert Enum.all?(waits, &(&1 >= 1))
    Enum.sum(waits) * resolution / span
  end

  test "an actor waits its interval on average, exactly when the slot divides the interval" do
    check(
      forall(
        {:proper_types.integer(1, 500), :proper_types.integer(2, 10),
         :proper_types.integer(0, 50)},
        fn {resolution, slots, jitter_percent} ->
          interval = resolution * slots
          assert mean_wait(interval, jitter_percent, resolution) == interval
        end
      ),
      numtests: 200
    )
  end

  test "with the default slot, an actor waits its interval on average, within 5 % where the slot does not divide it" do
    check(
      forall({:proper_types.integer(2, 5000), :proper_types.integer(0, 50)}, fn {interval,
                                                                                 jitter_percent} ->
        resolution = Grove.Actors.default_resolution(interval)
        mean = mean_wait(interval, jitter_percent, resolution)

        if rem(interval, resolution) == 0,
          do: assert(mean == interval),
          else: assert(abs(mean - interval) <= interval * 0.05)
      end),
      numtests: 200
    )
  end

  test "the default slot divides every even interval up to a second" do
    for interval <- 2..1000//2,
        do: assert(rem(interval, Grove.Actors.default_resolution(interval)) == 0)

    assert Grove.Actors.default_resolution(1000) == 500
    assert Grove.Actors.default_resolution(3000) == 500
  end

  # Commands on a wheel and on a plain list of {slot, id}, side by side.
  test "whatever is added, taken, dropped and popped, the wheel holds what a list of the same would" do
    check(
      forall(:proper_types.list(command()), fn commands ->
        {wheel, model} =
          Enum.reduce(commands, {Wheel.new(10, 3), []}, fn command, {wheel, model} ->
            run(command, wheel, model)
          end)

        assert Wheel.size(wheel) == length(model)
        assert Wheel.empty?(wheel) == (model == [])

        for slot <- -3..12 do
          expected = for {^slot, id} <- model, do: id
          {due, _} = Wheel.pop(wheel, slot)
          assert Enum.sort(Enum.map(due || [], &elem(&1, 0))) == Enum.sort(expected)
        end

        first = model |> Enum.map(&elem(&1, 0)) |> Enum.min(fn -> nil end)
        assert Wheel.next_due(wheel, -3, 13) == first
        assert Wheel.next_due(wheel, 13, 14) == first
      end),
      numtests: 300
    )
  end

  defp command do
    slot = :proper_types.integer(-3, 12)
    id = :proper_types.integer(1, 20)

    :proper_types.oneof([
      {:add, slot, id},
      {:add_all, slot, :proper_types.list(id)},
      {:drop, id},
      {:take, :proper_types.integer(0, 5)},
      {:pop, slot}
    ])
  end

  defp run({:add, slot, id}, wheel, model) do
    # Each actor is on the wheel once.
    if List.keymember?(model, id, 1),
      do: {wheel, model},
      else: {Wheel.add(wheel, slot, {id, 0}), [{slot, id} | model]}
  end

  defp run({:add_all, slot, ids}, wheel, model) do
    ids = ids |> Enum.uniq() |> Enum.reject(&List.keymember?(model, &1, 1))
    entries = for id <- ids, do: {id, 0}
    {Wheel.add_all(wheel, slot, entries), model ++ for(id <- ids, do: {slot, id})}
  end

  defp run({:drop, id}, wheel, model) do
    case Wheel.drop(wheel, id) do
      nil ->
        refute List.keymember?(model, id, 1)
        {wheel, model}

      wheel ->
        {wheel, List.keydelete(model, id, 1)}
    end
  end

  defp run({:take, count}, wheel, model) do
    {ids, wheel} = Wheel.take(wheel, count)
    assert length(ids) == min(count, length(model))
    assert Enum.all?(ids, &List.keymember?(model, &1, 1))
    {wheel, Enum.reject(model, fn {_slot, id} -> id in ids end)}
  end

  defp run({:pop, slot}, wheel, model) do
    {_due, wheel} = Wheel.pop(wheel, slot)
    {wheel, Enum.reject(model, &match?({^slot, _}, &1))}
  end
end
