#!/usr/bin/env bash
# Start a local single-node Kafka 4.1.2 (KRaft, combined broker+controller) for Ostinato
# (idempotent).
#   - jars: fetched once with Maven (infra/kafka/pom.xml) into
#     $OSTINATO_CACHE/kafka-4.1.2/libs (maven repo: $OSTINATO_CACHE/m2), shared by clones
#   - state: <repo>/.cache/kafka/{data,logs,server.properties,server.out,kafka.pid}
#   - PLAINTEXT on $OSTINATO_KAFKA_BOOTSTRAP (127.0.0.1:9092), controller on
#     127.0.0.1:$OSTINATO_KAFKA_CONTROLLER_PORT (9093), the tenants' SASL/SCRAM listener on
#     $OSTINATO_KAFKA_TENANT_BOOTSTRAP (127.0.0.1:9094), the services' on
#     $OSTINATO_KAFKA_SERVICE_BOOTSTRAP (127.0.0.1:9095)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"

KAFKA_VERSION=4.1.2
LIBS="$OSTINATO_CACHE/kafka-$KAFKA_VERSION/libs"
STATE="$ROOT/.cache/kafka"
DATA="$STATE/data"
LOGDIR="$STATE/logs"
CONF="$STATE/server.properties"
OUT="$STATE/server.out"
PIDFILE="$STATE/kafka.pid"
START_TIMEOUT=${OSTINATO_KAFKA_START_TIMEOUT:-90}

# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"

