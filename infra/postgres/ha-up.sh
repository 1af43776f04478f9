#!/usr/bin/env bash
# Start the HA profile's PostgreSQL 15 (idempotent): pg_auto_failover's monitor and two nodes,
# a primary and a synchronous standby, each a `pg_autoctl run` (keeper + postgres) on 127.0.0.1.
#   - ports: monitor $OSTINATO_PG_HA_MONITOR_PORT (15440), nodes $OSTINATO_PG_HA_PORTS
#     (15441,15442); state in $OSTINATO_PG_HA_DIR (.cache/pg-ha): monitor/, node1/, node2/
#     (data folders), log/, xdg/ (pg_autoctl's own config, state and pid files)
#   - installs postgresql-15-auto-failover and pg-auto-failover-cli (Debian) if missing
#   - the same roles and database as infra/postgres/up.sh, on the primary (ensure_role_and_db);
#     the standby gets them by replication
#   - the monitor fails over after OSTINATO_PG_HA_UNHEALTHY_MS (5000) without a health check
#     or a keeper report, then waits OSTINATO_PG_HA_DEMOTE_MS (5000) for the old primary to
#     stand down, longer than a keeper takes to demote a primary cut off from everyone
#     (OSTINATO_PG_HA_PARTITION_SECONDS, 3): no two nodes take writes at once
#   - prints the services' multi-host URL (target_session_attrs=read-write)
# infra/README.md "HA PostgreSQL" says why pg_auto_failover and not Patroni + etcd.
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

START_TIMEOUT=${OSTINATO_PG_START_TIMEOUT:-60}
UNHEALTHY_MS=${OSTINATO_PG_HA_UNHEALTHY_MS:-5000}
DEMOTE_MS=${OSTINATO_PG_HA_DEMOTE_MS:-5000}
PARTITION_SECONDS=${OSTINATO_PG_HA_PARTITION_SECONDS:-3}

pg_install "postgresql-$PG_MAJOR:$PGBIN/postgres" \
  "postgresql-$PG_MAJOR-auto-failover:/usr/lib/postgresql/$PG_MAJOR/lib/pgautofailover.so" \
  "pg-auto-failover-cli:/usr/bin/pg_autoctl"

for p in "$MONITOR_PORT" "${NODE_PORTS[@]}"; do
  [ "$p" -lt 32768 ] || die "port $p lies in Linux's ephemeral range: pick one below 32768"
done
for d in "$HA_BASE" "$LOGDIR" "$XDG/config" "$XDG/data" "$XDG/run"; do
  mkdir -p "$d"
  pg_own "$d"
done
[ "$HA_BASE" = "$OSTINATO_PG_HA_DIR" ] || printf '%s\n' "$ROOT" > "$HA_BASE/checkout"

# settings NAME: our settings for a server, rewritten on every start, included after
# pg_auto_failover's (so ours win where both speak: listen_addresses, memory).
settings() {
  local pgdata=$HA_BASE/$1
  grep -q "ostinato-ha.conf" "$pgdata/postgresql.conf" \
    || echo "include_if_exists = 'ostinato-ha.conf'" >> "$pgdata/postgresql.conf"
  cat > "$pgdata/ostinato-ha.conf" <<EOF
# Managed by infra/postgres/ha-up.sh (rewritten on every start).
listen_addresses = '127.0.0.1'
max_connections = 300
shared_buffers = 256MB
effective_cache_size = 2GB
work_mem = 8MB
maintenance_work_mem = 128MB
# durability is a product invariant: never turn these off (pg_auto_failover sets
# synchronous_standby_names on the primary while a standby is in quorum)
fsync = on
synchronous_commit = on
full_page_writes = on
timezone = 'UTC'
log_timezone = 'UTC'
autovacuum_naptime = 10s
EOF
  pg_own "$pgdata/ostinato-ha.conf" "$pgdata/postgresql.conf"
}

