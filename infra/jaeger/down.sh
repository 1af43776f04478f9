#!/usr/bin/env bash
# Stop the Jaeger started by infra/jaeger/up.sh for this checkout (idempotent):
# SIGTERM, wait up to 15 s, then SIGKILL. Traces are in memory only, so they are gone.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"

CONF="$ROOT/infra/jaeger/config.yaml"
STATE="$ROOT/.cache/jaeger"
PIDFILE="$STATE/jaeger.pid"
STOP_TIMEOUT=${OSTINATO_JAEGER_STOP_TIMEOUT:-15}

log() { echo "[infra] $*"; }

is_ours() {  # the process runs jaeger with this checkout's config file
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "--config $CONF "
}

pid=""
if [ -f "$PIDFILE" ]; then
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  if [ -n "$pid" ] && ! is_ours "$pid"; then pid=""; fi
fi
if [ -z "$pid" ]; then
  # pid file lost or stale: look for a jaeger running with exactly our config file
  for p in /proc/[0-9]*; do
    if is_ours "${p#/proc/}" 2>/dev/null; then pid=${p#/proc/}; break; fi
  done
fi
if [ -z "$pid" ]; then
  rm -f "$PIDFILE"
  log "jaeger not running (for this checkout)"
  exit 0
fi

log "stopping jaeger (pid $pid)"
kill -TERM "$pid" 2>/dev/null || true
deadline=$(( $(date +%s) + STOP_TIMEOUT ))
while kill -0 "$pid" 2>/dev/null; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    log "jaeger still running after ${STOP_TIMEOUT}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 1
    break
  fi
  sleep 0.2
done
rm -f "$PIDFILE"
log "jaeger stopped"
