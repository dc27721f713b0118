defmodule Grove.Cluster.Fingerprint do
  @moduledoc false
  # What nodes of one cluster must agree on, or they would not be one world:
  # the world's size, zones, terrain and rules, the store every node writes
  # to, the key tokens are signed with (as a digest: the key itself never
  # leaves the node), and Grove's version. Nodes whose fingerprints differ
  # are refused, with the differences named (`differences/2`).

  alias Grove.World

  @type t :: [{atom(), term()}]

  @doc "The fingerprint of an instance's configuration and the world it describes."
  @spec new(Grove.Config.t(), World.t()) :: t()
  def new(%Grove.Config{} = config, %World{} = world) do
    [
      width: world.grid.width,
      height: world.grid.height,
      zone_size: world.grid.zone_size,
      terrain: world.terrain_options,
      rules: world.rules |> Map.from_struct() |> Map.delete(:move_limit),
      tick: world.tick,
      store: store(config.store),
      token_key: token_key(config.accounts),
      version: version()
    ]
  end

  @doc "The name of the `:pg` group of the nodes that share a fingerprint."
  @spec group(t()) :: {:grove_world, non_neg_integer()}
  def group(fingerprint), do: {:grove_world, :erlang.phash2(fingerprint)}

  @doc """
  The differences between this node's fingerprint and another's, one
  sentence each, naming the setting; `[]` when they agree.
  """
  @spec differences(t(), t()) :: [String.t()]
  def differences(here, there) do
    for {key, value} <- here,
        other = Keyword.get(there, key, :missing),
        other != value,
        do: describe(key, value, other)
  end

  defp describe(:token_key, _here, _there),
    do:
      "the token key differs (give every node the same key: GROVE_TOKEN_KEY_FILE); " <>
        "tokens signed on one node would be refused on the other"

  defp describe(:store, here, there),
    do: "the store differs: #{inspect(here)} here, #{inspect(there)} there"

  defp describe(key, here, there),
    do: "#{key} differs: #{inspect(here)} here, #{inspect(there)} there"

  # Where the accounts live, without the password.
  defp store(false), do: :none

  defp store(store) do
    case Keyword.get(store, :adapter, :sqlite) do
      :postgres ->
        {:postgres, store[:host], store[:port] || 5432, store[:database]}

      adapter ->
        {adapter, store[:path]}
    end
  end

  # A digest of the key, so two nodes can compare keys without sending them.
  defp token_key(false), do: :none

  defp token_key(accounts) do
    case Grove.Accounts.key_digest(accounts) do
      nil -> :generated_per_start
      digest -> Base.encode16(digest, case: :lower)
    end
  end

  defp version do
    case Application.spec(:grove, :vsn) do
      nil -> :unknown
      vsn -> to_string(vsn)
    end
  end
end
