#!/bin/sh
# Every binary answers --help with usage on stdout and exit 0, and refuses an
# unknown flag with a non-zero exit and a message on stderr.
BUILD=${PICOLM_BUILD:-build}
for b in "$BUILD"/bin/*; do
    [ -x "$b" ] || continue
    n=$(basename "$b")
    out=$("$b" --help 2>/dev/null); rc=$?
    if [ $rc -eq 0 ] && echo "$out" | grep -qi "usage"; then echo "PASS: $n --help"; else echo "FAIL: $n --help: rc $rc"; fi
    err=$("$b" --no-such-flag 2>&1 >/dev/null); rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ -n "$err" ]; then echo "PASS: $n rejects an unknown flag (rc $rc)"; else echo "FAIL: $n --no-such-flag: rc $rc, stderr '$err'"; fi
done