# run NAME: start `pg_autoctl run` for NAME unless it runs, out of the caller's session.
run() {
  if autoctl status --pgdata "$HA_BASE/$1" >/dev/null 2>&1; then
    log "pg_autoctl $1 running"
    return 0
  fi
  settings "$1"
  as_pg env "XDG_CONFIG_HOME=$XDG/config" "XDG_DATA_HOME=$XDG/data" "XDG_RUNTIME_DIR=$XDG/run" \
    setsid nohup pg_autoctl run --pgdata "$HA_BASE/$1" \
    >> "$LOGDIR/$1.log" 2>&1 < /dev/null &
  log "pg_autoctl $1 started (log $LOGDIR/$1.log)"
}

# wait_for WHAT SQL: until the monitor answers SQL with 't' (START_TIMEOUT, plus a standby's
# base backup: generous), else show the logs and fail. Every 5 s it hurries a checkpoint that
# a rejoining standby's base backup waits for.
wait_for() {
  local what=$1 sql=$2 deadline=$(( $(date +%s) + 3 * START_TIMEOUT ))
  until [ "$(monitor_sql "$sql" 2>/dev/null)" = t ]; do
    hurry_base_backup
    if [ "$(date +%s)" -ge "$deadline" ]; then
      monitor_sql "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node" >&2 || true
      for n in monitor node1 node2; do tail -n 15 "$LOGDIR/$n.log" >&2 2>/dev/null || true; done
      die "$what: not within $(( 3 * START_TIMEOUT ))s (logs in $LOGDIR)"
    fi
    sleep 0.5
  done
}

# hurry_base_backup: a node that rejoins after a failover (the old primary) takes a base
# backup, and pg_basebackup starts it with a *spread* checkpoint on the primary:
# checkpoint_completion_target of checkpoint_timeout, 4.5 minutes. An immediate CHECKPOINT
# asked meanwhile makes the running one finish unthrottled (the standby was back in 10 s, not
# after infra's 180 s). Only while a node is in the monitor's backup states, every 5 s.
HURRIED_AT=0
hurry_base_backup() {
  local primary now
  now=$(date +%s)
  [ "$now" -ge $(( HURRIED_AT + 5 )) ] || return 0
  HURRIED_AT=$now
  primary=$(monitor_sql "SELECT p.nodeport FROM pgautofailover.node p WHERE p.reportedstate IN
    ('primary', 'wait_primary', 'single') AND EXISTS (SELECT 1 FROM pgautofailover.node s
    WHERE s.reportedstate IN ('wait_standby', 'catchingup') OR s.goalstate = 'catchingup')
    LIMIT 1" 2>/dev/null) || return 0
  [ -n "$primary" ] || return 0
  "$PGBIN/psql" -X -q -h 127.0.0.1 -p "$primary" -U postgres -d postgres -c CHECKPOINT \
    >/dev/null 2>&1 || true
}

t0=$(date +%s)
# --- monitor --------------------------------------------------------------------------
if [ ! -f "$HA_BASE/monitor.created" ]; then
  rm -rf "$HA_BASE/monitor"
  log "creating the pg_auto_failover monitor on 127.0.0.1:$MONITOR_PORT"
  port_open "$MONITOR_PORT" && die "port 127.0.0.1:$MONITOR_PORT is taken; set OSTINATO_PG_HA_MONITOR_PORT"
  autoctl create monitor --pgdata "$HA_BASE/monitor" --pgport "$MONITOR_PORT" \
    --hostname 127.0.0.1 --auth trust --no-ssl --pgctl "$PGBIN/pg_ctl" \
    >> "$LOGDIR/create-monitor.log" 2>&1 \
    || { tail -n 30 "$LOGDIR/create-monitor.log" >&2; die "pg_autoctl create monitor failed"; }
  touch "$HA_BASE/monitor.created"
fi
run monitor
wait_for "the monitor answering on 127.0.0.1:$MONITOR_PORT" "SELECT true"
# Failover timing (reloadable; rewritten on every start): health checks every second.
for setting in health_check_period=1000 health_check_timeout=1000 health_check_max_retries=1 \
    health_check_retry_delay=500 node_considered_unhealthy_timeout="$UNHEALTHY_MS" \
    primary_demote_timeout="$DEMOTE_MS"; do
  "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$MONITOR_PORT" -U postgres \
    -d pg_auto_failover -c "ALTER SYSTEM SET pgautofailover.${setting%%=*} = ${setting#*=}"
done
"$PGBIN/psql" -X -q -h 127.0.0.1 -p "$MONITOR_PORT" -U postgres -d pg_auto_failover \
  -c "SELECT pg_reload_conf()" >/dev/null

# --- nodes: the first becomes the primary, the second its synchronous standby -------------
i=0
for name in node1 node2; do
  port=${NODE_PORTS[$i]}
  i=$(( i + 1 ))
  if [ ! -f "$HA_BASE/$name.created" ]; then
    rm -rf "${HA_BASE:?}/$name"
    port_open "$port" && die "port 127.0.0.1:$port is taken; set OSTINATO_PG_HA_PORTS"
    log "creating pg_auto_failover node $name on 127.0.0.1:$port"
    autoctl create postgres --pgdata "$HA_BASE/$name" --pgport "$port" --name "$name" \
      --hostname 127.0.0.1 --listen 127.0.0.1 --auth trust --no-ssl \
      --pgctl "$PGBIN/pg_ctl" --monitor "$MONITOR_URL" \
      >> "$LOGDIR/create-$name.log" 2>&1 \
      || { tail -n 30 "$LOGDIR/create-$name.log" >&2; die "pg_autoctl create postgres $name failed"; }
    touch "$HA_BASE/$name.created"
  fi
  autoctl config set --pgdata "$HA_BASE/$name" timeout.network_partition_timeout \
    "$PARTITION_SECONDS" >/dev/null
  run "$name"
  if [ "$name" = node1 ]; then
    wait_for "a primary" "SELECT EXISTS (SELECT 1 FROM pgautofailover.node
      WHERE reportedstate IN ('single', 'primary', 'wait_primary') AND reportedstate = goalstate)"
  fi
