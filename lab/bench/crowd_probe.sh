#!/bin/bash
# A crowd with a trace of its zone: the server as `mix grove.bench.players`
# starts it (the default world, 20,000 actors, one scheduler pinned to core
# 0) but distributed, so that `zone_probe.exs` can trace the crowded zone
# from core 1; the load (`mix grove.load ws --crowd ...`, 1,000 binary
# players) on core 1. It prints the load's report, the server's own
# histogram of players' moves over the probe's window (from the frame read
# off the socket to the outcome written: what the server adds) and the
# probe's summary. From the repository's root:
#
#   lab/bench/crowd_probe.sh press middle          # MODE AT [PROBE_SECONDS]
#   CHECK=0 lab/bench/crowd_probe.sh press middle  # no player checks its views
#
# Environment: ZONE (the zones traced, a comma list, the first in full;
# default 210, the middle one's, and at the corner the four that meet at
# (500, 500): 210,209,190,189), SPAWN (GROVE_PLAYER_SPAWN, default 40 cells
# around the crowd's point), CHECK
# (players checking views, default 100), SETTLE, STAGE (seconds).
set -euo pipefail
MODE=${1:-press}; AT=${2:-middle}; PROBE=${3:-50}
case "$AT" in
  corner) ZONE=${ZONE:-210,209,190,189}; SPAWN=${SPAWN:-460,460,541,541} ;;
  *) ZONE=${ZONE:-210}; SPAWN=${SPAWN:-485,485,566,566} ;;
esac
source "$(dirname "$0")/probe.sh"
probe_setup crowd
mkdir -p "$DIR/home"
head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' > "$DIR/home/.erlang.cookie"
chmod 400 "$DIR/home/.erlang.cookie"
NAME=crowd$$
HOST=$(hostname -s)

probe_server HOME="$DIR/home" GROVE_ACTORS=20000 GROVE_PLAYER_SPAWN=$SPAWN \
  -- elixir --sname $NAME -S mix run --no-halt
echo "crowd probe: server up on port $PORT (OS pid $SERVER), files in $DIR"

cd "$ROOT/lab"
probe_load --stages 1000 --encoding binary --stage-seconds ${STAGE:-60} \
  --settle ${SETTLE:-40} --baseline-seconds 5 --ramp 1000 --check-views ${CHECK:-100} \
  --crowd $MODE --crowd-at $AT > "$DIR/load.log" 2>&1 &
LOAD=$!
sleep $(( ${SETTLE:-40} + 10 ))

curl -s http://127.0.0.1:$PORT/metrics > "$DIR/metrics0.txt"
HOME="$DIR/home" taskset -c 1 elixir --sname probe$$ "$ROOT/lab/bench/zone_probe.exs" \
  $NAME@$HOST $PROBE $ZONE "$DIR/probe.txt" > "$DIR/probe.log" 2>&1 || true
curl -s http://127.0.0.1:$PORT/metrics > "$DIR/metrics1.txt"
wait $LOAD || true

cat "$DIR/load.log" | sed -n '/^== load/,$p'
echo
echo "the server's own histogram of players' moves over the probe's ${PROBE} s:"
awk -F'[" ]' '/^grove_player_move_seconds_bucket/ { print $2, $NF }' "$DIR/metrics0.txt" > "$DIR/h0"
awk -F'[" ]' '/^grove_player_move_seconds_bucket/ { print $2, $NF }' "$DIR/metrics1.txt" > "$DIR/h1"
paste "$DIR/h0" "$DIR/h1" | awk '{ le[NR] = $1; n[NR] = $4 - $2 } END {
  total = n[NR]; p99 = ""; max = "";
  for (i = 1; i <= NR; i++) {
    if (p99 == "" && n[i] >= 0.99 * total) p99 = le[i];
    if (max == "" && n[i] >= total) max = le[i];
  }
  printf "  %d moves; p99 <= %s s, max <= %s s (bucket edges)\n", total, p99, max }'
echo
cat "$DIR/probe.log"
