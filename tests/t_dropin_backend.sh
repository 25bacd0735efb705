#!/bin/sh
# Drop-in proof for ISA backends: a backend built OUTSIDE picolm's build (one
# plain cc command, only include/picolm/{plugin,blocks,fp16}.h) that overrides
# a single kernel (Q8_0 x Q8_0) is found through --plugin-dir, listed, never
# chosen by `auto` over the stock backends (lower priority), runs generation
# when named, matches llama.cpp's logits and greedy text, and really runs its
# own kernel.  A backend requiring a CPU feature no CPU has is a clear error
# with a non-zero exit when forced, and is never picked.
BUILD=${PICOLM_BUILD:-build}
BIN=$BUILD/bin
S=${PICOLM_SHARED:-../shared}
M=$S/models/tiny-shakespeare-q8_0.gguf
R=$S/reference/logits
CC=${CC:-cc}
for b in picolm picolm-logits picolm-bench; do
    [ -x "$BIN/$b" ] || { echo "FAIL: t_dropin_backend: $BIN/$b not built"; exit 1; }
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
P=$tmp/plugins
mkdir "$P"

# 1. Build both plugins on their own: no Makefile, no core headers, no core library.
for src in mybackend impossible; do
    if $CC -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC -I include "tests/dropin/backend/$src.c" -o "$P/backend-$src.so" 2>"$tmp/log"; then
        echo "PASS: out-of-tree backend '$src' built with a plain '$CC -shared -fPIC -O2 -I include'"
    else
        echo "FAIL: out-of-tree backend '$src' does not build: $(head -3 "$tmp/log")"; exit 1
    fi
