#!/bin/bash
# Installs what `make test-aarch64` (and `make static TARGET=aarch64`) needs
# on Debian: the aarch64 cross compiler, qemu-user, and inih for arm64
# (multiarch).  Idempotent (tools/ci-cross-setup.sh).
exec bash "$(dirname "$0")/ci-cross-setup.sh" arm64 aarch64-linux-gnu libinih-dev:arm64
