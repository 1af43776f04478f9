#!/usr/bin/env bash
# The Swagger UI assets the api serves itself at /schema/swagger/assets (never from a CDN, so the
# page works offline): swagger-ui-dist, fetched once with npm into .cache/swagger-ui/<version>
# and checked against its pinned SHA-256 (lib.sh npm_asset). Without npm the api still runs;
# /schema/swagger then says the assets are missing (the OpenAPI document at
# /schema/openapi.json is unaffected).
set -euo pipefail
# shellcheck source=infra/lib.sh
. "$(dirname "$0")/lib.sh"
VERSION=5.35.0
SHA256=1b8e891893404ea4c3558b6a87e2a3e494e7eedba41168c2ece5800a391a6ea6
npm_asset swagger-ui-dist "$VERSION" "$SHA256" \
  "$(cd "$(dirname "$0")/.." && pwd)/.cache/swagger-ui/$VERSION" \
  swagger-ui-bundle.js swagger-ui-standalone-preset.js swagger-ui.css favicon-32x32.png
