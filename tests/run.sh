#!/bin/sh
# picolm test runner.  Runs every build/tests/test_* binary and every
# tests/t_*.sh script.  Each prints one line per check:
#   PASS: name      FAIL: name: why      SKIP: name: why
# A program that exits non-zero without printing FAIL counts as one failure
# (a crash is never silent).  Closing line: "N passed, N failed, N skipped".
# Filter with TESTS="test_formats t_cli" (names without extension).
BUILD=${PICOLM_BUILD:-build}
export PICOLM_BUILD="$BUILD"
export PICOLM_SHARED="${PICOLM_SHARED:-../shared}"
if [ ! -d "$PICOLM_SHARED/models" ]; then
    echo "!!! PICOLM_SHARED=$PICOLM_SHARED has no models/: tests that need shared data will be SKIPPED !!!"
fi
pass=0; fail=0; skip=0; failed_names=""
log=$(mktemp); trap 'rm -f "$log"' EXIT
for t in "$BUILD"/tests/test_* tests/t_*.sh; do
    [ -e "$t" ] || continue
    name=$(basename "$t"); name=${name%.sh}
    if [ -n "$TESTS" ]; then
        case " $TESTS " in *" $name "*) ;; *) continue ;; esac
    fi
    start=$(date +%s)
    case "$t" in
        *.sh) sh "$t" >"$log" 2>&1 ;;
        *) $PICOLM_TEST_WRAPPER "$t" >"$log" 2>&1 ;;
    esac
    rc=$?
    p=$(grep -c '^PASS: ' "$log"); f=$(grep -c '^FAIL: ' "$log"); s=$(grep -c '^SKIP: ' "$log")
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL: $name: exited with status $rc without reporting a failure" >>"$log"; f=1
    fi
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    el=$(( $(date +%s) - start ))
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
