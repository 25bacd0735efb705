#!/bin/sh
# Differential test of the BPE pre-tokenizers: core/unicode.c's splits
# against std::regex on llama.cpp's collapsed text (tests/pretok_regex.cpp),
# 20000 random strings per family.  Needs a C++ compiler (build-essential).
BUILD=${PICOLM_BUILD:-build}
CXX=${CXX:-g++}
if [ -n "$PICOLM_SANITIZER" ] || [ -n "$PICOLM_TEST_WRAPPER" ]; then
    echo "SKIP: pre-tokenizers vs std::regex: native builds only (test_bpe covers this code under sanitizers and emulation)"; exit 0
fi
command -v "$CXX" >/dev/null 2>&1 || { echo "SKIP: pre-tokenizers vs std::regex: no C++ compiler ($CXX)"; exit 0; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if ! "$CXX" -O1 -std=c++17 -Icore -I"$BUILD/gen" tests/pretok_regex.cpp "$BUILD/libpicolm.a" -o "$tmp/rx" 2>"$tmp/err"; then
    echo "FAIL: build tests/pretok_regex.cpp: $(head -3 "$tmp/err")"; exit 1
fi
"$tmp/rx"
