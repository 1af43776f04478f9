#!/usr/bin/env bash
# Tracing for `make up` without making a newcomer wait for a Go build.
#   - the binary is cached (any earlier build on this machine): start Jaeger now (seconds)
#   - it is not: build and start it in the background, detached, and return at once; the
#     services already export to $OSTINATO_JAEGER_OTLP, so traces appear once Jaeger answers
#     (spans of the minutes before are dropped by the exporter, nothing else is affected)
# `make up TRACING=1` waits for the build instead (infra/up.sh ... jaeger).
# Log of the background build and start: .cache/logs/jaeger-background.log
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"
LOG="$ROOT/.cache/logs/jaeger-background.log"
mkdir -p "$(dirname "$LOG")"

version=$(sed -nE 's/^JAEGER_VERSION=([^ ]+).*/\1/p' "$ROOT/infra/jaeger/build.sh")
if [ -x "$OSTINATO_CACHE/bin/jaeger-$version" ]; then
  exec bash "$ROOT/infra/jaeger/up.sh"
fi
echo "[infra] tracing: building jaeger $version in the background (several minutes, once per" \
     "machine; log $LOG); traces reach $OSTINATO_JAEGER_QUERY once it is up"
mkdir -p "$ROOT/.cache/jaeger"
# its own session (setsid): `make down` stops the whole group, the go build with it
nohup setsid bash "$ROOT/infra/jaeger/up.sh" >>"$LOG" 2>&1 </dev/null &
echo $! >"$ROOT/.cache/jaeger/background.pid"
