#!/bin/bash
# A long stage of players with `stall_probe.exs` watching the server: the
# server as `mix grove.bench.players` starts it (the default world, 20,000
# actors, one scheduler pinned to core 0), the load (`mix grove.load ws`,
# binary) on core 1. Every line of the load and of the probe carries the
# wall clock, so that a window in which the moves' p99 jumped can be set
# beside what the server did in it. From the repository's root:
#
#   lab/bench/stall_probe.sh 4000 300        # PLAYERS [STAGE]
#
# Environment: ENCODING (the players', default binary), SERVER_ENV (more
# of the server's environment, as `NAME=value ...`: `STALL_PROBE_SCANS=0`
# for the probe that asks no process anything), PERF=1 to record what ran
# on the server's core for the stage (`perf record -C 0`: every thread of
# every process, so that a stall from outside the server shows as such),
# in `perf.data`, perf itself on the load's core.
set -euo pipefail
PLAYERS=${1:-4000}; STAGE=${2:-300}
source "$(dirname "$0")/probe.sh"
probe_setup stall

# SERVER_ENV is split into words on purpose.
# shellcheck disable=SC2086
probe_server GROVE_ACTORS=20000 \
  STALL_PROBE_SECONDS=$(( 40 + PLAYERS / 1000 + STAGE )) ${SERVER_ENV:-} \
  -- mix run --no-halt -r lab/bench/stall_probe.exs
echo "stall probe: server up on port $PORT (OS pid $SERVER), files in $DIR"
if [ -n "${PERF:-}" ]; then
  taskset -c 1 perf record -q -F 999 -C 0 -g -o "$DIR/perf.data" -- sleep $(( 30 + PLAYERS / 1000 + STAGE )) \
    > "$DIR/perf.log" 2>&1 &
fi

cd "$ROOT/lab"
probe_load --stages $PLAYERS --encoding ${ENCODING:-binary} --stage-seconds $STAGE \
  --settle 5 --baseline-seconds 15 --ramp 1000 2>&1 |
  while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%1N)" "$line"; done > "$DIR/load.log" || true

grep -E ' stage ' "$DIR/load.log" || true
echo "(the probe's lines: $DIR/server.log; the load's: $DIR/load.log)"
