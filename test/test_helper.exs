# Integration tests that start browsers or servers are tagged and opted into
# by the Makefile; everything else runs by default.
{:ok, _} = Application.ensure_all_started(:inets)
ExUnit.start()
