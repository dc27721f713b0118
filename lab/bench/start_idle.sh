#!/bin/bash
# The server as `make run` starts it (`mix run --no-halt`: the default
# actors, the orchard, a fresh SQLite file; the port any free one), once per
# world size given (cells a side; default 1000, 100000 and 1000000): the
# time from `mix run` to "listening" (compiling already done), the world's
# own start line, and after IDLE seconds (default 30) the VM's resident
# memory (ps) and the memory its last status line gives. One server at a
# time, each stopped before the next. From the repository's root:
#
#   lab/bench/start_idle.sh                  # 1000 100000 1000000
#   IDLE=60 lab/bench/start_idle.sh 1000000
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
IDLE=${IDLE:-30}
SIZES=("$@")
[ ${#SIZES[@]} -eq 0 ] && SIZES=(1000 100000 1000000)
mix compile >/dev/null

echo "| world | zones | mix run to listening | world's start line | VM resident after ${IDLE} s | status line memory |"
echo "| --- | --- | --- | --- | --- | --- |"
for size in "${SIZES[@]}"; do
  data=$(mktemp -d)
  log=$(mktemp)
  started=$(date +%s%N)
  GROVE_DATA=$data GROVE_WIDTH=$size GROVE_HEIGHT=$size GROVE_PORT=0 mix run --no-halt >"$log" 2>&1 &
  pid=$!
  until grep -q "listening on" "$log"; do
    if ! kill -0 "$pid" 2>/dev/null; then cat "$log"; exit 1; fi
    sleep 0.1
  done
  ready=$(( ($(date +%s%N) - started) / 1000000 ))
  sleep "$IDLE"
  rss=$(ps -o rss= -p "$pid" | tr -d ' ')
  world=$(grep -o "cells in [0-9]* zones.*terrain in [0-9]* ms" "$log" | head -1)
  status=$(grep "entities" "$log" | tail -1 | grep -o "| [0-9]* MB" | tail -1 | tr -d '| ')
  kill -TERM "$pid"
  wait "$pid" || true
  rm -rf "$data" "$log"
  echo "| ${size} x ${size} | $(echo "$world" | grep -o "[0-9]* zones" | cut -d" " -f1) | ${ready} ms | ${world} | $((rss / 1024)) MB | ${status:-?} |"
done
