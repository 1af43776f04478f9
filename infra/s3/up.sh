#!/usr/bin/env bash
# Start a local SeaweedFS with its S3 gateway (idempotent): the object store of the tests and
# of `make up S3=1` (archived runs; docs/RETENTION.md).
#   - binary: built once per machine from the Go module proxy by infra/s3/build.sh
#     ($OSTINATO_CACHE/bin/weed-<version>; Go caches in $OSTINATO_CACHE/go/{mod,build})
#   - one process, `weed server`: master, volume server, filer and S3 gateway, every listener
#     on 127.0.0.1: S3 on $OSTINATO_S3_PORT (18333), master/volume/filer on the three ports
#     under it (18330-18332), each one's gRPC port 10000 higher (all under 32768, outside the
#     ephemeral range); no Iceberg/Lance listeners, no telemetry
#   - identities: $OSTINATO_S3_DIR/s3.json, one identity with OSTINATO_S3_ACCESS_KEY /
#     OSTINATO_S3_SECRET_KEY (Admin, Read, List, Tagging, Write); anonymous requests are refused
#   - state: $OSTINATO_S3_DIR (default <repo>/.cache/s3): data/, weed.pid, weed.log
#   - ready: /healthz answers and a signed write and delete of a probe object in the bucket
#     $OSTINATO_S3_BUCKET (created here if missing) succeed, within OSTINATO_S3_START_TIMEOUT
# Another state folder and port make a second, private instance (tests/helpers/objects.py).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"
# shellcheck source=infra/s3/common.sh
. "$ROOT/infra/s3/common.sh"
# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"

START_TIMEOUT=${OSTINATO_S3_START_TIMEOUT:-90}
command -v curl >/dev/null 2>&1 || die "curl is needed (apt-get install curl)"

s3_ready() { s3_healthy && s3_bucket_ready; }
wait_ready() {  # $1 = pid, $2 = start time
  wait_server "seaweedfs S3" "$1" "$2" "$START_TIMEOUT" s3_ready \
    "$S3_ENDPOINT answers and takes a signed write in bucket $OSTINATO_S3_BUCKET, state $STATE" \
    "OSTINATO_S3_DIR=$STATE OSTINATO_S3_PORT=$OSTINATO_S3_PORT infra/s3/down.sh"
}

mkdir -p "$STATE/data"

# --- already running? ----------------------------------------------------------------------
pid=$(find_ours "$PIDFILE" "$OURS")
if [ -n "$pid" ]; then
  log "seaweedfs already running (pid $pid); checking it answers"
  wait_ready "$pid" "$(date +%s)"
  exit 0
fi
rm -f "$PIDFILE"
if port_open "$OSTINATO_S3_PORT" && s3_healthy && s3_bucket_ready; then
  log "an S3 server on $S3_ENDPOINT takes our key's writes but was not started from $STATE; reusing it"
  exit 0
fi
for p in "${S3_PORTS[@]}"; do
  port_open "$p" && die "port 127.0.0.1:$p (seaweedfs for $STATE) is taken by another process; free it or set OSTINATO_S3_PORT"
done

# --- binary (built once per machine) -------------------------------------------------------
BIN=$(bash "$ROOT/infra/s3/build.sh")

# --- identities: the one access key the tests and the services use -------------------------
umask 077
cat >"$CONF.tmp" <<JSON
{
  "identities": [
    {
      "name": "ostinato",
      "credentials": [{"accessKey": "$OSTINATO_S3_ACCESS_KEY", "secretKey": "$OSTINATO_S3_SECRET_KEY"}],
      "actions": ["Admin", "Read", "List", "Tagging", "Write"]
    }
  ]
}
JSON
mv -f "$CONF.tmp" "$CONF"
umask 022

# --- start -----------------------------------------------------------------------------------
t0=$(date +%s)
log "starting seaweedfs ($(basename "$BIN")) S3 on $S3_ENDPOINT (log $OUT)"
start_server infra/s3/up.sh "$PIDFILE" "$OUT" "$BIN" server "${WEED_ARGS[@]}"
wait_ready "$SERVER_PID" "$t0"
