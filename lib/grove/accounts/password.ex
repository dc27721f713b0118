defmodule Grove.Accounts.Password do
  @moduledoc """
  Password hashing with PBKDF2-HMAC-SHA256 from `:crypto`: a random salt per
  account, a configurable cost (iterations), and a constant-time comparison.

  ## Examples

      iex> salt = Grove.Accounts.Password.salt()
      iex> hash = Grove.Accounts.Password.hash("correct horse", salt, 1000)
      iex> Grove.Accounts.Password.verify?("correct horse", salt, hash, 1000)
      true
      iex> Grove.Accounts.Password.verify?("wrong horse", salt, hash, 1000)
      false
  """

  @length 32

  @doc "A fresh random salt."
  @spec salt() :: binary()
  def salt, do: :crypto.strong_rand_bytes(16)

  @doc "The password's hash with this salt and cost."
  @spec hash(String.t(), binary(), pos_integer()) :: binary()
  def hash(password, salt, iterations),
    do: :crypto.pbkdf2_hmac(:sha256, password, salt, iterations, @length)

  @doc "True when the password matches the hash; the comparison takes the same time either way."
  @spec verify?(String.t(), binary(), binary(), pos_integer()) :: boolean()
  def verify?(password, salt, expected, iterations) do
    actual = hash(password, salt, iterations)
    byte_size(actual) == byte_size(expected) and :crypto.hash_equals(actual, expected)
  end

  @doc """
  Hashes a password nobody has, to spend the same time on an unknown name as
  on a wrong password: the answer time must not tell which names exist.
  """
  @spec waste(String.t(), pos_integer()) :: false
  def waste(password, iterations) do
    _ = hash(password, <<0::128>>, iterations)
    false
  end
end
