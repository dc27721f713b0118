#!/bin/bash
# The actor bench with a profile of it: `mix grove.bench.actors` (both
# cores, the herds and the world in one VM) with `knee_probe.exs` loaded,
# which after PROBE_AFTER seconds samples the run queue and every
# process's message queue for 10 s, sums reductions by kind of process,
# prints the scheduler utilization, then runs eprof for 3 s; before it,
# `perf record` of the whole machine for 10 s (the VM runs with
# `+JPperf true`, so the JIT's functions are named), printed by process
# and by function. From the repository's root:
#
#   lab/bench/actors_probe.sh 250000            # ACTORS [DURATION] [PROBE_AFTER]
#
# A profile, not a benchmark: eprof slows what it watches for its 3 s, and
# perf a little throughout; take the bench's figures from a run without it.
set -euo pipefail
ACTORS=${1:-250000}; DURATION=${2:-60}; AFTER=${3:-40}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=$(mktemp -d /tmp/grove-actors-probe.XXXXXX)

cd "$ROOT/lab"
mix compile >/dev/null
KNEE_PROBE_AFTER=$AFTER ELIXIR_ERL_OPTIONS="+JPperf true" \
  mix run --no-start -r bench/knee_probe.exs \
  -e "Mix.Task.run(\"grove.bench.actors\", ~w(--actors $ACTORS --duration $DURATION))" \
  > "$DIR/bench.log" 2>&1 &
BENCH=$!
trap 'kill -TERM $BENCH 2>/dev/null || true' EXIT

# perf over the 10 s before the probe starts.
sleep $(( AFTER > 12 ? AFTER - 12 : 1 ))
perf record -F 499 -a -g -o "$DIR/perf.data" -- sleep 10 > "$DIR/perf.log" 2>&1 || true
wait $BENCH || true
trap - EXIT

cat "$DIR/bench.log"
echo "== perf, by process and thread (all CPUs, 10 s; the bench's VM is $BENCH)"
perf report -i "$DIR/perf.data" --no-children --sort pid,comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -16
echo "== perf, by function (the bench's VM)"
perf report -i "$DIR/perf.data" --no-children --pid "$BENCH" --sort sym --stdio 2>/dev/null |
  grep -E '^ +[0-9]' | head -40
echo "(files in $DIR)"
