#!/bin/bash
# Where a roaming walker's server time goes: the server as `mix
# grove.bench.players` starts it on a world a million cells a side in zones
# of 50 on demand (asleep after 20 s idle, the orchard, no actors), one
# scheduler pinned to core 0, with `+JPperf true` and `knee_probe.exs`
# loaded; PLAYERS walkers walking straight at five steps a second (`mix
# grove.load ws --walk straight`) on core 1. Once they have joined, `perf`
# samples the server for 20 s; at the end it prints the load's lines, the
# probe's (reductions by kind of process, a connection's messages), the
# world's counters of wakes, sleeps and saves, and the perf samples by
# what their Erlang call chain says they were for (the first of the
# kinds below whose function is on the chain; a sample with no Erlang
# frame is the runtime's or the kernel's); then, from 10 s more recorded
# with the stacks copied and unwound through the runtime's own frames,
# the samples by the runtime's function the Erlang code called into
# (phash2_2, ets_lookup_2, a socket's send, scheduling, a collection),
# which names what the first table leaves as "no Erlang chain". From the
# repository's root:
#
#   lab/bench/roam_probe.sh 500 100          # PLAYERS [STAGE seconds]
#
# A profile, not a benchmark: perf and the probe slow what they watch.
set -euo pipefail
PLAYERS=${1:-500}; STAGE=${2:-100}
source "$(dirname "$0")/probe.sh"
probe_setup roam

# The probe starts once the players have joined (20 a second) and walked a while.
AFTER=$(( 5 + PLAYERS / 20 + 40 ))
probe_server GROVE_ACTORS=0 KNEE_PROBE_AFTER=$AFTER \
  GROVE_WIDTH=1000000 GROVE_HEIGHT=1000000 GROVE_ZONES=on_demand GROVE_ZONE_IDLE_MS=20000 \
  ELIXIR_ERL_OPTIONS="$SERVER_ERL +JPperf true" \
  -- mix run --no-halt -r lab/bench/knee_probe.exs
BEAM=$SERVER
[ "$(cat /proc/$SERVER/comm)" = beam.smp ] || BEAM=$(pgrep -P $SERVER -n)
echo "roam probe: server up on port $PORT (OS pid $BEAM), files in $DIR"

cd "$ROOT/lab"
probe_load --stages $PLAYERS --encoding binary --stage-seconds $STAGE \
  --walk straight --move-every 200 --settle 5 --baseline-seconds 5 --ramp 20 --every 30 \
  > "$DIR/load.log" 2>&1 &
LOAD=$!
sleep $(( PLAYERS / 20 + 20 ))
perf record -F 499 -g -p "$BEAM" -o "$DIR/perf.data" -- sleep 20 > "$DIR/perf.log" 2>&1 || true
# Then 10 s more with each sample's stack copied, unwound afterwards by
# the runtime's own unwind tables (`.eh_frame`, present in a stripped
# beam.smp): through the runtime's frames up to the first of the JIT's,
# where the frame pointers of the first record stop at the runtime's
# first function, and name nothing above it.
perf record -F 199 --call-graph dwarf,16384 -p "$BEAM" -o "$DIR/perf-dwarf.data" -- sleep 10 \
  > "$DIR/perf-dwarf.log" 2>&1 || true
wait $LOAD || true
curl -s http://127.0.0.1:$PORT/metrics |
  grep -E '^grove_(zone_(wakes|sleeps|saves|save_failures)_total|game_(zones_saved|bases_saved|zones_loaded|loads_skipped)_total|game_saves_total)' || true

grep -E '^(load|stage) ' "$DIR/load.log" || true
probe_wait_done
grep '^PROBE' "$DIR/server.log" | grep -v '^PROBE eprof' || true

echo "perf samples by what they were for:"
perf script -i "$DIR/perf.data" 2>/dev/null | awk '
  function kind() {
    if (erl ~ /Terrain.:.(-made|area)|Woodland/) return "wake: the ground"
    if (erl ~ /Zone.:(recover_|make_core|handle_continue)|Zone\.Game.:setup|Slots.:open/) return "wake: the layer, the tables"
    if (erl ~ /Zone.:(sleep|fall_asleep|store_asleep|pass_on_mailbox)/) return "sleep"
    if (erl ~ /Saver|Storage|sqlite|Store\.|SQLite/) return "the store, the saver"
    if (erl ~ /Orchard.:(catch_up|tick)|Zone\.Game.:(settle|tick|due)/) return "the game ticks"
    if (erl ~ /Zone\.Views|Zone.:tick|State.:flush|snapshot/) return "the zones views"
    if (erl ~ /Zone.:(handle_move|apply_one|apply_batch|moved|run_effect)|Handoff|wake_ahead/) return "the moves"
    if (erl ~ /Gateway|Connection|Session|Protocol|yaws|inet/) return "the connections"
    if (erl ~ /Door|Placer|[Ss]upervisor|Registry/) return "door, placer, supervisors"
    if (erl ~ /Metrics|Collector|Status/) return "metrics"
    if (erl ~ /Grove\.World\.Zone/) return "zones, other"
    if (erl != "") return "other Erlang"
    if (other ~ /writev|tcp|sock|epoll/) return "kernel network, no Erlang chain"
    return "runtime or kernel, no Erlang chain"
  }
  function flush() { if (n) { c[kind()]++; total++ } erl = ""; other = ""; n = 0 }
  /^[^ \t]/ { flush(); next }
  /^[ \t]+[0-9a-f]+ / { n++; if ($2 ~ /^\$/) erl = erl " " $2; else other = other " " $2; next }
  /^$/ { flush() }
  END { flush()
        for (k in c) printf "%6.1f %%  %s\n", 100 * c[k] / total, k | "sort -rn"
        close("sort -rn"); printf "%d samples\n", total }'

# The second record's samples by the runtime's function the Erlang code
# called into (the outermost of the runtime's frames that has a name: a
# BIF such as phash2_2 or ets_lookup_2, erts_internal_port_command_3 for
# a socket's sends, erts_schedule, erts_garbage_collect*), else by the
# JIT's function they were in, else by the kernel's outermost function.
echo "perf samples by the runtime function entered (stacks unwound, $DIR/perf-dwarf.data):"
perf script -i "$DIR/perf-dwarf.data" 2>/dev/null | awk '
  function flush() {
    if (n) {
      k = named != "" ? named : (jit != "" ? "Erlang " jit : (kernel != "" ? "kernel " kernel : "runtime, unnamed"))
      c[k]++; total++
    }
    n = 0; named = ""; jit = ""; kernel = ""
  }
  /^[^ \t]/ { flush(); next }
  /^[ \t]+[0-9a-f]+ / {
    n++; s = $2; sub(/\+0x[0-9a-f]+$/, "", s)
    if ($0 ~ /beam\.smp/ && s != "[unknown]") named = s
    else if ($0 ~ /perf-[0-9]+\.map/ && jit == "") jit = s
    else if ($0 ~ /kernel/) kernel = s
    next
  }
  /^$/ { flush() }
  END { flush()
        for (k in c) if (c[k] * 200 >= total) printf "%6.1f %%  %s\n", 100 * c[k] / total, k | "sort -rn"
        close("sort -rn"); printf "%d samples (entries under 0.5 %% left out)\n", total }'
