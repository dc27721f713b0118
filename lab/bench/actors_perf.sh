#!/bin/bash
# Where the actor bench's CPU goes at the level of the runtime's C: the
# bench (`mix grove.bench.actors`, both cores, the herds and the world in
# one VM, the goal's own measure), with the release's flags
# (rel/vm.args.eex) and `+JPperf true`, so that the JIT's
# functions are named; `perf record -g` of that VM alone for PERF_SECONDS
# (default 18) from 5 s after the bench's first line of its measure;
# `:msacc` for MSACC_SECONDS (default 5) from MSACC_AFTER seconds after
# that line (default: as perf ends; `actors_msacc.exs`), within the
# measure. Printed: the samples by library, by
# function, and summed by what the runtime does (the JIT's Erlang code,
# maps, ETS, the collector, messages, the kernel: page faults and
# unmapping, most of it the collector's new heaps), and by module.
# From the repository's root:
#
#   lab/bench/actors_perf.sh 250000            # ACTORS [DURATION]
#
# A profile, not a benchmark: perf costs a few per cent of what it
# watches. The runtime's own functions that its binary does not name
# (static ones) show as addresses: each is named here after the nearest
# function the binary names below it (`nm -D` of the VM that ran, so of
# any build), `unnamed after <function>`, and counted with that function;
# a source file's static functions lie among its named ones, so the
# guess is right but where a file's first functions are static. The
# unnamed ones' share is printed apart, so that what is guessed shows.
set -euo pipefail
ACTORS=${1:-250000}; DURATION=${2:-35}; SECONDS_PERF=${PERF_SECONDS:-18}
export MSACC_SECONDS=${MSACC_SECONDS:-5}
MSACC_AFTER=${MSACC_AFTER:-$((5 + SECONDS_PERF))}
# Within the measure, or the VM ends before `:msacc` prints.
if [ $((MSACC_AFTER + MSACC_SECONDS)) -gt "$DURATION" ]; then
  MSACC_AFTER=$((DURATION > MSACC_SECONDS ? DURATION - MSACC_SECONDS - 1 : 0))
fi
export MSACC_AFTER
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=$(mktemp -d /tmp/grove-actors-perf.XXXXXX)
export MSACC_LOG="$DIR/bench.log"

cd "$ROOT/lab"
mix compile >/dev/null
ELIXIR_ERL_OPTIONS="+JPperf true -args_file $ROOT/rel/vm.args.eex" \
  mix run --no-start -r bench/actors_msacc.exs \
  -e "Mix.Task.run(\"grove.bench.actors\", ~w(--actors $ACTORS --duration $DURATION))" \
  > "$DIR/bench.log" 2>&1 &
BENCH=$!
trap 'kill -TERM $BENCH 2>/dev/null || true' EXIT

for _ in $(seq 1 300); do grep -q ' measure ' "$DIR/bench.log" && break; sleep 1; done
# The VM's binary, whose exported functions name the addresses perf cannot.
BEAM_EXE=$(readlink "/proc/$BENCH/exe" || echo beam.smp)
nm -D --defined-only "$BEAM_EXE" 2>/dev/null |
  awk '$2 ~ /^[Tt]$/ { print $1, $3 }' | sort > "$DIR/beam.syms" || true
sleep 5
perf record -F 999 -g -p "$BENCH" -o "$DIR/perf.data" -- sleep "$SECONDS_PERF" > "$DIR/perf.log" 2>&1 || true
wait $BENCH || true
trap - EXIT

grep -v '^|' "$DIR/bench.log"
echo "== perf, by library (the bench's VM, $SECONDS_PERF s)"
perf report -i "$DIR/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -8
echo "== perf, by function"
perf report -i "$DIR/perf.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null |
  grep -E '^ +[0-9]' > "$DIR/dso_sym.txt"
# An address in the VM's binary named after the function below it
# (`beam.syms`, addresses as perf gives them for a position-independent
# binary, compared as strings of 16 digits); every line as per cent, kind
# and name (a library's name may have spaces: the kind, `[.]` or `[k]`,
# is found).
awk -v beam="$(basename "$BEAM_EXE")" '
  FILENAME ~ /beam.syms$/ { n++; at[n] = "x" $1; name[n] = $2; next }
  {
    i = 3; while (i < NF && $i !~ /^\[[.k]\]$/) i++
    p = $1; d = $(i - 1); k = $i; s = $(i + 1)
    if (s ~ /^0x[0-9a-f]+$/ && d == beam && n > 0) {
      h = substr(s, 3); while (length(h) < 16) h = "0" h
      a = "x" h; lo = 1; hi = n; below = 0
      while (lo <= hi) { mid = int((lo + hi) / 2); if (at[mid] <= a) { below = mid; lo = mid + 1 } else hi = mid - 1 }
      if (below > 0) s = "unnamed after " name[below]
    }
    printf "%9s  %s %s\n", p, k, s
  }
' "$DIR/beam.syms" "$DIR/dso_sym.txt" > "$DIR/sym.txt"
head -40 "$DIR/sym.txt"
echo "== perf, by what the runtime does (per cent of the samples)"
# The JIT's Erlang functions first: their names hold words (map, gc) that
# name the runtime's functions below.
awk '
  { p = $1 + 0; k = $2; s = $3; if (s == "unnamed") s = $5 }
  k == "[k]"                                              { c["kernel (page faults, unmapping, ...)"] += p; next }
  s ~ /^\$global/                                         { c["the JIT'"'"'s shared code"] += p; next }
  s ~ /^\$/                                               { c["Erlang code (JIT)"] += p; next }
  s ~ /map/                                               { c["maps (the JIT'"'"'s lookups, the runtime'"'"'s updates)"] += p; next }
  s ~ /^db_|^erl_db|_ets_|^ets_/                          { c["ETS"] += p; next }
  s ~ /garbage|gc_/                                       { c["the collector"] += p; next }
  s ~ /copy_struct|size_object|memmove|send_message|copy_shallow|_sig_/ { c["messages (sized, copied)"] += p; next }
  s ~ /atomics|counters/                                  { c["atomics and counters"] += p; next }
  { c["the rest of the runtime"] += p }
  END { for (k in c) printf "%6.2f  %s\n", c[k], k }
' "$DIR/sym.txt" | sort -rn
awk '$3 == "unnamed" { u += $1 } END { printf "(%.2f of these in functions the binary does not name, each counted with the one named below it)\n", u }' \
  "$DIR/sym.txt"
echo "== perf, the JIT's code by module"
awk '$3 ~ /^\$/ { m = $3; sub(/^\$'"'"'?/, "", m); sub(/'"'"'?:.*/, "", m); c[m] += $1 } END { for (k in c) printf "%6.2f  %s\n", c[k], k }' \
  "$DIR/sym.txt" | sort -rn | head -15
echo "(files in $DIR)"
