#!/usr/bin/env bash
# Stop the local infrastructure of this checkout (idempotent): jaeger, redis, kafka, postgres.
#   infra/down.sh                -> jaeger, redis, kafka, then postgres (whatever of them runs)
#   infra/down.sh postgres       -> only postgres
# Data is kept; see infra/README.md to reset it.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)

KNOWN_DOWN="jaeger redis kafka postgres"  # reverse of the start order
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
    *" $c "*) bash "$ROOT/infra/$c/down.sh" || { echo "[infra] ERROR: stopping $c failed" >&2; rc=1; } ;;
  esac
done
exit "$rc"
