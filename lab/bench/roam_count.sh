#!/bin/bash
# What a roaming walker makes its zones do, counted: the server as
# `roam_probe.sh` starts it (a world a million cells a side in zones of 50
# on demand, asleep after 20 s idle, the orchard, no actors; one scheduler
# pinned to core 0), PLAYERS walkers walking straight at five steps a
# second on core 1; once they have walked a while, the world's counters
# read from `/metrics` twice, 30 s apart, each as a rate a second and a
# walker-second: the moves, the handoffs across zones, the wakes and
# sleeps, the view deltas published and the snapshots sent, the zones'
# view ticks (`grove_zone_tick_duration_seconds_count`) and the writes to
# the walkers' sockets (`grove_socket_writes_total`). Counts,
# not speed: run it under the shared lock. From the repository's root,
# the server and the load of this checkout or of another (built) one:
#
#   lab/bench/roam_count.sh 300                  # PLAYERS [CHECKOUT]
#   lab/bench/roam_count.sh 300 /path/to/other/checkout
set -euo pipefail
PLAYERS=${1:-300}
source "$(dirname "$0")/probe.sh"
probe_setup roamcount
if [ -n "${2:-}" ]; then
  ROOT=$(cd "$2" && pwd)
  (cd "$ROOT" && mix compile >/dev/null && cd lab && mix compile >/dev/null)
  cd "$ROOT"
fi
probe_server GROVE_ACTORS=0 GROVE_WIDTH=1000000 GROVE_HEIGHT=1000000 GROVE_ZONES=on_demand \
  GROVE_ZONE_IDLE_MS=20000 -- mix run --no-halt

cd "$ROOT/lab"
probe_load --stages "$PLAYERS" --encoding binary --stage-seconds 90 --walk straight --move-every 200 \
  --settle 5 --baseline-seconds 5 --ramp 20 --every 30 > "$DIR/load.log" 2>&1 &
LOAD=$!
sleep $(( PLAYERS / 20 + 40 ))
counters() {
  curl -s "http://127.0.0.1:$PORT/metrics" |
    grep -E '^grove_(zone_tick_duration_seconds_count|view_deltas_total|view_snapshots_total|zone_wakes_total|zone_sleeps_total|handoffs_total|moves_total\{outcome="(ok|blocked)"\}|socket_writes_total\{encoding="binary"\})'
}
counters > "$DIR/first"; T0=$(date +%s.%N)
sleep 30
counters > "$DIR/second"; T1=$(date +%s.%N)
wait $LOAD || true
grep -E '^stage ' "$DIR/load.log" || true
paste "$DIR/first" "$DIR/second" |
  awk -v t="$(echo "$T1 - $T0" | bc)" -v p="$PLAYERS" \
    '{ printf "%-50s %10.1f a second %8.2f a walker-second\n", $1, ($4 - $2) / t, ($4 - $2) / t / p }'
