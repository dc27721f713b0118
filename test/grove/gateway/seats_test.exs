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

  # Processes at once take seats, hold them a moment and give them back,
  # over and over: those holding one at any instant are never more than
  # the limit, and when all have done, every seat is free again.
  test "takers at once never hold more seats than the limit" do
    check(
      forall({:proper_types.integer(0, 6), :proper_types.integer(1, 12)}, fn {max, takers} ->
        seats = Seats.new()
        holding = :atomics.new(1, signed: true)

        1..takers
        |> Task.async_stream(fn _ -> take_and_give_back(seats, max, holding, 50) end,
          max_concurrency: takers,
          ordered: false
        )
        |> Enum.each(fn {:ok, most} -> assert most <= max end)

        assert Seats.taken(seats) == 0
        assert Seats.take(seats, max) == if(max > 0, do: :ok, else: :full)
      end),
      numtests: 50
    )
  end

  # The most seats held at once that this taker saw, as it took one.
  defp take_and_give_back(seats, max, holding, rounds, most \\ 0)
  defp take_and_give_back(_seats, _max, _holding, 0, most), do: most

  defp take_and_give_back(seats, max, holding, rounds, most) do
    case Seats.take(seats, max) do
      :ok ->
        held = :atomics.add_get(holding, 1, 1)
        :erlang.yield()
        :atomics.sub(holding, 1, 1)
        Seats.give_back(seats)
        take_and_give_back(seats, max, holding, rounds - 1, max(most, held))

      :full ->
        :erlang.yield()
        take_and_give_back(seats, max, holding, rounds - 1, most)
    end
  end
end
