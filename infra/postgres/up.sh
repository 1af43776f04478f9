#!/usr/bin/env bash
# Start a local PostgreSQL 15 for Ostinato (idempotent).
#   - listens on 127.0.0.1:$OSTINATO_PG_PORT (default 15432) only, trust auth on loopback
#   - data/logs/socket under <repo>/.cache/pg (or /var/lib/ostinato/<hash> if the
#     postgres OS user cannot traverse the checkout's path)
#   - creates roles `ostinato` (SUPERUSER, administration), `ostinato_owner` (owns the schema:
#     migrations) and `ostinato_app` (the services) and database `ostinato` if missing
#   - starts infra/postgres/supervise.sh, which starts the server again whenever it has
#     stopped (killed, or stopped by a PANIC on a full disk); OSTINATO_PG_SUPERVISE=0: none
# Runs the server as the `postgres` OS user when invoked as root.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"

PORT=$OSTINATO_PG_PORT
START_TIMEOUT=${OSTINATO_PG_START_TIMEOUT:-60}

# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"
# shellcheck source=infra/postgres/common.sh
. "$ROOT/infra/postgres/common.sh"   # PGBIN, pg_install, as_pg, pg_own, pg_base, ensure_role_and_db

# --- binaries -----------------------------------------------------------------
pg_install "postgresql-$PG_MAJOR:$PGBIN/postgres"

