defmodule Grove.Test.MemoryStore do
  @moduledoc """
  A world's store (`Grove.World.Game.Storage`) kept in an Agent, for tests
  of what a world writes there and reads back, without a database.
  `refuse/2` makes its writes fail as a store that cannot answer does;
  `reads/2` counts the values read from it.

      store = {Grove.Test.MemoryStore, start_supervised!(Grove.Test.MemoryStore)}
      World.start_link(name: :w, store: store, ...)

  Start it before the world, so that it stops after: a world's last
  saves are written as it stops.
  """

  use Agent

  def start_link(_opts \\ []),
    do: Agent.start_link(fn -> %{data: %{}, refuse: false, reads: []} end)

  @doc "From now on, writes fail (`true`) or succeed again (`false`)."
  def refuse({__MODULE__, pid}, refuse?), do: Agent.update(pid, &%{&1 | refuse: refuse?})

  @doc "The keys of a scope whose name starts with `prefix`."
  def keys({__MODULE__, pid}, prefix) do
    Agent.get(pid, fn %{data: data} ->
      for {scope, key} <- Map.keys(data), String.starts_with?(scope, prefix), do: key
    end)
  end

  def save_state(pid, scope, entries) do
    Agent.get_and_update(pid, fn
      %{refuse: true} = state ->
        {{:error, :unavailable}, state}

      state ->
        data =
          Enum.reduce(entries, state.data, fn
            {key, nil}, data -> Map.delete(data, {scope, key})
            {key, value}, data -> Map.put(data, {scope, key}, value)
          end)

        {:ok, %{state | data: data}}
    end)
  end

  @doc "How many values of scopes whose name starts with `prefix` were read (`fetch_state/3`)."
  def reads({__MODULE__, pid}, prefix),
    do: Agent.get(pid, &Enum.count(&1.reads, fn scope -> String.starts_with?(scope, prefix) end))

  def fetch_state(pid, scope, key) do
    found =
      Agent.get_and_update(
        pid,
        &{Map.fetch(&1.data, {scope, key}), %{&1 | reads: [scope | &1.reads]}}
      )

    case found do
      {:ok, value} -> {:ok, value}
      :error -> {:error, :not_found}
    end
  end

  def list_state(pid, scope),
    do: {:ok, Agent.get(pid, &for({{^scope, key}, value} <- &1.data, do: {key, value}))}

  def list_keys(pid, scope),
    do: {:ok, Agent.get(pid, &for({^scope, key} <- Map.keys(&1.data), do: key))}

  def fetch_account(_pid, _lookup), do: {:error, :not_found}
end
