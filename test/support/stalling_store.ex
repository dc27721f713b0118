defmodule Grove.Test.StallingStore do
  @moduledoc """
  A `Grove.Store` adapter that stalls: every call waits behind a gate
  until the test opens it, as a database that stopped answering would, so
  that tests can check what callers do meanwhile. Once the gate is open it
  answers from memory: no account is found, and every write succeeds.

      gate = Grove.Test.StallingStore.gate()
      Grove.Store.start_link(name: S, adapter: Grove.Test.StallingStore, gate: gate)
      ...
      Grove.Test.StallingStore.open(gate)

  The gate counts the calls that wait behind it (`waiting/1`).
  """

  @behaviour Grove.Store

  alias Grove.Store.Account

  @doc "A closed gate, owned by a process of its own (stopped with the test)."
  def gate do
    {:ok, gate} = Agent.start(fn -> %{open: false, waiting: []} end)
    ExUnit.Callbacks.on_exit(fn -> if Process.alive?(gate), do: Agent.stop(gate) end)
    gate
  end

  @doc "Opens the gate: the calls waiting behind it go on, and later ones pass."
  def open(gate) do
    waiting = Agent.get_and_update(gate, &{&1.waiting, %{&1 | open: true, waiting: []}})
    for from <- waiting, do: send(from, {:gate, :open})
    :ok
  end

  @doc "How many calls wait behind the gate now."
  def waiting(gate), do: Agent.get(gate, &length(&1.waiting))

  defp pass(gate) do
    caller = self()

    if Agent.get_and_update(gate, fn
         %{open: true} = state -> {true, state}
         state -> {false, %{state | waiting: [caller | state.waiting]}}
       end) do
      :ok
    else
      receive do: ({:gate, :open} -> :ok)
    end
  end

  @impl true
  def config!(opts), do: %{gate: Keyword.fetch!(opts, :gate)}

  @impl true
  def default_pool_size, do: 1

  @impl true
  def migrate(_config), do: {:ok, []}

  @impl true
  def connect(%{gate: gate}) do
    # Every call runs in the worker that connected: the gate is kept there.
    Process.put({__MODULE__, :gate}, gate)
    {:ok, spawn_link(fn -> receive(do: (:never -> :ok)) end)}
  end

  @impl true
  def disconnect(conn) do
    Process.unlink(conn)
    Process.exit(conn, :shutdown)
    :ok
  end

  @impl true
  def write(conn, operations) do
    pass(current_gate())
    {:ok, Enum.map(operations, fn {fun, args} -> apply(__MODULE__, fun, [conn | args]) end)}
  end

  @impl true
  def create_account(_conn, attrs) do
    now = System.os_time(:second)

    {:ok,
     %Account{
       id: System.unique_integer([:positive]),
       name: attrs.name,
       device_id: attrs.device_id,
       avatar: attrs.avatar,
       created_at: now,
       updated_at: now
     }}
  end

  @impl true
  def fetch_account(conn, _lookup), do: read(conn, {:error, :not_found})

  @impl true
  def update_account(_conn, _id, _changes), do: {:error, :not_found}

  @impl true
  def create_token(_conn, _token), do: :ok

  @impl true
  def fetch_token(conn, _id), do: read(conn, {:error, :not_found})

  @impl true
  def revoke_token(_conn, _id), do: :ok

  @impl true
  def save_positions(_conn, _positions), do: :ok

  @impl true
  def fetch_position(conn, _id), do: read(conn, {:error, :not_found})

  @impl true
  def save_state(_conn, _scope, _entries), do: :ok

  @impl true
  def fetch_state(conn, _scope, _key), do: read(conn, {:error, :not_found})

  @impl true
  def list_state(conn, _scope), do: read(conn, {:ok, []})

  @impl true
  def list_keys(conn, _scope), do: read(conn, {:ok, []})

  defp read(_conn, answer) do
    pass(current_gate())
    answer
  end

  defp current_gate, do: Process.get({__MODULE__, :gate})
end
