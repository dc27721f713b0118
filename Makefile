# Grove's two commands: `make run` and `make test`. Each installs what a fresh
# Debian machine lacks (scripts/setup), then builds and does its job.
SHELL := /bin/bash
export LC_ALL := C.UTF-8
export LANG := C.UTF-8
export ERL_AFLAGS := +P 5000000

.PHONY: run test setup setup-test compile check bench clean

run: setup
	mix compile
	mix run --no-halt

test: setup-test
	mix format --check-formatted
	MIX_ENV=test mix compile --warnings-as-errors --force
	mix test

setup:
	@scripts/setup

setup-test:
	@scripts/setup test

compile: setup
	mix compile --warnings-as-errors

# A one-minute look at the world under 250,000 actors; see docs/benchmarks.md.
bench: setup
	MIX_ENV=prod mix grove.bench.actors --actors 250000 --duration 60

clean:
	rm -rf _build
