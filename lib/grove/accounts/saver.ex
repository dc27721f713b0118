defmodule Grove.Accounts.Saver do
  @moduledoc false
  # Writes players' positions behind, in batches. Every `interval` it reads
  # who is playing which entity (the accounts' `playing` table, written by
  # the sessions), their cells from the world's ETS (no message to any
  # zone) and the last cells of those who left (the `left_cells` table,
  # written by the leaving session itself, so that a join right after finds
  # it), and saves what changed in one store call.
  #
  # What it knows lives in those tables, owned by the accounts' supervisor:
  # a saver that crashes and restarts carries on where it was, and at worst
  # writes again what was written. On shutdown it traps the exit and writes
  # the last batch, trying again while the store cannot take it, for up to
  # `flush_timeout`: a clean stop loses nothing, even while the database is
  # briefly locked; a crash of the VM loses at most one interval.

  use GenServer

  alias Grove.{Store, World}

  require Logger

  # Between tries of the last batch, while the store is unavailable.
  @retry_ms 200
  # The supervisor must give the last batch its time, and a little more.
  @margin_ms 1000

  defstruct [:accounts, :interval, :flush_timeout, saved: %{}]

  def start_link(opts) do
    accounts = Keyword.fetch!(opts, :accounts)
    GenServer.start_link(__MODULE__, opts, name: accounts.saver)
  end

  def child_spec(opts) do
    %{
      id: __MODULE__,
      start: {__MODULE__, :start_link, [opts]},
      shutdown: Keyword.fetch!(opts, :flush_timeout) + @margin_ms
    }
  end

  @doc false
  def flush(saver), do: GenServer.call(saver, :flush)

  @impl true
  def init(opts) do
    Process.flag(:trap_exit, true)

    state = %__MODULE__{
      accounts: Keyword.fetch!(opts, :accounts),
      interval: Keyword.fetch!(opts, :interval),
      flush_timeout: Keyword.fetch!(opts, :flush_timeout)
    }

    Process.send_after(self(), :save, state.interval)
    {:ok, state}
  end

  @impl true
  def handle_call(:flush, _from, state) do
    {_result, state} = save(state)
    {:reply, :ok, state}
  end

  @impl true
  def handle_info(:save, state) do
    Process.send_after(self(), :save, state.interval)
    {_result, state} = save(state)
    {:noreply, state}
  end

  def handle_info({:EXIT, _from, reason}, state), do: {:stop, reason, state}

  @impl true
  def terminate(_reason, state) do
    last_batch(state, System.monotonic_time(:millisecond) + state.flush_timeout)
    :ok
  end

  defp last_batch(state, deadline) do
    case save(state) do
      {:ok, _state} ->
        :ok

      {:error, state} ->
        if System.monotonic_time(:millisecond) + @retry_ms < deadline do
          Process.sleep(@retry_ms)
          last_batch(state, deadline)
        else
          Logger.error("accounts: the last positions could not be written before the stop")
        end
    end
  end

  # Only positions that changed since they were last saved are written.
  defp save(state) do
    accounts = state.accounts
    left = Map.new(:ets.tab2list(accounts.left_cells))

    current =
      for {account_id, entity_id} <- :ets.tab2list(accounts.playing),
          cell = position(accounts.world, entity_id),
          cell != nil,
          into: left,
          do: {account_id, cell}

    changed =
      for {account_id, cell} <- current, state.saved[account_id] != cell, do: {account_id, cell}

    if changed == [] do
      forget(accounts, left)
      {:ok, state}
    else
      rows = for {account_id, {x, y}} <- changed, do: %{account_id: account_id, x: x, y: y}

      case Store.save_positions(accounts.store, rows) do
        :ok ->
          saved =
            Enum.reduce(changed, state.saved, fn {id, cell}, acc -> Map.put(acc, id, cell) end)

          # Forget who left once their last cell is written.
          saved =
            Map.drop(saved, for({id, _} <- left, not :ets.member(accounts.playing, id), do: id))

          forget(accounts, left)
          {:ok, %{state | saved: saved}}

        {:error, reason} ->
          # What is unsaved stays (the left cells in their table); the next
          # batch tries again.
          Logger.warning(
            "accounts: saving #{length(rows)} positions failed (#{inspect(reason)}); retrying"
          )

          {:error, state}
      end
    end
  end

  # A world that is restarting (or stopping first) has no cells to give:
  # then only the left cells are written.
  defp position(world, entity_id) do
    World.position(world, entity_id)
  rescue
    ArgumentError -> nil
  end

  # The last cells of those who left are in the store now (or were
  # already); a cell a player left since then stays for the next batch.
  defp forget(accounts, left) do
    for {account_id, cell} <- left,
        do: :ets.delete_object(accounts.left_cells, {account_id, cell})
  end
end
