#!/bin/bash
# Installs a Debian cross toolchain for the tests under qemu-user:
#   ci-cross-setup.sh DEBIAN_ARCH TRIPLET [PACKAGE...]
# the cross gcc (gcc-TRIPLET), its C library headers (libc6-dev-ARCH-cross),
# qemu-user, python3-numpy (the tests compare logits with
# shared/tools/cmp_logits.py) and the extra PACKAGEs; a PACKAGE:ARCH adds
# ARCH as a dpkg foreign architecture first (multiarch).  Idempotent: does
# nothing (and needs no network) when everything is already there.  Used by
# tools/ci-aarch64-setup.sh, ci-armhf-setup.sh and ci-riscv64-setup.sh.
set -euo pipefail
arch=$1 triplet=$2
shift 2

need=()
command -v "$triplet-gcc" >/dev/null 2>&1 || need+=("gcc-$triplet")
# only *recommended* by the cross gcc: --no-install-recommends leaves it out
# (a fresh machine then fails on <bits/wordsize.h>)
dpkg -s "libc6-dev-$arch-cross" >/dev/null 2>&1 || need+=("libc6-dev-$arch-cross")
dpkg -s qemu-user >/dev/null 2>&1 || need+=(qemu-user)
/usr/bin/python3 -c "import numpy" >/dev/null 2>&1 || need+=(python3-numpy)
multiarch=0
for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
    case $p in *:"$arch") multiarch=1 ;; esac
done

if [ ${#need[@]} -eq 0 ]; then
    echo "ci-cross-setup $arch: everything present"
    exit 0
fi

SUDO=
[ "$(id -u)" -ne 0 ] && SUDO=sudo
if [ $multiarch = 1 ] && ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
    $SUDO dpkg --add-architecture "$arch"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
echo "ci-cross-setup $arch: installed ${need[*]}"