BOOT=${OSTINATO_KAFKA_BOOTSTRAP%%,*}
KHOST=${BOOT%:*}
KPORT=${BOOT##*:}
CPORT=$OSTINATO_KAFKA_CONTROLLER_PORT
SPORT=${OSTINATO_KAFKA_TENANT_BOOTSTRAP##*:}
VPORT=${OSTINATO_KAFKA_SERVICE_BOOTSTRAP##*:}
case "$KHOST" in
  127.0.0.1|localhost) ;;
  *) die "OSTINATO_KAFKA_BOOTSTRAP=$OSTINATO_KAFKA_BOOTSTRAP: the local broker only listens on 127.0.0.1" ;;
esac
BOOTSTRAP="127.0.0.1:$KPORT"

# --- java and maven ------------------------------------------------------------------
apt_install() {
  [ "$(id -u)" -eq 0 ] || die "missing $*; install it (apt-get install $*)"
  log "installing $* with apt-get (one-off)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
  JAVA="$JAVA_HOME/bin/java"
else
  command -v java >/dev/null 2>&1 || apt_install openjdk-17-jre-headless
  JAVA=$(command -v java)
fi
java_major=$("$JAVA" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
[ "${java_major:-0}" -ge 17 ] 2>/dev/null || die "Kafka $KAFKA_VERSION needs Java 17+, $JAVA is ${java_major:-unknown}"

# --- jars (once per machine) ----------------------------------------------------------
fetch_jars() {
  mkdir -p "$OSTINATO_CACHE"
  (
    # one fetch at a time per cache, even with two clones starting together
    flock 9
    [ -f "$LIBS/kafka_2.13-$KAFKA_VERSION.jar" ] && exit 0
    command -v mvn >/dev/null 2>&1 || apt_install maven
    local_tmp="$LIBS.tmp.$$"
    rm -rf "$local_tmp"
    t0=$(date +%s)
    log "fetching Kafka $KAFKA_VERSION jars with Maven into $LIBS (one-off)"
    mvnlog="$OSTINATO_CACHE/mvn-kafka-$KAFKA_VERSION.log"
    if ! mvn -B -q -Dstyle.color=never -f "$ROOT/infra/kafka/pom.xml" \
        -Dmaven.repo.local="$OSTINATO_CACHE/m2" -Dkafka.libs.dir="$local_tmp" package \
        >"$mvnlog" 2>&1 </dev/null; then
      tail -n 40 "$mvnlog" >&2
      die "mvn failed to fetch the Kafka jars (log: $mvnlog)"
    fi
    [ -f "$local_tmp/kafka_2.13-$KAFKA_VERSION.jar" ] || die "kafka_2.13-$KAFKA_VERSION.jar missing after mvn"
    # SLF4J 1.7 would ignore the log4j2 (SLF4J 2) provider and the broker would log nothing
    ls "$local_tmp"/slf4j-api-2.*.jar >/dev/null 2>&1 || die "slf4j-api 2.x missing from $local_tmp"
    if ls "$local_tmp"/slf4j-api-1.*.jar >/dev/null 2>&1; then die "slf4j-api 1.x resolved into $local_tmp"; fi
    rm -rf "$LIBS"
    mv "$local_tmp" "$LIBS"
    log "fetched $(find "$LIBS" -name '*.jar' | wc -l) jars in $(( $(date +%s) - t0 ))s"
  ) 9>"$OSTINATO_CACHE/.kafka-$KAFKA_VERSION.lock"
}
if [ ! -f "$LIBS/kafka_2.13-$KAFKA_VERSION.jar" ]; then fetch_jars; fi
# infra/kafka/cluster.sh (the HA profile's three brokers) reuses this fetch and nothing else.
[ "${OSTINATO_KAFKA_FETCH_ONLY:-0}" = 1 ] && exit 0

LOG4J="-Dlog4j2.configurationFile=$ROOT/infra/kafka/log4j2.properties"
# Short-lived command-line tools: small heap, fast start, logs to stderr.
kjava() {
  "$JAVA" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
    "$LOG4J" -Dostinato.log.target=SYSTEM_ERR -cp "$LIBS/*" "$@"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
broker_answers() {
  timeout 30 "$JAVA" -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "$LOG4J" \
    -Dostinato.log.target=SYSTEM_ERR -cp "$LIBS/*" \
    org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$BOOTSTRAP" \
    >"$STATE/readiness.out" 2>&1
}
# pid of the broker started from this checkout (its command line names our config file)
our_pid() {
  local pid
  [ -f "$PIDFILE" ] || return 1
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "kafka.Kafka $CONF" || return 1
  echo "$pid"
}
OUT_OFFSET=0   # size of $OUT before this start: show only this start's lines on failure
wait_ready() {  # $1 = pid, $2 = start time
  local pid=$1 t0=$2 deadline=$(( $2 + START_TIMEOUT ))
  while :; do
    if ! kill -0 "$pid" 2>/dev/null; then
      show_log
      die "kafka exited during start-up (log: $OUT)"
    fi
    if port_open "$KPORT" && broker_answers; then
      log "kafka ready on $BOOTSTRAP (controller 127.0.0.1:$CPORT, pid $pid) in $(( $(date +%s) - t0 ))s"
      return 0
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      show_log
      echo "----- last readiness check -----" >&2; tail -n 5 "$STATE/readiness.out" >&2 || true
      die "kafka did not answer on $BOOTSTRAP within ${START_TIMEOUT}s (pid $pid still running; stop it with infra/kafka/down.sh)"
    fi
    sleep 1
  done
}

mkdir -p "$STATE" "$DATA" "$LOGDIR"

# --- already running? ----------------------------------------------------------------------
if pid=$(our_pid); then
  log "kafka already running (pid $pid); checking it answers"
  wait_ready "$pid" "$(date +%s)"
  exit 0
fi
rm -f "$PIDFILE"
if port_open "$KPORT"; then
  if broker_answers; then
    log "kafka on $BOOTSTRAP was not started by this checkout ($ROOT); reusing it"
    exit 0
  fi
  die "port $BOOTSTRAP is taken by a process that is not a Kafka broker; free it or set OSTINATO_KAFKA_BOOTSTRAP"
fi
port_open "$CPORT" && die "controller port 127.0.0.1:$CPORT is taken; free it or set OSTINATO_KAFKA_CONTROLLER_PORT"
port_open "$SPORT" && die "tenants' SASL port 127.0.0.1:$SPORT is taken; free it or set OSTINATO_KAFKA_TENANT_BOOTSTRAP"
port_open "$VPORT" && die "services' SASL port 127.0.0.1:$VPORT is taken; free it or set OSTINATO_KAFKA_SERVICE_BOOTSTRAP"

# --- config + storage format (once) -------------------------------------------------------
sed -e "s#^log\.dirs=.*#log.dirs=$DATA#" \
    -e "s#^listeners=.*#listeners=PLAINTEXT://127.0.0.1:$KPORT,CONTROLLER://127.0.0.1:$CPORT,TENANTS://127.0.0.1:$SPORT,SERVICES://127.0.0.1:$VPORT#" \
    -e "s#^advertised\.listeners=.*#advertised.listeners=PLAINTEXT://127.0.0.1:$KPORT,TENANTS://127.0.0.1:$SPORT,SERVICES://127.0.0.1:$VPORT#" \
    -e "s#^controller\.quorum\.voters=.*#controller.quorum.voters=1@127.0.0.1:$CPORT#" \
    "$ROOT/infra/kafka/server.properties" > "$CONF"

t0=$(date +%s)
if [ ! -f "$DATA/meta.properties" ]; then
  rm -rf "$DATA" && mkdir -p "$DATA"     # never formatted successfully: nothing to keep
  CID=$(kjava kafka.tools.StorageTool random-uuid | grep -E '^[A-Za-z0-9_-]{22}$' | tail -n 1)
  [ -n "$CID" ] || die "StorageTool random-uuid returned no cluster id"
  log "formatting $DATA (cluster id $CID)"
  kjava kafka.tools.StorageTool format --cluster-id "$CID" --config "$CONF" --ignore-formatted \
    >"$STATE/format.out" 2>&1 || { cat "$STATE/format.out" >&2; die "kafka storage format failed"; }
  echo "$CID" > "$STATE/cluster.id"
fi

# --- start -----------------------------------------------------------------------------------
JVM_OPTS=(-Xms512m -Xmx1g -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20
  -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15
  -Djava.awt.headless=true "$LOG4J" "-Dkafka.logs.dir=$LOGDIR")
log "starting kafka $KAFKA_VERSION on $BOOTSTRAP (log $OUT)"
# The broker's output only grows (a start with many topics writes a line per partition): past
# 64 MiB it becomes server.out.1 (the one before that goes), so a dev machine's disk does not fill.
if [ "$(stat -c %s "$OUT" 2>/dev/null || echo 0)" -gt $((64 << 20)) ]; then
  mv -f "$OUT" "$OUT.1"
fi
OUT_OFFSET=$(stat -c %s "$OUT" 2>/dev/null || echo 0)
echo "===== $(date -u +%FT%TZ) infra/kafka/up.sh: starting kafka $KAFKA_VERSION =====" >>"$OUT"
# setsid: leave the caller's session (a Ctrl-C in `make` must not kill the broker);
# the inner bash writes its own pid, which `exec` hands over to the JVM.
# shellcheck disable=SC2016  # $$ and $@ expand in the inner bash
nohup setsid bash -c 'echo $$ > "$1"; shift; exec "$@"' _ "$PIDFILE" \
  "$JAVA" "${JVM_OPTS[@]}" -cp "$LIBS/*" kafka.Kafka "$CONF" >>"$OUT" 2>&1 </dev/null &
for _ in $(seq 50); do [ -s "$PIDFILE" ] && break; sleep 0.1; done
pid=$(cat "$PIDFILE" 2>/dev/null) || die "kafka did not start (no pid file); see $OUT"
wait_ready "$pid" "$t0"
