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

# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"

stop_ours kafka "$PIDFILE" "kafka.Kafka $CONF" "$STOP_TIMEOUT"
