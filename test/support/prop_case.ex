defmodule Grove.PropCase do
  @moduledoc """
  Running PropEr properties from ExUnit.

  `forall/2` builds a property whose body may use ExUnit assertions; `check/2`
  runs it and fails the test with PropEr's shrunk counterexample and the
  assertion that failed on it.

      check(forall(:proper_types.integer(), fn n -> assert n + 0 == n end), numtests: 200)

  The body's failures (errors, exits and throws) are turned into `false`
  here because Debian's PropEr predates OTP 23 and would crash inspecting
  one itself (it calls `erlang:get_stacktrace/0`, which OTP 23 removed).
  """

  import ExUnit.Assertions

  @doc "A property over `generator`; the body passes unless it raises or returns `false`."
  def forall(generator, body) do
    :proper.forall(generator, fn value ->
      try do
        body.(value) != false
      catch
        # Exits and throws too: PropEr would catch them itself, and crash.
        kind, reason ->
          failure = Exception.format(kind, reason, __STACKTRACE__)
          # The first failure, before any shrinking, and the last (the
          # counterexample's): a slow property's shrinking may fail otherwise.
          # The first is written out at once too: shrinking a property whose
          # every failing try waits out a timeout can outlast the test's
          # own, whose process then dies with what it kept.
          unless Process.get(:grove_prop_first_failure) do
            Process.put(:grove_prop_first_failure, {value, failure})

            IO.puts(
              :standard_error,
              "A property failed; PropEr shrinks it now. The input, before shrinking:\n" <>
                inspect(value, pretty: true, limit: :infinity) <> "\n" <> failure
            )
          end

          Process.put(:grove_prop_failure, failure)
          false
      end
    end)
  end

  @doc """
  Runs a property; fails with the smallest counterexample found.

  Options: `:numtests` (default 100), the cases `make test` runs;
  `:deep_numtests` (default ten times as many), those `make test-deep`
  runs (`deep?/0`); `:max_shrinks` (default PropEr's 500), to bound
  the tries at a smaller counterexample for properties whose every try is
  slow; and `:max_size` (default PropEr's 42), the largest size PropEr
  grows its cases to. `:proper_types.resize/2` sizes only the type it
  wraps (a list's length), not the types inside it: a list of messages of
  lists resized to 6 still holds lists that grow to 42 items, and strings
  of 42 characters in them; `:max_size` bounds them all.
  """
  def check(property, opts \\ []) do
    numtests = Keyword.get(opts, :numtests, 100)
    numtests = if deep?(), do: Keyword.get(opts, :deep_numtests, 10 * numtests), else: numtests
    Process.delete(:grove_prop_failure)
    Process.delete(:grove_prop_first_failure)
    limits = for key <- [:max_shrinks, :max_size], value = opts[key], do: {key, value}

    case :proper.quickcheck(:proper.numtests(numtests, property), [:quiet | limits]) do
      true ->
        true

      other ->
        {first, first_failure} = Process.get(:grove_prop_first_failure, {nil, ""})

        flunk("""
        property failed: #{inspect(other)}
        counterexample: #{inspect(:proper.counterexample(), pretty: true, limit: :infinity)}
        #{Process.get(:grove_prop_failure, "")}
        first failing input, before shrinking: #{inspect(first, pretty: true, limit: :infinity)}
        #{first_failure}
        """)
    end
  end

  @doc "True in `make test-deep` (GROVE_TEST_DEEP=1): properties run many more cases."
  def deep?, do: System.get_env("GROVE_TEST_DEEP") in ["1", "true"]
end
