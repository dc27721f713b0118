#!/bin/bash
# Where the actor bench's CPU goes at the level of the runtime's C: the
# bench (`mix grove.bench.actors`, both cores, the herds and the world in
# one VM, the goal's own measure), with the release's flags
# (rel/vm.args.eex) and `+JPperf true`, so that the JIT's
# functions are named; `perf record -g` of that VM alone for PERF_SECONDS
# (default 18) from 5 s after the measure starts; `:msacc` for 5 s at
# 58 s from the start (`actors_msacc.exs`). Printed: the samples by library, by
# function, and summed by what the runtime does (the JIT's Erlang code,
# maps, ETS, the collector, messages, the kernel: page faults and
# unmapping, most of it the collector's new heaps), and by module.
# From the repository's root:
#
#   lab/bench/actors_perf.sh 250000            # ACTORS [DURATION]
#
# A profile, not a benchmark: perf costs a few per cent of what it
# watches. The runtime's own functions that its binary does not name
# (static ones) show as addresses, counted here by where they lie: those
# of ETS among ETS's named functions, the collector's among its.
set -euo pipefail
ACTORS=${1:-250000}; DURATION=${2:-35}; SECONDS_PERF=${PERF_SECONDS:-18}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=$(mktemp -d /tmp/grove-actors-perf.XXXXXX)

cd "$ROOT/lab"
mix compile >/dev/null
ELIXIR_ERL_OPTIONS="+JPperf true -args_file $ROOT/rel/vm.args.eex" \
  mix run --no-start -r bench/actors_msacc.exs \
  -e "Mix.Task.run(\"grove.bench.actors\", ~w(--actors $ACTORS --duration $DURATION))" \
  > "$DIR/bench.log" 2>&1 &
BENCH=$!
trap 'kill -TERM $BENCH 2>/dev/null || true' EXIT

for _ in $(seq 1 300); do grep -q ' measure ' "$DIR/bench.log" && break; sleep 1; done
sleep 5
perf record -F 999 -g -p "$BENCH" -o "$DIR/perf.data" -- sleep "$SECONDS_PERF" > "$DIR/perf.log" 2>&1 || true
wait $BENCH || true
trap - EXIT

grep -v '^|' "$DIR/bench.log"
echo "== perf, by library (the bench's VM, $SECONDS_PERF s)"
perf report -i "$DIR/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -8
echo "== perf, by function"
perf report -i "$DIR/perf.data" --no-children --sort sym --stdio -g none 2>/dev/null |
  grep -E '^ +[0-9]' > "$DIR/sym.txt"
head -40 "$DIR/sym.txt"
echo "== perf, by what the runtime does (per cent of the samples)"
awk '
  { p = $1 + 0; k = $2; s = $3 }
  k == "[k]"                                              { c["kernel (page faults, unmapping, ...)"] += p; next }
  s ~ /map/                                               { c["maps (the JIT'"'"'s lookups, the runtime'"'"'s updates)"] += p; next }
  s ~ /^db_/ || s ~ /^0x00000000001e[0-9a-f]+$/           { c["ETS"] += p; next }
  s ~ /garbage|gc_/ || s ~ /^0x0000000000(20[0-4]|1ff)/   { c["the collector"] += p; next }
  s ~ /copy_struct|size_object|memmove|send_message|copy_shallow|_sig_/ { c["messages (sized, copied)"] += p; next }
  s ~ /^\$global/                                         { c["the JIT'"'"'s shared code"] += p; next }
  s ~ /^\$/                                               { c["Erlang code (JIT)"] += p; next }
  s ~ /atomics|counters/                                  { c["atomics and counters"] += p; next }
  { c["the rest of the runtime"] += p }
  END { for (k in c) printf "%6.2f  %s\n", c[k], k }
' "$DIR/sym.txt" | sort -rn
echo "== perf, the JIT's code by module"
awk '$3 ~ /^\$/ { m = $3; sub(/^\$'"'"'?/, "", m); sub(/'"'"'?:.*/, "", m); c[m] += $1 } END { for (k in c) printf "%6.2f  %s\n", c[k], k }' \
  "$DIR/sym.txt" | sort -rn | head -15
echo "(files in $DIR)"
