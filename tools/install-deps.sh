#!/bin/sh
# Install everything picolm needs to build and to run its tests on Debian.
# Idempotent: installs only what is missing.  Uses sudo when not root.
set -e
export DEBIAN_FRONTEND=noninteractive
SUDO=
[ "$(id -u)" -ne 0 ] && SUDO=sudo
need=""
for p in build-essential pkg-config libinih-dev libmicrohttpd-dev libjson-c-dev unicode-data python3 python3-numpy valgrind clang libclang-rt-14-dev curl chromium; do
    dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq $need
fi
# picolm-server's tests drive it with real clients: the official openai SDK
# and playwright-core (for Debian's chromium), from the npm registry, pinned
# by tests/server/package-lock.json (tests/t_server.sh runs this too).
if ! command -v npm >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq nodejs npm
fi
srv_tests="$(dirname "$0")/../tests/server"
if [ ! -d "$srv_tests/node_modules/openai" ] || [ ! -d "$srv_tests/node_modules/playwright-core" ]; then
    (cd "$srv_tests" && npm ci --no-audit --no-fund --loglevel=error)
fi
