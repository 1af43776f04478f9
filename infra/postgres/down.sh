#!/usr/bin/env bash
# Stop the PostgreSQL started by infra/postgres/up.sh for this checkout (idempotent).
# Data stays; see infra/README.md for a full reset.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"

PG_MAJOR=${OSTINATO_PG_MAJOR:-15}
PGBIN=/usr/lib/postgresql/$PG_MAJOR/bin
# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"

if [ "$(id -u)" -eq 0 ]; then
  as_pg() { (cd / && runuser -u postgres -- "$@"); }
else
  as_pg() { "$@"; }
fi

# Same places up.sh uses: <repo>/.cache/pg, or the /var/lib fallback.
HASH=$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)
PGDATA=""
for base in "$ROOT/.cache/pg" "/var/lib/ostinato/$HASH"; do
  if [ -f "$base/data/PG_VERSION" ]; then PGDATA="$base/data"; break; fi
done
if [ -z "$PGDATA" ]; then
  log "postgres: no data dir for this checkout, nothing to stop"
  exit 0
fi
# The supervisor first (infra/postgres/supervise.sh), or it would start the server again.
stop_ours "postgres supervisor" "$(dirname "$PGDATA")/supervisor.pid" "supervise.sh $PGDATA " 10
if [ ! -x "$PGBIN/pg_ctl" ]; then
  log "postgres: $PGBIN/pg_ctl missing, nothing to stop"
  exit 0
fi
if ! as_pg "$PGBIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; then
  log "postgres not running (data $PGDATA)"
  exit 0
fi
log "stopping postgres (data $PGDATA)"
if ! as_pg "$PGBIN/pg_ctl" -D "$PGDATA" stop -m fast -w -t 60 -s; then
  log "fast shutdown timed out; using immediate shutdown"
  as_pg "$PGBIN/pg_ctl" -D "$PGDATA" stop -m immediate -w -t 30 -s || die "could not stop postgres"
fi
log "postgres stopped"
