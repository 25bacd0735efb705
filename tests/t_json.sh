#!/bin/sh
# --json end to end: the CLI, at temperature 1 over many seeds and budgets,
# must print exactly one complete JSON object or array on stdout (nothing
# else: no prompt echo, stats go to stderr) and exit 0.  -j 1: the runs are
# tiny, and a busy machine makes a thread pool slower, not faster.
# Each output is checked by python3's json module (when present) and by the
# strict validator in build/tests/test_json --validate (always).
BUILD=${PICOLM_BUILD:-build}
BIN=$BUILD/bin/picolm
VAL=$BUILD/tests/test_json
MODEL=models/tiny-shakespeare-q8_0.gguf
for f in "$BIN" "$VAL"; do
    if [ ! -x "$f" ]; then echo "SKIP: t_json: $f not built"; exit 0; fi
done
if [ ! -f "$MODEL" ]; then echo "SKIP: t_json: $MODEL absent"; exit 0; fi
PY=
for p in /usr/bin/python3 python3; do # the system one starts faster than a pyenv shim
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import json' 2>/dev/null; then PY=$p; break; fi
done
[ -z "$PY" ] && echo "SKIP: t_json: python3 absent, checking with $VAL --validate only"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# check_json FILE... -> 0 when every FILE is one complete JSON object/array
# (one python process per call: its start-up dominates otherwise)
check_json() {
    for f in "$@"; do "$VAL" --validate <"$f" || return 1; done
    if [ -n "$PY" ]; then
        $PY -c 'import json,sys
for p in sys.argv[1:]:
    d = json.load(open(p, encoding="utf-8"))
    if not isinstance(d, (dict, list)): sys.exit(1)' "$@" 2>/dev/null || return 1
    fi
    return 0
}

# run_case LABEL N SEEDS ARGS... : one PASS/FAIL line for all seeds
run_case() {
    label=$1; n=$2; seeds=$3; shift 3
    # sanitized (5-10x slower): every case, on its first three seeds
    [ -n "$PICOLM_SANITIZER" ] && seeds=$(echo $seeds | cut -d' ' -f1-3)
    bad=0; total=0; first_bad=; files=
    rm -f "$tmp"/out.*
    for seed in $seeds; do
        total=$((total + 1))
        "$BIN" "$MODEL" -j 1 -n "$n" -t 1 -s "$seed" --json "$@" >"$tmp/out.$seed" 2>"$tmp/err"
        rc=$?
        if [ $rc -ne 0 ] || ! "$VAL" --validate <"$tmp/out.$seed"; then
            bad=$((bad + 1))
            if [ -z "$first_bad" ]; then
                first_bad="seed $seed rc $rc: stdout '$(head -c 200 "$tmp/out.$seed" | tr '\n' ' ')' stderr '$(grep -v '^picolm: \(load\|backend\|warning\)' "$tmp/err" | tr '\n' ' ' | head -c 300)'"
            fi
        else
            files="$files $tmp/out.$seed"
        fi
    done
    # shellcheck disable=SC2086
    if [ -n "$files" ] && ! check_json $files; then
        bad=$((bad + 1)); first_bad="${first_bad:-python3's json module rejects one of the outputs}"
    fi
    if [ $bad -eq 0 ]; then
        echo "PASS: --json $label: $total/$total outputs are complete JSON ($(cat "$tmp"/out.* | wc -c) bytes in all)"
    else
        echo "FAIL: --json $label: $bad/$total outputs invalid or truncated; first: $first_bad"
    fi
}

SEEDS="1 2 3 4 5 6 7 8 9 10 11 12 13 14 15"
for n in 2 3 4 6 10 25; do
    run_case "-n $n -p ROMEO:" "$n" "$SEEDS" -p "ROMEO:"
done
run_case "-n 100 -p ROMEO:" 100 "$SEEDS" -p "ROMEO:"
run_case "-n 400 -p '{\"name\": '" 400 "1 2 3 4 5 6 7 8" -p '{"name": '
run_case "-n 250 -p 'JULIET:'" 250 "21 22 23 24 25 26 27 28" -p "JULIET:"
run_case "-n 60 greedy" 60 "1" -p "ROMEO:" -t 0
run_case "-n 60 with top-k/min-p/penalties" 60 "1 2 3 4 5" -p "ROMEO:" --top-k 40 --min-p 0.05 --repeat-penalty 1.3
# The context fills up before -n: the budget must count the context's room too.
run_case "-c 48 -n 200 (context smaller than the budget)" 200 "1 2 3 4 5" -p "ROMEO:" -c 48

# Same seed, same document.
"$BIN" "$MODEL" -j 1 -n 80 -t 1 -s 7 --json -p "ROMEO:" >"$tmp/a" 2>/dev/null
"$BIN" "$MODEL" -j 1 -n 80 -t 1 -s 7 --json -p "ROMEO:" >"$tmp/b" 2>/dev/null
if cmp -s "$tmp/a" "$tmp/b" && [ -s "$tmp/a" ]; then
    echo "PASS: --json: same seed, same document"
else
    echo "FAIL: --json: two runs with seed 7 differ (or are empty)"
fi

# A budget too small for any document: a clean error, not broken JSON.
"$BIN" "$MODEL" -j 1 -n 1 -t 1 -s 1 --json -p "ROMEO:" >"$tmp/out" 2>"$tmp/err"
rc=$?
if { [ $rc -ne 0 ] && [ ! -s "$tmp/out" ] && grep -q "budget" "$tmp/err"; } || { [ $rc -eq 0 ] && check_json "$tmp/out"; }; then
    echo "PASS: --json -n 1: valid JSON or a clean budget error (rc $rc)"
else
    echo "FAIL: --json -n 1: rc $rc, stdout '$(head -c 100 "$tmp/out")', stderr '$(head -c 200 "$tmp/err")'"
fi
exit 0
