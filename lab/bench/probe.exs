# What the probes loaded into a server (`knee_probe.exs`,
# `zone_knee_probe.exs`) share, each requiring this script, since they run
# in the server's VM (`mix run -r`), where the lab's modules are not: a
# trace of some processes for a few seconds, folded as it comes, and
# `:eprof` over some processes, its costliest functions printed as lines
# with a prefix.
defmodule Grove.Bench.Probe do
  @moduledoc false

  @doc """
  Traces `pids` for `ms` milliseconds (the messages they receive, their
  turns on the scheduler, their garbage collections) and folds each event,
  `{tag, what}` of the trace's `{:trace, pid, tag, what}` (`{:receive,
  message}`, `{:in, mfa}`, `{:gc_minor_start, info}`, ...), into `acc` with
  `fun`; any other message it is sent meanwhile is dropped. A process that
  ended since it was listed is passed over.
  """
  def trace(pids, ms, acc, fun) do
    me = self()

    for p <- pids,
        do: set_trace(p, true, [:receive, :garbage_collection, :running, {:tracer, me}])

    acc = fold(System.monotonic_time(:millisecond) + ms, acc, fun)
    for p <- pids, do: set_trace(p, false, [:all])
    acc
  end

  # A process that ended since it was listed cannot be traced.
  defp set_trace(p, how, flags) do
    :erlang.trace(p, how, flags)
  rescue
    ArgumentError -> 0
  end

  defp fold(until, acc, fun) do
    receive do
      {:trace, _p, tag, what} -> fold(until, fun.({tag, what}, acc), fun)
      _other -> fold(until, acc, fun)
    after
      max(until - System.monotonic_time(:millisecond), 0) -> acc
    end
  end

  @doc """
  Profiles `pids` for `ms` milliseconds and prints the last `lines` lines
  of eprof's table (the costliest functions and the total), each after
  `prefix`.
  """
  def eprof(pids, ms, lines, prefix) do
    :eprof.start()
    :eprof.start_profiling(pids)
    Process.sleep(ms)
    :eprof.stop_profiling()

    file =
      Path.join(
        System.tmp_dir!(),
        "probe-eprof-#{System.pid()}-#{System.unique_integer([:positive])}.txt"
      )

    :eprof.log(String.to_charlist(file))
    :eprof.analyze(:total, [{:sort, :time}])
    :eprof.stop()

    file
    |> File.read!()
    |> String.split("\n")
    |> Enum.filter(&String.contains?(&1, ":"))
    |> Enum.take(-lines)
    |> Enum.each(&IO.puts("#{prefix} #{&1}"))

    File.rm(file)
  end
end
