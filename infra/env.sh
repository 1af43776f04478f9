# shellcheck shell=bash
# Defaults shared by the infra scripts, the Makefile, .ci/run and the tests.
# Source it (`. infra/env.sh`); values already set in the environment win.

# Download caches shared by every clone on this machine (maven repo, kafka jars, Go module and
# build caches, the jaeger binary).
: "${OSTINATO_CACHE:=${HOME:-/root}/.cache/ostinato}"
# Default ports lie outside Linux's ephemeral range (32768-60999, ip_local_port_range): a port
# in it may be held by any outgoing connection, and a start then fails with "Address already in
# use" while nothing listens (it happened at 55432).
# PostgreSQL (infra/postgres/up.sh)
: "${OSTINATO_PG_PORT:=15432}"
# Three roles (README.md "Database roles"): the services connect as ostinato_app (owns nothing,
# cannot alter, truncate, disable triggers or rewrite the log); migrations, rebuild-projections
# and schema-dump as ostinato_owner; the superuser `ostinato` is for the tests' fixtures and
# benchmarks (create/drop databases) and administration only, never for a service.
: "${OSTINATO_DATABASE_URL:=postgresql://ostinato_app@127.0.0.1:${OSTINATO_PG_PORT}/ostinato}"
: "${OSTINATO_OWNER_DATABASE_URL:=postgresql://ostinato_owner@127.0.0.1:${OSTINATO_PG_PORT}/ostinato}"
: "${OSTINATO_ADMIN_DATABASE_URL:=postgresql://ostinato@127.0.0.1:${OSTINATO_PG_PORT}/ostinato}"
# The HA profile's PostgreSQL (infra/postgres/ha-up.sh, `make up HA=1`): a pg_auto_failover
# monitor and two nodes, a primary and a synchronous standby (either may be primary after a
# failover); state in this folder. The services find the writable one through a multi-host
# URL (target_session_attrs=read-write): OSTINATO_PG_HA_DATABASE_URL and its owner and admin
# twins, which the HA profile gives them as OSTINATO_DATABASE_URL and so on.
: "${OSTINATO_PG_HA_MONITOR_PORT:=15440}"
: "${OSTINATO_PG_HA_PORTS:=15441,15442}"
: "${OSTINATO_PG_HA_DIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.cache/pg-ha}"
_ostinato_pg_ha_hosts="127.0.0.1:${OSTINATO_PG_HA_PORTS//,/,127.0.0.1:}"
: "${OSTINATO_PG_HA_DATABASE_URL:=postgresql://ostinato_app@${_ostinato_pg_ha_hosts}/ostinato?target_session_attrs=read-write}"
: "${OSTINATO_PG_HA_OWNER_DATABASE_URL:=postgresql://ostinato_owner@${_ostinato_pg_ha_hosts}/ostinato?target_session_attrs=read-write}"
: "${OSTINATO_PG_HA_ADMIN_DATABASE_URL:=postgresql://ostinato@${_ostinato_pg_ha_hosts}/ostinato?target_session_attrs=read-write}"
unset _ostinato_pg_ha_hosts
if [ "${OSTINATO_HA:-0}" = 1 ]; then  # the HA profile: services, migrations, tests use it
  OSTINATO_DATABASE_URL=$OSTINATO_PG_HA_DATABASE_URL
  OSTINATO_OWNER_DATABASE_URL=$OSTINATO_PG_HA_OWNER_DATABASE_URL
  OSTINATO_ADMIN_DATABASE_URL=$OSTINATO_PG_HA_ADMIN_DATABASE_URL
fi
export OSTINATO_PG_HA_MONITOR_PORT OSTINATO_PG_HA_PORTS OSTINATO_PG_HA_DIR \
       OSTINATO_PG_HA_DATABASE_URL OSTINATO_PG_HA_OWNER_DATABASE_URL OSTINATO_PG_HA_ADMIN_DATABASE_URL
