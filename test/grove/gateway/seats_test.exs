defmodule Grove.Gateway.SeatsTest do
  use ExUnit.Case, async: true

  import Grove.PropCase

  alias Grove.Gateway.Seats

  test "seats are taken up to the limit, and one given back is taken again" do
    seats = Seats.new()
    assert for(_ <- 1..3, do: Seats.take(seats, 2)) == [:ok, :ok, :full]
    assert Seats.taken(seats) == 2
    Seats.give_back(seats)
    assert Seats.take(seats, 2) == :ok
    assert Seats.take(seats, 2) == :full
    assert Seats.take(Seats.new(), 0) == :full
  end

  # Takers at once, their steps interleaved in every order the property
  # draws: each reads the seats taken, tries to take one from what it read
  # (`Seats.attempt/3`, the step `Seats.take/2` repeats until it is not
  # told to look again), and gives back the one it holds. After every step
  # the seats taken are exactly those held, never more than the limit. A
  # step that checked what it read and then added one, rather than
  # swapping it for one more, fails this: two takers read the last free
  # seat, and both take it.
  test "takers at once, their steps interleaved in any order, never hold more seats than the limit" do
    check(
      forall(
        {:proper_types.integer(0, 4), :proper_types.integer(1, 6),
         :proper_types.list(:proper_types.integer(0, 5))},
        fn {max, takers, schedule} ->
          seats = Seats.new()

          Enum.reduce(schedule, Map.new(1..takers, &{&1, :idle}), fn turn, takers_at ->
            taker = rem(turn, takers) + 1
            takers_at = Map.update!(takers_at, taker, &step(seats, max, &1))
            held = Enum.count(takers_at, fn {_, at} -> at == :holding end)
            assert Seats.taken(seats) == held
            assert held <= max
            takers_at
          end)

          true
        end
      ),
      numtests: 500
    )
  end

  # One step of a taker, from where it is.
  defp step(seats, _max, :idle), do: {:seen, Seats.taken(seats)}

  defp step(seats, max, {:seen, seen}) do
    case Seats.attempt(seats, max, seen) do
      :ok -> :holding
      :full -> :idle
      {:changed, now} -> {:seen, now}
    end
  end

  defp step(seats, _max, :holding) do
    Seats.give_back(seats)
    :idle
  end
end
