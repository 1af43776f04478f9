# shellcheck shell=bash
# Sourced by infra/s3/up.sh and down.sh (after infra/env.sh): one instance's state folder,
# ports, command line and S3 probes. OSTINATO_S3_DIR and OSTINATO_S3_PORT choose the instance.

STATE=${OSTINATO_S3_DIR:-$ROOT/.cache/s3}
mkdir -p "$STATE"
STATE=$(cd "$STATE" && pwd)
OUT="$STATE/weed.log"
PIDFILE="$STATE/weed.pid"
CONF="$STATE/s3.json"
S3_ENDPOINT="http://127.0.0.1:$OSTINATO_S3_PORT"

case "$OSTINATO_S3_PORT" in
  ''|*[!0-9]*) echo "[infra] ERROR: OSTINATO_S3_PORT=$OSTINATO_S3_PORT is not a port" >&2; exit 2 ;;
esac
# master, volume and filer on the three ports under the S3 port; each gRPC port 10000 higher
# (SeaweedFS's convention), so the S3 port must leave every one under 32768 (the ephemeral range)
if [ "$OSTINATO_S3_PORT" -lt 1027 ] || [ "$OSTINATO_S3_PORT" -gt 22767 ]; then
  echo "[infra] ERROR: OSTINATO_S3_PORT=$OSTINATO_S3_PORT: must be 1027..22767 (its gRPC port, 10000 higher, must stay under the ephemeral range 32768-60999)" >&2
  exit 2
fi
S3_MASTER_PORT=$(( OSTINATO_S3_PORT - 3 ))
S3_VOLUME_PORT=$(( OSTINATO_S3_PORT - 2 ))
S3_FILER_PORT=$(( OSTINATO_S3_PORT - 1 ))
S3_PORTS=()
for _p in "$S3_MASTER_PORT" "$S3_VOLUME_PORT" "$S3_FILER_PORT" "$OSTINATO_S3_PORT"; do
  S3_PORTS+=("$_p" $(( _p + 10000 )))
done
unset _p

# what identifies this instance's process: its data folder on the command line
OURS="-dir=$STATE/data "
WEED_ARGS=(
  -dir="$STATE/data" -ip=127.0.0.1 -ip.bind=127.0.0.1
  -master.port="$S3_MASTER_PORT" -master.port.grpc=$(( S3_MASTER_PORT + 10000 ))
  -master.telemetry=false -master.volumeSizeLimitMB=64 -volume.max=0
  -volume.port="$S3_VOLUME_PORT" -volume.port.grpc=$(( S3_VOLUME_PORT + 10000 ))
  -volume.preStopSeconds=0
  -filer -filer.port="$S3_FILER_PORT" -filer.port.grpc=$(( S3_FILER_PORT + 10000 ))
  -filer.localSocket="$STATE/filer.sock"
  -s3 -s3.port="$OSTINATO_S3_PORT" -s3.port.grpc=$(( OSTINATO_S3_PORT + 10000 ))
  -s3.port.iceberg=0 -s3.port.lance=0 -s3.config="$CONF" -s3.localSocket="$STATE/s3.sock"
)

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
s3_healthy() { curl -fsS -o /dev/null --max-time 2 "$S3_ENDPOINT/healthz" 2>/dev/null; }
# a signed request with the configured key (curl's SigV4; S3 wants the payload hash header)
s3_curl() {
  curl -sS -o /dev/null -w '%{http_code}' --max-time 5 \
    --aws-sigv4 "aws:amz:us-east-1:s3" --user "$OSTINATO_S3_ACCESS_KEY:$OSTINATO_S3_SECRET_KEY" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@" 2>/dev/null || true
}
# the bucket exists (made here if not) and takes a write and a delete
s3_bucket_ready() {
  local code
  code=$(s3_curl -X PUT "$S3_ENDPOINT/$OSTINATO_S3_BUCKET")
  case "$code" in 200|409) ;; *) return 1 ;; esac
  code=$(s3_curl -X PUT --data-binary "up" "$S3_ENDPOINT/$OSTINATO_S3_BUCKET/infra-up-probe")
  [ "$code" = 200 ] || return 1
  code=$(s3_curl -X DELETE "$S3_ENDPOINT/$OSTINATO_S3_BUCKET/infra-up-probe")
  [ "$code" = 204 ] || [ "$code" = 200 ]
}
