defmodule Grove.MetricsTest do
  use ExUnit.Case, async: true
  doctest Grove.Metrics

  import ExUnit.CaptureLog

  alias Grove.Metrics

  setup do
    id = {:test, make_ref()}
    on_exit(fn -> Metrics.detach(id) end)
    %{id: id, event: [:grove_test, System.unique_integer([:positive])]}
  end

  test "handlers get every event they are attached to, in the emitting process", %{
    id: id,
    event: event
  } do
    test = self()

    :ok =
      Metrics.attach(
        id,
        event,
        fn e, m, meta, config -> send(test, {e, m, meta, config, self()}) end,
        :cfg
      )

    :ok = Metrics.execute(event, %{n: 1}, %{who: :me})
    assert_received {^event, %{n: 1}, %{who: :me}, :cfg, pid} when pid == test
    assert {:error, :already_exists} = Metrics.attach(id, event, fn _, _, _, _ -> :ok end)
  end

  test "detached handlers get nothing, and an unknown id is reported", %{id: id, event: event} do
    :ok = Metrics.attach(id, event, fn _, _, _, pid -> send(pid, :called) end, self())
    :ok = Metrics.detach(id)
    Metrics.execute(event, %{}, %{})
    refute_received :called
    assert {:error, :not_found} = Metrics.detach(id)
  end

  test "a handler that raises is detached and the emitter carries on", %{id: id, event: event} do
    :ok = Metrics.attach(id, event, fn _, _, _, _ -> raise "boom" end)

    log = capture_log(fn -> assert :ok = Metrics.execute(event, %{}, %{}) end)
    assert log =~ "detached"
    refute id in Metrics.attached_ids()
  end

  test "span emits start and stop with a duration, or exception", %{id: id, event: event} do
    test = self()
    events = [event ++ [:start], event ++ [:stop], event ++ [:exception]]
    :ok = Metrics.attach_many(id, events, fn e, m, _meta, _ -> send(test, {e, m}) end)

    assert Metrics.span(event, %{}, fn -> :result end) == :result
    stop = event ++ [:stop]
    assert_received {^stop, %{duration: d}} when is_integer(d) and d >= 0

    assert_raise RuntimeError, fn -> Metrics.span(event, %{}, fn -> raise "no" end) end
    exception = event ++ [:exception]
    assert_received {^exception, %{duration: _}}
  end
end
