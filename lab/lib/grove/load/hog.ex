defmodule Grove.Load.Hog do
  @moduledoc """
  A CPU hog for overload runs: OS processes that spin, each pinned with
  `taskset` to a core of its own (core 0, then 1, ...), so that they take
  that core from whatever else runs there, the server under test above
  all. They are other OS processes, not BEAM processes: a hog inside the
  server's VM would only compete with it for its own schedulers, which is
  not what a busy machine does.

  A hog is always gone at the end. Each runs under a small shell whose
  standard input is a port of the process that started it; when the port
  closes (`stop/1`, that process exits, the VM stops, crashes or is killed
  with `kill -9`), the shell reads the end of its input and kills its hog.

  `plan/2` runs hogs for a window of a run (from `:from` seconds, for
  `:for` seconds) so that a report shows before, during and after.

  ## Examples

      hog = Grove.Load.Hog.start(1)
      # ... measure ...
      Grove.Load.Hog.stop(hog)
  """

  # $1: the core, $2: what to run. The hog leads a process group of its
  # own (setsid), so that whatever it starts goes with it; the shell reaps
  # it, so not even a zombie is left behind.
  @wrapper ~S"""
  if [ -n "$1" ] && command -v taskset >/dev/null 2>&1; then
    taskset -c "$1" setsid sh -c "$2" &
  else
    setsid sh -c "$2" &
  fi
  p=$!
  echo "$p"
  read _ignored
  kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null
  wait "$p" 2>/dev/null
  """

  @spin "while :; do :; done"

  defstruct ports: [], os_pids: []

  @type t :: %__MODULE__{ports: [port()], os_pids: [pos_integer()]}

  @doc """
  Starts `count` hogs owned by the calling process and returns once they
  run. Options: `:command` (a shell command, default a busy loop) and
  `:pin` (pin hog `i` to core `i` modulo the cores, default `true`).
  """
  @spec start(non_neg_integer(), keyword()) :: t()
  def start(count, opts \\ []) do
    command = Keyword.get(opts, :command, @spin)
    pin? = Keyword.get(opts, :pin, true)
    cores = System.schedulers_online()

    ports =
      for i <- 0..(count - 1)//1 do
        core = if pin?, do: Integer.to_string(rem(i, cores)), else: ""

        Port.open({:spawn_executable, "/bin/sh"}, [
          :binary,
          {:line, 64},
          args: ["-c", @wrapper, "grove-hog", core, command]
        ])
      end

    %__MODULE__{ports: ports, os_pids: Enum.map(ports, &os_pid/1)}
  end

  defp os_pid(port) do
    receive do
      {^port, {:data, {:eol, line}}} -> String.to_integer(line)
    after
      5000 -> raise "a hog did not start"
    end
  end

  @doc "Stops the hogs (closing their ports, which kills them)."
  @spec stop(t()) :: :ok
  def stop(%__MODULE__{ports: ports}) do
    for port <- ports, do: safe_close(port)
    :ok
  end

  defp safe_close(port) do
    Port.close(port)
  catch
    :error, :badarg -> :ok
  end

  @doc """
  Runs `count` hogs from `:from` seconds from now for `:for` seconds (until
  `cancel/1` without it), in a process linked to the caller: if the caller
  goes, so do the hogs. Other options as for `start/2`.
  """
  @spec plan(non_neg_integer(), keyword()) :: %{pid: pid(), on: :atomics.atomics_ref()}
  def plan(count, opts) do
    from_ms = round(Keyword.get(opts, :from, 0) * 1000)
    for_ms = if s = Keyword.get(opts, :for), do: round(s * 1000), else: :infinity
    on = :atomics.new(1, [])

    pid =
      spawn_link(fn ->
        wait(from_ms)
        hog = start(count, opts)
        :atomics.put(on, 1, 1)
        wait(for_ms)
        stop(hog)
        :atomics.put(on, 1, 0)
        wait(:infinity)
      end)

    %{pid: pid, on: on}
  end

  @doc "Whether a plan's hogs run now."
  @spec on?(%{on: :atomics.atomics_ref()}) :: boolean()
  def on?(%{on: on}), do: :atomics.get(on, 1) == 1

  @doc "Ends a plan, and its hogs if they run, and waits until they are stopped."
  @spec cancel(%{pid: pid()}) :: :ok
  def cancel(%{pid: pid, on: on}) do
    Process.unlink(pid)
    ref = Process.monitor(pid)
    Process.exit(pid, :kill)

    receive do
      {:DOWN, ^ref, :process, ^pid, _} -> :atomics.put(on, 1, 0)
    end

    :ok
  end

  defp wait(:infinity), do: receive(do: (:never -> :ok))

  defp wait(ms) do
    receive do
    after
      ms -> :ok
    end
  end
end
