#!/usr/bin/env bash
# Stop the Kafka broker started by infra/kafka/up.sh for this checkout (idempotent):
# SIGTERM (controlled shutdown), wait up to 30 s, then SIGKILL. Data stays.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"

STATE="$ROOT/.cache/kafka"
CONF="$STATE/server.properties"
PIDFILE="$STATE/kafka.pid"
STOP_TIMEOUT=${OSTINATO_KAFKA_STOP_TIMEOUT:-30}

log() { echo "[infra] $*"; }

is_ours() {  # the process runs kafka.Kafka with this checkout's config file
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "kafka.Kafka $CONF"
}

pid=""
if [ -f "$PIDFILE" ]; then
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  if [ -n "$pid" ] && ! is_ours "$pid"; then pid=""; fi
fi
if [ -z "$pid" ]; then
  # pid file lost or stale: look for a broker running with exactly our config file
  for p in /proc/[0-9]*; do
    if is_ours "${p#/proc/}" 2>/dev/null; then pid=${p#/proc/}; break; fi
  done
fi
if [ -z "$pid" ]; then
  rm -f "$PIDFILE"
  log "kafka not running (for this checkout)"
  exit 0
fi

log "stopping kafka (pid $pid)"
kill -TERM "$pid" 2>/dev/null || true
deadline=$(( $(date +%s) + STOP_TIMEOUT ))
while kill -0 "$pid" 2>/dev/null; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    log "kafka still running after ${STOP_TIMEOUT}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 1
    break
  fi
  sleep 0.5
done
rm -f "$PIDFILE"
log "kafka stopped"
