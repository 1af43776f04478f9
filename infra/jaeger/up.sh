#!/usr/bin/env bash
# Start a local Jaeger v2 all-in-one (in-memory storage) for Ostinato's traces (idempotent).
#   - binary: built once per machine from the Go module proxy by infra/jaeger/build.sh
#     ($OSTINATO_CACHE/bin/jaeger-<version>; Go caches in $OSTINATO_CACHE/go/{mod,build})
#   - config: infra/jaeger/config.yaml, every listener on 127.0.0.1: OTLP HTTP 4318
#     ($OSTINATO_JAEGER_OTLP), OTLP gRPC 4317, query 16686 ($OSTINATO_JAEGER_QUERY), health 13133
#   - state: <repo>/.cache/jaeger/{jaeger.pid,jaeger.log}; traces are in memory only
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"

CONF="$ROOT/infra/jaeger/config.yaml"
STATE="$ROOT/.cache/jaeger"
OUT="$STATE/jaeger.log"
PIDFILE="$STATE/jaeger.pid"
HEALTH="http://127.0.0.1:13133/status"
START_TIMEOUT=${OSTINATO_JAEGER_START_TIMEOUT:-60}

# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"

command -v curl >/dev/null 2>&1 || die "curl is needed (apt-get install curl)"

# The ports are fixed in config.yaml; the URLs the tests and services use must match them.
case "$OSTINATO_JAEGER_OTLP" in
  http://127.0.0.1:4318|http://127.0.0.1:4318/|http://localhost:4318|http://localhost:4318/) ;;
  *) die "OSTINATO_JAEGER_OTLP=$OSTINATO_JAEGER_OTLP: the local Jaeger takes OTLP/HTTP on http://127.0.0.1:4318 only (see infra/jaeger/config.yaml)" ;;
esac
case "$OSTINATO_JAEGER_QUERY" in
  http://127.0.0.1:16686|http://127.0.0.1:16686/|http://localhost:16686|http://localhost:16686/) ;;
  *) die "OSTINATO_JAEGER_QUERY=$OSTINATO_JAEGER_QUERY: the local Jaeger serves its query API on http://127.0.0.1:16686 only (see infra/jaeger/config.yaml)" ;;
esac
QUERY="http://127.0.0.1:16686"
PORTS=(4317 4318 16685 16686 13132 13133 8888)

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
healthy() { curl -fsS -o /dev/null --max-time 2 "$HEALTH" 2>/dev/null; }
query_answers() { curl -fsS -o /dev/null --max-time 2 "$QUERY/api/services" 2>/dev/null; }
jaeger_ready() { healthy && query_answers; }
OURS="--config $CONF "  # the jaeger started from this checkout: its command line names our config
wait_ready() {  # $1 = pid, $2 = start time
  wait_server jaeger "$1" "$2" "$START_TIMEOUT" jaeger_ready \
    "health $HEALTH, OTLP $OSTINATO_JAEGER_OTLP, query $OSTINATO_JAEGER_QUERY" \
    infra/jaeger/down.sh
}

mkdir -p "$STATE"

# --- already running? ----------------------------------------------------------------------
pid=$(find_ours "$PIDFILE" "$OURS")
if [ -n "$pid" ]; then
  log "jaeger already running (pid $pid); checking it answers"
  wait_ready "$pid" "$(date +%s)"
  exit 0
fi
rm -f "$PIDFILE"
if port_open 13133 || port_open 4318 || port_open 16686; then
  if healthy && query_answers && port_open 4318; then
    log "jaeger on 127.0.0.1 (health 13133, OTLP 4318, query 16686) was not started by this checkout ($ROOT); reusing it"
    exit 0
  fi
fi
for p in "${PORTS[@]}"; do
  port_open "$p" && die "port 127.0.0.1:$p (used by infra/jaeger/config.yaml) is taken by a process that is not a usable Jaeger; free it"
done

# --- binary (built once per machine) -------------------------------------------------------
BIN=$(bash "$ROOT/infra/jaeger/build.sh")

# --- start -----------------------------------------------------------------------------------
t0=$(date +%s)
log "starting jaeger ($(basename "$BIN"), in-memory) on 127.0.0.1 (log $OUT)"
start_server infra/jaeger/up.sh "$PIDFILE" "$OUT" "$BIN" --config "$CONF"
wait_ready "$SERVER_PID" "$t0"
