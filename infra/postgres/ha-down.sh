#!/usr/bin/env bash
# Stop the HA profile's PostgreSQL started by infra/postgres/ha-up.sh (idempotent): the monitor
# first, so that no failover is decided while the nodes stop, then each node's pg_autoctl
# (keeper and postgres, fast shutdown; immediate if that takes over 60 s). Data is kept:
# `ha-up.sh` starts the same cluster again, the primary where it was.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"
# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"
# shellcheck source=infra/postgres/common.sh
. "$ROOT/infra/postgres/common.sh"
# shellcheck source=infra/postgres/ha-common.sh
. "$ROOT/infra/postgres/ha-common.sh"

command -v pg_autoctl >/dev/null || { log "pg_autoctl not installed: nothing to stop"; exit 0; }

for name in monitor node1 node2; do
  pgdata=$HA_BASE/$name
  [ -f "$pgdata/PG_VERSION" ] || continue
  if ! autoctl status --pgdata "$pgdata" >/dev/null 2>&1; then
    log "pg_autoctl $name not running"
    continue
  fi
  log "stopping pg_autoctl $name"
  autoctl stop --pgdata "$pgdata" >/dev/null 2>&1 || true
  deadline=$(( $(date +%s) + 60 ))
  while autoctl status --pgdata "$pgdata" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "pg_autoctl $name still running after 60s: immediate stop"
      autoctl stop --immediate --pgdata "$pgdata" >/dev/null 2>&1 || true
      sleep 2
      break
    fi
    sleep 0.3
  done
  # a keeper killed with -9 leaves its postgres behind: stop that one too
  if as_pg "$PGBIN/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
    as_pg "$PGBIN/pg_ctl" -D "$pgdata" -m fast -w -t 60 stop >/dev/null \
      || as_pg "$PGBIN/pg_ctl" -D "$pgdata" -m immediate -w stop >/dev/null || true
  fi
  log "pg_autoctl $name stopped"
done
