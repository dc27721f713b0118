defmodule Grove.Secret do
  @moduledoc """
  A secret (a token, a key, a password) that cannot be printed by accident.

  The value lives in a closure, so neither `inspect/1` (logs, crash
  reports, `:sys.get_state/1`) nor Erlang's own term printing shows it:
  a process or a child spec that holds a `Grove.Secret` may crash and be
  reported without giving it away. Only `reveal/1` gives the value back,
  at the moment it is used.

      iex> secret = Grove.Secret.new("hunter2-hunter2")
      iex> inspect(secret)
      "#Grove.Secret<redacted>"
      iex> Grove.Secret.reveal(secret)
      "hunter2-hunter2"
      iex> Grove.Secret.equal?(secret, "hunter2-hunter2")
      true
  """

  @enforce_keys [:value]
  defstruct [:value]

  @opaque t :: %__MODULE__{value: (() -> binary())}

  @doc "Wraps a value; `nil` stays `nil` and a secret stays itself."
  @spec new(binary() | t() | nil) :: t() | nil
  def new(nil), do: nil
  def new(%__MODULE__{} = secret), do: secret
  def new(value) when is_binary(value), do: %__MODULE__{value: fn -> value end}

  @doc "The value, for the moment it is used."
  @spec reveal(t()) :: binary()
  def reveal(%__MODULE__{value: value}), do: value.()

  @doc "Compares a secret with a candidate in constant time."
  @spec equal?(t(), binary()) :: boolean()
  def equal?(%__MODULE__{} = secret, candidate) when is_binary(candidate) do
    value = reveal(secret)
    byte_size(value) == byte_size(candidate) and :crypto.hash_equals(value, candidate)
  end

  def equal?(%__MODULE__{}, _candidate), do: false

  defimpl Inspect do
    def inspect(_secret, _opts), do: "#Grove.Secret<redacted>"
  end
end
