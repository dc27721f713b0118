# Grove's two commands: `make run` and `make test`. Each installs what a fresh
# Debian machine lacks (scripts/setup), builds the browser client and the
# server, and does its job.
SHELL := /bin/bash
export LC_ALL := C.UTF-8
export LANG := C.UTF-8

# The client library (clients/js): the browser client bundles its sources,
# Node programs (its tests, its example bot) import its build in dist/.
LIBRARY_SOURCES := $(shell find clients/js/src -type f 2>/dev/null) clients/js/package.json clients/js/tsconfig.json
LIBRARY_BUILD := clients/js/dist/index.js
LIBRARY_MODULES := clients/js/node_modules/.package-lock.json
CLIENT_SOURCES := $(shell find assets/src -type f 2>/dev/null) assets/package.json assets/tsconfig.json $(LIBRARY_SOURCES)
CLIENT_BUNDLE := priv/static/assets/app.js priv/static/assets/dashboard.js
NODE_MODULES := assets/node_modules/.package-lock.json

.PHONY: run test test-deep test-browser test-library suite-product suite-lab suite-browser suite-library compile-lab compile-servers setup setup-test compile client bench bench-players bench-peers bench-peers-setup release clean

# The VM's flags, the release's own (rel/vm.args.eex), for `make run` and
# the benches alike.
VM_ARGS := -args_file $(CURDIR)/rel/vm.args.eex

run: export ERL_AFLAGS := $(VM_ARGS)
run: setup client
	mix compile
	mix run --no-halt

# The product's tests, the lab's (lab/, its own Mix project: the load lab,
# the benches, chaos and fuzz), the browser's and the client library's.
# Once the product is checked and compiled, the four suites run at once,
# each after what it needs is built (the lab compiled, the servers of the
# browser's and the library's tests compiled), and each prints its whole
# output as it ends: most of their time is spent waiting (on peer nodes,
# servers, browsers), which two cores can share.
test: setup-test client
	mix format --check-formatted
	cd lab && mix format --check-formatted
	MIX_ENV=test mix compile --warnings-as-errors --force
	@echo "make test: the product's, the lab's, the browser's and the client library's suites run at once; each prints its output as it ends"
	ports="$$(scripts/free-ports 4 | tr '\n' ' ')" && \
	  $(MAKE) --jobs=4 --output-sync=target suite-product suite-lab suite-browser suite-library EPMD_PORTS="$$ports"

# The same, deeper: every property with many more cases, and the long runs
# (many nodes, the benches at a small size) tagged :deep.
test-deep: export GROVE_TEST_DEEP := 1
test-deep: test

# The headless-browser tests start their own servers (scripts/test-server).
test-browser: client
	$(MAKE) suite-browser

# The client library's tests, its bot among them, against real servers too.
test-library: client
	$(MAKE) suite-library

# The suites, each once what it runs is built. The Node suites run through
# scripts/node-test: `node --test` with a check that every test a file
# announced was reported (a file's process that exits before its reports
# reach the runner would make a lost report a pass), --test-timeout to fail
# a test stuck waiting for something that never comes, and a limit on the
# whole suite for a file that never ends.
NODE_TEST := $(CURDIR)/scripts/node-test

# Each suite's nodes find each other through an epmd of the suite's own
# (ERL_EPMD_PORT, a port `make test` found free): a suite's cluster tests
# start the machine's epmd when none runs and stop it when they end, and
# with the suites at once one suite stopped the epmd another's nodes were
# using (a node could not become distributed: `nodistribution`).
epmd_port = $(if $(EPMD_PORTS),ERL_EPMD_PORT=$(word $(1),$(EPMD_PORTS)))

suite-product:
	$(call epmd_port,1) mix test

suite-lab: compile-lab
	cd lab && $(call epmd_port,2) mix test

suite-browser: compile-servers
	cd assets && $(call epmd_port,3) $(NODE_TEST) test/*.test.mjs

suite-library: compile-servers
	cd clients/js && $(call epmd_port,4) $(NODE_TEST) test/*.test.mjs

compile-lab:
	cd lab && MIX_ENV=test mix compile --warnings-as-errors --force

# What scripts/test-server runs.
compile-servers:
	mix compile

setup:
	@scripts/setup

setup-test:
	@scripts/setup test

client: $(CLIENT_BUNDLE) $(LIBRARY_BUILD)

$(NODE_MODULES): assets/package-lock.json
	cd assets && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# TypeScript and ws, exactly as locked; neither runs anything at install.
$(LIBRARY_MODULES): clients/js/package-lock.json
	cd clients/js && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

$(LIBRARY_BUILD): $(LIBRARY_MODULES) $(LIBRARY_SOURCES)
	cd clients/js && npm run --silent build

# One build writes every bundle.
$(CLIENT_BUNDLE) &: $(NODE_MODULES) $(CLIENT_SOURCES)
	cd assets && npm run --silent build

compile: setup
	mix compile --warnings-as-errors

# A self-contained release (ERTS included, the browser client bundled) in
# _build/prod/rel/grove; see docs/operations.md, "Releases".
release: setup client
	MIX_ENV=prod mix release --overwrite

# The benches are the lab's (lab/, a Mix project of its own); see
# docs/benchmarks.md, and `scripts/setup bench` for what they use.
# Room for a process per baseline actor in the benches, and there only: a
# VM with a process table this large takes a minute to stop (OTP's last
# sweep of the table at the end of a stop is slow), which nothing else
# needs, the release the tests start least of all.
bench bench-players bench-peers: export ERL_AFLAGS := +P 5000000 $(VM_ARGS)
# A one-minute look at the world under 250,000 actors.
bench: setup
	cd lab && mix grove.bench.actors --actors 250000 --duration 60

# What a player costs the server, with the server and the load pinned to
# cores of their own; see docs/benchmarks.md ("Players per core").
bench-players: setup
	cd lab && mix grove.bench.players $(BENCH_ARGS)

# Grove and the same game on Colyseus, side by side; see docs/benchmarks.md
# ("Side by side with Colyseus"). The Colyseus packages are installed by
# bench-peers-setup, never by `make test`: exact versions from the lock, no
# optional native add-ons, no install scripts.
bench-peers-setup:
	npm ci --prefix lab/bench/peers/colyseus --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error

bench-peers: setup
	cd lab && mix grove.bench.peers $(BENCH_ARGS)

clean:
	rm -rf _build lab/_build priv/static/assets assets/node_modules clients/js/node_modules clients/js/dist
