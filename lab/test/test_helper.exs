# `make test` runs every test, and every property with its own number of
# cases. `make test-deep` (GROVE_TEST_DEEP=1) runs each property with many
# more cases (`Grove.PropCase.check/2`), and the tests tagged `:deep`
# besides: long runs that the default suite covers in short.
{:ok, _} = Application.ensure_all_started(:inets)

# Every module of Grove and the applications it runs loaded in one batch
# (`Grove.Preload`), as the product's suite does: loaded one by one as the
# tests, all running at once, first call them, through the one code
# server, a world's first zone waits on them before it answers the first
# join, which has 5 s on a machine busy with the other suites too.
Grove.Preload.load()
ExUnit.start(exclude: if(Grove.PropCase.deep?(), do: [], else: [:deep]))
