#!/usr/bin/env bash
# Temporal's development server, the durable-workflow peer of bench/workflows.py (benchmarks
# only: `make bench-infra` runs `infra/temporal.sh up`; `make up` and `make test` never build it).
#   infra/temporal.sh build   build the CLI once per machine (prints the binary's path)
#   infra/temporal.sh up      build if needed, then start `temporal server start-dev` (idempotent)
#   infra/temporal.sh down    stop the server this checkout started (idempotent)
#   infra/temporal.sh status  say whether it runs, and where
#   - binary: github.com/temporalio/cli/cmd/temporal v$TEMPORAL_VERSION, from the Go module
#     proxy with the machine's Go (module infra/temporal/go.mod + go.sum), into
#     $OSTINATO_CACHE/bin/temporal-$TEMPORAL_VERSION; `go_build` in infra/lib.sh, at nice 19
#     (the machine is shared); build log $OSTINATO_CACHE/go-build-temporal-<version>.log
#   - server: frontend gRPC on 127.0.0.1:$OSTINATO_TEMPORAL_PORT, HTTP API and metrics on the
#     two ports after it, no web UI; its state in SQLite, .cache/temporal/temporal.db (WAL
#     journal), log and pid beside it. The database is kept across restarts; `down` then
#     `rm -rf .cache/temporal` starts afresh.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"

TEMPORAL_VERSION=1.5.1          # github.com/temporalio/cli, as infra/temporal/go.mod requires
MODDIR="$ROOT/infra/temporal"
STATE="$ROOT/.cache/temporal"
OUT="$STATE/temporal.log"
PIDFILE="$STATE/temporal.pid"
DB="$STATE/temporal.db"
START_TIMEOUT=${OSTINATO_TEMPORAL_START_TIMEOUT:-120}

# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"

build() {
  grep -qE "^[[:space:]]*github.com/temporalio/cli v$TEMPORAL_VERSION( |$)" "$MODDIR/go.mod" \
    || die "infra/temporal/go.mod does not require github.com/temporalio/cli v$TEMPORAL_VERSION; update TEMPORAL_VERSION in infra/temporal.sh"
  # the build (go and its compilers inherit it) yields the CPU; $BASHPID: this function's own
  # process under `up`'s $(build), so the server that `up` starts later keeps its priority
  renice -n 19 -p "$BASHPID" >/dev/null
  GO_BUILD_VERSION_ARG=--version go_build temporal "$TEMPORAL_VERSION" "$MODDIR" \
    github.com/temporalio/cli/cmd/temporal 1.25.0 \
    "-s -w -X github.com/temporalio/cli/temporalcli.Version=$TEMPORAL_VERSION" GOTOOLCHAIN=local
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
frontend_up() { port_open "$OSTINATO_TEMPORAL_PORT"; }

up() {
  local bin pid t0
  bin=$(build)
  mkdir -p "$STATE"
  pid=$(find_ours "$PIDFILE" "--db-filename $DB ")
  if [ -n "$pid" ]; then
    log "temporal already running (pid $pid, 127.0.0.1:$OSTINATO_TEMPORAL_PORT)"
    return 0
  fi
  for port in "$OSTINATO_TEMPORAL_PORT" "$OSTINATO_TEMPORAL_HTTP_PORT" "$OSTINATO_TEMPORAL_METRICS_PORT"; do
    port_open "$port" && die "port $port is taken by another process (set OSTINATO_TEMPORAL_PORT and its neighbours)"
  done
  t0=$(date +%s)
  start_server temporal "$PIDFILE" "$OUT" "$bin" server start-dev --ip 127.0.0.1 --headless \
    --port "$OSTINATO_TEMPORAL_PORT" --http-port "$OSTINATO_TEMPORAL_HTTP_PORT" \
    --metrics-port "$OSTINATO_TEMPORAL_METRICS_PORT" --db-filename "$DB" \
    --sqlite-pragma journal_mode=wal
  wait_server temporal "$SERVER_PID" "$t0" "$START_TIMEOUT" frontend_up \
    "127.0.0.1:$OSTINATO_TEMPORAL_PORT, $DB" "infra/temporal.sh down"
}

down() {
  stop_ours temporal "$PIDFILE" "--db-filename $DB " 20
}

status() {
  local pid
  pid=$(find_ours "$PIDFILE" "--db-filename $DB ")
  if [ -n "$pid" ]; then
    echo "temporal running (pid $pid) on 127.0.0.1:$OSTINATO_TEMPORAL_PORT, state $DB"
  else
    echo "temporal not running (for this checkout)"
  fi
}

case "${1:-}" in
  build) build ;;
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: infra/temporal.sh build|up|down|status" >&2; exit 2 ;;
esac
