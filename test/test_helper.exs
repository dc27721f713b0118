# `make test` runs every test, and every property with its own number of
# cases. `make test-deep` (GROVE_TEST_DEEP=1) runs each property with many
# more cases (`Grove.PropCase.check/2`), and the tests tagged `:deep`
# besides: long runs that the default suite covers in short.
#
# A message a test waits for comes when it comes: on a machine busy with
# other suites, more than ExUnit's default 100 ms after it was asked for.
# `assert_receive` returns as soon as it arrives, so a passing test does
# not wait longer; only a failing one does.
{:ok, _} = Application.ensure_all_started(:inets)

# Every module loaded now, in one batch, as a release loads them as it
# boots: loaded one by one as tests first call them, on a machine whose
# cores are busy, a world's first start waited seconds on the code server
# (`Grove.Preload`).
Grove.Preload.load()

ExUnit.start(
  exclude: if(Grove.PropCase.deep?(), do: [], else: [:deep]),
  assert_receive_timeout: 5000
)