done
wait_for "a primary and a synchronous standby" "SELECT count(*) FILTER (WHERE reportedstate =
  'primary' AND goalstate = 'primary') = 1 AND count(*) FILTER (WHERE reportedstate =
  'secondary' AND goalstate = 'secondary') = 1 FROM pgautofailover.node"

# The monitor's last states may predate a restart of the nodes (after a failover the nodes
# start again in their old roles and the monitor then swaps them): ask the node the monitor
# names now, again each time, until one takes writes.
deadline=$(( $(date +%s) + START_TIMEOUT ))
while :; do
  primary=$(monitor_sql "SELECT nodeport FROM pgautofailover.node WHERE reportedstate = 'primary'
    AND goalstate = 'primary' LIMIT 1")
  [ -n "$primary" ] && [ "$("$PGBIN/psql" -X -tA -h 127.0.0.1 -p "$primary" -U postgres \
      -d postgres -c "SELECT NOT pg_is_in_recovery()" 2>/dev/null)" = t ] && break
  [ "$(date +%s)" -lt "$deadline" ] || die "no primary takes writes (the monitor names ${primary:-none}; logs in $LOGDIR)"
  sleep 0.5
done
ensure_role_and_db "$primary"
log "HA postgres ready in $(( $(date +%s) - t0 ))s: monitor 127.0.0.1:$MONITOR_PORT, primary 127.0.0.1:$primary, standby $(monitor_sql "SELECT '127.0.0.1:' || nodeport FROM pgautofailover.node WHERE reportedstate = 'secondary'") (data $HA_BASE)"
echo "$OSTINATO_PG_HA_DATABASE_URL"
