#!/bin/bash
# Installs what `make test-aarch64` needs on Debian: the aarch64 cross
# compiler, qemu-user, and inih for arm64 (multiarch).  Idempotent: does
# nothing (and needs no network) when everything is already there.
set -euo pipefail

need=()
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need+=(gcc-aarch64-linux-gnu)
# the C library headers for the cross compiler: only *recommended* by
# gcc-aarch64-linux-gnu, so --no-install-recommends leaves them out (a fresh
# machine then fails on <bits/wordsize.h>)
dpkg -s libc6-dev-arm64-cross >/dev/null 2>&1 || need+=(libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null 2>&1 || need+=(qemu-user)
dpkg -s libinih-dev:arm64 >/dev/null 2>&1 || need+=(libinih-dev:arm64)
# tests/t_aarch64.sh compares logits with shared/tools/cmp_logits.py
/usr/bin/python3 -c "import numpy" >/dev/null 2>&1 || need+=(python3-numpy)

if [ ${#need[@]} -eq 0 ]; then
    echo "ci-aarch64-setup: everything present"
    exit 0
fi

SUDO=
[ "$(id -u)" -ne 0 ] && SUDO=sudo
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
echo "ci-aarch64-setup: installed ${need[*]}"
