#!/usr/bin/env bash
# The Swagger UI assets the api serves itself at /schema/swagger/assets (never from a CDN, so the
# page works offline): swagger-ui-dist, fetched once with npm into .cache/swagger-ui/<version>
# and checked against its pinned SHA-256. Without npm the api still runs; /schema/swagger then
# says the assets are missing (the OpenAPI document at /schema/openapi.json is unaffected).
set -euo pipefail
# shellcheck source=infra/lib.sh
. "$(dirname "$0")/lib.sh"
VERSION=5.35.0
SHA256=1b8e891893404ea4c3558b6a87e2a3e494e7eedba41168c2ece5800a391a6ea6
DEST="$(cd "$(dirname "$0")/.." && pwd)/.cache/swagger-ui/$VERSION"
FILES="swagger-ui-bundle.js swagger-ui-standalone-preset.js swagger-ui.css favicon-32x32.png"

have=1
for f in $FILES; do [ -s "$DEST/$f" ] || have=0; done
[ "$have" -eq 1 ] && exit 0
command -v npm >/dev/null 2>&1 || { log "npm missing: Swagger UI assets not installed"; exit 0; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log "fetching swagger-ui-dist $VERSION (one-off)"
(cd "$work" && npm pack "swagger-ui-dist@$VERSION" --silent >/dev/null)
echo "$SHA256  $work/swagger-ui-dist-$VERSION.tgz" | sha256sum -c --quiet - \
  || die "swagger-ui-dist $VERSION: checksum mismatch"
tar -xzf "$work/swagger-ui-dist-$VERSION.tgz" -C "$work"
mkdir -p "$DEST"
for f in $FILES LICENSE; do cp "$work/package/$f" "$DEST/$f"; done
