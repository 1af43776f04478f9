#!/usr/bin/env bash
# Start or stop the five Ostinato services and the demo worker as background processes.
#   infra/services.sh start    # start what is not running, wait until ready, bootstrap the demo
#   infra/services.sh stop     # SIGTERM each (graceful), SIGKILL after 20 s
#   infra/services.sh status
# With OSTINATO_HA=1 (`make up HA=1`, the HA profile) two instances of each service: the second,
# <name>_2, listens on its first's port + OSTINATO_HA_PORT_OFFSET (10: api 8090, worker-gateway
# 8091, probes 8092-8094), and all of them use the three-node Kafka cluster
# (OSTINATO_KAFKA_HA_BOOTSTRAP, PLAINTEXT: no SCRAM users, no tenant Kafka submission).
# Logs: .cache/logs/<name>.log (JSON lines). Pid files: .cache/run/<name>.pid.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. infra/env.sh
# The services connect as the least-privilege role (OSTINATO_DATABASE_URL: ostinato_app); the
# owner's and the superuser's URLs are for migrations and administration, not for them.
unset OSTINATO_OWNER_DATABASE_URL OSTINATO_ADMIN_DATABASE_URL
# The reconciler measures the free space of the database's volume at a path on it (statvfs;
# docs/RETENTION.md "The disk"): the local PostgreSQL's folder, where infra/postgres/up.sh
# keeps it (the checkout's .cache/pg, or /var/lib/ostinato/<hash>). Set it yourself for another
# server; unset, the reconciler measures the size only and refuses nothing.
if [ -z "${OSTINATO_DB_VOLUME_PATH:-}" ]; then
  for base in "$ROOT/.cache/pg" "/var/lib/ostinato/$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)"; do
    if [ -d "$base/data" ]; then export OSTINATO_DB_VOLUME_PATH=$base; break; fi
  done
fi
RUN="${OSTINATO_RUN_DIR:-$ROOT/.cache/run}"; LOGS="$ROOT/.cache/logs"; mkdir -p "$RUN" "$LOGS"
PY="$ROOT/.venv/bin/python"
SERVICES="api scheduler dispatcher worker_gateway reconciler"
HA_OFFSET=${OSTINATO_HA_PORT_OFFSET:-10}
# Every instance a stop looks for, whether or not this start is the HA profile's.
INSTANCES="$SERVICES api_2 scheduler_2 dispatcher_2 worker_gateway_2 reconciler_2"

# The bootstrap admin key: from the environment, else generated once for this checkout.
if [ -z "${OSTINATO_ADMIN_KEY:-}" ]; then
  [ -s "$ROOT/.cache/admin_key" ] || (umask 077; "$PY" -c 'import secrets; print("adm_" + secrets.token_urlsafe(32))' > "$ROOT/.cache/admin_key")
  OSTINATO_ADMIN_KEY=$(cat "$ROOT/.cache/admin_key")
fi
export OSTINATO_ADMIN_KEY
# What the demo worker talks to: the gateway these services start, on its configured port.
GATEWAY_URL="${OSTINATO_GATEWAY_URL:-http://127.0.0.1:${OSTINATO_GATEWAY_PORT:-8081}}"
# Traces go to the local Jaeger that `make up` starts (unset OSTINATO_OTLP_ENDPOINT= to turn off).
export OSTINATO_OTLP_ENDPOINT="${OSTINATO_OTLP_ENDPOINT-${OSTINATO_JAEGER_OTLP:-}}"

# alive NAME: its pid file names a live process. Judged by the process's state, not `kill -0`,
# which also succeeds on a zombie (killed, not yet reaped by its parent): that one is dead.
alive() {
  local pid state
  [ -f "$RUN/$1.pid" ] || return 1
  pid=$(cat "$RUN/$1.pid")
  [ -r "/proc/$pid/stat" ] || return 1
  state=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != "Z" ] && [ "$state" != "X" ]
}

