#!/usr/bin/env bash
# Two builds of Grove side by side, each world alone (nobody connected) on
# one pinned core: the default world, then the peers bench's (20,000
# random walkers, no bacteria, no game), each build in turn, ROUNDS times;
# WORLDS="default walkers orchard_walkers" adds the walkers with the
# orchard on; default_full and walkers_full are the default world and the
# walkers with every actor taking every turn, seen or not
# (GROVE_UNSEEN_EVERY=1, as the peers bench runs them; a build older than
# the setting ignores it).
#
#   lab/bench/world_alone.sh BEFORE_DIR AFTER_DIR [ROUNDS]
#
# BEFORE_DIR and AFTER_DIR are checkouts, each built (`mix compile`).
# Each run starts the server as `make run` does, on core 0 with one
# scheduler that does not spin (as `mix grove.bench.players` starts it),
# and `world_alone.exs` measures it from inside after WARM seconds, over
# SECS seconds (defaults 20 and 20). Prints one line per run.
set -euo pipefail
before=$(cd "$1" && pwd)
after=$(cd "$2" && pwd)
rounds=${3:-2}
script=$(cd "$(dirname "$0")" && pwd)/world_alone.exs
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
erl_flags="+S 1:1 +sbwt none +sbwtdcpu none +sbwtdio none"

run() { # label dir world-env...
  local label=$1 dir=$2
  shift 2
  local line
  line=$(cd "$dir" && env "$@" GROVE_PORT=0 GROVE_DATA="$data/$label" \
    taskset -c 0 elixir --erl "$erl_flags" -S mix run --no-halt -r "$script" 2>&1 |
    grep '^WORLD_ALONE' || echo "WORLD_ALONE failed")
  echo "$label ($(git -C "$dir" rev-parse --short HEAD)): ${line#WORLD_ALONE }"
}

for round in $(seq 1 "$rounds"); do
  for world in ${WORLDS:-default walkers}; do
    case $world in
      default) world_env=() ;;
      walkers) world_env=(GROVE_ACTOR_KINDS=walker:20000 GROVE_LIFE=off GROVE_GAME=off) ;;
      orchard_walkers) world_env=(GROVE_ACTOR_KINDS=walker:20000 GROVE_LIFE=off) ;;
      default_full) world_env=(GROVE_UNSEEN_EVERY=1) ;;
      walkers_full) world_env=(GROVE_ACTOR_KINDS=walker:20000 GROVE_LIFE=off GROVE_GAME=off GROVE_UNSEEN_EVERY=1) ;;
      *) echo "unknown world: $world" >&2 && exit 1 ;;
    esac
    run "before $world $round" "$before" "${world_env[@]}"
    run "after $world $round" "$after" "${world_env[@]}"
  done
done
