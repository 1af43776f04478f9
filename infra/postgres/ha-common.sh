# shellcheck shell=bash
# Shared by infra/postgres/ha-up.sh and ha-down.sh (after common.sh): where the HA profile's
# servers live and how to ask pg_auto_failover about them.

MONITOR_PORT=$OSTINATO_PG_HA_MONITOR_PORT
IFS=, read -r -a NODE_PORTS <<< "$OSTINATO_PG_HA_PORTS"
[ ${#NODE_PORTS[@]} -eq 2 ] || die "OSTINATO_PG_HA_PORTS must name two ports (primary,standby): $OSTINATO_PG_HA_PORTS"
HA_BASE=$(pg_base "$OSTINATO_PG_HA_DIR" pg-ha)
LOGDIR=$HA_BASE/log
XDG=$HA_BASE/xdg  # pg_autoctl's config, state and pid files, kept with the data they describe
MONITOR_URL="postgres://autoctl_node@127.0.0.1:$MONITOR_PORT/pg_auto_failover?sslmode=disable"

# autoctl ARGS...: pg_autoctl as the postgres OS user, with its files under $XDG.
autoctl() {
  as_pg env "XDG_CONFIG_HOME=$XDG/config" "XDG_DATA_HOME=$XDG/data" "XDG_RUNTIME_DIR=$XDG/run" \
    pg_autoctl "$@"
}

# monitor_sql SQL: one value from the monitor's database.
monitor_sql() {
  "$PGBIN/psql" -X -q -tA -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$MONITOR_PORT" -U autoctl_node \
    -d pg_auto_failover -c "$1"
}
