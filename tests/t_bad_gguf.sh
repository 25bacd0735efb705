#!/bin/sh
# Hostile GGUF files (tests/bad/, made by tools/mkbad.py) must be refused
# with a clear message and exit status 1 or 2: never a signal, never a hang.
# Each line of tests/bad/expected.txt says, for picolm-gguf info,
# picolm-logits and picolm: rej (exit 1/2 and the output names the problem),
# ok (exit 0) or any (exit 0/1/2).
BUILD=${PICOLM_BUILD:-build}
BIN=$BUILD/bin
DIR=tests/bad
T=${TIMEOUT:-10}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$BIN/picolm-gguf" ] || [ ! -x "$BIN/picolm-logits" ]; then
    echo "FAIL: t_bad_gguf: $BIN/picolm-gguf or $BIN/picolm-logits not built"; exit 1
fi
# Token ids 1, 5, 10 (little-endian int32): valid in the 300-token base model.
printf '\001\000\000\000\005\000\000\000\012\000\000\000' >"$tmp/tok.i32"

# The committed files must be what the generator makes (when python3 exists).
if command -v python3 >/dev/null 2>&1; then
    if python3 tools/mkbad.py "$tmp/gen" >/dev/null 2>&1; then
        stale=""
        for f in "$tmp"/gen/*; do
            cmp -s "$f" "$DIR/$(basename "$f")" || stale="$stale $(basename "$f")"
        done
        if [ -z "$stale" ]; then echo "PASS: tests/bad matches tools/mkbad.py"
        else echo "FAIL: tests/bad is stale (run python3 tools/mkbad.py):$stale"; fi
    else
        echo "FAIL: tools/mkbad.py failed"
    fi
else
    echo "SKIP: python3 absent: not checking tests/bad against tools/mkbad.py"
fi

# run TOOL-LABEL EXPECT SUBSTRING FILE COMMAND...
run() {
    label=$1 expect=$2 sub=$3 file=$4; shift 4
    timeout -s KILL "$T" "$@" >"$tmp/out" 2>&1
    rc=$?
    what="$label $file"
    if [ $rc -ge 124 ]; then
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "FAIL: $what: hung (killed after ${T}s)"
        else echo "FAIL: $what: died with status $rc (signal $((rc - 128)))"; fi
        sed 's/^/    | /' "$tmp/out" | head -5
        return
    fi
    # under make test-asan a sanitizer report may come with a plain exit 1
    if grep -qE 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error:' "$tmp/out"; then
        echo "FAIL: $what: sanitizer report: $(grep -m1 -E 'SUMMARY|runtime error:' "$tmp/out")"
        return
    fi
    case $expect in
    ok)  if [ $rc -eq 0 ]; then echo "PASS: $what: accepted"
         else echo "FAIL: $what: expected success, got status $rc: $(head -c 300 "$tmp/out" | tr '\n' ' ')"; fi ;;
    any) if [ $rc -le 2 ]; then echo "PASS: $what: status $rc, no crash"
         else echo "FAIL: $what: status $rc"; fi ;;
    rej) if [ $rc -ne 1 ] && [ $rc -ne 2 ]; then
             echo "FAIL: $what: expected status 1 or 2, got $rc"
         elif ! grep -qF -- "$sub" "$tmp/out"; then
             echo "FAIL: $what: message lacks '$sub': $(grep -v '^ ' "$tmp/out" | tail -n 3 | tr '\n' ' ' | head -c 300)"
         else echo "PASS: $what: refused ($(grep -F -- "$sub" "$tmp/out" | head -n 1 | head -c 160))"; fi ;;
    esac
}

have_cli=0
[ -x "$BIN/picolm" ] && have_cli=1
[ $have_cli -eq 1 ] || echo "SKIP: $BIN/picolm not built: CLI column not checked"
n=0
while read -r file g l c sub; do
    case $file in ''|'#'*) continue ;; esac
    [ -f "$DIR/$file" ] || { echo "FAIL: $DIR/$file missing"; continue; }
    n=$((n + 1))
    run "gguf-info" "$g" "$sub" "$file" "$BIN/picolm-gguf" info "$DIR/$file"
    run "logits" "$l" "$sub" "$file" "$BIN/picolm-logits" "$DIR/$file" "$tmp/tok.i32" "$tmp/logits.f32" -j 1
    if [ $have_cli -eq 1 ]; then
        run "cli" "$c" "$sub" "$file" "$BIN/picolm" "$DIR/$file" -p hi -n 1 -j 1
    fi
done <"$DIR/expected.txt"
[ $n -ge 50 ] && echo "PASS: $n crafted files checked" || echo "FAIL: only $n crafted files in $DIR/expected.txt"
