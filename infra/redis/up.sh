#!/usr/bin/env bash
# Start a local Redis for the benchmarks only (Celery's broker, bench/peers/celery_peer.py);
# idempotent. Ostinato itself never uses Redis.
#   - listens on 127.0.0.1:$OSTINATO_REDIS_PORT (default 16379) only
#   - data, pid file and log under <repo>/.cache/redis; Redis's default persistence
#     (periodic snapshots, no append-only file)
#   - installs the Debian package redis-server with apt-get when the binary is missing
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"
# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"

PORT=$OSTINATO_REDIS_PORT
STATE="$ROOT/.cache/redis"
PIDFILE="$STATE/redis.pid"
OUT="$STATE/redis.log"

if ! command -v redis-server >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || die "redis-server not found (install the Debian package redis-server)"
  log "installing redis-server with apt-get (one-off)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  # The package may start its own server on :6379; the benchmarks use their own.
  if command -v systemctl >/dev/null 2>&1; then systemctl disable --now redis-server 2>/dev/null || true; fi
fi

mkdir -p "$STATE"
pid=$(find_ours "$PIDFILE" "redis-server" "$STATE")  # its data folder is its working dir
if [ -n "$pid" ] && redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null 2>&1; then
  log "redis already running on 127.0.0.1:$PORT (pid $pid)"
  exit 0
fi
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  die "port 127.0.0.1:$PORT is taken by another process; set OSTINATO_REDIS_PORT"
fi

OUT_OFFSET=$(stat -c %s "$OUT" 2>/dev/null || echo 0)
log "starting redis on 127.0.0.1:$PORT (data $STATE)"
redis-server --bind 127.0.0.1 --port "$PORT" --dir "$STATE" --pidfile "$PIDFILE" \
  --logfile "$OUT" --daemonize yes --protected-mode yes
for _ in $(seq 1 50); do
  if redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null 2>&1; then
    log "redis ready on 127.0.0.1:$PORT (pid $(cat "$PIDFILE" 2>/dev/null || echo '?'))"
    exit 0
  fi
  sleep 0.2
done
show_log
die "redis did not answer on 127.0.0.1:$PORT within 10s"
