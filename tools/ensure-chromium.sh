#!/usr/bin/env bash
# The browser tests drive Debian's chromium with playwright (playwright cannot download its own browser
# here): install the package when it is missing. Idempotent; a no-op when /usr/bin/chromium exists.
set -euo pipefail
CHROMIUM=${HVSYNC_CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing Debian's chromium for the browser tests"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q chromium >/dev/null \
  || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q chromium >/dev/null; }
[ -x "$CHROMIUM" ] || { echo "chromium is not at $CHROMIUM after installing it" >&2; exit 1; }
