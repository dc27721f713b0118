# Where a server's scheduler spends its time, by the runtime's own
# accounting (`:msacc`, microstate accounting: Erlang code, collections,
# ports, polling for I/O, the scheduler's other work, sleep): loaded into
# the server, it waits `ROAM_MSACC_AFTER` seconds (default 60), accounts
# for 20 s and prints each state's share of the normal schedulers' time,
# and of their time awake, as lines that start with `MSACC`. With
# `roam_inproc.exs` it is run in the walkers' own VM instead (where it
# accounts over the walkers' measured 30 s). From the repository's root:
#
#   ROAM_MSACC_AFTER=60 ... mix run --no-halt -r lab/bench/roam_msacc.exs
defmodule Bench.RoamMsacc do
  @moduledoc false

  # Each state's time summed over the threads of `type`, from `:msacc.stats/0`.
  def states(stats, type) do
    for %{type: ^type, counters: counters} <- stats, reduce: %{} do
      acc -> Map.merge(acc, counters, fn _state, a, b -> a + b end)
    end
  end

  def print(stats, label) do
    states = states(stats, :scheduler)
    total = Enum.sum(Map.values(states))
    awake = total - Map.get(states, :sleep, 0)

    for {state, time} <- Enum.sort_by(states, &(-elem(&1, 1))) do
      share = 100 * time / max(total, 1)

      of_awake =
        if state == :sleep,
          do: "",
          else: ", #{Float.round(100 * time / max(awake, 1), 1)} % awake"

      IO.puts("MSACC #{label} #{state}: #{Float.round(share, 1)} %#{of_awake}")
    end
  end

  def run(label, ms) do
    :msacc.start(ms)
    print(:msacc.stats(), label)
  end
end

if System.get_env("ROAM_MSACC_AFTER") do
  spawn(fn ->
    Process.sleep(String.to_integer(System.get_env("ROAM_MSACC_AFTER")) * 1000)
    Bench.RoamMsacc.run("server", 20_000)
  end)
end
