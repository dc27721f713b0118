defmodule Grove.Gateway.Rewrite do
  @moduledoc false
  # Yaws's arg_rewrite_mod: sees every request before Yaws serves it.
  #
  # A Range header whose byte ranges are malformed (`bytes=5-1`, a last
  # byte before the first) made Yaws's static file code crash the
  # connection's process with no answer. RFC 9110 says such a header is
  # ignored, so it is: the client gets the whole file with 200.

  import Grove.Gateway.Records

  def arg_rewrite(arg) do
    headers = arg(arg, :headers)

    case headers(headers, :range) do
      range when is_list(range) ->
        if valid_range?(to_string(range)),
          do: arg,
          else: arg(arg, headers: headers(headers, range: :undefined))

      _ ->
        arg
    end
  end

  # bytes=FIRST-[LAST] or bytes=-SUFFIX, comma-separated, with LAST >= FIRST.
  defp valid_range?("bytes=" <> specs) do
    specs
    |> String.split(",")
    |> Enum.all?(fn spec ->
      case String.split(String.trim(spec), "-", parts: 2) do
        ["", suffix] ->
          digits?(suffix) and suffix != ""

        [first, ""] ->
          digits?(first) and first != ""

        [first, last] ->
          digits?(first) and digits?(last) and first != "" and last != "" and
            String.to_integer(last) >= String.to_integer(first)

        _ ->
          false
      end
    end)
  end

  defp valid_range?(_other), do: false

  defp digits?(text), do: String.match?(text, ~r/^[0-9]{0,18}$/)
end
