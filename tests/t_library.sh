#!/bin/sh
# docs/library.md's example of sequences and batches is a program of one's
# own against the library: it compiles with include/ and libpicolm.a alone,
# and its two replies (a prompt evaluated once, a forked sequence sharing
# its blocks, both continued in one batch a step, each with its own sampler
# chain) are what picolm prints for the same settings and each seed.
. "${0%/*}/lib.sh"
MODEL=models/tiny-shakespeare-q8_0.gguf
need_built "$BIN/picolm"
[ -f "$BUILD/libpicolm.a" ] || { echo "FAIL: $TEST_NAME: $BUILD/libpicolm.a not built"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
awk '/^## Sequences and batches/ { on = 1 } on && /^```c$/ { code = 1; next } code && /^```$/ { exit } code' docs/library.md >"$tmp/app.c"
if ! grep -q 'picolm_decode' "$tmp/app.c"; then
    echo "FAIL: $TEST_NAME: no C example under '## Sequences and batches' in docs/library.md"; exit 1
fi
# (LDFLAGS: a sanitizer build's archive needs its runtime)
if ${CC:-cc} -std=c11 -Wall -Wextra -Werror -Iinclude $LDFLAGS "$tmp/app.c" "$BUILD/libpicolm.a" -ldl -lpthread -lm -o "$tmp/app" 2>"$tmp/cc"; then
    echo "PASS: $TEST_NAME: the example compiles with include/ and libpicolm.a alone, without warnings"
else
    echo "FAIL: $TEST_NAME: the example does not compile: $(head -5 "$tmp/cc" | tr '\n' ' ')"; exit 1
fi
PICOLM_PLUGIN_DIR=$BUILD/plugins "$tmp/app" "$MODEL" >"$tmp/got" 2>"$tmp/err" ||
    { echo "FAIL: $TEST_NAME: the example failed: $(head -3 "$tmp/err")"; exit 1; }
for seed in 1 2; do
    "$BIN/picolm" "$MODEL" -p "ROMEO:" -n 24 --sampler top_k,temperature,dist --top-k 40 -t 0.5 -s $seed 2>/dev/null >"$tmp/s$seed"
    echo >>"$tmp/s$seed"
done
cat "$tmp/s1" "$tmp/s2" >"$tmp/want"
if [ -s "$tmp/s1" ] && ! cmp -s "$tmp/s1" "$tmp/s2" && cmp -s "$tmp/got" "$tmp/want"; then
    echo "PASS: $TEST_NAME: its two replies (different seeds, different texts) equal picolm's for seeds 1 and 2"
else
    echo "FAIL: $TEST_NAME: the replies differ from picolm's: got '$(head -c 200 "$tmp/got" | tr '\n' '|')', want '$(head -c 200 "$tmp/want" | tr '\n' '|')'"
fi
