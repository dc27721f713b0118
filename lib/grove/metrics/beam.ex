defmodule Grove.Metrics.BEAM do
  @moduledoc """
  The virtual machine's metrics (a `Grove.Metrics.Source`; its argument is
  `{instance, mailbox_sample}`: the instance, whose latest sample holds the
  schedulers' utilization, and how many processes a scrape looks at for the
  longest mailbox): memory, processes, ports, tables, the longest mailbox,
  the run queue.

  The longest mailbox (`grove_beam_mailbox_max`) is read at scrape time
  from every named process (the instance's single writers among them) and
  from at most `mailbox_sample` of the others, evenly spread over them
  from a random start (`spread/3`): every process while the VM runs no
  more than that, and a lower bound of the longest beyond, different
  processes each scrape. Reading a process's mailbox takes a signal to
  it when messages are on their way in, so a scan of every process cost
  in proportion to the players connected; the sample bounds it.
  `grove_beam_mailbox_sampled` says how many were looked at.
  """

  @behaviour Grove.Metrics.Source

  alias Grove.Metrics.Collector

  @impl true
  def metrics({instance, mailbox_sample}) do
    memory = :erlang.memory()
    {longest, looked_at} = longest_mailbox(mailbox_sample)
    latest = Collector.latest(instance) || %{}

    [
      {"grove_beam_memory_bytes", :gauge, "Memory the BEAM uses, by kind.",
       for(
         kind <- [:total, :processes, :ets, :binary, :atom, :code],
         do: {[kind: kind], memory[kind]}
       )},
      {"grove_beam_processes", :gauge, "Processes in the BEAM.",
       [{[], :erlang.system_info(:process_count)}]},
      {"grove_beam_ports", :gauge, "Ports (sockets, files, drivers) open in the BEAM.",
       [{[], :erlang.system_info(:port_count)}]},
      {"grove_beam_ets_tables", :gauge, "ETS tables in the BEAM.", [{[], length(:ets.all())}]},
      {"grove_beam_mailbox_max", :gauge,
       "The longest mailbox of the named processes and a sample of the others, read at scrape time.",
       [{[], longest}]},
      {"grove_beam_mailbox_sampled", :gauge,
       "Processes whose mailbox the last scrape looked at (named ones and a sample of the rest).",
       [{[], looked_at}]},
      {"grove_beam_run_queue", :gauge, "Processes waiting for a scheduler.",
       [{[], :erlang.statistics(:total_run_queue_lengths)}]},
      {"grove_beam_scheduler_utilization", :gauge,
       "Share of time schedulers were busy over the last sample.",
       [{[], Map.get(latest, :scheduler_utilization, 0.0)}]}
    ]
  end

  @impl true
  def reading(_instance), do: :scheduler.sample()

  @impl true
  def sample(_instance, before, now, _seconds) do
    fields = %{
      memory_mb: round(:erlang.memory(:total) / 1_000_000),
      processes: :erlang.system_info(:process_count),
      run_queue: :erlang.statistics(:total_run_queue_lengths),
      scheduler_utilization: normal_utilization(:scheduler.utilization(before, now))
    }

    {fields, %{}}
  end

  defp normal_utilization(samples) do
    normal = for {:normal, _id, util, _} <- samples, do: util
    if normal == [], do: 0.0, else: Float.round(Enum.sum(normal) / length(normal), 3)
  end

  @doc """
  The longest mailbox of the named processes and of at most `sample` of
  the others (`spread/3` from a random start), and how many processes
  were looked at: `{longest, looked_at}`.
  """
  @spec longest_mailbox(non_neg_integer()) :: {non_neg_integer(), non_neg_integer()}
  def longest_mailbox(sample) do
    named = for name <- Process.registered(), pid = Process.whereis(name), do: pid
    others = List.to_tuple(Process.list() -- named)
    start = if tuple_size(others) > 0, do: :rand.uniform(tuple_size(others)) - 1, else: 0
    pids = named ++ spread(others, sample, start)
    {Enum.reduce(pids, 0, &max(queue_length(&1), &2)), length(pids)}
  end

  @doc """
  At most `count` of `items` (a tuple), evenly spread over it from index
  `start`: all of them, in order, when there are no more than `count`.

      iex> Grove.Metrics.BEAM.spread({:a, :b, :c, :d, :e, :f}, 3, 1)
      [:b, :d, :f]
      iex> Grove.Metrics.BEAM.spread({:a, :b, :c}, 5, 2)
      [:a, :b, :c]
  """
  @spec spread(tuple(), non_neg_integer(), non_neg_integer()) :: [term()]
  def spread(items, count, _start) when tuple_size(items) <= count, do: Tuple.to_list(items)

  def spread(items, count, start) do
    size = tuple_size(items)
    for i <- 0..(count - 1)//1, do: elem(items, rem(start + div(i * size, count), size))
  end

  defp queue_length(pid) do
    case Process.info(pid, :message_queue_len) do
      {:message_queue_len, length} -> length
      nil -> 0
    end
  end
end
