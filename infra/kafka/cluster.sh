#!/usr/bin/env bash
# The HA profile's Kafka: three KRaft nodes (each broker + controller, a static quorum of three
# voters) as local processes, each with its own ports and data folder (idempotent).
#   infra/kafka/cluster.sh up        start the nodes not running, wait until all three answer
#   infra/kafka/cluster.sh down      SIGTERM all three together, SIGKILL after 30 s; data stays
#   infra/kafka/cluster.sh kill N    kill -9 node N (1..3): a crash, for fault drills
#   infra/kafka/cluster.sh status    one line per node
# Ports: node N's PLAINTEXT is the N-th of OSTINATO_KAFKA_HA_BOOTSTRAP
# (127.0.0.1:19092,127.0.0.1:19094,127.0.0.1:19096), its controller the N-th of
# OSTINATO_KAFKA_HA_CONTROLLER_PORTS (19093,19095,19097). State: OSTINATO_KAFKA_HA_DIR
# (<repo>/.cache/kafka-ha)/<N>/{data,server.properties,server.out,kafka.pid}, cluster.id.
# Jars: the single broker's cache (infra/kafka/up.sh fetches them once).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"
# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"

KAFKA_VERSION=4.1.2
LIBS="$OSTINATO_CACHE/kafka-$KAFKA_VERSION/libs"
STATE="$OSTINATO_KAFKA_HA_DIR"
START_TIMEOUT=${OSTINATO_KAFKA_START_TIMEOUT:-120}
STOP_TIMEOUT=${OSTINATO_KAFKA_STOP_TIMEOUT:-30}
LOG4J="-Dlog4j2.configurationFile=$ROOT/infra/kafka/log4j2.properties"

IFS=, read -r -a BOOTS <<<"$OSTINATO_KAFKA_HA_BOOTSTRAP"
IFS=, read -r -a CPORTS <<<"$OSTINATO_KAFKA_HA_CONTROLLER_PORTS"
[ "${#BOOTS[@]}" -eq 3 ] && [ "${#CPORTS[@]}" -eq 3 ] \
  || die "OSTINATO_KAFKA_HA_BOOTSTRAP and OSTINATO_KAFKA_HA_CONTROLLER_PORTS must name three nodes each"
PORTS=()
for b in "${BOOTS[@]}"; do
  case "${b%:*}" in 127.0.0.1|localhost) ;; *) die "$b: the local nodes only listen on 127.0.0.1" ;; esac
  PORTS+=("${b##*:}")
done
NODES="1 2 3"
VOTERS="1@127.0.0.1:${CPORTS[0]},2@127.0.0.1:${CPORTS[1]},3@127.0.0.1:${CPORTS[2]}"

