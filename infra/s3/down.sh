#!/usr/bin/env bash
# Stop the SeaweedFS started by infra/s3/up.sh for this state folder (idempotent): SIGTERM,
# wait up to 20 s, then SIGKILL. Data is kept in $OSTINATO_S3_DIR (default <repo>/.cache/s3).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"
# shellcheck source=infra/s3/common.sh
. "$ROOT/infra/s3/common.sh"
# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"

stop_ours seaweedfs "$PIDFILE" "$OURS" "${OSTINATO_S3_STOP_TIMEOUT:-20}"
