#!/bin/sh
# Drop-in proof: a weight format built OUTSIDE picolm's build (its own
# directory, one plain cc command, only include/picolm/plugin.h) is picked up
# by picolm-quantize and picolm-logits through --plugin-dir, and a model in
# that format is refused, naming the tensor and the type, without it.
. "${0%/*}/lib.sh"
CC=${CC:-cc}
need_shared "$M/tiny-shakespeare-f32.gguf"
need_built "$BIN/picolm-quantize" "$BIN/picolm-logits" "$BUILD/tests/test_quantize"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/plugins"

# 1. Build the plugin on its own: no Makefile, no core headers, no core library.
if $CC -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC -I include tests/dropin/format/q8_64.c -o "$tmp/plugins/format-q8_64.so" -lm 2>"$tmp/log"; then
    echo "PASS: out-of-tree plugin built with a plain '$CC -shared -fPIC -I include'"
else
    echo "FAIL: out-of-tree plugin does not build: $(head -3 "$tmp/log")"; exit 1
fi
if grep -q '#include "' tests/dropin/format/q8_64.c && grep '#include "' tests/dropin/format/q8_64.c | grep -vq 'picolm/plugin.h'; then
    echo "FAIL: the plugin includes more than picolm/plugin.h"
else
    echo "PASS: the plugin includes only picolm/plugin.h (plus libc)"
fi
if nm -D --undefined-only "$tmp/plugins/format-q8_64.so" 2>/dev/null | grep -E ' (registry_|gguf_|llama_|threadpool_|dispatch_)' >/dev/null; then
    echo "FAIL: the plugin links against core symbols"
else
    echo "PASS: the plugin needs no core symbols"
fi

# 2. picolm-quantize knows the type only through the plugin.
"$BIN/picolm-quantize" "$M/tiny-shakespeare-f32.gguf" "$tmp/x.gguf" Q8_64 >"$tmp/log" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "unknown type 'Q8_64'" "$tmp/log" && echo "PASS: without the plugin, Q8_64 is an unknown type" ||
    echo "FAIL: without the plugin: rc $rc: $(tail -1 "$tmp/log")"
"$BIN/picolm-quantize" --plugin-dir "$tmp/plugins" --help | grep -q 'Q8_64.*type id 1064' && echo "PASS: --help lists the plugin's type" ||
    echo "FAIL: --help with --plugin-dir does not list Q8_64"
if "$BIN/picolm-quantize" --plugin-dir "$tmp/plugins" "$M/tiny-shakespeare-f32.gguf" "$tmp/q8_64.gguf" Q8_64 --pure -j 2 >"$tmp/log" 2>&1; then
    n=$(grep -c 'F32 -> *Q8_64' "$tmp/log")
    [ "$n" -eq 30 ] && echo "PASS: picolm-quantize --plugin-dir wrote 30 matrices as Q8_64" || echo "FAIL: $n matrices as Q8_64, want 30"
else
    echo "FAIL: picolm-quantize --plugin-dir ... Q8_64: $(tail -1 "$tmp/log")"; exit 1
fi

# 3. The model runs with the plugin: logits within the README limits for an 8-bit format.
if "$BIN/picolm-logits" --plugin-dir "$tmp/plugins" "$tmp/q8_64.gguf" "$R/tiny-shakespeare-f32.tokens.i32" "$tmp/l.f32" --batch 8 >"$tmp/log" 2>&1; then
    if out=$("$BUILD/tests/test_quantize" --cmp-logits "$tmp/l.f32" "$R/tiny-shakespeare-f32.logits.f32" 1024 0.03 1e-3); then
        echo "PASS: Q8_64 model runs through the plugin: $out"
    else
        echo "FAIL: Q8_64 logits: $out"
    fi
else
    echo "FAIL: picolm-logits --plugin-dir on the Q8_64 model: $(tail -1 "$tmp/log")"
fi

# 4. Without the plugin the model is refused, naming a tensor and the type id.
"$BIN/picolm-logits" "$tmp/q8_64.gguf" "$R/tiny-shakespeare-f32.tokens.i32" "$tmp/l2.f32" >"$tmp/log" 2>&1; rc=$?
if [ $rc -eq 1 ] && grep -q "tensor '[a-z0-9_.]*weight' has type 1064" "$tmp/log"; then
    echo "PASS: without --plugin-dir the model is refused: $(tail -1 "$tmp/log")"
else
    echo "FAIL: without the plugin: rc $rc: $(tail -1 "$tmp/log")"
fi
