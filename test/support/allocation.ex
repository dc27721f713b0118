defmodule Grove.Allocation do
  @moduledoc """
  How many words of memory a function allocates, counted from the
  garbage collections of the process it runs in (traced), not timed: a
  count that grows with the work done, copies included (a list appended
  to, a tuple written), where reductions count a copy of thousands of
  words as a few. A test compares it between two sizes of one input: a
  rule linear in the size allocates about ten times as much for ten
  times the input, a quadratic one about a hundred.
  """

  @doc "The words `fun` allocates, run in a process of its own, and what it returned."
  @spec words((() -> term())) :: {non_neg_integer(), term()}
  def words(fun) do
    parent = self()

    {pid, monitor} =
      spawn_monitor(fn ->
        receive do
          :go -> :ok
        end

        result = fun.()
        send(parent, {:done, self(), used(self()), result})
      end)

    1 = :erlang.trace(pid, true, [:garbage_collection, {:tracer, parent}])
    # It waits for `:go`: what it holds now is not the function's.
    before = used(pid)
    send(pid, :go)
    count(pid, monitor, before, 0)
  end

  # Each collection starts with what was allocated since the one before
  # ended, or since the start (what survived is in the heap at both); the
  # end adds what was allocated since the last.
  defp count(pid, monitor, last, words) do
    receive do
      {:trace, ^pid, start, info} when start in [:gc_minor_start, :gc_major_start] ->
        count(pid, monitor, last, words + used(info) - last)

      {:trace, ^pid, finish, info} when finish in [:gc_minor_end, :gc_major_end] ->
        count(pid, monitor, used(info), words)

      {:done, ^pid, later, result} ->
        Process.demonitor(monitor, [:flush])
        {words + later - last, result}

      {:DOWN, ^monitor, :process, ^pid, reason} ->
        exit(reason)
    end
  end

  defp used(pid) when is_pid(pid) do
    {:garbage_collection_info, info} = Process.info(pid, :garbage_collection_info)
    used(info)
  end

  defp used(info), do: info[:heap_size] + info[:old_heap_size] + info[:mbuf_size]
end
