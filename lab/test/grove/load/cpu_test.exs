defmodule Grove.Load.CpuTest do
  use ExUnit.Case, async: true

  alias Grove.Load.Cpu

  test "other processes' share is the cores' busy time less this process's, of all the cores' time" do
    before = %Cpu{busy: 1_000, total: 4_000, own: 300}
    # 400 ticks of 2 cores over 2 s at 100 a second: 250 busy, 100 of them ours.
    now = %Cpu{busy: 1_250, total: 4_400, own: 400}
    assert Cpu.others_percent(before, now) == 37.5
  end

  test "a share is never below 0, and there is none without two samples a time apart" do
    before = %Cpu{busy: 1_000, total: 4_000, own: 300}
    # Process and core times are counted apart and may disagree by a tick.
    assert Cpu.others_percent(before, %Cpu{busy: 1_100, total: 4_400, own: 401}) == 0.0
    assert Cpu.others_percent(before, before) == nil
    assert Cpu.others_percent(nil, before) == nil
    assert Cpu.others_percent(before, nil) == nil
  end

  test "a sample reads the machine's cores and this process's time" do
    case :os.type() do
      {:unix, :linux} ->
        %Cpu{busy: busy, total: total, own: own} = Cpu.sample()
        assert busy <= total and own > 0 and own <= busy

      _ ->
        assert Cpu.sample() == nil
    end
  end
end
