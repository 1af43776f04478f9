#!/usr/bin/env bash
# axe-core, the accessibility checker the browser tests inject into each UI page
# (tests/helpers/axe.py; docs/UI.md "Accessibility"): fetched once with npm into
# .cache/axe-core/<version> and checked against its pinned SHA-256 (lib.sh npm_asset, as for
# Swagger UI). Test-only: the api never serves it. Without npm the accessibility test skips
# and says why. The version below is the one the tests read (one home).
set -euo pipefail
# shellcheck source=infra/lib.sh
. "$(dirname "$0")/lib.sh"
VERSION=4.14.1
SHA256=e6b0ce02b84d892e2e33e403485e7f3d6c29e2be6df65daf44d89ba564139745
npm_asset axe-core "$VERSION" "$SHA256" \
  "$(cd "$(dirname "$0")/.." && pwd)/.cache/axe-core/$VERSION" axe.min.js
