defmodule Grove.World.Game.Storage do
  @moduledoc """
  Where a world keeps its game's state: the zones' saves and the tallies
  (keys of a scope, each with a binary), and the names of the accounts its
  leaderboards show.

  The world's `:store` option is `{module, name}`: a module with these
  functions, each called with `name` first. An instance with a store
  gives its world `{Grove.Store, its store}`, whose functions these are
  (writes grouped with the store's other writes, behind its bounded
  queue). The world knows this contract, not the store: it sits below the
  store, which sits below the accounts that read both.
  """

  @typedoc "A store, as the world's `:store` option names it."
  @type t :: {module(), term()}

  @doc "Writes keys of a scope in one transaction (`nil`: the key goes)."
  @callback save_state(name :: term(), scope :: String.t(), [{String.t(), binary() | nil}]) ::
              :ok | {:error, term()}

  @doc "The value saved under a key of a scope."
  @callback fetch_state(name :: term(), scope :: String.t(), key :: String.t()) ::
              {:ok, binary()} | {:error, :not_found | term()}

  @doc "Every key of a scope with its value."
  @callback list_state(name :: term(), scope :: String.t()) ::
              {:ok, [{String.t(), binary()}]} | {:error, term()}

  @doc """
  Every key of a scope, without its value. Optional: a world whose store
  has it knows which zones have a save of their game's layer from its
  start, and wakes the others without asking the store.
  """
  @callback list_keys(name :: term(), scope :: String.t()) ::
              {:ok, [String.t()]} | {:error, term()}

  @optional_callbacks list_keys: 2

  @doc "An account by id: its name (or its avatar) for the leaderboards."
  @callback fetch_account(name :: term(), {:id, pos_integer()}) ::
              {:ok, %{optional(:name) => String.t() | nil, optional(:avatar) => String.t()}}
              | {:error, term()}

  @doc false
  @spec save_state(t(), String.t(), [{String.t(), binary() | nil}]) :: :ok | {:error, term()}
  def save_state({module, name}, scope, entries), do: module.save_state(name, scope, entries)

  @doc false
  @spec fetch_state(t(), String.t(), String.t()) :: {:ok, binary()} | {:error, term()}
  def fetch_state({module, name}, scope, key), do: module.fetch_state(name, scope, key)

  @doc false
  @spec list_state(t(), String.t()) :: {:ok, [{String.t(), binary()}]} | {:error, term()}
  def list_state({module, name}, scope), do: module.list_state(name, scope)

  @doc false
  # `{:error, :not_supported}` for a store without `list_keys/2`.
  @spec list_keys(t(), String.t()) :: {:ok, [String.t()]} | {:error, term()}
  def list_keys({module, name}, scope) do
    if Code.ensure_loaded?(module) and function_exported?(module, :list_keys, 2),
      do: module.list_keys(name, scope),
      else: {:error, :not_supported}
  end

  @doc false
  @spec fetch_account(t(), pos_integer()) :: {:ok, map()} | {:error, term()}
  def fetch_account({module, name}, id), do: module.fetch_account(name, {:id, id})
end
