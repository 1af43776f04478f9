#!/usr/bin/env bash
# Build SeaweedFS's `weed` binary (its S3 gateway is the tests' object store) from the Go module
# proxy, once per machine.
#   - module: infra/s3/go.mod + go.sum (github.com/seaweedfs/seaweedfs at a pseudo-version: the
#     one the module proxy serves here; `go install ...@version` refuses upstream's replace
#     directive, so the build runs in our own module, as infra/jaeger does)
#   - caches: $OSTINATO_CACHE/go/mod (GOMODCACHE) and $OSTINATO_CACHE/go/build (GOCACHE),
#     outside the repo and shared with the Jaeger build and every clone on the machine
#   - binary: $OSTINATO_CACHE/bin/weed-$WEED_VERSION; skipped when it exists and was built from
#     the same go.mod/go.sum (stamp file next to it)
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
BIN="$OSTINATO_CACHE/bin/weed-$WEED_VERSION"
STAMP="$BIN.stamp"
LDFLAGS_EXTRA=${OSTINATO_S3_LDFLAGS--s -w}

log() { echo "[infra] $*" >&2; }
die() { echo "[infra] ERROR: $*" >&2; exit 1; }

grep -qE "^[[:space:]]*github.com/seaweedfs/seaweedfs $WEED_MODULE_VERSION( |$)" "$MODDIR/go.mod" \
  || die "infra/s3/go.mod does not require github.com/seaweedfs/seaweedfs $WEED_MODULE_VERSION; update WEED_MODULE_VERSION/WEED_VERSION in infra/s3/build.sh"
want_stamp=$(cat "$MODDIR/go.mod" "$MODDIR/go.sum" | sha256sum | cut -c1-16)
built() { [ -x "$BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want_stamp" ]; }

if built; then echo "$BIN"; exit 0; fi

if [ -n "${OSTINATO_GO:-}" ]; then GO=$OSTINATO_GO
elif command -v go >/dev/null 2>&1; then GO=$(command -v go)
elif [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go
else die "no Go toolchain found (need Go >= 1.26.6: put go on PATH or set OSTINATO_GO)"; fi

mkdir -p "$OSTINATO_CACHE/bin" "$OSTINATO_CACHE/go/mod" "$OSTINATO_CACHE/go/build"
(
  # one build at a time per cache, even with two clones starting together
  flock 9
  if built; then exit 0; fi
  buildlog="$OSTINATO_CACHE/go-build-weed-$WEED_VERSION.log"
  tmp="$BIN.tmp.$$"
  rm -f "$tmp"
  t0=$(date +%s)
  log "building seaweedfs weed $WEED_VERSION with $("$GO" version | cut -d' ' -f3) into $BIN (one-off, several minutes cold; log $buildlog)"
  pkg=github.com/seaweedfs/seaweedfs/weed
  ldflags="$LDFLAGS_EXTRA -X github.com/seaweedfs/seaweedfs/weed/util/version.COMMIT=${WEED_VERSION#*-}"
  # GOFLAGS=-modcacherw: the module cache stays deletable with a plain rm -rf.
  # CGO_ENABLED=0 and -trimpath: a static binary, as upstream's release builds.
  if ! (cd "$MODDIR" && env GOMODCACHE="$OSTINATO_CACHE/go/mod" GOCACHE="$OSTINATO_CACHE/go/build" \
        GOFLAGS=-modcacherw GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 \
        "$GO" build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg") \
        >"$buildlog" 2>&1 </dev/null; then
    rm -f "$tmp"
    tail -n 40 "$buildlog" >&2
    die "go build of seaweedfs weed $WEED_VERSION failed (log: $buildlog)"
  fi
  "$tmp" version >/dev/null 2>&1 || { rm -f "$tmp"; die "the built weed binary does not run ($tmp)"; }
  mv -f "$tmp" "$BIN"
  echo "$want_stamp" > "$STAMP"
  log "built seaweedfs weed $WEED_VERSION ($(du -m "$BIN" | cut -f1) MB) in $(( $(date +%s) - t0 ))s"
) 9>"$OSTINATO_CACHE/.weed-$WEED_VERSION.lock"
built || die "weed binary missing after build ($BIN)"
echo "$BIN"
