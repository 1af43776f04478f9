#!/usr/bin/env bash
# Build the Jaeger v2 all-in-one binary from the Go module proxy (once per machine).
#   - module: infra/jaeger/go.mod + go.sum (github.com/jaegertracing/jaeger v1.76.0 = v2.13.0)
#   - caches: $OSTINATO_CACHE/go/mod (GOMODCACHE) and $OSTINATO_CACHE/go/build (GOCACHE),
#     outside the repo and shared by every clone on the machine
#   - binary: $OSTINATO_CACHE/bin/jaeger-$JAEGER_VERSION; skipped when it exists and was built
#     from the same go.mod/go.sum (stamp file next to it): `go_build` in infra/lib.sh
# Prints the binary's path on stdout (progress goes to stderr).
# Env: OSTINATO_GO (go binary; default: `go` on PATH, else /usr/local/go/bin/go),
#      OSTINATO_JAEGER_LDFLAGS (default "-s -w": no symbol table / DWARF, smaller and faster link).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=infra/env.sh
. "$ROOT/infra/env.sh"

JAEGER_VERSION=2.13.0           # what the binary reports (`jaeger version`)
JAEGER_MODULE_VERSION=v1.76.0   # the module version go.mod requires (same commit)
MODDIR="$ROOT/infra/jaeger"
LDFLAGS_EXTRA=${OSTINATO_JAEGER_LDFLAGS--s -w}

# shellcheck source=infra/lib.sh
. "$ROOT/infra/lib.sh"

grep -qE "^[[:space:]]*github.com/jaegertracing/jaeger $JAEGER_MODULE_VERSION( |$)" "$MODDIR/go.mod" \
  || die "infra/jaeger/go.mod does not require github.com/jaegertracing/jaeger $JAEGER_MODULE_VERSION; update JAEGER_VERSION/JAEGER_MODULE_VERSION in infra/jaeger/build.sh"

pkg=github.com/jaegertracing/jaeger
# as in upstream's own build (scripts/makefiles/BuildBinaries.mk): the version it reports
go_build jaeger "$JAEGER_VERSION" "$MODDIR" "$pkg/cmd/jaeger" 1.24.6 \
  "$LDFLAGS_EXTRA -X $pkg/internal/version.latestVersion=v$JAEGER_VERSION -X $pkg/internal/version.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
