#!/usr/bin/env bash
# Stop the benchmarks' Redis of this checkout (idempotent; data kept in .cache/redis).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"
# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"

# Ours is the redis-server working in this checkout's data folder (it chdirs to --dir), found
# by its pid file first: the port alone would also match another clone's Redis.
STATE="$ROOT/.cache/redis"
stop_ours redis "$STATE/redis.pid" "redis-server" 20 "$STATE"
