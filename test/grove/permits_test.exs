defmodule Grove.PermitsTest do
  use ExUnit.Case, async: true

  alias Grove.Permits

  setup do
    name = :"permits_#{System.unique_integer([:positive])}"
    start_supervised!({Permits, name: name, concurrency: 2, queue: 1})
    %{permits: name}
  end

  # Holds a permit until told to let go.
  defp hold(permits) do
    test = self()

    pid =
      spawn(fn ->
        Permits.run(permits, 1000, fn ->
          send(test, {:holding, self()})
          receive do: (:release -> :ok)
        end)
      end)

    assert_receive {:holding, ^pid}
    pid
  end

  test "runs the work and returns its result", %{permits: permits} do
    assert Permits.run(permits, 100, fn -> 6 * 7 end) == {:ok, 42}
  end

  test "beyond the permits and the queue, callers are turned away at once", %{permits: permits} do
    a = hold(permits)
    b = hold(permits)
    test = self()

    # The queue holds one: this one waits...
    waiter = spawn(fn -> send(test, {:waited, Permits.run(permits, 5000, fn -> :ran end)}) end)
    Grove.WorldCase.eventually(fn -> assert Permits.stats(permits).waiting == 1 end)

    # ...and this one is refused without waiting.
    assert Permits.run(permits, 5000, fn -> :never end) == {:error, :busy}

    send(a, :release)
    assert_receive {:waited, {:ok, :ran}}
    send(b, :release)
    assert Permits.stats(permits).refused >= 1
    refute Process.alive?(waiter)
  end

  test "a caller does not wait past its deadline", %{permits: permits} do
    hold(permits)
    hold(permits)
    assert Permits.run(permits, 10, fn -> :never end) == {:error, :busy}
    assert Permits.stats(permits).waiting == 0
  end

  # A waiter's deadline passes just as a permit is granted to it: the grant
  # is on its way when the waiter withdraws. Played step by step with the
  # messages `run/3` exchanges, since the real race lasts microseconds.
  test "a withdrawal that crosses its grant gives the permit back", %{permits: permits} do
    a = hold(permits)
    hold(permits)
    ref = make_ref()
    deadline = System.monotonic_time(:millisecond) + 60_000
    assert :queued = GenServer.call(permits, {:acquire, ref, deadline})

    send(a, :release)
    assert_receive {:granted, ^ref}
    assert :ok = GenServer.call(permits, {:withdraw, ref})

    assert %{holders: 1, waiting: 0} = Permits.stats(permits)
    assert Permits.run(permits, 1000, fn -> :free end) == {:ok, :free}
  end

  test "a holder that dies gives its permit back", %{permits: permits} do
    a = hold(permits)
    hold(permits)
    Process.exit(a, :kill)
    assert Permits.run(permits, 1000, fn -> :after end) == {:ok, :after}
  end
end
