#!/bin/bash
# Installs what `make test-armhf` (and `make static TARGET=armhf`) needs on
# Debian: the arm-linux-gnueabihf cross compiler, qemu-user, and inih for
# armhf (multiarch libinih-dev:armhf).  Idempotent (tools/ci-cross-setup.sh).
exec bash "$(dirname "$0")/ci-cross-setup.sh" armhf arm-linux-gnueabihf libinih-dev:armhf
