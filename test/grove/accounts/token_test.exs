defmodule Grove.Accounts.TokenTest do
  use ExUnit.Case, async: true

  alias Grove.Accounts.Token

  @secret :crypto.strong_rand_bytes(32)
  @alphabet ~c"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

  setup do
    {token, id} = Token.sign(@secret, 42, 2_000_000_000)
    %{token: token, id: id}
  end

  test "the token as signed is accepted", %{token: token, id: id} do
    assert {:ok, %{id: ^id, account_id: 42}} = Token.verify(@secret, token, 1_900_000_000)
  end

  test "another spelling of the same bytes is refused: padding", %{token: token} do
    ["v1", payload, signature] = String.split(token, ".")
    # 32 bytes are 43 characters of base64 and one "=" of padding.
    assert {:error, :invalid_token} =
             Token.verify(@secret, "v1.#{payload}=.#{signature}", 1_900_000_000)

    assert {:error, :invalid_token} =
             Token.verify(@secret, "v1.#{payload}.#{signature}=", 1_900_000_000)
  end

  test "another spelling of the same bytes is refused: unused bits set", %{token: token} do
    ["v1", payload, signature] = String.split(token, ".")
    # The last of 43 characters carries 4 bits of data and 2 unused ones.
    <<head::binary-size(42), last>> = signature
    index = Enum.find_index(@alphabet, &(&1 == last))
    other = <<head::binary, Enum.at(@alphabet, Bitwise.bxor(index, 1))>>

    assert Base.url_decode64!(other, padding: false) ==
             Base.url_decode64!(signature, padding: false)

    assert {:error, :invalid_token} =
             Token.verify(@secret, "v1.#{payload}.#{other}", 1_900_000_000)
  end
end
