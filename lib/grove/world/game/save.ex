defmodule Grove.World.Game.Save do
  @moduledoc false
  # How a zone's game layer is kept in the store: a base, the whole layer
  # as it was once (`{key, value}` rows, compressed), under the zone's
  # number, and beside it its changes since, the cells whose value changed
  # (`{key, value}`, `nil` for a cell that has none any more), under
  # `"<zone>/changes"`. The saver writes the base once per run of a zone,
  # then only the cells that changed since: the changes grow until they
  # are worth a new base (`compact?/2`), which drops them in the same
  # write. Loading a zone applies its changes to its base.
  #
  # Each base has an id, which its changes name: changes that name another
  # base (written for a base that has been replaced since) are not applied,
  # so a load gives a layer some save held whole, never a mix of two.
  # Saves from before changes existed are bases without an id.

  @typedoc "A cell layer's rows as saved: `{key, value}`."
  @type rows :: [{non_neg_integer(), term()}]

  @typedoc "Changed cells: `{key, value}`, `nil` for a cell whose value went."
  @type cells :: [{non_neg_integer(), term() | nil}]

  # Below this many changed cells, changes are written whatever the base's size.
  @least_to_compact 16

  @doc "The store's key of a zone's base."
  @spec base_key(non_neg_integer()) :: String.t()
  def base_key(index), do: Integer.to_string(index)

  @doc "The store's key of a zone's changes since its base."
  @spec changes_key(non_neg_integer()) :: String.t()
  def changes_key(index), do: Integer.to_string(index) <> "/changes"

  @doc "A new base's id."
  @spec new_id() :: pos_integer()
  def new_id, do: :erlang.unique_integer([:positive]) + System.os_time(:microsecond) * 1024

  @doc "A base: the whole layer, of the game's `version`."
  @spec encode_base(non_neg_integer(), rows(), pos_integer()) :: binary()
  def encode_base(version, rows, id) do
    save = %{version: version, saved_at: now(), rows: rows, id: id}
    :erlang.term_to_binary(save, [:compressed])
  end

  @doc "Changes of the base `id`: the cells changed since, with their values now."
  @spec encode_changes(non_neg_integer(), cells(), pos_integer()) :: binary()
  def encode_changes(version, cells, id),
    do: :erlang.term_to_binary(%{version: version, saved_at: now(), base: id, cells: cells})

  @doc """
  True when `changed` cells are worth a new base of `size` cells: more
  than half as many, and at least #{@least_to_compact}.
  """
  @spec compact?(non_neg_integer(), non_neg_integer()) :: boolean()
  def compact?(changed, size), do: changed >= @least_to_compact and changed * 2 > size

  @doc """
  A zone's layer from its base and its changes (nil: none), each passed
  through `upgrade` (`fn value, version -> value`) when of another
  version than `version`: `{:ok, rows, changed_keys, saved_at}`, rows in
  key order, or `{:error, why}`. Changes of another base are left out.
  """
  @spec decode(binary(), binary() | nil, non_neg_integer(), (term(), non_neg_integer() -> term())) ::
          {:ok, rows(), [non_neg_integer()], integer()} | {:error, String.t()}
  def decode(base, changes, version, upgrade) do
    with {:ok, %{rows: rows, saved_at: saved_at} = base} <- read(base, :base),
         {:ok, rows} <- upgraded(rows, base.version, version, upgrade),
         {:ok, cells, from, saved_at} <- applicable(changes, base, saved_at),
         {:ok, cells} <- upgraded(cells, from, version, upgrade) do
      layer = Enum.reduce(cells, Map.new(rows), &apply_cell/2)
      {:ok, layer |> Map.to_list() |> List.keysort(0), Enum.map(cells, &elem(&1, 0)), saved_at}
    end
  end

  defp apply_cell({key, nil}, layer), do: Map.delete(layer, key)
  defp apply_cell({key, value}, layer), do: Map.put(layer, key, value)

  defp applicable(nil, _base, saved_at), do: {:ok, [], nil, saved_at}

  defp applicable(binary, %{id: id}, saved_at) do
    case read(binary, :changes) do
      {:ok, %{base: ^id, cells: cells, version: version, saved_at: at}} when id != nil ->
        {:ok, cells, version, max(at, saved_at)}

      # Changes of a base replaced since: the base alone is a whole layer.
      {:ok, _of_another_base} ->
        {:ok, [], nil, saved_at}

      {:error, _why} = error ->
        error
    end
  end

  defp upgraded(rows, same, same, _upgrade), do: {:ok, rows}
  defp upgraded([], _from, _version, _upgrade), do: {:ok, []}

  defp upgraded(rows, from, _version, upgrade) do
    {:ok,
     for({key, value} <- rows, do: {key, if(value == nil, do: nil, else: upgrade.(value, from))})}
  end

  defp read(binary, kind) do
    case {kind, :erlang.binary_to_term(binary, [:safe])} do
      {:base, %{version: version, saved_at: saved_at, rows: rows} = save}
      when is_integer(version) and is_integer(saved_at) and is_list(rows) ->
        {:ok, Map.put_new(save, :id, nil)}

      {:changes, %{version: version, saved_at: saved_at, base: _id, cells: cells} = save}
      when is_integer(version) and is_integer(saved_at) and is_list(cells) ->
        {:ok, save}

      {:base, _other} ->
        {:error, "it is not a zone's save"}

      {:changes, _other} ->
        {:error, "its changes are not a zone's changes"}
    end
  rescue
    ArgumentError -> {:error, "it is not a zone's save"}
  end

  defp now, do: System.system_time(:millisecond)
end
