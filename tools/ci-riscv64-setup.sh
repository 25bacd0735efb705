#!/bin/bash
# Installs what `make test-riscv64` (and `make static TARGET=riscv64`) needs
# on Debian: the riscv64-linux-gnu cross compiler and its C library headers,
# qemu-user, clang-16 (RVV 1.0 intrinsics for backends/rvv) and inih.
# Idempotent: does nothing (and needs no network) when everything is there.
#
# Debian 12 has no riscv64 port, so there is no libinih-dev:riscv64 for it
# (and this machine's Debian mirror serves no source packages to build one).
# Debian 13 (trixie) has riscv64 as a release architecture: this script
# downloads trixie's libinih-dev:riscv64 package with apt-get download and a
# private package list (the system's apt sources stay untouched), and
# extracts ini.h and the static libinih.a into the cross toolchain's
# directory /usr/riscv64-linux-gnu.  picolm links it statically, so the
# riscv64 binaries need no libinih on the board.  No inih code lives in the
# picolm tree.
set -euo pipefail

SYSROOT=/usr/riscv64-linux-gnu
bash "$(dirname "$0")/ci-cross-setup.sh" riscv64 riscv64-linux-gnu clang-16
if [ -f $SYSROOT/lib/libinih.a ] && [ -f $SYSROOT/include/ini.h ]; then
    echo "ci-riscv64-setup: inih present"
    exit 0
fi
SUDO=
[ "$(id -u)" -ne 0 ] && SUDO=sudo
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The Debian archive this machine's own apt sources name (not its security
# archive): trixie comes from the same mirror as the system's packages.
archive=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
          awk '$1 == "URIs:" && $2 ~ /debian/ && $2 !~ /security/ { print $2; exit }')
[ -n "$archive" ] || archive=$(sed -e 's/\[[^]]*\]//' /etc/apt/sources.list 2>/dev/null |
          awk '$1 == "deb" && $2 !~ /security/ && $2 ~ /debian/ { print $2; exit }')
if [ -z "$archive" ]; then
    echo "ci-riscv64-setup: no Debian archive in the system's apt sources" >&2
    exit 1
fi
cat >"$work/trixie.sources" <<SRC
Types: deb
URIs: $archive
Suites: trixie
Components: main
Architectures: riscv64
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
apt_private=(-o Dir::Etc::SourceList="$work/trixie.sources" -o Dir::Etc::SourceParts=/dev/null
             -o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache"
             -o APT::Architectures::=riscv64 -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
apt-get "${apt_private[@]}" update -qq
(cd "$work" && apt-get "${apt_private[@]}" download -qq libinih-dev:riscv64)
dpkg-deb -x "$work"/libinih-dev_*_riscv64.deb "$work/x"
$SUDO install -D -m 644 "$work/x/usr/include/ini.h" $SYSROOT/include/ini.h
$SUDO install -D -m 644 "$work/x/usr/lib/riscv64-linux-gnu/libinih.a" $SYSROOT/lib/libinih.a
echo "ci-riscv64-setup: installed ini.h and libinih.a from $(basename "$work"/libinih-dev_*_riscv64.deb) (Debian 13)"
