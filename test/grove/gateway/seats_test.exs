defmodule Grove.Gateway.SeatsTest do
  use ExUnit.Case, async: true

  import Grove.PropCase
  import Grove.WorldCase, only: [eventually: 1]

  alias Grove.Gateway.{Seats, Stats}

  # A keeper of its own, its seats and the stats it counts sessions in.
  setup context do
    seats = Seats.new()
    stats = Stats.new()
    keeper = start_supervised!({Seats, {seats, stats, context.test}})
    %{seats: seats, stats: stats, keeper: keeper}
  end

  test "seats are taken up to the limit, and one given back is taken again", %{
    seats: seats,
    keeper: keeper
  } do
    [{a, :ok}, {_b, :ok}, {_c, :full}] = for _ <- 1..3, do: holder(keeper, 2)
    assert Seats.taken(seats) == 2
    run(a, &Seats.give_back/1)
    eventually(fn -> assert Seats.taken(seats) == 1 end)
    assert {_, :ok} = holder(keeper, 2)
    assert {_, :full} = holder(keeper, 2)
    assert {_, :full} = holder(keeper, 0)
  end

  # Killed before it started a connection, or while it waited for one to
  # start: whatever it was doing, it holds nothing once it is gone.
  test "an upgrade killed before it hands its seat over gives it back", %{
    seats: seats,
    keeper: keeper
  } do
    {upgrade, :ok} = holder(keeper, 1)
    assert Seats.taken(seats) == 1
    Process.exit(upgrade, :kill)
    eventually(fn -> assert Seats.taken(seats) == 0 end)
    assert {_, :ok} = holder(keeper, 1)
  end

  test "a seat handed to a connection is the connection's: it comes back when the connection is gone",
       %{seats: seats, keeper: keeper} do
    {upgrade, :ok} = holder(keeper, 1)
    connection = holder_process(keeper)
    run(upgrade, &Seats.hand(&1, connection))
    # The upgrade ends once it has handed the socket over.
    ref = Process.monitor(upgrade)
    Process.exit(upgrade, :kill)
    assert_receive {:DOWN, ^ref, _, _, _}
    assert {_, :full} = holder(keeper, 1)
    assert Seats.taken(seats) == 1

    Process.exit(connection, :kill)
    eventually(fn -> assert Seats.taken(seats) == 0 end)
  end

  # However a connection ends, `terminate/2` or not, the keeper sees it gone.
  test "a connection counts in sessions from when it plays until it is gone, killed too", %{
    stats: stats,
    keeper: keeper
  } do
    # Its word may reach the keeper before its upgrade's hand-over: the
    # two come from two processes.
    for early? <- [false, true] do
      {upgrade, :ok} = holder(keeper, 1)
      connection = holder_process(keeper)
      if early?, do: run(connection, &Seats.playing/1)
      run(upgrade, &Seats.hand(&1, connection))
      if not early?, do: run(connection, &Seats.playing/1)
      eventually(fn -> assert Stats.get(stats, :sessions) == 1 end)

      Process.exit(connection, :kill)
      Process.exit(upgrade, :kill)
      eventually(fn -> assert Stats.get(stats, :sessions) == 0 end)
    end

    # A connection given no seat is not counted, and one that never plays neither.
    connection = holder_process(keeper)
    run(connection, &Seats.playing/1)
    {upgrade, :ok} = holder(keeper, 1)
    quiet = holder_process(keeper)
    run(upgrade, &Seats.hand(&1, quiet))
    :sys.get_state(keeper)
    assert Stats.get(stats, :sessions) == 0
    Process.exit(connection, :kill)
  end

  test "a take the keeper does not answer in time holds no seat", %{
    seats: seats,
    keeper: keeper
  } do
    :ok = :sys.suspend(keeper)
    test = self()

    waiter =
      spawn(fn ->
        send(test, {:took, Seats.take(keeper, 1, 50)})

        # Alive until the test is done, so that the keeper, resumed, meets
        # a caller that is still there and gave up.
        receive do
          :done -> :ok
        end
      end)

    on_exit(fn -> Process.exit(waiter, :kill) end)
    assert_receive {:took, :busy}, 60_000
    :ok = :sys.resume(keeper)
    :sys.get_state(keeper)
    assert Seats.taken(seats) == 0
    assert Process.alive?(waiter)
    send(waiter, :done)
  end

  # Takers at once, their steps interleaved in every order the property
  # draws: each reads the seats taken, tries to take one from what it read
  # (`Seats.attempt/3`, the keeper's step; repeated until it is not told
  # to look again), and gives back the one it holds. After every step
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
    :atomics.sub(seats, 1, 1)
    :idle
  end

  # A process that asks `keeper` for a seat of `max` and waits, and its answer.
  defp holder(keeper, max) do
    test = self()
    pid = holder_process(keeper)

    send(
      pid,
      {:run, fn keeper -> send(test, {:took, self(), Seats.take(keeper, max, 60_000)}) end}
    )

    assert_receive {:took, ^pid, taken}, 60_000
    {pid, taken}
  end

  # A process that runs what it is sent with the keeper, and is killed
  # with the test.
  defp holder_process(keeper) do
    pid = spawn(fn -> serve(keeper) end)
    on_exit(fn -> Process.exit(pid, :kill) end)
    pid
  end

  defp serve(keeper) do
    receive do
      {:run, fun} ->
        fun.(keeper)
        serve(keeper)
    end
  end

  # Runs `fun` in `pid`, and waits until the keeper has had what it sent
  # (what one process sends another arrives in order).
  defp run(pid, fun) do
    test = self()

    send(
      pid,
      {:run,
       fn keeper ->
         fun.(keeper)
         :sys.get_state(keeper)
         send(test, {:ran, self()})
       end}
    )

    assert_receive {:ran, ^pid}, 60_000
    :ok
  end
end