java_bin() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then echo "$JAVA_HOME/bin/java"
  else command -v java || die "java missing: run infra/kafka/up.sh once (it installs it)"; fi
}
conf() { echo "$STATE/$1/server.properties"; }
pidfile() { echo "$STATE/$1/kafka.pid"; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
node_pid() { find_ours "$(pidfile "$1")" "kafka.Kafka $(conf "$1")"; }

started() {  # node: this start's output says the server started (no JVM spent on asking)
  tail -c +$(( $(cat "$STATE/$1/start.offset" 2>/dev/null || echo 0) + 1 )) "$STATE/$1/server.out" \
    2>/dev/null | grep -q "Kafka Server started"
}
answers() {  # node: its PLAINTEXT listener answers an API-versions request
  timeout 30 "$JAVA" -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "$LOG4J" \
    -Dostinato.log.target=SYSTEM_ERR -cp "$LIBS/*" \
    org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "127.0.0.1:${PORTS[$1-1]}" \
    >"$STATE/$1/readiness.out" 2>&1
}

render() {  # node
  local n=$1 p=${PORTS[$1-1]} c=${CPORTS[$1-1]}
  mkdir -p "$STATE/$n/data"
  sed -e "s#^node\.id=.*#node.id=$n#" \
      -e "s#^log\.dirs=.*#log.dirs=$STATE/$n/data#" \
      -e "s#^listeners=.*#listeners=PLAINTEXT://127.0.0.1:$p,CONTROLLER://127.0.0.1:$c#" \
      -e "s#^advertised\.listeners=.*#advertised.listeners=PLAINTEXT://127.0.0.1:$p#" \
      -e "s#^controller\.quorum\.voters=.*#controller.quorum.voters=$VOTERS#" \
      "$ROOT/infra/kafka/cluster.properties" > "$(conf "$n")"
}

format() {  # node: once, with the cluster's one id
  local n=$1
  [ -f "$STATE/$n/data/meta.properties" ] && return 0
  rm -rf "$STATE/$n/data" && mkdir -p "$STATE/$n/data"
  "$JAVA" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "$LOG4J" \
    -Dostinato.log.target=SYSTEM_ERR -cp "$LIBS/*" kafka.tools.StorageTool format \
    --cluster-id "$(cat "$STATE/cluster.id")" --config "$(conf "$n")" --ignore-formatted \
    >"$STATE/$n/format.out" 2>&1 || { cat "$STATE/$n/format.out" >&2; die "node $n: storage format failed"; }
}

start() {  # node
  local n=$1 out="$STATE/$1/server.out"
  if [ "$(stat -c %s "$out" 2>/dev/null || echo 0)" -gt $((64 << 20)) ]; then mv -f "$out" "$out.1"; fi
  stat -c %s "$out" 2>/dev/null > "$STATE/$n/start.offset" || echo 0 > "$STATE/$n/start.offset"
  echo "===== $(date -u +%FT%TZ) infra/kafka/cluster.sh: starting node $n =====" >>"$out"
  # shellcheck disable=SC2016  # $$ and $@ expand in the inner bash
  nohup setsid bash -c 'echo $$ > "$1"; shift; exec "$@"' _ "$(pidfile "$n")" \
    "$JAVA" -Xms256m -Xmx512m -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -Djava.awt.headless=true "$LOG4J" "-Dkafka.logs.dir=$STATE/$n" \
    -cp "$LIBS/*" kafka.Kafka "$(conf "$n")" >>"$out" 2>&1 </dev/null &
  for _ in $(seq 50); do [ -s "$(pidfile "$n")" ] && break; sleep 0.1; done
  log "kafka node $n starting on 127.0.0.1:${PORTS[$n-1]} (controller ${CPORTS[$n-1]}, pid $(cat "$(pidfile "$n")"), log $out)"
}

up() {
  if [ ! -f "$LIBS/kafka_2.13-$KAFKA_VERSION.jar" ]; then
    OSTINATO_KAFKA_FETCH_ONLY=1 bash "$ROOT/infra/kafka/up.sh"
  fi
  JAVA=$(java_bin)
  mkdir -p "$STATE"
  local n t0 pending=() pid
  for n in $NODES; do
    if [ -n "$(node_pid "$n")" ]; then continue; fi
    port_open "${PORTS[$n-1]}" && die "node $n: port ${PORTS[$n-1]} is taken (OSTINATO_KAFKA_HA_BOOTSTRAP)"
    port_open "${CPORTS[$n-1]}" && die "node $n: controller port ${CPORTS[$n-1]} is taken (OSTINATO_KAFKA_HA_CONTROLLER_PORTS)"
    pending+=("$n")
  done
  if [ ! -s "$STATE/cluster.id" ]; then
    "$JAVA" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "$LOG4J" \
      -Dostinato.log.target=SYSTEM_ERR -cp "$LIBS/*" kafka.tools.StorageTool random-uuid \
      | grep -E '^[A-Za-z0-9_-]{22}$' | tail -n 1 > "$STATE/cluster.id"
    [ -s "$STATE/cluster.id" ] || die "StorageTool random-uuid returned no cluster id"
  fi
  t0=$(date +%s)
  for n in "${pending[@]}"; do render "$n"; format "$n"; done
  for n in "${pending[@]}"; do start "$n"; done
  # A node has started once it has joined the quorum and been unfenced, so every node is
  # waited for (a lone node of three never gets a quorum); when none was started, each is
  # asked for its API versions.
  for n in $NODES; do
    local fresh=0
    case " ${pending[*]:-} " in *" $n "*) fresh=1 ;; esac
    while :; do
      pid=$(node_pid "$n")
      if [ -z "$pid" ]; then
        OUT="$STATE/$n/server.out" OUT_OFFSET=0; show_log
        die "kafka node $n exited during start-up (log: $STATE/$n/server.out)"
      fi
      if port_open "${PORTS[$n-1]}"; then
        if [ "$fresh" = 1 ] && started "$n"; then break; fi
        # (a running node beside ones started now: its open port is enough, a JVM less)
        if [ "$fresh" = 0 ] && { [ "${#pending[@]}" -gt 0 ] || answers "$n"; }; then break; fi
      fi
      if [ "$(date +%s)" -ge $(( t0 + START_TIMEOUT )) ]; then
        tail -n 30 "$STATE/$n/server.out" >&2
        die "kafka node $n did not answer on 127.0.0.1:${PORTS[$n-1]} within ${START_TIMEOUT}s (stop with infra/kafka/cluster.sh down)"
      fi
      sleep 1
    done
  done
  log "kafka cluster ready on $OSTINATO_KAFKA_HA_BOOTSTRAP (started ${pending[*]:-none}) in $(( $(date +%s) - t0 ))s"
}

down() {
  local n pid pids=() deadline
  for n in $NODES; do
    pid=$(node_pid "$n")
    [ -n "$pid" ] && { kill -TERM "$pid" 2>/dev/null || true; pids+=("$pid"); }
  done
  [ "${#pids[@]}" -gt 0 ] || { log "kafka cluster not running (for $STATE)"; return 0; }
  log "stopping kafka cluster (pids ${pids[*]})"
  deadline=$(( $(date +%s) + STOP_TIMEOUT ))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null; do
      if [ "$(date +%s)" -ge "$deadline" ]; then
        log "pid $pid still running after ${STOP_TIMEOUT}s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true; sleep 0.5; break
      fi
      sleep 0.2
    done
  done
  for n in $NODES; do rm -f "$(pidfile "$n")"; done
  log "kafka cluster stopped"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  kill)
    n=${2:-}; case "$n" in 1|2|3) ;; *) die "usage: $0 kill 1|2|3" ;; esac
    pid=$(node_pid "$n"); [ -n "$pid" ] || die "kafka node $n is not running"
    kill -KILL "$pid"; log "kafka node $n killed (pid $pid)" ;;
  status)
    for n in $NODES; do
      pid=$(node_pid "$n")
      if [ -n "$pid" ]; then echo "node $n: running (pid $pid, 127.0.0.1:${PORTS[$n-1]})"
      else echo "node $n: stopped"; fi
    done ;;
  *) echo "usage: $0 up|down|kill N|status" >&2; exit 2 ;;
esac
