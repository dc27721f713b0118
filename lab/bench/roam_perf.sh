#!/bin/bash
# Where the server's core goes at the C level while walkers roam: WALKERS
# walkers in the server's own VM with no socket (`roam_inproc.exs`, one
# scheduler pinned to core 0), the VM started with its JIT's perf map
# (`+JPperf true`, which names the Erlang functions it compiled), and
# `perf record` on it for SECONDS once the walkers have joined and walked
# 20 s (the bench's measured 30 s). MODE `fp` follows frame pointers,
# which the JIT's frames keep (the Erlang callers of the code that ran)
# but the runtime's C does not; `dwarf` unwinds the C (which of the
# runtime's exported functions the static ones ran for) as far as the
# first Erlang frame. Prints the split by object (JIT'd code, the runtime,
# the kernel) and the hottest symbols; the data and the perf map are left
# in /tmp/roam_perf.* for `perf report`, and the runtime's own perf map,
# /tmp/perf-<pid>.map, is left where the VM wrote it (`perf report` of
# the data reads it there). The bench runs with `roam_msacc.exs` loaded,
# so the scheduler's accounting (`:msacc`, over the measured 30 s) runs
# while perf samples and is in what it sees. The VM is killed if the
# script stops early (interrupted, or `perf record` failing). Run it
# under the exclusive machine lock, from the repository's root:
#
#   lab/bench/roam_perf.sh 500 18 fp          # WALKERS SECONDS MODE
set -euo pipefail
WALKERS=${1:-500}
SECONDS_TRACED=${2:-18}
MODE=${3:-fp}
OUT=/tmp/roam_perf.$$
LOG=$OUT.log

env GROVE_ACTORS=0 GROVE_WIDTH=1000000 GROVE_HEIGHT=1000000 GROVE_ZONES=on_demand \
  GROVE_ZONE_IDLE_MS=20000 GROVE_PORT=0 \
  ELIXIR_ERL_OPTIONS="+S 1:1 +sbwt none +sbwtdcpu none +sbwtdio none +JPperf true" \
  taskset -c 0 mix run --no-compile -r lab/bench/roam_msacc.exs lab/bench/roam_inproc.exs "$WALKERS" \
  >"$LOG" 2>&1 &
RUN=$!
trap 'kill -TERM "$RUN" 2>/dev/null || true' EXIT

# The bench names its VM's process as it starts its measured 30 s.
until grep -q "^INPROC pid" "$LOG"; do
  kill -0 "$RUN" 2>/dev/null || { cat "$LOG"; exit 1; }
  sleep 1
done
BEAM=$(grep -o "^INPROC pid [0-9]*" "$LOG" | awk '{print $3}')
sleep 2

case "$MODE" in
  fp) GRAPH=(-F 999 -g) ;;
  dwarf) GRAPH=(-F 499 --call-graph dwarf,16384) ;;
  *) echo "MODE is fp or dwarf" >&2; exit 2 ;;
esac
perf record "${GRAPH[@]}" -p "$BEAM" -o "$OUT.data" -- sleep "$SECONDS_TRACED" 2>&1 | tail -1
wait "$RUN"
trap - EXIT
grep -E '^(INPROC|MSACC)' "$LOG"
cp "/tmp/perf-$BEAM.map" "$OUT.map"

echo "PERF by object:"
perf report -i "$OUT.data" --no-children --sort dso --stdio -g none 2>/dev/null | grep -E '^ +[0-9]'
echo "PERF the hottest symbols:"
perf report -i "$OUT.data" --no-children --sort sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -40
echo "PERF data in $OUT.data (the perf map, /tmp/perf-$BEAM.map, copied to $OUT.map)"
