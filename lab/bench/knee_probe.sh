#!/bin/bash
# A stage of players with a profile of the server at it: the server as
# `mix grove.bench.players` starts it (the default world, 20,000 actors,
# one scheduler pinned to core 0) with `knee_probe.exs` loaded, the load
# (`mix grove.load ws`, binary) on core 1. It prints the load's report and
# the probe's lines: utilization, run queue, reductions and message
# queues by kind of process, eprof's costliest functions. From the
# repository's root:
#
#   lab/bench/knee_probe.sh 4000            # PLAYERS [SETTLE] [STAGE]
#   SPAWN=460,460,541,541 LOAD_ARGS="--crowd mill --crowd-at corner" lab/bench/knee_probe.sh 1000 30
#
# Environment: PROBE (the script loaded into the server: knee_probe.exs
# by default, zone_knee_probe.exs for the zones alone), SPAWN (the
# server's GROVE_PLAYER_SPAWN, for a crowd), LOAD_ARGS (more options for the load), ENCODING (the players', default
# binary), WORLD=peers for the world of `mix grove.bench.peers` (20,000
# walkers, no bacteria, no game) instead of the default one.
set -euo pipefail
PLAYERS=${1:-4000}; SETTLE=${2:-20}; STAGE=${3:-40}
source "$(dirname "$0")/probe.sh"
probe_setup knee

# The probe starts once the players have joined (1,000 a second) and settled.
AFTER=$(( 20 + 5 + PLAYERS / 1000 + SETTLE + 5 ))
WORLD_ENV=()
if [ "${WORLD:-default}" = peers ]; then
  WORLD_ENV=(GROVE_ACTOR_KINDS=walker:20000 GROVE_LIFE=off GROVE_GAME=off GROVE_SEED=1)
fi
probe_server GROVE_ACTORS=20000 KNEE_PROBE_AFTER=$AFTER \
  ${SPAWN:+GROVE_PLAYER_SPAWN=$SPAWN} "${WORLD_ENV[@]}" \
  -- mix run --no-halt -r "${PROBE:-lab/bench/knee_probe.exs}"
START=$(date +%s)
echo "knee probe: server up on port $PORT (OS pid $SERVER), files in $DIR"

cd "$ROOT/lab"
probe_load --stages $PLAYERS --encoding ${ENCODING:-binary} --stage-seconds $STAGE \
  --settle $SETTLE --baseline-seconds 5 --ramp 1000 ${LOAD_ARGS:-} > "$DIR/load.log" 2>&1 || true

sed -n '/^== load/,$p' "$DIR/load.log"
grep -E '^stage' "$DIR/load.log" || true
# The probe began about AFTER s after the server started.
probe_wait_done
grep '^PROBE' "$DIR/server.log"
echo "(the server was up $(( $(date +%s) - START )) s before the load ended)"
