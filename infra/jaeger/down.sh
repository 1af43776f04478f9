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

# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"

# a background build and start of `make up` (infra/jaeger/background.sh) still under way
if bg=$(cat "$STATE/background.pid" 2>/dev/null) && kill -0 "$bg" 2>/dev/null \
    && tr '\0' ' ' <"/proc/$bg/cmdline" 2>/dev/null | grep -qF "infra/jaeger/up.sh"; then
  kill -TERM -- "-$bg" 2>/dev/null || true
  log "stopped the background jaeger build/start (process group $bg)"
fi
rm -f "$STATE/background.pid"
stop_ours jaeger "$PIDFILE" "--config $CONF " "$STOP_TIMEOUT"