start_one() {  # name, command...
  local name=$1; shift
  if alive "$name"; then echo "[services] $name already running (pid $(cat "$RUN/$name.pid"))"; return; fi
  nohup "$@" >> "$LOGS/$name.log" 2>&1 &
  echo $! > "$RUN/$name.pid"
  echo "[services] started $name (pid $!, log .cache/logs/$name.log)"
}

wait_ready() {  # name, url
  for _ in $(seq 1 120); do
    if "$PY" -c "import httpx,sys; sys.exit(0 if httpx.get('$2', timeout=2).status_code == 200 else 1)" 2>/dev/null; then
      return 0
    fi
    alive "$1" || { echo "[services] $1 exited; last log lines:"; tail -n 20 "$LOGS/$1.log"; exit 1; }
    sleep 0.5
  done
  echo "[services] $1 not ready at $2 after 60 s; last log lines:"; tail -n 20 "$LOGS/$1.log"; exit 1
}

# Each service as its own Kafka SCRAM user on the broker's SERVICES listener, with only the ACLs
# it needs (docs/KAFKA.md; passwords in .cache/kafka-users.json, kept 0600). Off with
# OSTINATO_SERVICE_KAFKA_USERS=0 (the loopback PLAINTEXT listener, a super user).
USERS_FILE="$ROOT/.cache/kafka-users.json"
kafka_users() {
  [ "${OSTINATO_SERVICE_KAFKA_USERS:-1}" = 1 ] || return 1
  local port=${OSTINATO_KAFKA_SERVICE_BOOTSTRAP##*:}
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "[services] the broker has no SERVICES listener on $OSTINATO_KAFKA_SERVICE_BOOTSTRAP (started by an older checkout? make down && make up): the services use PLAINTEXT"
    return 1
  fi
  "$PY" -m ostinato kafka-users --file "$USERS_FILE" | sed 's/^/[services] /'
}
port_of() {  # service [offset]: its configured port (+ offset)
  local v
  case "$1" in
    api) v=${OSTINATO_API_PORT:-8080} ;;
    worker_gateway) v=${OSTINATO_GATEWAY_PORT:-8081} ;;
    scheduler) v=${OSTINATO_SCHEDULER_PORT:-8082} ;;
    dispatcher) v=${OSTINATO_DISPATCHER_PORT:-8083} ;;
    reconciler) v=${OSTINATO_RECONCILER_PORT:-8084} ;;
  esac
  echo $(( v + ${2:-0} ))
}
port_var() {  # service: the variable naming its port
  case "$1" in
    api) echo OSTINATO_API_PORT ;;
    worker_gateway) echo OSTINATO_GATEWAY_PORT ;;
    *) echo "OSTINATO_$(echo "$1" | tr '[:lower:]' '[:upper:]')_PORT" ;;
  esac
}
start_second() {  # service: the HA profile's second instance, <service>_2, on port + offset
  local s=$1
  start_one "${s}_2" env "$(port_var "$s")=$(port_of "$s" "$HA_OFFSET")" "$PY" -m "services.$s"
}
start_service() {  # name: as its own Kafka user when kafka_users set them up
  local s=$1
  if [ "$USE_USERS" = 1 ]; then
    local creds
    mapfile -t creds < <("$PY" -c 'import json, sys; u = json.load(open(sys.argv[1]))[sys.argv[2]]; print(u["username"]); print(u["password"])' "$USERS_FILE" "$s")
    start_one "$s" env OSTINATO_KAFKA_BOOTSTRAP="$OSTINATO_KAFKA_SERVICE_BOOTSTRAP" \
      OSTINATO_KAFKA_USERNAME="${creds[0]}" OSTINATO_KAFKA_PASSWORD="${creds[1]}" \
      "$PY" -m "services.$s"
  else
    start_one "$s" "$PY" -m "services.$s"
  fi
}

