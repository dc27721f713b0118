defmodule Grove.Metrics.BEAM do
  @moduledoc """
  The virtual machine's metrics (a `Grove.Metrics.Source`; its argument is
  the instance, whose latest sample holds the schedulers' utilization):
  memory, processes, ports, tables, the longest mailbox, the run queue.
  """

  @behaviour Grove.Metrics.Source

  alias Grove.Metrics.Collector

  @impl true
  def metrics(instance) do
    memory = :erlang.memory()
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
       "The longest mailbox of any process, read at scrape time.", [{[], mailbox_max()}]},
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

  # One pass over every process: a few milliseconds with tens of thousands.
  defp mailbox_max do
    Enum.reduce(Process.list(), 0, fn pid, longest ->
      case Process.info(pid, :message_queue_len) do
        {:message_queue_len, length} -> max(length, longest)
        nil -> longest
      end
    end)
  end
end
