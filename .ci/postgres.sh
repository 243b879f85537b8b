#!/usr/bin/env bash
# PostgreSQL server binaries for the backend tests; idempotent. The tests start (and remove)
# their own throwaway server from these binaries, so nothing is configured or started here.
set -euo pipefail

if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
