# Integration tests that start browsers or servers are tagged and opted into
# by the Makefile; everything else runs by default.
ExUnit.start()