# Kafka (infra/kafka/up.sh); the broker listens on this host:port (127.0.0.1 only)
: "${OSTINATO_KAFKA_BOOTSTRAP:=127.0.0.1:9092}"
: "${OSTINATO_KAFKA_CONTROLLER_PORT:=9093}"
# ... and tenants' producers reach it here, over SASL/SCRAM (docs/KAFKA.md)
: "${OSTINATO_KAFKA_TENANT_BOOTSTRAP:=127.0.0.1:9094}"
# ... and the services, each as its own SCRAM user (infra/services.sh, `ostinato kafka-users`)
: "${OSTINATO_KAFKA_SERVICE_BOOTSTRAP:=127.0.0.1:9095}"
# The HA profile's three Kafka nodes (infra/kafka/cluster.sh, `make up HA=1`): node N's
# PLAINTEXT listener is the N-th address, its controller the N-th port; state in this folder.
: "${OSTINATO_KAFKA_HA_BOOTSTRAP:=127.0.0.1:19092,127.0.0.1:19094,127.0.0.1:19096}"
: "${OSTINATO_KAFKA_HA_CONTROLLER_PORTS:=19093,19095,19097}"
: "${OSTINATO_KAFKA_HA_DIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.cache/kafka-ha}"
# The HA profile (OSTINATO_HA=1: `make up HA=1`, docs in infra/README.md): the services and
# `ostinato topics` use the three nodes, and topics get three replicas (min.insync.replicas 2).
if [ "${OSTINATO_HA:-0}" = 1 ]; then
  OSTINATO_KAFKA_BOOTSTRAP=$OSTINATO_KAFKA_HA_BOOTSTRAP
  : "${OSTINATO_KAFKA_REPLICATION_FACTOR:=3}"
  export OSTINATO_KAFKA_REPLICATION_FACTOR
fi
# Redis, for the benchmarks' Celery peer only (infra/redis/up.sh)
: "${OSTINATO_REDIS_PORT:=16379}"
# Jaeger (infra/jaeger/up.sh): OTLP/HTTP receiver (give it to services as OSTINATO_OTLP_ENDPOINT)
# and query API; the ports are fixed in infra/jaeger/config.yaml (127.0.0.1 only)
: "${OSTINATO_JAEGER_OTLP:=http://127.0.0.1:4318}"
: "${OSTINATO_JAEGER_QUERY:=http://127.0.0.1:16686}"

# SeaweedFS's S3 gateway (infra/s3/up.sh: master, volume and filer on the three ports under it,
# each gRPC port 10000 higher), the tests' object store; `make up S3=1` (OSTINATO_S3=1) gives
# it to the services as OSTINATO_OBJECT_STORE_URL (otherwise: the local folder .cache/objects).
# The key is local and loopback-only, like the trust auth of the local PostgreSQL.
: "${OSTINATO_S3_PORT:=18333}"
: "${OSTINATO_S3_ENDPOINT:=http://127.0.0.1:${OSTINATO_S3_PORT}}"
: "${OSTINATO_S3_ACCESS_KEY:=ostinato}"
: "${OSTINATO_S3_SECRET_KEY:=ostinato-local-secret}"
: "${OSTINATO_S3_BUCKET:=ostinato}"
: "${OSTINATO_S3_URL:=s3://${OSTINATO_S3_BUCKET}?endpoint=${OSTINATO_S3_ENDPOINT}&access_key_id=${OSTINATO_S3_ACCESS_KEY}&secret_access_key=${OSTINATO_S3_SECRET_KEY}}"
if [ "${OSTINATO_S3:-0}" = 1 ]; then
  : "${OSTINATO_OBJECT_STORE_URL:=$OSTINATO_S3_URL}"
  export OSTINATO_OBJECT_STORE_URL
fi
export OSTINATO_S3_PORT OSTINATO_S3_ENDPOINT OSTINATO_S3_ACCESS_KEY OSTINATO_S3_SECRET_KEY \
       OSTINATO_S3_BUCKET OSTINATO_S3_URL

export OSTINATO_CACHE OSTINATO_PG_PORT OSTINATO_DATABASE_URL OSTINATO_OWNER_DATABASE_URL \
       OSTINATO_ADMIN_DATABASE_URL \
       OSTINATO_KAFKA_BOOTSTRAP OSTINATO_KAFKA_CONTROLLER_PORT OSTINATO_KAFKA_TENANT_BOOTSTRAP \
       OSTINATO_KAFKA_SERVICE_BOOTSTRAP OSTINATO_KAFKA_HA_BOOTSTRAP \
       OSTINATO_KAFKA_HA_CONTROLLER_PORTS OSTINATO_KAFKA_HA_DIR \
       OSTINATO_JAEGER_OTLP OSTINATO_JAEGER_QUERY OSTINATO_REDIS_PORT

# Temporal's development server, a benchmark peer only (infra/temporal.sh, `make bench-infra`):
# its frontend gRPC port (clients and workers connect here), its HTTP API and metrics ports.
: "${OSTINATO_TEMPORAL_PORT:=17233}"
: "${OSTINATO_TEMPORAL_HTTP_PORT:=17234}"
: "${OSTINATO_TEMPORAL_METRICS_PORT:=17235}"
export OSTINATO_TEMPORAL_PORT OSTINATO_TEMPORAL_HTTP_PORT OSTINATO_TEMPORAL_METRICS_PORT
