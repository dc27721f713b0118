defmodule Grove.Cluster.Fingerprint do
  @moduledoc false
  # What nodes of one cluster must agree on, or they would not be one world:
  # the world's size, zones, terrain and rules, its game (module, options
  # and version: zones move between nodes with their game's state), the
  # store every node writes to, the key tokens are signed with (as a
  # digest: the key itself never leaves the node), and Grove's version. Nodes whose fingerprints differ
  # are refused, with the differences named (`differences/2`).
  #
  # The instance makes it from its configuration (`Grove.Config.fingerprint/2`);
  # the cluster only compares fingerprints, as data.

  @type t :: [{atom(), term()}]

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
end
