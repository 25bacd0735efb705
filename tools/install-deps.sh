#!/bin/sh
# Install everything picolm needs to build and to run its tests on Debian.
# Idempotent; run as root (or with sudo).
set -e
export DEBIAN_FRONTEND=noninteractive
need=""
for p in build-essential pkg-config libinih-dev python3 python3-numpy valgrind clang libclang-rt-14-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
    apt-get update -qq
    apt-get install -y -qq $need
fi
