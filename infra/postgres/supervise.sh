#!/usr/bin/env bash
# Keep one local PostgreSQL running (the single-server profile; `make up HA=1` has a failover
# manager instead): every OSTINATO_PG_SUPERVISE_SECONDS (2) it asks `pg_ctl status`, and when
# the server has stopped (its pid file gone, or the postmaster dead: killed, or stopped itself
# after a PANIC such as "could not write to WAL" on a full disk) it starts it again, retrying
# with a delay doubling to 60 s while the start fails (the disk still full). Each restart and
# each failed attempt is a log line. It stops on SIGTERM, and by itself when the data folder is
# removed.
#   infra/postgres/supervise.sh PGDATA LOGFILE PORT
# Started by infra/postgres/up.sh (pid file <base>/supervisor.pid, log <base>/log/supervisor.log)
# and stopped by infra/postgres/down.sh before it stops the server, so a stop on purpose stays.
set -uo pipefail

PGDATA=$1
LOGFILE=$2
PORT=$3
PG_MAJOR=${OSTINATO_PG_MAJOR:-15}
PGBIN=${OSTINATO_PGBIN:-/usr/lib/postgresql/$PG_MAJOR/bin}
INTERVAL=${OSTINATO_PG_SUPERVISE_SECONDS:-2}
START_TIMEOUT=${OSTINATO_PG_START_TIMEOUT:-60}
MAX_DELAY=60

log() { echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) [postgres-supervisor] $*"; }
if [ "$(id -u)" -eq 0 ]; then
  as_pg() { (cd / && runuser -u postgres -- "$@"); }
else
  as_pg() { "$@"; }
fi

trap 'kill "$!" 2>/dev/null; log "stopping (data $PGDATA)"; exit 0' TERM INT
log "watching postgres on 127.0.0.1:$PORT (data $PGDATA) every ${INTERVAL}s"
delay=$INTERVAL
while true; do
  sleep "$delay" &
  wait $!  # (a sleep in the background: the TERM trap runs at once, not after the sleep)
  if [ ! -f "$PGDATA/PG_VERSION" ]; then
    log "data folder $PGDATA is gone; exiting"
    exit 0
  fi
  if as_pg "$PGBIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; then
    delay=$INTERVAL
    continue
  fi
  log "postgres is not running (data $PGDATA); restarting it"
  if as_pg setsid "$PGBIN/pg_ctl" -D "$PGDATA" -l "$LOGFILE" -w -t "$START_TIMEOUT" -s start \
     && "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -t 5; then
    log "postgres restarted on 127.0.0.1:$PORT (pid $(head -n 1 "$PGDATA/postmaster.pid" 2>/dev/null))"
    delay=$INTERVAL
  else
    delay=$(( ${delay%.*} * 2 ))
    [ "$delay" -ge 1 ] || delay=1
    [ "$delay" -le "$MAX_DELAY" ] || delay=$MAX_DELAY
    log "restart failed (see $LOGFILE); trying again in ${delay}s"
  fi
done
