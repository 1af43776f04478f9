#!/usr/bin/env bash
# Stop the local infrastructure of this checkout (idempotent): the benchmarks' Temporal dev
# server, the S3 server, jaeger, redis, the HA profile's three Kafka nodes, kafka, the HA
# profile's PostgreSQL, postgres.
#   infra/down.sh                -> temporal, s3, jaeger, redis, kafka-ha, kafka, postgres-ha,
#                                   then postgres
#   infra/down.sh postgres       -> only postgres
# Data is kept; see infra/README.md to reset it.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"

KNOWN_DOWN="temporal s3 jaeger redis kafka-ha kafka postgres-ha postgres"  # reverse of the start order
read -r -a components <<<"${*//,/ }"
[ "${#components[@]}" -gt 0 ] || read -r -a components <<<"$KNOWN_DOWN"
for c in "${components[@]}"; do
  case " $KNOWN_DOWN " in
    *" $c "*) ;;
    *) echo "[infra] ERROR: unknown component '$c' (known: $KNOWN_DOWN)" >&2; exit 2 ;;
  esac
done

rc=0
for c in $KNOWN_DOWN; do
  case " ${components[*]} " in
    *" $c "*)
      # the HA profile's parts are skipped where they were never started (no state folder)
      case "$c" in
        kafka-ha) [ -d "${OSTINATO_KAFKA_HA_DIR:-/nonexistent}" ] || continue
                  script=("$ROOT/infra/kafka/cluster.sh" down) ;;
        postgres-ha) [ -d "${OSTINATO_PG_HA_DIR:-/nonexistent}" ] || continue
                     script=("$ROOT/infra/postgres/ha-down.sh") ;;
        temporal) script=("$ROOT/infra/temporal.sh" down) ;;
        *) script=("$ROOT/infra/$c/down.sh") ;;
      esac
      bash "${script[@]}" || { echo "[infra] ERROR: stopping $c failed" >&2; rc=1; } ;;
  esac
done
exit "$rc"
