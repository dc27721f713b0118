# What the probe scripts beside it (knee_probe.sh, roam_probe.sh,
# stall_probe.sh, crowd_probe.sh) share; sourced by each, not run:
#
#   source "$(dirname "$0")/probe.sh"
#   probe_setup knee                    # ROOT, DIR, PORT; both projects built; in ROOT
#   probe_server GROVE_ACTORS=20000 -- mix run --no-halt -r lab/bench/knee_probe.exs
#   cd "$ROOT/lab" && probe_load --stages 4000 ...
#   probe_wait_done                     # the probe loaded into the server printed its last line

# The server's flags as `mix grove.bench.players` starts it: one scheduler
# that does not spin.
SERVER_ERL="+S 1:1 +sbwt none +sbwtdcpu none +sbwtdio none ${SERVER_ERL_MORE:-}"

# probe_setup NAME: ROOT (the repository), DIR (a new directory for the
# probe's files, /tmp/grove-NAME-probe.*), PORT (one for the server, at
# random); Grove and the lab compiled; the working directory ROOT.
probe_setup() {
  ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  DIR=$(mktemp -d "/tmp/grove-$1-probe.XXXXXX")
  PORT=$((20000 + RANDOM % 20000))
  (cd "$ROOT" && mix compile >/dev/null && cd lab && mix compile >/dev/null)
  cd "$ROOT"
}

# probe_server [NAME=value ...] -- COMMAND ...: the server, COMMAND run
# pinned to core 0 with GROVE_PORT, GROVE_DATA (in DIR) and
# ELIXIR_ERL_OPTIONS (SERVER_ERL) set, then the NAME=value given (which
# may override them), its output in DIR/server.log; SERVER its OS pid,
# stopped when the script exits. Returns once the server answers /readyz
# (or after 300 s).
probe_server() {
  local vars=()
  while [ "$1" != -- ]; do
    vars+=("$1")
    shift
  done
  shift
  env GROVE_PORT="$PORT" GROVE_DATA="$DIR/data" ELIXIR_ERL_OPTIONS="$SERVER_ERL" "${vars[@]}" \
    taskset -c 0 "$@" > "$DIR/server.log" 2>&1 &
  SERVER=$!
  trap 'kill -TERM $SERVER 2>/dev/null || true' EXIT
  for _ in $(seq 1 300); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/readyz" && break; sleep 1; done
}

# probe_load ARGS ...: `mix grove.load ws` (run from the lab) against the
# server, pinned to core 1 with one scheduler.
probe_load() {
  ELIXIR_ERL_OPTIONS="+S 1:1" taskset -c 1 mix grove.load ws --url "ws://127.0.0.1:$PORT/ws" \
    --server-pid "$SERVER" "$@"
}

# probe_wait_done: waits (60 s at the most) for the last line of the probe
# loaded into the server, `PROBE done`, in DIR/server.log.
probe_wait_done() {
  for _ in $(seq 1 60); do grep -q "PROBE done" "$DIR/server.log" && break; sleep 1; done
}
