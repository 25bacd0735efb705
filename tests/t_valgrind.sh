#!/bin/sh
# One short generation under valgrind memcheck: no invalid access, no use of
# uninitialised values, no leak.  SKIP when valgrind is absent.  Uses
# picolm -p "ROMEO:" -n 8 (falls back to picolm-logits before the CLI exists).
BUILD=${PICOLM_BUILD:-build}
BIN=$BUILD/bin
MODEL=models/tiny-shakespeare-q8_0.gguf
if ! command -v valgrind >/dev/null 2>&1; then echo "SKIP: t_valgrind: valgrind not installed"; exit 0; fi
case "$BUILD" in *asan*|*tsan*) echo "SKIP: t_valgrind: sanitizer build ($BUILD) cannot run under valgrind"; exit 0 ;; esac
[ -f "$MODEL" ] || { echo "FAIL: t_valgrind: $MODEL missing"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
VG="valgrind --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible --track-origins=yes -q"

check() { # name rc log
    if [ "$2" -eq 0 ] && ! grep -q '^==[0-9]*==' "$3"; then echo "PASS: $1: valgrind clean"
    else echo "FAIL: $1: status $2"; grep '^==[0-9]*==' "$3" | head -30 | sed 's/^/    | /'; fi
}

if [ -x "$BIN/picolm" ]; then
    timeout 600 $VG "$BIN/picolm" "$MODEL" -p "ROMEO:" -n 8 -j 2 -s 1 >"$tmp/out" 2>"$tmp/log"
    check "picolm -p ROMEO: -n 8" $? "$tmp/log"
    [ -s "$tmp/out" ] && echo "PASS: picolm printed text under valgrind" || echo "FAIL: picolm printed nothing under valgrind"
else
    echo "SKIP: $BIN/picolm not built: using picolm-logits"
fi
# token ids of "ROMEO:" and a few more (BOS first), little-endian int32
printf '\001\000\000\000\142\000\000\000\167\000\000\000\056\000\000\000' >"$tmp/tok.i32"
timeout 600 $VG "$BIN/picolm-logits" "$MODEL" "$tmp/tok.i32" "$tmp/out.f32" -j 2 --batch 2 >/dev/null 2>"$tmp/log2"
check "picolm-logits 4 tokens, batch 2, 2 threads" $? "$tmp/log2"
# a refused file must not leak either
timeout 120 $VG "$BIN/picolm-logits" tests/bad/attn_q_wrong_rows.gguf "$tmp/tok.i32" "$tmp/out.f32" -j 1 >/dev/null 2>"$tmp/log3"
rc=$?
if [ $rc -eq 1 ] && ! grep -q '^==[0-9]*==' "$tmp/log3"; then echo "PASS: refusing a bad model is valgrind clean"
else echo "FAIL: refusing a bad model: status $rc"; grep '^==[0-9]*==' "$tmp/log3" | head -20 | sed 's/^/    | /'; fi
