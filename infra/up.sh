#!/usr/bin/env bash
# Start the local infrastructure (idempotent), in order.
#   infra/up.sh                  -> postgres, then kafka (the default set)
#   infra/up.sh kafka            -> only kafka (components: postgres kafka redis jaeger s3; "a,b" works too)
#   infra/up.sh postgres kafka jaeger -> all three (jaeger: builds its binary once per machine)
#   infra/up.sh s3               -> SeaweedFS's S3 gateway, the object store (infra/s3/up.sh; builds
#                                its binary once per machine, like jaeger)
#   infra/up.sh postgres-ha kafka-ha -> the HA profile: PostgreSQL primary + synchronous standby
#                                (infra/postgres/ha-up.sh), three Kafka nodes (infra/kafka/cluster.sh)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"

KNOWN="postgres postgres-ha kafka kafka-ha redis jaeger s3"  # start order (redis: benchmarks only)
DEFAULT="postgres kafka"
read -r -a components <<<"${*//,/ }"
[ "${#components[@]}" -gt 0 ] || read -r -a components <<<"$DEFAULT"
for c in "${components[@]}"; do
  case " $KNOWN " in
    *" $c "*) ;;
    *) echo "[infra] ERROR: unknown component '$c' (known: $KNOWN)" >&2; exit 2 ;;
  esac
done

t0=$(date +%s)
for c in $KNOWN; do                       # always in dependency order
  case " ${components[*]} " in
    *" $c "*)
      case "$c" in
        kafka-ha) bash "$ROOT/infra/kafka/cluster.sh" up ;;
        postgres-ha) bash "$ROOT/infra/postgres/ha-up.sh" ;;
        *) bash "$ROOT/infra/$c/up.sh" ;;
      esac ;;
  esac
done
summary="OSTINATO_DATABASE_URL=$OSTINATO_DATABASE_URL OSTINATO_KAFKA_BOOTSTRAP=$OSTINATO_KAFKA_BOOTSTRAP"
case " ${components[*]} " in
  *" kafka-ha "*) summary="$summary OSTINATO_KAFKA_HA_BOOTSTRAP=$OSTINATO_KAFKA_HA_BOOTSTRAP" ;;
esac
case " ${components[*]} " in
  *" jaeger "*) summary="$summary OSTINATO_JAEGER_OTLP=$OSTINATO_JAEGER_OTLP OSTINATO_JAEGER_QUERY=$OSTINATO_JAEGER_QUERY" ;;
esac
case " ${components[*]} " in
  *" s3 "*) summary="$summary OSTINATO_S3_ENDPOINT=$OSTINATO_S3_ENDPOINT (bucket $OSTINATO_S3_BUCKET)" ;;
esac
echo "[infra] up (${components[*]}) in $(( $(date +%s) - t0 ))s: $summary"
