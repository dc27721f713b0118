# `:eprof` over some processes for a few seconds, its costliest functions
# printed as lines with a prefix: for the probes loaded into a server
# (`knee_probe.exs`, `zone_knee_probe.exs`), each requiring this script,
# since they run in the server's VM (`mix run -r`), where the lab's
# modules are not.
defmodule Grove.Bench.Eprof do
  @moduledoc false

  @doc """
  Profiles `pids` for `ms` milliseconds and prints the last `lines` lines
  of eprof's table (the costliest functions and the total), each after
  `prefix`.
  """
  def print(pids, ms, lines, prefix) do
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
