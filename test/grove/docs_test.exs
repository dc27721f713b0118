defmodule Grove.DocsTest do
  # What an operator or a load tester reads must say what the server does.
  use ExUnit.Case, async: true

  @root Path.expand("../..", __DIR__)

  defp read(path), do: File.read!(Path.join(@root, path))

  test "every environment variable the configuration reads is in the operations guide" do
    operations = read("docs/operations.md")

    variables =
      Regex.scan(~r/"(GROVE_[A-Z_]+)"/, read("config/runtime.exs"), capture: :all_but_first)

    assert variables != []

    for [variable] <- Enum.uniq(variables),
        do: assert(operations =~ "`#{variable}`", "#{variable} is not in docs/operations.md")
  end

  # A load test from one machine is one address, and logins past the
  # limit are refused: where a load tester reads, the knob is named.
  test "the login limit per address, and how to raise it, is told where load tests are" do
    [_, load_testing] = String.split(read("README.md"), "## Load testing", parts: 2)
    assert load_testing =~ "GROVE_LOGIN_RATE"
    [_, endpoints] = String.split(read("docs/api.md"), "## Endpoints", parts: 2)
    assert endpoints =~ "GROVE_LOGIN_RATE"
  end
end
