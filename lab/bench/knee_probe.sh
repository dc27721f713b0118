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
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=$(mktemp -d /tmp/grove-knee-probe.XXXXXX)
PORT=$((20000 + RANDOM % 20000))

(cd "$ROOT" && mix compile >/dev/null && cd lab && mix compile >/dev/null)

cd "$ROOT"
# The probe starts once the players have joined (1,000 a second) and settled.
AFTER=$(( 20 + 5 + PLAYERS / 1000 + SETTLE + 5 ))
WORLD_ENV=()
if [ "${WORLD:-default}" = peers ]; then
  WORLD_ENV=(GROVE_ACTOR_KINDS=walker:20000 GROVE_LIFE=off GROVE_GAME=off GROVE_SEED=1)
fi
env GROVE_PORT=$PORT GROVE_DATA="$DIR/data" GROVE_ACTORS=20000 KNEE_PROBE_AFTER=$AFTER \
  ${SPAWN:+GROVE_PLAYER_SPAWN=$SPAWN} "${WORLD_ENV[@]}" \
  ELIXIR_ERL_OPTIONS="+S 1:1 +sbwt none +sbwtdcpu none +sbwtdio none" \
  taskset -c 0 mix run --no-halt -r "${PROBE:-lab/bench/knee_probe.exs}" > "$DIR/server.log" 2>&1 &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do curl -sf -o /dev/null http://127.0.0.1:$PORT/readyz && break; sleep 1; done
START=$(date +%s)
echo "knee probe: server up on port $PORT (OS pid $SERVER), files in $DIR"

cd "$ROOT/lab"
ELIXIR_ERL_OPTIONS="+S 1:1" taskset -c 1 mix grove.load ws --url ws://127.0.0.1:$PORT/ws \
  --server-pid $SERVER --stages $PLAYERS --encoding ${ENCODING:-binary} --stage-seconds $STAGE \
  --settle $SETTLE --baseline-seconds 5 --ramp 1000 ${LOAD_ARGS:-} > "$DIR/load.log" 2>&1 || true

sed -n '/^== load/,$p' "$DIR/load.log"
grep -E '^stage' "$DIR/load.log" || true
# The probe began about AFTER s after the server started.
for _ in $(seq 1 60); do grep -q "PROBE done" "$DIR/server.log" && break; sleep 1; done
grep '^PROBE' "$DIR/server.log"
echo "(the server was up $(( $(date +%s) - START )) s before the load ended)"
