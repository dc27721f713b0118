defmodule Grove.Bench.EtsStore do
  @moduledoc """
  A world's store (`Grove.World.Game.Storage`) in an ETS table, for runs
  that write and read sleeping zones' state a million times without a
  database. `new/0` makes one, owned by the caller: pass
  `{Grove.Bench.EtsStore, table}` as the world's `:store`.
  """

  @behaviour Grove.World.Game.Storage

  @doc "A new, empty store."
  @spec new() :: :ets.tid()
  def new, do: :ets.new(:bench_store, [:set, :public, read_concurrency: true])

  @impl true
  def save_state(table, scope, entries) do
    for {key, value} <- entries do
      if value == nil,
        do: :ets.delete(table, {scope, key}),
        else: :ets.insert(table, {{scope, key}, value})
    end

    :ok
  end

  @impl true
  def fetch_state(table, scope, key) do
    case :ets.lookup(table, {scope, key}) do
      [{_, value}] -> {:ok, value}
      [] -> {:error, :not_found}
    end
  end

  @impl true
  def list_state(table, scope),
    do: {:ok, :ets.select(table, [{{{scope, :"$1"}, :"$2"}, [], [{{:"$1", :"$2"}}]}])}

  @impl true
  def fetch_account(_table, _id), do: {:error, :not_found}
end
