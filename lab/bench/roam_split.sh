#!/bin/bash
# A roaming walker's server time split between the sockets and the rest,
# in one sitting: WALKERS walkers played in the server's own VM with no
# socket (`roam_inproc.exs`, which prints the VM's CPU a walker-second and
# the scheduler's states by `:msacc`), then the same number over
# WebSockets (the server as `roam_probe.sh` starts it, without perf: a
# world a million cells a side in zones of 50 on demand, asleep after
# 20 s idle, the orchard, no actors, one scheduler on core 0; `mix
# grove.load ws --walk straight` at five steps a second on core 1), with
# the scheduler's states accounted for 20 s once they have walked a while
# (`roam_msacc.exs`). Run it under the exclusive machine lock, from the
# repository's root:
#
#   lab/bench/roam_split.sh 500               # WALKERS
set -euo pipefail
WALKERS=${1:-500}
source "$(dirname "$0")/probe.sh"
probe_setup roamsplit

env GROVE_ACTORS=0 GROVE_WIDTH=1000000 GROVE_HEIGHT=1000000 GROVE_ZONES=on_demand \
  GROVE_ZONE_IDLE_MS=20000 GROVE_PORT=0 GROVE_DATA="$DIR/inproc" ELIXIR_ERL_OPTIONS="$SERVER_ERL" \
  taskset -c 0 mix run -r lab/bench/roam_msacc.exs lab/bench/roam_inproc.exs "$WALKERS" 2>&1 |
  grep -E '^(INPROC|MSACC)'

AFTER=$(( 5 + WALKERS / 20 + 30 ))
probe_server GROVE_ACTORS=0 ROAM_MSACC_AFTER=$AFTER \
  GROVE_WIDTH=1000000 GROVE_HEIGHT=1000000 GROVE_ZONES=on_demand GROVE_ZONE_IDLE_MS=20000 \
  -- mix run --no-halt -r lab/bench/roam_msacc.exs
cd "$ROOT/lab"
probe_load --stages "$WALKERS" --encoding binary --stage-seconds 70 --walk straight --move-every 200 \
  --settle 5 --baseline-seconds 5 --ramp 20 --every 30 > "$DIR/load.log" 2>&1 || true
grep -E '^stage ' "$DIR/load.log" || true
for _ in $(seq 1 30); do grep -q "MSACC server sleep" "$DIR/server.log" && break; sleep 1; done
grep '^MSACC' "$DIR/server.log" || true