# --- locations ----------------------------------------------------------------
STATE="$ROOT/.cache/pg"
HASH=$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)
BASE=$(pg_base "$STATE")  # /var/lib/ostinato/$HASH if postgres cannot traverse the checkout
PGDATA="$BASE/data"
LOGDIR="$BASE/log"
SOCKDIR="$BASE/run"
# unix socket paths are limited to 107 bytes (".s.PGSQL.<port>.lock" included)
if [ $(( ${#SOCKDIR} + 21 )) -gt 100 ]; then
  SOCKDIR="/tmp/ostinato-pg-$HASH"
fi
LOGFILE="$LOGDIR/postgres.log"
INIT_MARK="$BASE/initialized"

# ensure_supervisor: the supervisor of this checkout's server is running (its own pid file,
# found by the data folder on its command line), else start it, out of the caller's session.
ensure_supervisor() {
  [ "${OSTINATO_PG_SUPERVISE:-1}" = 1 ] || return 0
  local pidfile="$BASE/supervisor.pid" pid
  pid=$(find_ours "$pidfile" "supervise.sh $PGDATA ")
  if [ -n "$pid" ]; then
    log "postgres supervisor running (pid $pid)"
    return 0
  fi
  setsid nohup "$ROOT/infra/postgres/supervise.sh" "$PGDATA" "$LOGFILE" "$PORT" \
    >> "$LOGDIR/supervisor.log" 2>&1 < /dev/null &
  echo $! > "$pidfile"
  log "postgres supervisor started (pid $!, log $LOGDIR/supervisor.log)"
}

ours_running() {
  [ -f "$PGDATA/PG_VERSION" ] && as_pg "$PGBIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1
}

# --- already running? -----------------------------------------------------------
# (a server that is still starting, or dying after a crash, gets START_TIMEOUT to settle)
deadline=$(( $(date +%s) + START_TIMEOUT ))
while ours_running; do
  if "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -t 2; then
    ensure_role_and_db "$PORT"
    log "postgres already running on 127.0.0.1:$PORT (data $PGDATA)"
    ensure_supervisor
    exit 0
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    die "postgres of this checkout is running but does not answer on 127.0.0.1:$PORT (port changed? run infra/postgres/down.sh first); see $LOGFILE"
  fi
  sleep 1
done

if port_open "$PORT"; then
  # Something else owns the port: reuse it if it is a PostgreSQL we can use.
  if "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -t 5 \
     && "$PGBIN/psql" -X -q -h 127.0.0.1 -p "$PORT" -U ostinato -d ostinato -tAc 'SELECT 1' >/dev/null 2>&1; then
    log "postgres on 127.0.0.1:$PORT was not started by this checkout ($ROOT); reusing it"
    ensure_role_and_db "$PORT"   # another clone's server, maybe from before the roles
    exit 0
  fi
  die "port 127.0.0.1:$PORT is taken by another process that is not a usable PostgreSQL (role/db ostinato); free it or set OSTINATO_PG_PORT"
fi

# --- directories -------------------------------------------------------------------
if [ "$BASE" != "$STATE" ]; then
  log "postgres cannot traverse $STATE; keeping its data in $BASE"
  mkdir -p "$BASE"
  printf '%s\n' "$ROOT" > "$BASE/checkout"
  pg_own "$BASE"
fi
for d in "$LOGDIR" "$SOCKDIR"; do
  mkdir -p "$d"
  pg_own "$d"
  chmod 0755 "$d"
done

# --- initdb (once) ----------------------------------------------------------------
t0=$(date +%s)
if [ ! -f "$INIT_MARK" ] || [ ! -f "$PGDATA/PG_VERSION" ]; then
  log "initdb $PGDATA (UTF8, locale C, trust on loopback)"
  rm -rf "$PGDATA" "$INIT_MARK"   # an unfinished earlier init: nothing to keep
  mkdir -p "$PGDATA"
  pg_own "$PGDATA"
  chmod 0700 "$PGDATA"
  as_pg "$PGBIN/initdb" -D "$PGDATA" --username=postgres --auth=trust \
    --encoding=UTF8 --locale=C >"$LOGDIR/initdb.log" 2>&1 \
    || { tail -n 30 "$LOGDIR/initdb.log" >&2; die "initdb failed"; }
  cat > "$PGDATA/pg_hba.conf" <<'EOF'
# Managed by infra/postgres/up.sh: local development/CI only, loopback + socket.
# TYPE  DATABASE  USER  ADDRESS        METHOD
local   all       all                  trust
host    all       all   127.0.0.1/32   trust
EOF
  echo "include_if_exists = 'ostinato.conf'" >> "$PGDATA/postgresql.conf"
  pg_own "$PGDATA/pg_hba.conf"
  touch "$INIT_MARK"
fi
if [ "$(cat "$PGDATA/PG_VERSION")" != "$PG_MAJOR" ]; then
  die "$PGDATA was created by PostgreSQL $(cat "$PGDATA/PG_VERSION"), not $PG_MAJOR; reset with: infra/postgres/down.sh && rm -rf $PGDATA $INIT_MARK"
fi

# Settings are rewritten on every start so that edits here (and the port) apply.
cat > "$PGDATA/ostinato.conf" <<EOF
# Managed by infra/postgres/up.sh (rewritten on every start).
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$SOCKDIR'
max_connections = 300
shared_buffers = 512MB
effective_cache_size = 8GB
work_mem = 8MB
maintenance_work_mem = 256MB
max_wal_size = 2GB
# durability is a product invariant: never turn these off
fsync = on
synchronous_commit = on
full_page_writes = on
timezone = 'UTC'
log_timezone = 'UTC'
log_line_prefix = '%m [%p] %q%u@%d '
log_lock_waits = on
# the queue tables set their own vacuum thresholds (migration 0035); look for them often
autovacuum_naptime = 10s
# statements per run in bench/ (cheap; the extension is created only where read)
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = top
EOF
pg_own "$PGDATA/ostinato.conf"

# --- start --------------------------------------------------------------------------
log "starting postgres on 127.0.0.1:$PORT"
# setsid: the server leaves the caller's session, so a Ctrl-C in `make` does not kill it.
as_pg setsid -w "$PGBIN/pg_ctl" -D "$PGDATA" -l "$LOGFILE" -w -t "$START_TIMEOUT" -s start \
  || { tail -n 30 "$LOGFILE" >&2 || true; die "pg_ctl start failed (log: $LOGFILE)"; }

deadline=$(( $(date +%s) + START_TIMEOUT ))
until "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -t 2; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    tail -n 30 "$LOGFILE" >&2 || true
    die "postgres did not become ready within ${START_TIMEOUT}s (log: $LOGFILE)"
  fi
  sleep 0.5
done
ensure_role_and_db "$PORT"
ensure_supervisor
log "postgres ready on 127.0.0.1:$PORT in $(( $(date +%s) - t0 ))s (socket $SOCKDIR, data $PGDATA, url $OSTINATO_DATABASE_URL)"
