#!/usr/bin/env bash
# Build the Jaeger v2 all-in-one binary from the Go module proxy (once per machine).
#   - module: infra/jaeger/go.mod + go.sum (github.com/jaegertracing/jaeger v1.76.0 = v2.13.0)
#   - caches: $OSTINATO_CACHE/go/mod (GOMODCACHE) and $OSTINATO_CACHE/go/build (GOCACHE),
#     outside the repo and shared by every clone on the machine
#   - binary: $OSTINATO_CACHE/bin/jaeger-$JAEGER_VERSION; skipped when it exists and was built
#     from the same go.mod/go.sum (stamp file next to it)
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
BIN="$OSTINATO_CACHE/bin/jaeger-$JAEGER_VERSION"
STAMP="$BIN.stamp"
LDFLAGS_EXTRA=${OSTINATO_JAEGER_LDFLAGS--s -w}

log() { echo "[infra] $*" >&2; }
die() { echo "[infra] ERROR: $*" >&2; exit 1; }

grep -qE "^[[:space:]]*github.com/jaegertracing/jaeger $JAEGER_MODULE_VERSION( |$)" "$MODDIR/go.mod" \
  || die "infra/jaeger/go.mod does not require github.com/jaegertracing/jaeger $JAEGER_MODULE_VERSION; update JAEGER_VERSION/JAEGER_MODULE_VERSION in infra/jaeger/build.sh"
want_stamp=$(cat "$MODDIR/go.mod" "$MODDIR/go.sum" | sha256sum | cut -c1-16)
built() { [ -x "$BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want_stamp" ]; }

if built; then echo "$BIN"; exit 0; fi

if [ -n "${OSTINATO_GO:-}" ]; then GO=$OSTINATO_GO
elif command -v go >/dev/null 2>&1; then GO=$(command -v go)
elif [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go
else die "no Go toolchain found (need Go >= 1.24.6: put go on PATH or set OSTINATO_GO)"; fi

mkdir -p "$OSTINATO_CACHE/bin" "$OSTINATO_CACHE/go/mod" "$OSTINATO_CACHE/go/build"
(
  # one build at a time per cache, even with two clones starting together
  flock 9
  if built; then exit 0; fi
  buildlog="$OSTINATO_CACHE/go-build-jaeger-$JAEGER_VERSION.log"
  tmp="$BIN.tmp.$$"
  rm -f "$tmp"
  t0=$(date +%s)
  log "building jaeger $JAEGER_VERSION with $("$GO" version | cut -d' ' -f3) into $BIN (one-off, several minutes cold; log $buildlog)"
  pkg=github.com/jaegertracing/jaeger
  ldflags="$LDFLAGS_EXTRA -X $pkg/internal/version.latestVersion=v$JAEGER_VERSION"
  ldflags="$ldflags -X $pkg/internal/version.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  # GOFLAGS=-modcacherw: the module cache stays deletable with a plain rm -rf.
  # CGO_ENABLED=0 and -trimpath as in upstream's own build (scripts/makefiles/BuildBinaries.mk).
  if ! (cd "$MODDIR" && env GOMODCACHE="$OSTINATO_CACHE/go/mod" GOCACHE="$OSTINATO_CACHE/go/build" \
        GOFLAGS=-modcacherw GOWORK=off CGO_ENABLED=0 \
        "$GO" build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg/cmd/jaeger") \
        >"$buildlog" 2>&1 </dev/null; then
    rm -f "$tmp"
    tail -n 40 "$buildlog" >&2
    die "go build of jaeger $JAEGER_VERSION failed (log: $buildlog)"
  fi
  "$tmp" version >/dev/null 2>&1 || { rm -f "$tmp"; die "the built jaeger binary does not run ($tmp)"; }
  mv -f "$tmp" "$BIN"
  echo "$want_stamp" > "$STAMP"
  log "built jaeger $JAEGER_VERSION ($(du -m "$BIN" | cut -f1) MB) in $(( $(date +%s) - t0 ))s"
) 9>"$OSTINATO_CACHE/.jaeger-$JAEGER_VERSION.lock"
built || die "jaeger binary missing after build ($BIN)"
echo "$BIN"
