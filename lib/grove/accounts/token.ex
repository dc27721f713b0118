defmodule Grove.Accounts.Token do
  @moduledoc """
  Bearer tokens: signed, expiring, revocable.

  A token is `v1.PAYLOAD.SIGNATURE`, both parts base64url without padding.
  The payload holds a random 16-byte token id, the account id and the expiry
  (unix seconds); the signature is HMAC-SHA256 of the payload with the
  server's secret. Checking a token's signature and expiry needs no
  database; the token id is what revocation records.

  ## Examples

      iex> secret = :crypto.strong_rand_bytes(32)
      iex> {token, id} = Grove.Accounts.Token.sign(secret, 42, 2_000_000_000)
      iex> {:ok, %{id: ^id, account_id: 42, expires_at: 2_000_000_000}} = Grove.Accounts.Token.verify(secret, token, 1_900_000_000)
      iex> Grove.Accounts.Token.verify(secret, token, 2_000_000_001)
      {:error, :expired}
      iex> Grove.Accounts.Token.verify(secret, token <> "x", 1_900_000_000)
      {:error, :invalid_token}
  """

  @doc "A new token for an account, and its id."
  @spec sign(binary() | Grove.Secret.t(), pos_integer(), integer()) :: {String.t(), binary()}
  def sign(secret, account_id, expires_at) do
    id = new_id()
    {sign(secret, account_id, expires_at, id), id}
  end

  @doc """
  The token with a given id (from `new_id/0`): for an account whose id is
  known only once the token's id has been stored with it.
  """
  @spec sign(binary() | Grove.Secret.t(), pos_integer(), integer(), binary()) :: String.t()
  def sign(secret, account_id, expires_at, <<_::binary-size(16)>> = id) do
    payload = <<id::binary-size(16), account_id::64, expires_at::64>>
    "v1." <> encode(payload) <> "." <> encode(signature(secret, payload))
  end

  @doc "A fresh random token id."
  @spec new_id() :: binary()
  def new_id, do: :crypto.strong_rand_bytes(16)

  @doc "Checks a token's signature and expiry against `now` (unix seconds)."
  @spec verify(binary() | Grove.Secret.t(), String.t(), integer()) ::
          {:ok, %{id: binary(), account_id: pos_integer(), expires_at: integer()}}
          | {:error, :invalid_token | :expired}
  def verify(secret, token, now) when is_binary(token) do
    with ["v1", payload64, signature64] <- String.split(token, ".", parts: 3),
         {:ok, payload} <- decode(payload64),
         {:ok, given} <- decode(signature64),
         expected = signature(secret, payload),
         true <- byte_size(given) == byte_size(expected) and :crypto.hash_equals(given, expected),
         <<id::binary-size(16), account_id::64, expires_at::64>> <- payload do
      if now <= expires_at,
        do: {:ok, %{id: id, account_id: account_id, expires_at: expires_at}},
        else: {:error, :expired}
    else
      _ -> {:error, :invalid_token}
    end
  end

  def verify(_secret, _token, _now), do: {:error, :invalid_token}

  defp signature(%Grove.Secret{} = secret, payload),
    do: signature(Grove.Secret.reveal(secret), payload)

  defp signature(secret, payload), do: :crypto.mac(:hmac, :sha256, secret, payload)
  defp encode(bytes), do: Base.url_encode64(bytes, padding: false)

  # Exactly one spelling per token: the one `encode/1` writes (no padding,
  # unused bits zero), so that a token is one string wherever it is compared.
  defp decode(text) do
    with {:ok, bytes} <- Base.url_decode64(text, padding: false),
         true <- encode(bytes) == text do
      {:ok, bytes}
    else
      _ -> :error
    end
  end
end
