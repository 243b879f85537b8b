#!/usr/bin/env bash
# Debian's Chromium for the bank explorer's browser tests (tests/explorer/test_browser.py drives
# it through Playwright); idempotent. Playwright's own browser download is never used.
set -euo pipefail

if [ -x /usr/bin/chromium ] || command -v chromium >/dev/null; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
command -v chromium >/dev/null
