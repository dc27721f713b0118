defmodule Grove.Accounts.Saver do
  @moduledoc false
  # Writes players' positions behind, in batches. It knows which entity each
  # logged-in player is, and every `interval` reads their cells from the
  # world's ETS (no message to any zone) and saves them all in one store
  # call. A player who leaves hands over its last cell, in the accounts'
  # `left_cells` table (written by the leaving session itself, so a join
  # right after finds it), which the saver empties as it writes them. On
  # shutdown it traps
  # the exit and writes one last batch, so a clean stop loses nothing; a
  # crash loses at most one interval.

  use GenServer

  alias Grove.{Store, World}

  require Logger

  defstruct [:accounts, :interval, playing: %{}, saved: %{}]

  def start_link(opts) do
    accounts = Keyword.fetch!(opts, :accounts)
    GenServer.start_link(__MODULE__, opts, name: accounts.saver)
  end

  def playing(saver, account_id, entity_id),
    do: GenServer.cast(saver, {:playing, account_id, entity_id})

  def left(saver, account_id), do: GenServer.cast(saver, {:left, account_id})

  @doc false
  def flush(saver), do: GenServer.call(saver, :flush)

  @impl true
  def init(opts) do
    Process.flag(:trap_exit, true)

    state = %__MODULE__{
      accounts: Keyword.fetch!(opts, :accounts),
      interval: Keyword.fetch!(opts, :interval)
    }

    Process.send_after(self(), :save, state.interval)
    {:ok, state}
  end

  @impl true
  def handle_cast({:playing, account_id, entity_id}, state) do
    {:noreply, %{state | playing: Map.put(state.playing, account_id, entity_id)}}
  end

  def handle_cast({:left, account_id}, state),
    do: {:noreply, %{state | playing: Map.delete(state.playing, account_id)}}

  @impl true
  def handle_call(:flush, _from, state) do
    state = save(state)
    {:reply, :ok, state}
  end

  @impl true
  def handle_info(:save, state) do
    Process.send_after(self(), :save, state.interval)
    {:noreply, save(state)}
  end

  def handle_info({:EXIT, _from, reason}, state), do: {:stop, reason, state}

  @impl true
  def terminate(_reason, state) do
    save(state)
    :ok
  end

  # Only positions that changed since they were last saved are written.
  defp save(state) do
    world = state.accounts.world
    left = Map.new(:ets.tab2list(state.accounts.left_cells))

    current =
      for {account_id, entity_id} <- state.playing,
          cell = World.position(world, entity_id),
          cell != nil,
          into: left,
          do: {account_id, cell}

    changed =
      for {account_id, cell} <- current, state.saved[account_id] != cell, do: {account_id, cell}

    if changed == [] do
      forget(state, left)
      state
    else
      rows = for {account_id, {x, y}} <- changed, do: %{account_id: account_id, x: x, y: y}

      case Store.save_positions(state.accounts.store, rows) do
        :ok ->
          saved =
            Enum.reduce(changed, state.saved, fn {id, cell}, acc -> Map.put(acc, id, cell) end)

          # Forget who left once their last cell is written.
          saved = Map.drop(saved, Map.keys(left) -- Map.keys(state.playing))
          forget(state, left)
          %{state | saved: saved}

        {:error, reason} ->
          # What is unsaved stays (the left cells in their table); the next
          # batch tries again.
          Logger.warning(
            "accounts: saving #{length(rows)} positions failed (#{inspect(reason)}); retrying"
          )

          state
      end
    end
  end

  # The last cells of those who left are in the store now (or were
  # already); a cell a player left since then stays for the next batch.
  defp forget(state, left) do
    for {account_id, cell} <- left,
        do: :ets.delete_object(state.accounts.left_cells, {account_id, cell})
  end
end
