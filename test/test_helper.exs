# `make test` runs every test, and every property with its own number of
# cases. `make test-deep` (GROVE_TEST_DEEP=1) runs each property with many
# more cases (`Grove.PropCase.check/2`), and the tests tagged `:deep`
# besides: long runs that the default suite covers in short.
{:ok, _} = Application.ensure_all_started(:inets)
ExUnit.start(exclude: if(Grove.PropCase.deep?(), do: [], else: [:deep]))
