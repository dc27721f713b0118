defmodule Grove.Text do
  @moduledoc """
  What players may write where others read it: the names they play under,
  and the lines they say.
  Pure functions; each refusal comes with a sentence saying why, for the
  player.

  A name is valid UTF-8, 1 to 24 characters (graphemes: an emoji with its
  skin tone or a family joined by zero-width joiners counts as one) once
  the whitespace around it is trimmed and each run of spaces inside it
  squeezed to one, and
  at most 96 bytes. It may hold letters, marks, digits, punctuation,
  symbols and emoji of any script, and spaces; it may not hold control
  characters (line breaks, tabs, escapes), characters that reorder the
  text around them (the bidirectional overrides and isolates, marks such
  as U+200E), other invisible format characters (except the joiner emoji
  need), private-use, surrogate or unassigned code points.

  ## Examples

      iex> Grove.Text.name("  Ada   Lovelace ")
      {:ok, "Ada Lovelace"}
      iex> Grove.Text.name("Zoë 🦊")
      {:ok, "Zoë 🦊"}
      iex> Grove.Text.name("")
      {:error, "a name needs at least one character"}
      iex> Grove.Text.name("evil\\u202Eeman")
      {:error, "a name may not hold U+202E, a character that reorders the text around it"}
      iex> Grove.Text.name("two\\nlines")
      {:error, "a name may not hold U+000A, a control character"}
  """

  @name_max_graphemes 24
  @name_max_bytes 96

  @adjectives {"Quiet", "Brave", "Swift", "Merry", "Gentle", "Clever", "Sunny", "Misty", "Bold",
               "Lucky", "Calm", "Keen", "Jolly", "Nimble", "Wise", "Wild"}
  @animals {"Otter", "Fox", "Heron", "Badger", "Hare", "Wren", "Lynx", "Moth", "Newt", "Owl",
            "Vole", "Finch", "Stoat", "Crane", "Mole", "Robin"}

  # What may not appear in what players write for others: control
  # characters; characters that reorder the text around them (the
  # bidirectional embeddings, overrides and isolates, and the marks that
  # act like them); line and paragraph separators; other invisible format
  # characters, except the zero-width joiner emoji sequences (👨‍👩‍👧) are
  # made with; private-use and surrogate code points. (Unassigned ones are
  # let through: to this VM's Unicode tables the newest emoji are unassigned.)
  @control ~S"[\x{0}-\x{1F}\x{7F}-\x{9F}]"
  @bidi ~S"[\x{61C}\x{200E}\x{200F}\x{202A}-\x{202E}\x{2066}-\x{2069}]"
  @separator ~S"[\p{Zl}\p{Zp}]"
  @format ~S"(?!\x{200D})\p{Cf}"
  @private ~S"[\p{Co}\p{Cs}]"
  @spaces ~r/\p{Zs}+/u
  @forbidden Regex.compile!(Enum.join([@control, @bidi, @separator, @format, @private], "|"), "u")
  @reasons [
    {Regex.compile!(@control, "u"), "a control character"},
    {Regex.compile!(@bidi, "u"), "a character that reorders the text around it"},
    {Regex.compile!(@separator, "u"), "a line break"},
    {Regex.compile!(@format, "u"), "an invisible formatting character"}
  ]

  @doc "The longest a name may be, in characters."
  @spec name_max() :: pos_integer()
  def name_max, do: @name_max_graphemes

  @doc """
  Checks a name a player chose and tidies its spaces: `{:ok, name}`, or
  `{:error, why}` with a sentence for the player.
  """
  @spec name(term()) :: {:ok, String.t()} | {:error, String.t()}
  def name(text) when is_binary(text) do
    with :ok <- utf8(text, "a name"),
         trimmed = String.trim(text),
         :ok <- characters(trimmed, "a name"),
         tidy = squeeze(trimmed),
         :ok <- name_length(tidy) do
      {:ok, tidy}
    end
  end

  def name(_other), do: {:error, "a name is text"}

  @doc """
  Checks a line a player says to those around it and tidies it like a
  name: `{:ok, line}`, or `{:error, why}`. A line is valid UTF-8, 1 to
  `max` characters once trimmed (default 200), and holds nothing a name
  may not hold (no line breaks: a line is one line).

  ## Examples

      iex> Grove.Text.speech("  hello there  ")
      {:ok, "hello there"}
      iex> Grove.Text.speech(String.duplicate("a", 201))
      {:error, "a line is at most 200 characters"}
      iex> Grove.Text.speech("hi\u0000")
      {:error, "a line may not hold U+0000, a control character"}
  """
  @spec speech(term(), pos_integer()) :: {:ok, String.t()} | {:error, String.t()}
  def speech(text, max \\ 200) do
    case check_speech(text, max) do
      {:ok, line} -> {:ok, line}
      {:error, _code, why} -> {:error, why}
    end
  end

  @doc """
  Like `speech/2`, with a code for what is wrong beside the sentence:
  `:bad_utf8`, `:bad_character` (a control, reordering, invisible or
  private-use character), `:empty` (nothing once trimmed) or `:too_long`.

  ## Examples

      iex> Grove.Text.check_speech(<<"hi", 0xC3>>)
      {:error, :bad_utf8, "a line must be valid UTF-8"}
      iex> Grove.Text.check_speech("   ")
      {:error, :empty, "a line needs at least one character"}
  """
  @spec check_speech(term(), pos_integer()) ::
          {:ok, String.t()}
          | {:error, :bad_utf8 | :bad_character | :empty | :too_long, String.t()}
  def check_speech(text, max \\ 200)

  def check_speech(text, max) when is_binary(text) and is_integer(max) and max > 0 do
    with {:utf8, :ok} <- {:utf8, utf8(text, "a line")},
         trimmed = String.trim(text),
         {:characters, :ok} <- {:characters, characters(trimmed, "a line")} do
      tidy = squeeze(trimmed)

      cond do
        tidy == "" -> {:error, :empty, "a line needs at least one character"}
        String.length(tidy) > max -> {:error, :too_long, "a line is at most #{max} characters"}
        byte_size(tidy) > 4 * max -> {:error, :too_long, "a line is at most #{4 * max} bytes"}
        true -> {:ok, tidy}
      end
    else
      {:utf8, {:error, why}} -> {:error, :bad_utf8, why}
      {:characters, {:error, why}} -> {:error, :bad_character, why}
    end
  end

  def check_speech(_other, _max), do: {:error, :bad_utf8, "a line is text"}

  @doc """
  A name for a player who chose none, the same for the same number every
  time: two words, such as "Quiet Otter".
  """
  @spec default_name(non_neg_integer()) :: String.t()
  def default_name(n) when is_integer(n) and n >= 0 do
    adjective = elem(@adjectives, rem(n, tuple_size(@adjectives)))
    animal = elem(@animals, rem(div(n, tuple_size(@adjectives)), tuple_size(@animals)))
    "#{adjective} #{animal}"
  end

  @doc false
  # The checks shared with other texts players write: valid UTF-8, and no
  # character that hides, breaks or reorders what others see.
  @spec utf8(binary(), String.t()) :: :ok | {:error, String.t()}
  def utf8(text, what) do
    if String.valid?(text), do: :ok, else: {:error, "#{what} must be valid UTF-8"}
  end

  @doc false
  @spec characters(String.t(), String.t()) :: :ok | {:error, String.t()}
  def characters(text, what) do
    case Regex.run(@forbidden, text, return: :index) do
      nil ->
        :ok

      [{at, size}] ->
        char = binary_part(text, at, size)
        {:error, "#{what} may not hold #{code_point(char)}, #{why_forbidden(char)}"}
    end
  end

  @doc false
  # Each run of spaces one plain space, none around.
  @spec squeeze(String.t()) :: String.t()
  def squeeze(text), do: text |> String.replace(@spaces, " ") |> String.trim(" ")

  defp name_length(""), do: {:error, "a name needs at least one character"}

  defp name_length(name) do
    cond do
      String.length(name) > @name_max_graphemes ->
        {:error, "a name is at most #{@name_max_graphemes} characters"}

      byte_size(name) > @name_max_bytes ->
        {:error, "a name is at most #{@name_max_bytes} bytes"}

      true ->
        :ok
    end
  end

  defp why_forbidden(char) do
    Enum.find_value(@reasons, "a private-use character", fn {pattern, why} ->
      if char =~ pattern, do: why
    end)
  end

  defp code_point(char) do
    [point] = String.to_charlist(char)
    "U+" <> String.pad_leading(Integer.to_string(point, 16), 4, "0")
  end
end
