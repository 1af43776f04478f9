#!/usr/bin/env bash
# Build SeaweedFS's `weed` binary (its S3 gateway is the tests' object store) from the Go module
# proxy, once per machine.
#   - module: infra/s3/go.mod + go.sum (github.com/seaweedfs/seaweedfs at a pseudo-version: the
#     one the module proxy serves here; `go install ...@version` refuses upstream's replace
#     directive, so the build runs in our own module, as infra/jaeger does)
#   - caches: $OSTINATO_CACHE/go/mod (GOMODCACHE) and $OSTINATO_CACHE/go/build (GOCACHE),
#     outside the repo and shared with the Jaeger build and every clone on the machine
#   - binary: $OSTINATO_CACHE/bin/weed-$WEED_VERSION; skipped when it exists and was built from
#     the same go.mod/go.sum (stamp file next to it): `go_build` in infra/lib.sh, as for Jaeger
# Prints the binary's path on stdout (progress goes to stderr).
# Env: OSTINATO_GO (go binary; default: `go` on PATH, else /usr/local/go/bin/go; needs Go >=
#      1.26.6, what seaweedfs's go.mod asks), OSTINATO_S3_LDFLAGS (default "-s -w").
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"

WEED_MODULE_VERSION=v0.0.0-20261109003541-7506e5f91cd6   # what go.mod requires
WEED_VERSION=20261109-7506e5f91cd6                        # the binary's name: date and commit
MODDIR="$ROOT/infra/s3"
LDFLAGS_EXTRA=${OSTINATO_S3_LDFLAGS--s -w}

# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"

grep -qE "^[[:space:]]*github.com/seaweedfs/seaweedfs $WEED_MODULE_VERSION( |$)" "$MODDIR/go.mod" \
  || die "infra/s3/go.mod does not require github.com/seaweedfs/seaweedfs $WEED_MODULE_VERSION; update WEED_MODULE_VERSION/WEED_VERSION in infra/s3/build.sh"

# GOTOOLCHAIN=local: build with the Go found (>= 1.26.6, seaweedfs's go line), never fetch another
go_build weed "$WEED_VERSION" "$MODDIR" github.com/seaweedfs/seaweedfs/weed 1.26.6 \
  "$LDFLAGS_EXTRA -X github.com/seaweedfs/seaweedfs/weed/util/version.COMMIT=${WEED_VERSION#*-}" \
  GOTOOLCHAIN=local