done
inc=$(grep -h '#include' tests/dropin/backend/*.c | sort -u | grep -v -e 'picolm/plugin.h' -e 'picolm/blocks.h' -e 'picolm/fp16.h')
[ -z "$inc" ] && echo "PASS: the plugins include only picolm/plugin.h, blocks.h, fp16.h" || echo "FAIL: extra includes: $inc"
if nm -D --undefined-only "$P/backend-mybackend.so" 2>/dev/null | grep -E ' (registry_|gguf_|llama_|threadpool_|dispatch_|ops_|ref_)' >/dev/null; then
    echo "FAIL: the plugin links against core symbols"
else
    echo "PASS: the plugin needs no core symbols"
fi

# 2. --list-plugins: listed with its kernel; auto still picks a stock backend; impossible rejected with the reason.
"$BIN/picolm" --plugin-dir "$P" --list-plugins >"$tmp/list" 2>&1; rc=$?
if [ $rc -eq 0 ] && grep -q '^  mybackend  *0.1  *ok  *score 5' "$tmp/list" && grep -A2 '^  mybackend' "$tmp/list" | grep -q 'kernels: Q8_0$'; then
    echo "PASS: --list-plugins lists mybackend (ok, score 5, kernels: Q8_0)"
else
    echo "FAIL: --list-plugins: rc $rc: $(grep -A2 mybackend "$tmp/list" | tr '\n' ' ')"
fi
chosen=$(awk '$3 == "CHOSEN" {print $1}' "$tmp/list")
[ -n "$chosen" ] && [ "$chosen" != mybackend ] && [ "$chosen" != impossible ] &&
    echo "PASS: auto still chooses a stock backend ($chosen): the drop-in's priority is lower" ||
    echo "FAIL: auto chose '$chosen'"
grep -A2 '^  impossible' "$tmp/list" | grep -q 'why: CPU lacks required feature(s): impossible' &&
    echo "PASS: the impossible backend is listed as rejected: CPU lacks required feature(s): impossible" ||
    echo "FAIL: impossible backend not rejected in --list-plugins: $(grep -A2 impossible "$tmp/list" | tr '\n' ' ')"
"$BIN/picolm" --list-plugins >"$tmp/list0" 2>&1
grep -q mybackend "$tmp/list0" && echo "FAIL: mybackend visible without --plugin-dir" || echo "PASS: without --plugin-dir the drop-in is not loaded"

if [ ! -f "$M" ]; then
    echo "SKIP: t_dropin_backend: PICOLM_SHARED=$S has no tiny-shakespeare-q8_0.gguf: shared data absent, model checks skipped"
    exit 0
fi

# 3. --backend mybackend generates, and greedy equals llama.cpp's reference continuation.
if out=$("$BIN/picolm" --plugin-dir "$P" --backend mybackend "$M" -p "ROMEO:" -n 16 -t 0 2>"$tmp/err") && [ -n "$out" ] &&
    grep -q 'backend mybackend' "$tmp/err"; then
    echo "PASS: picolm --backend mybackend generates: '$(echo "$out" | tr '\n' ' ' | head -c 50)'"
else
    echo "FAIL: picolm --backend mybackend: $(tail -2 "$tmp/err")"
fi
if [ -f "$R/tiny-shakespeare-q8_0.greedy.txt" ]; then
    "$BIN/picolm" --plugin-dir "$P" --backend mybackend "$M" -t 0 -n 48 <"$R/tiny-shakespeare.prompt.txt" >"$tmp/g" 2>/dev/null
    n=$(wc -c <"$R/tiny-shakespeare-q8_0.greedy.txt")
    head -c "$n" "$tmp/g" | cmp -s - "$R/tiny-shakespeare-q8_0.greedy.txt" &&
        echo "PASS: greedy with mybackend = llama.cpp's greedy text ($n bytes)" || echo "FAIL: greedy with mybackend differs from llama.cpp's"
fi

# 4. picolm-logits with the drop-in: within the README limits (cmp_logits.py needs numpy).
if "$BIN/picolm-logits" --plugin-dir "$P" --backend mybackend "$M" "$R/tiny-shakespeare-q8_0.tokens.i32" "$tmp/l.f32" --batch 8 >"$tmp/log" 2>&1 &&
    grep -q 'backend mybackend' "$tmp/log"; then
    echo "PASS: picolm-logits --backend mybackend ran"
    if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
        if out=$(/usr/bin/python3 "$S/tools/cmp_logits.py" "$tmp/l.f32" "$R/tiny-shakespeare-q8_0.logits.f32" 1024 2>&1); then
            echo "PASS: mybackend logits match llama.cpp's: $out"
        else
            echo "FAIL: mybackend logits: $out"
        fi
    else
        echo "SKIP: t_dropin_backend: /usr/bin/python3 cannot import numpy (apt-get install python3-numpy): LOGITS NOT COMPARED"
    fi
else
    echo "FAIL: picolm-logits --backend mybackend: $(tail -1 "$tmp/log")"
fi

# 5. The drop-in's own kernel ran: the dispatch table names it for Q8_0, and only for Q8_0.
"$BIN/picolm-bench" --plugin-dir "$P" --micro --backends mybackend --formats Q8_0,Q4_0 --micro-ms 2 --micro-mib 1 --format csv >"$tmp/m.csv" 2>"$tmp/m.log"
grep -q '^Q8_0,mybackend,mybackend,' "$tmp/m.csv" && grep -q '^Q4_0,mybackend,reference,' "$tmp/m.csv" &&
    echo "PASS: dispatch: Q8_0 -> mybackend's kernel, Q4_0 -> reference fallback" ||
    echo "FAIL: dispatch table: $(cat "$tmp/m.csv" "$tmp/m.log" | tr '\n' ' ')"

# 6. Forcing a backend the CPU cannot run: clear error, non-zero exit, in every tool.
"$BIN/picolm" --plugin-dir "$P" --backend impossible "$M" -p "ROMEO:" -n 4 >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -ne 0 ] && grep -q "backend 'impossible' .*cannot be used: CPU lacks required feature(s): impossible" "$tmp/err" && [ ! -s "$tmp/out" ]; then
    echo "PASS: picolm --backend impossible fails (exit $rc): $(tail -1 "$tmp/err")"
else
    echo "FAIL: picolm --backend impossible: rc $rc: $(tail -1 "$tmp/err")"
fi
"$BIN/picolm-logits" --plugin-dir "$P" --backend impossible "$M" "$R/tiny-shakespeare-q8_0.tokens.i32" "$tmp/l2.f32" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -ne 0 ] && grep -q "CPU lacks required feature(s): impossible" "$tmp/err" && echo "PASS: picolm-logits --backend impossible fails (exit $rc)" ||
    echo "FAIL: picolm-logits --backend impossible: rc $rc"
"$BIN/picolm-bench" --plugin-dir "$P" --backends reference,impossible "$M" -p 2 -n 2 -r 1 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -ne 0 ] && grep -q "CPU lacks required feature(s): impossible" "$tmp/err" && echo "PASS: picolm-bench --backends ...,impossible fails before running (exit $rc)" ||
    echo "FAIL: picolm-bench --backends impossible: rc $rc"
