defmodule Grove.TextTest do
  use ExUnit.Case, async: true
  doctest Grove.Text

  import Grove.PropCase

  alias Grove.Text

  test "a name keeps any script, emoji with their joiners and skin tones, and one space between words" do
    for name <- ["Ada", "Zoë", "Дарья", "李小龙", "مريم", "👨‍👩‍👧 family", "👍🏽", "a.b-c_d", "1️⃣ one"],
        do: assert(Text.name(name) == {:ok, name})

    assert Text.name(" \t Ada \u00A0 Lovelace  ") == {:ok, "Ada Lovelace"}
  end

  test "a name is refused, saying why, when it is empty, too long or not text" do
    assert Text.name("   ") == {:error, "a name needs at least one character"}
    assert {:ok, _} = Text.name(String.duplicate("é", 24))
    assert Text.name(String.duplicate("é", 25)) == {:error, "a name is at most 24 characters"}
    # 24 characters but far more bytes: each family is one grapheme of 18 bytes.
    assert Text.name(String.duplicate("👨‍👩‍👧", 6)) == {:error, "a name is at most 96 bytes"}
    assert Text.name(<<0xFF, 0xFE>>) == {:error, "a name must be valid UTF-8"}
    assert Text.name(42) == {:error, "a name is text"}
  end

  test "control, reordering and invisible characters are refused, each named" do
    assert Text.name("a\u0007b") == {:error, "a name may not hold U+0007, a control character"}
    assert Text.name("a\u009Bb") == {:error, "a name may not hold U+009B, a control character"}

    for char <- [0x202E, 0x202D, 0x2066, 0x2069, 0x200F, 0x061C] do
      assert {:error, why} = Text.name("a" <> <<char::utf8>> <> "b")
      assert why =~ "a character that reorders the text around it"
    end

    assert Text.name("a\u2028b") == {:error, "a name may not hold U+2028, a line break"}

    assert Text.name("a\u200Bb") ==
             {:error, "a name may not hold U+200B, an invisible formatting character"}

    assert Text.name("a\uE000b") ==
             {:error, "a name may not hold U+E000, a private-use character"}
  end

  test "whatever the input, a name accepted is valid, tidy, short and free of controls" do
    property =
      forall(:proper_types.binary(), fn bytes ->
        case Text.name(bytes) do
          {:ok, name} ->
            assert String.valid?(name)
            assert name == String.trim(name)
            assert String.length(name) in 1..24
            refute name =~ ~r/[\x{0}-\x{1F}\x{7F}-\x{9F}\x{202A}-\x{202E}\x{2066}-\x{2069}]/u
            true

          {:error, why} ->
            is_binary(why)
        end
      end)

    check(property, numtests: 2000)
  end

  test "a player who chose no name gets two words, the same for the same number" do
    assert Text.default_name(7) == Text.default_name(7)
    assert [_, _] = String.split(Text.default_name(12_345))
    assert length(Enum.uniq(for n <- 0..255, do: Text.default_name(n))) == 256
  end

  test "a line said is refused, saying why, when it is empty, too long, not UTF-8 or holds controls" do
    assert Text.speech(" hi  there ") == {:ok, "hi there"}
    assert Text.speech("👋 привет, 世界") == {:ok, "👋 привет, 世界"}
    assert Text.speech("   ") == {:error, "a line needs at least one character"}
    assert Text.speech(String.duplicate("é", 200)) == {:ok, String.duplicate("é", 200)}
    assert Text.speech(String.duplicate("é", 201)) == {:error, "a line is at most 200 characters"}
    assert Text.speech("short", 3) == {:error, "a line is at most 3 characters"}
    assert Text.speech(<<"ok", 0xC3>>) == {:error, "a line must be valid UTF-8"}

    assert Text.speech("two\nlines") ==
             {:error, "a line may not hold U+000A, a control character"}

    assert {:error, _} = Text.speech("rtl\u202Eover")
    assert Text.speech(nil) == {:error, "a line is text"}
  end
end
