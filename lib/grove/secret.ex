defmodule Grove.Secret do
  @moduledoc """
  A secret (a token, a key, a password) that cannot be printed by accident.

  The value is kept encrypted with a key that this node makes once, at
  random, and holds apart from it, so neither `inspect/1` (logs, crash
  reports, `:sys.get_state/1`) nor Erlang's own term printing shows
  anything but random bytes: a process or a child spec that holds a
  `Grove.Secret` may crash and be reported without giving it away. Only
  `reveal/1` gives the value back, at the moment it is used, and only on
  the node that made the secret.

  It is plain data, not a closure: the running configuration lives in
  `:persistent_term`, and the crash dump writer of the VM Grove runs on
  faults on a closure there, which turned any crash dump into a
  segmentation fault and no dump.

      iex> secret = Grove.Secret.new("hunter2-hunter2")
      iex> inspect(secret)
      "#Grove.Secret<redacted>"
      iex> Grove.Secret.reveal(secret)
      "hunter2-hunter2"
      iex> Grove.Secret.equal?(secret, "hunter2-hunter2")
      true
  """

  @enforce_keys [:iv, :masked]
  defstruct [:iv, :masked]

  @opaque t :: %__MODULE__{iv: binary(), masked: binary()}

  @key {__MODULE__, :key}

  @doc "Wraps a value; `nil` stays `nil` and a secret stays itself."
  @spec new(binary() | t() | nil) :: t() | nil
  def new(nil), do: nil
  def new(%__MODULE__{} = secret), do: secret

  def new(value) when is_binary(value) do
    iv = :crypto.strong_rand_bytes(16)
    %__MODULE__{iv: iv, masked: :crypto.crypto_one_time(:aes_256_ctr, key(), iv, value, true)}
  end

  @doc "The value, for the moment it is used."
  @spec reveal(t()) :: binary()
  def reveal(%__MODULE__{iv: iv, masked: masked}),
    do: :crypto.crypto_one_time(:aes_256_ctr, key(), iv, masked, false)

  @doc "Compares a secret with a candidate in constant time."
  @spec equal?(t(), binary()) :: boolean()
  def equal?(%__MODULE__{} = secret, candidate) when is_binary(candidate) do
    value = reveal(secret)
    byte_size(value) == byte_size(candidate) and :crypto.hash_equals(value, candidate)
  end

  def equal?(%__MODULE__{}, _candidate), do: false

  defp key do
    case :persistent_term.get(@key, nil) do
      nil -> make_key()
      key -> key
    end
  end

  # Once per node, by whoever comes first: two processes that each found
  # none must not each mask with a key of their own.
  defp make_key do
    :global.trans(
      {@key, self()},
      fn ->
        case :persistent_term.get(@key, nil) do
          nil ->
            key = :crypto.strong_rand_bytes(32)
            :persistent_term.put(@key, key)
            key

          key ->
            key
        end
      end,
      [node()]
    )
  end

  defimpl Inspect do
    def inspect(_secret, _opts), do: "#Grove.Secret<redacted>"
  end
end
