#!/bin/bash
# Installs what `make test-armhf` (and `make static TARGET=armhf`) needs on
# Debian: the arm-linux-gnueabihf cross compiler and its C library headers,
# qemu-user, and inih for armhf (multiarch libinih-dev:armhf).  Idempotent:
# does nothing (and needs no network) when everything is already there.
set -euo pipefail

need=()
command -v arm-linux-gnueabihf-gcc >/dev/null 2>&1 || need+=(gcc-arm-linux-gnueabihf)
# only *recommended* by the cross gcc: --no-install-recommends leaves it out
dpkg -s libc6-dev-armhf-cross >/dev/null 2>&1 || need+=(libc6-dev-armhf-cross)
command -v qemu-arm >/dev/null 2>&1 || need+=(qemu-user)
dpkg -s libinih-dev:armhf >/dev/null 2>&1 || need+=(libinih-dev:armhf)
# tests/t_cross.sh compares logits with shared/tools/cmp_logits.py
/usr/bin/python3 -c "import numpy" >/dev/null 2>&1 || need+=(python3-numpy)

if [ ${#need[@]} -eq 0 ]; then
    echo "ci-armhf-setup: everything present"
    exit 0
fi

SUDO=
[ "$(id -u)" -ne 0 ] && SUDO=sudo
if ! dpkg --print-foreign-architectures | grep -qx armhf; then
    $SUDO dpkg --add-architecture armhf
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
echo "ci-armhf-setup: installed ${need[*]}"