case "${1:-}" in
  start)
    USE_USERS=0
    if [ "${OSTINATO_HA:-0}" = 1 ]; then
      # infra/env.sh pointed OSTINATO_KAFKA_BOOTSTRAP at the three nodes (PLAINTEXT only)
      export OSTINATO_KAFKA_TENANT_BOOTSTRAP=
      echo "[services] HA profile: two instances of each service on $OSTINATO_KAFKA_BOOTSTRAP (replication factor ${OSTINATO_KAFKA_REPLICATION_FACTOR:-1})"
    elif kafka_users; then USE_USERS=1; fi
    for s in $SERVICES; do start_service "$s"; done
    if [ "${OSTINATO_HA:-0}" = 1 ]; then
      for s in $SERVICES; do start_second "$s"; done
    fi
    for s in api worker_gateway scheduler dispatcher reconciler; do
      wait_ready "$s" "http://127.0.0.1:$(port_of "$s")/readyz"
      if [ "${OSTINATO_HA:-0}" = 1 ]; then
        wait_ready "${s}_2" "http://127.0.0.1:$(port_of "$s" "$HA_OFFSET")/readyz"
      fi
    done
    if [ ! -s "$ROOT/.cache/demo.json" ]; then
      "$PY" -m ostinato demo --out "$ROOT/.cache/demo.json" > /dev/null
    fi
    # The demo worker talks to the gateway started above, on its configured port.
    OSTINATO_DEMO_FILE="$ROOT/.cache/demo.json" OSTINATO_GATEWAY_URL="$GATEWAY_URL" \
      start_one demo_worker "$PY" -m ostinato.demo worker
    SECOND=""
    if [ "${OSTINATO_HA:-0}" = 1 ]; then
      SECOND="http://127.0.0.1:$(port_of api "$HA_OFFSET") http://127.0.0.1:$(port_of worker_gateway "$HA_OFFSET")"
    fi
    # shellcheck disable=SC2086  # SECOND: none or two words
    "$PY" - "$ROOT/.cache/demo.json" "$GATEWAY_URL" $SECOND <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
gateway = sys.argv[2]
second = (f"  second api    {sys.argv[3]}   second worker-gateway {sys.argv[4]} (HA profile)\n"
          if len(sys.argv) > 4 else "")
print(f"""
Ostinato is up.
  web UI        {d['api']}/ui   (log in with the demo API key below)
  API           {d['api']}   (OpenAPI: {d['openapi']}, Swagger UI: {d['openapi']}/swagger)
  worker-gateway {gateway}
{second}  traces        http://127.0.0.1:16686/api/traces?service=ostinato-api (Jaeger query API)
  demo tenant   {d['tenant']} ({d['tenant_id']})
  demo API key  {d['api_key']}
  try:          curl -H 'Authorization: Bearer {d['api_key']}' {d['api']}/v1/runs
""" + (f"""  kafka submit  {d['kafka']['topic']} on {d['kafka']['bootstrap_servers']} as {d['kafka']['username']} (SCRAM; password in .cache/demo.json; docs/KAFKA.md)
""" if d.get('kafka') else "") + f"""  logs          .cache/logs/*.log      stop with: make down
""")
PYEOF
    ;;
  stop)
    for s in demo_worker $INSTANCES; do
      if alive "$s"; then kill -TERM "$(cat "$RUN/$s.pid")"; fi
    done
    for s in demo_worker $INSTANCES; do
      if [ -f "$RUN/$s.pid" ]; then
        pid=$(cat "$RUN/$s.pid")
        for _ in $(seq 1 40); do alive "$s" || break; sleep 0.5; done
        alive "$s" && { echo "[services] $s did not stop in 20 s: SIGKILL"; kill -9 "$pid"; }
        rm -f "$RUN/$s.pid"; echo "[services] stopped $s"
      fi
    done
    ;;
  status)
    for s in $INSTANCES demo_worker; do
      case "$s" in *_2) [ -f "$RUN/$s.pid" ] || continue ;; esac
      if alive "$s"; then echo "$s: running (pid $(cat "$RUN/$s.pid"))"; else echo "$s: stopped"; fi
    done
    ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
