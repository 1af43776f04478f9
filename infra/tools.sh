#!/usr/bin/env bash
# Debian packages the test suite needs besides the servers: libfaketime (the clock-skew fault
# test runs schedulers with their host clock moved) and chromium (the web UI's browser tests,
# tests/e2e/test_ui.py, drive Debian's Chromium with Playwright; never `playwright install`).
# Installed with apt-get when missing (as root, as CI runs); otherwise says what to install.
set -euo pipefail
# shellcheck source=infra/lib.sh
. "$(dirname "$0")/lib.sh"

missing=()
compgen -G "/usr/lib/*/faketime/libfaketime.so.1" >/dev/null || missing+=(libfaketime)
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0
[ "$(id -u)" -eq 0 ] || die "missing ${missing[*]}; install it (apt-get install ${missing[*]})"
log "installing ${missing[*]} with apt-get (one-off)"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
