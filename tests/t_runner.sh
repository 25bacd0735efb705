#!/bin/sh
# The test runner itself (tests/run.sh), on a dummy suite in a temporary
# directory: a test that hangs (a shell script, and a "C program" stand-in
# that is an executable in build/tests) is a FAIL naming it once its time
# limit is up, its children included, and the suite still finishes with the
# closing line; a per-test override lets a slow test pass; a passing test
# next to them still counts.
RUN=$(pwd)/tests/run.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tests" "$tmp/b/tests"
cat >"$tmp/tests/t_hang.sh" <<'EOF'
echo "PASS: before the hang"
sleep 300 &          # a child that must not outlive the limit either
echo $! >"$HANG_PID"
wait
EOF
cat >"$tmp/tests/t_slow.sh" <<'EOF'
sleep 3
echo "PASS: slow but allowed"
EOF
cat >"$tmp/tests/t_good.sh" <<'EOF'
echo "PASS: good"
EOF
printf '#!/bin/sh\nwhile :; do :; done\n' >"$tmp/b/tests/test_spin"
chmod +x "$tmp/b/tests/test_spin"

start=$(date +%s)
# (the outer run's filter, wrapper and limits must not reach the dummy suite)
out=$(cd "$tmp" && env -u TESTS -u VERBOSE -u PICOLM_TEST_WRAPPER HANG_PID="$tmp/pid" PICOLM_BUILD=b PICOLM_SHARED="$tmp" \
      PICOLM_TEST_TIMEOUT=2 PICOLM_TIMEOUT_t_slow=20 \
      timeout -k 5 60 sh "$RUN" 2>&1); rc=$?
el=$(( $(date +%s) - start ))
echo "$out" | sed 's/^/    | /'
[ $rc -ne 0 ] && echo "PASS: the runner exits non-zero when a test hangs (exit $rc)" || echo "FAIL: the runner exited 0"
echo "$out" | grep -q '^    FAIL: t_hang: timed out after 2s' &&
    echo "PASS: a hanging shell test is a FAIL naming it (t_hang: timed out after 2s)" ||
    echo "FAIL: no 'FAIL: t_hang: timed out' line"
echo "$out" | grep -q '^    FAIL: test_spin: timed out after 2s' &&
    echo "PASS: a hanging program in build/tests is a FAIL naming it (test_spin)" ||
    echo "FAIL: no 'FAIL: test_spin: timed out' line"
echo "$out" | grep -q '^t_slow .* 1 passed *0 failed' &&
    echo "PASS: PICOLM_TIMEOUT_t_slow=20 lets a 3 s test pass under a 2 s default" ||
    echo "FAIL: the per-test override did not apply to t_slow"
echo "$out" | tail -1 | grep -qx '3 passed, 2 failed, 0 skipped' &&
    echo "PASS: closing line counts everything: $(echo "$out" | tail -1)" ||
    echo "FAIL: closing line: $(echo "$out" | tail -1)"
[ "$el" -lt 50 ] && echo "PASS: the suite finished in bounded time (${el}s)" || echo "FAIL: the suite took ${el}s"
pid=$(cat "$tmp/pid" 2>/dev/null)
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    echo "FAIL: the hanging test's child (pid $pid) survived the time limit"; kill "$pid"
else
    echo "PASS: the hanging test's child process was ended too"
fi
