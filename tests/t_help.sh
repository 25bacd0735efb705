#!/bin/sh
# Every binary answers --help with usage on stdout and exit 0, and follows
# the one exit-code rule of docs/cli.md: 0 success, 1 runtime failure (a
# missing model, a write error), 2 usage error (an unknown flag, a bad or
# missing value, a missing argument).
BUILD=${PICOLM_BUILD:-build}
MODEL=models/tiny-shakespeare-q8_0.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for b in "$BUILD"/bin/*; do
    [ -x "$b" ] || continue
    n=$(basename "$b")
    out=$("$b" --help 2>/dev/null); rc=$?
    if [ $rc -eq 0 ] && echo "$out" | grep -qi "usage"; then echo "PASS: $n --help"; else echo "FAIL: $n --help: rc $rc"; fi
    "$b" --help >/dev/full 2>"$tmp/err"; rc=$?
    if [ $rc -eq 1 ] && grep -q "cannot write" "$tmp/err"; then echo "PASS: $n --help >/dev/full: exit 1"; else echo "FAIL: $n --help >/dev/full: rc $rc"; fi
    err=$("$b" --no-such-flag 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 2 ] && [ -n "$err" ]; then echo "PASS: $n rejects an unknown flag (exit 2)"; else echo "FAIL: $n --no-such-flag: rc $rc, stderr '$err'"; fi
done

printf '\001\000\000\000\062\000\000\000' >"$tmp/tok.i32"
printf 'Some text to score.\n' >"$tmp/text.txt"
# expect RC NAME ARGS...: the tool exits RC and says something on stderr
expect() {
    want=$1; shift
    "$BUILD/bin/$@" >"$tmp/out" 2>"$tmp/err" </dev/null; rc=$?
    if [ $rc -eq "$want" ] && [ -s "$tmp/err" ]; then echo "PASS: exit $want: $*"
    else echo "FAIL: exit $want expected: $* -> rc $rc: $(head -c 200 "$tmp/err")"; fi
}
NOPE="$tmp/no-such-model.gguf"
# a missing model: 1
expect 1 picolm "$NOPE" -p hi
expect 1 picolm-bench "$NOPE" -p 1 -n 1 -r 1 --bw-mib 16
expect 1 picolm-gguf info "$NOPE"
expect 1 picolm-logits "$NOPE" "$tmp/tok.i32" "$tmp/out.f32"
expect 1 picolm-perplexity "$NOPE" "$tmp/text.txt"
expect 1 picolm-quantize "$NOPE" "$tmp/q.gguf" Q8_0
expect 1 picolm-tokenize "$NOPE" -p hi
# missing arguments: 2
expect 2 picolm
expect 2 picolm-bench
expect 2 picolm-gguf info
expect 2 picolm-logits "$MODEL" "$tmp/tok.i32"
expect 2 picolm-perplexity "$MODEL"
expect 2 picolm-quantize "$MODEL" "$tmp/q.gguf"
expect 2 picolm-tokenize "$MODEL"
# the shared options, with a bad value: 2 in every tool that runs a model
for t in picolm picolm-logits picolm-perplexity picolm-bench; do
    case $t in
        picolm) args="$MODEL -p hi" ;; picolm-logits) args="$MODEL $tmp/tok.i32 $tmp/out.f32" ;;
        picolm-perplexity) args="$MODEL $tmp/text.txt" ;; picolm-bench) args="$MODEL -p 1 -n 1 -r 1 --bw-mib 16" ;;
    esac
    expect 2 $t $args -j many
    expect 2 $t $args --kv-type f32
    expect 2 $t $args --backend no-such-backend
    expect 2 $t $args --config "$tmp/no-such.ini"
    "$BUILD/bin/$t" --help >"$tmp/help" 2>&1
    miss=; for f in "-j, --threads" "--context" "--backend" "--plugin-dir" "--config" "-v"; do grep -q -- "$f" "$tmp/help" || miss="$miss $f"; done
    if [ -z "$miss" ]; then echo "PASS: $t --help lists the shared options"; else echo "FAIL: $t --help lacks:$miss"; fi
done
for t in picolm picolm-logits picolm-perplexity; do
    case $t in
        picolm) args="$MODEL -p hi -n 1" ;; picolm-logits) args="$MODEL $tmp/tok.i32 $tmp/out.f32" ;;
        picolm-perplexity) args="$MODEL $tmp/text.txt" ;;
    esac
    expect 2 $t $args -c -5
done
# bad values of a tool's own options: 2
expect 2 picolm -n abc "$MODEL"
expect 2 picolm-bench "$MODEL" -r abc
expect 2 picolm-logits "$MODEL" "$tmp/tok.i32" "$tmp/out.f32" --batch 0
expect 2 picolm-logits "$MODEL" "$tmp/tok.i32" "$tmp/out.f32" --last x
expect 2 picolm-perplexity "$MODEL" "$tmp/text.txt" --chunks x
expect 2 picolm-tokenize "$MODEL" -p
expect 2 picolm-gguf --plugin-dir
expect 2 picolm-gguf frobnicate "$MODEL"
# PICOLM_CPU_MASK with an unknown feature: 2 in every tool that loads plugins
for t in "picolm $MODEL -p hi -n 1" "picolm-logits $MODEL $tmp/tok.i32 $tmp/out.f32" "picolm-gguf info $MODEL" \
         "picolm-quantize $MODEL $tmp/q.gguf Q8_0" "picolm-perplexity $MODEL $tmp/text.txt" "picolm-bench $MODEL -p 1 -n 1 -r 1"; do
    PICOLM_CPU_MASK=bogus expect 2 $t
done
# picolm --help names every architecture of docs/architectures.md's table
archs=$(sed -n 's/^| `\([a-z0-9]*\)` (.*/\1/p' docs/architectures.md)
help=$("$BUILD/bin/picolm" --help 2>/dev/null)
for a in $archs; do
    if echo "$help" | grep -qw "$a"; then echo "PASS: picolm --help names the $a architecture"
    else echo "FAIL: picolm --help does not name the $a architecture (docs/architectures.md has it)"; fi
done
[ -n "$archs" ] || echo "FAIL: no architecture rows found in docs/architectures.md"
