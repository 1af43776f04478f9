#!/usr/bin/env bash
# Stop the benchmarks' Redis of this checkout (idempotent; data kept in .cache/redis).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"
# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"

stop_ours redis "$ROOT/.cache/redis/redis.pid" "127.0.0.1:$OSTINATO_REDIS_PORT" 20
