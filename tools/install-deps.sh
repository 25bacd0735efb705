#!/bin/sh
# Install everything picolm needs to build and to run its tests on Debian.
# Idempotent: installs only what is missing.  Uses sudo when not root.
set -e
export DEBIAN_FRONTEND=noninteractive
SUDO=
[ "$(id -u)" -ne 0 ] && SUDO=sudo
need=""
for p in build-essential pkg-config libinih-dev unicode-data python3 python3-numpy valgrind clang libclang-rt-14-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq $need
fi
