#!/bin/sh
# picolm test runner.  Runs every build/tests/test_* binary and every
# tests/t_*.sh script.  Each prints one line per check:
#   PASS: name      FAIL: name: why      SKIP: name: why
# A program that exits non-zero without printing FAIL counts as one failure
# (a crash is never silent).  Closing line: "N passed, N failed, N skipped".
# Filter with TESTS="test_formats t_cli" (names without extension).
# Every test runs under a time limit (coreutils `timeout`, which signals the
# test's whole process group, then SIGKILLs it 10 s later), so a deadlock is
# a FAIL naming the test instead of a hung suite:
#   PICOLM_TEST_TIMEOUT=600     default limit in seconds (0 = none)
#   PICOLM_TIMEOUT_<name>=N     limit for one test, e.g. PICOLM_TIMEOUT_t_valgrind=3000
# Tests known to run long get a larger default below (slow_tests).
#   PICOLM_BENCH=1              test_kernels also prints its kernel throughput
#                               (INFO lines; off by default: figures, not checks)
BUILD=${PICOLM_BUILD:-build}
export PICOLM_BUILD="$BUILD"
export PICOLM_BENCH="${PICOLM_BENCH:-0}"
export PICOLM_SHARED="${PICOLM_SHARED:-../shared}"
if [ ! -d "$PICOLM_SHARED/models" ]; then
    echo "!!! PICOLM_SHARED=$PICOLM_SHARED has no models/: tests that need shared data will be SKIPPED !!!"
fi
pass=0; fail=0; skip=0; failed_names=""
default_limit=${PICOLM_TEST_TIMEOUT:-600}
# tests that take minutes on a slow board or under qemu: their own default
slow_tests="t_valgrind=2400 t_aarch64=2400 t_cross=2400 t_static=1800 test_logits=1800 test_kernels=1800 test_samplers=1800"
# limit NAME: PICOLM_TIMEOUT_NAME, else PICOLM_TEST_TIMEOUT when set, else slow_tests, else 600
limit() {
    eval "v=\${PICOLM_TIMEOUT_$1:-}"
    [ -z "$v" ] && [ -n "$PICOLM_TEST_TIMEOUT" ] && v=$PICOLM_TEST_TIMEOUT
    for kv in $slow_tests; do
        [ -z "$v" ] && [ "${kv%%=*}" = "$1" ] && v=${kv#*=}
    done
    echo "${v:-$default_limit}"
}
if ! command -v timeout >/dev/null 2>&1; then
    echo "!!! no 'timeout' (coreutils): tests run WITHOUT a time limit !!!"; default_limit=0
fi
log=$(mktemp); trap 'rm -f "$log"' EXIT
for t in "$BUILD"/tests/test_* tests/t_*.sh; do
    [ -e "$t" ] || continue
    name=$(basename "$t"); name=${name%.sh}
    if [ -n "$TESTS" ]; then
        case " $TESTS " in *" $name "*) ;; *) continue ;; esac
    fi
    start=$(date +%s)
    lim=$(limit "$name")
    to=""
    [ "$lim" != 0 ] && [ "$default_limit" != 0 ] && to="timeout -k 10 $lim"
    case "$t" in
        *.sh) $to sh "$t" >"$log" 2>&1 </dev/null ;;
        *) $to $PICOLM_TEST_WRAPPER "$t" >"$log" 2>&1 </dev/null ;;
    esac
    rc=$?
    el=$(( $(date +%s) - start ))
    if [ -n "$to" ] && { [ $rc -eq 124 ] || { [ $rc -eq 137 ] && [ "$el" -ge "$lim" ]; }; }; then
        echo "FAIL: $name: timed out after ${lim}s (a hang or deadlock?; PICOLM_TIMEOUT_$name=N raises the limit)" >>"$log"
    fi
    p=$(grep -c '^PASS: ' "$log"); f=$(grep -c '^FAIL: ' "$log"); s=$(grep -c '^SKIP: ' "$log")
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL: $name: exited with status $rc without reporting a failure" >>"$log"; f=1
    fi
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    printf '%-28s %4d passed %4d failed %4d skipped  (%ds)\n' "$name" "$p" "$f" "$s" "$el"
    if [ "$f" -gt 0 ] || [ -n "$VERBOSE" ]; then
        grep -E '^(FAIL|SKIP): ' "$log" | head -40 | sed 's/^/    /'
        if [ "$f" -gt 0 ]; then
            tail -15 "$log" | grep -v -E '^(PASS|FAIL|SKIP): ' | sed 's/^/    | /'
            failed_names="$failed_names $name"
        fi
    elif [ "$s" -gt 0 ]; then
        grep '^SKIP: ' "$log" | head -5 | sed 's/^/    /'
    fi
done
[ -n "$failed_names" ] && echo "failed:$failed_names"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
