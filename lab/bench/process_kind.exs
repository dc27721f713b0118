# What the probes loaded into a server (`knee_probe.exs`, `stall_probe.exs`,
# `world_profile.exs`) call a process by, and the reductions they sum by
# it. A script of its own, required by each, since they run in the
# server's VM (`mix run -r`), where the lab's modules are not.
defmodule Grove.Bench.ProcessKind do
  @moduledoc false

  @doc """
  What a process is: its registered name (a zone's index as `.N`), else
  its gen_server's module or initial call as `{module, function, arity}`;
  `:gone` once it has exited.
  """
  def of(pid) do
    case Process.info(pid, [:registered_name, :dictionary, :initial_call]) do
      nil ->
        :gone

      [{:registered_name, name} | _] when name != [] ->
        name |> Atom.to_string() |> String.replace(~r/\.\d+$/, ".N")

      [_, {:dictionary, dictionary}, {:initial_call, initial}] ->
        Keyword.get(dictionary, :"$initial_call", initial)
    end
  end

  @doc "Every process's reductions so far (0 for one gone as it was read)."
  def reductions do
    Map.new(Process.list(), fn pid ->
      {pid, (Process.info(pid, :reductions) || {:reductions, 0}) |> elem(1)}
    end)
  end
end
