#!/usr/bin/env bash
# axe-core, the accessibility checker the browser tests inject into each UI page
# (tests/helpers/ui.py `Tab.axe`; docs/UI.md "Accessibility"): fetched once with npm into
# .cache/axe-core/<version> and checked against its pinned SHA-256, as infra/swagger_ui.sh does
# for Swagger UI. Test-only: the api never serves it. Without npm the accessibility test skips
# and says why. The version below is the one the tests read (one home).
set -euo pipefail
# shellcheck source=infra/lib.sh
. "$(dirname "$0")/lib.sh"
VERSION=4.14.1
SHA256=e6b0ce02b84d892e2e33e403485e7f3d6c29e2be6df65daf44d89ba564139745
DEST="$(cd "$(dirname "$0")/.." && pwd)/.cache/axe-core/$VERSION"
FILES="axe.min.js LICENSE"

have=1
for f in $FILES; do [ -s "$DEST/$f" ] || have=0; done
[ "$have" -eq 1 ] && exit 0
command -v npm >/dev/null 2>&1 || { log "npm missing: axe-core not installed"; exit 0; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log "fetching axe-core $VERSION (one-off)"
(cd "$work" && npm pack "axe-core@$VERSION" --silent >/dev/null)
echo "$SHA256  $work/axe-core-$VERSION.tgz" | sha256sum -c --quiet - \
  || die "axe-core $VERSION: checksum mismatch"
tar -xzf "$work/axe-core-$VERSION.tgz" -C "$work"
mkdir -p "$DEST.partial"
for f in $FILES; do cp "$work/package/$f" "$DEST.partial/$f"; done
rm -rf "$DEST" && mv "$DEST.partial" "$DEST"
