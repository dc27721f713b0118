defmodule Grove.Bench.ZoneSoakTest do
  # The soak of `mix grove.soak.zones` at a small count: a zone put to
  # sleep and woken, its actors and its game's layer going to the store
  # and back each time, comes back with exactly what it held (its layer
  # as it last saved it: what ticks alone changed is not saved). The
  # million cycles are the command's (docs/benchmarks.md).
  use ExUnit.Case, async: true

  @moduletag :capture_log

  test "a zone put to sleep and woken 2,000 times loses nothing and keeps no table asleep" do
    result = Grove.Bench.ZoneSoak.run(2000, fn _done, _so_far -> :ok end, audit_every: 500)

    assert result.cycles == 2000
    assert result.lost == 0
    assert result.changed == 0
    assert result.kept_tables == 0
    assert result.audits == 5 and result.audit_failures == 0
    # The actors did step, so each save was of something new; and acted,
    # so the layer went to the store and back too.
    assert result.moves > 1000
    assert result.layer_saves > 0
  end

  # A hundred thousand in `make test-deep`; the million, the command's.
  @tag :deep
  @tag timeout: 600_000
  test "a zone put to sleep and woken 100,000 times loses nothing" do
    result = Grove.Bench.ZoneSoak.run(100_000, fn _done, _so_far -> :ok end)

    assert %{cycles: 100_000, lost: 0, changed: 0, kept_tables: 0, audit_failures: 0} = result
    assert result.audits == 101
  end
end
