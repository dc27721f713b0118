defmodule Grove.Gateway.DeadlineTest do
  # A store that stops answering: every API request must still get its
  # answer, a 503 with Retry-After, by its deadline, never wait for the
  # store. The store is a double (Grove.Test.StallingStore) whose calls
  # wait behind a gate that stays closed until the end of the test, so an
  # answer that comes at all came while the store was stalled.
  use ExUnit.Case, async: false

  alias Grove.RawHTTP
  alias Grove.Test.StallingStore

  @moduletag :gateway

  setup do
    gate = StallingStore.gate()

    context =
      Grove.TestInstance.start!("deadline",
        world: [width: 40, height: 40, zone_size: 20, tick: 50],
        store: [adapter: StallingStore, gate: gate, timeout: 60_000],
        accounts: [password_cost: 1000, ip_rate: 1000, ip_burst: 1000, hash_timeout: 60_000],
        gateway: [port: 0, request_deadline: 200],
        metrics: [interval: 50]
      )

    Map.put(context, :gate, gate)
  end

  test "a login that the store cannot serve in time gets 503 and Retry-After while it stalls",
       %{port: port, gate: gate, instance: instance} do
    # The store's only worker is stuck on the first one; the rest wait in its queue.
    for n <- 1..5 do
      assert {503, %{"retry-after" => "1"}, %{"error" => "unavailable"}} =
               RawHTTP.post(
                 port,
                 "/api/device_login",
                 %{"device_id" => "stalled-#{n}-device"},
                 60_000
               )
    end

    assert {503, %{"retry-after" => "1"}, %{"error" => "unavailable"}} =
             RawHTTP.post(
               port,
               "/api/register",
               %{"name" => "stalled", "password" => "long enough"},
               60_000
             )

    # Still stalled: every answer above came while the store held the call.
    assert StallingStore.waiting(gate) == 1
    assert %{running: 1, timed_out: timed_out} = Grove.Store.stats(Grove.store(instance))
    assert timed_out >= 6

    metrics = IO.iodata_to_binary(Grove.Metrics.Prometheus.render(instance))
    assert metrics =~ ~s(grove_http_late_total{stage="store"} 6)
    assert metrics =~ ~s(grove_request_wait_seconds_count{stage="store_queue"})
    assert metrics =~ ~s(grove_request_wait_seconds_count{stage="accept"} )

    StallingStore.open(gate)
  end
end
