#!/bin/sh
# kv_type = q8_0 halves the KV cache and stays within the logits tolerances
# (quantized-model limits: nRMSE <= 0.10, mean KL <= 1e-3), with batched
# prefill too; and the cache really is smaller.
BUILD=${PICOLM_BUILD:-build}
S=${PICOLM_SHARED:-../shared}
if [ ! -d "$S/models" ]; then echo "SKIP: t_kv_q8: PICOLM_SHARED=$S has no models"; exit 0; fi
R=$S/reference/logits
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for m in tiny-shakespeare-f32 tiny-shakespeare-q4_k_m rand-spm-q8_0; do
    nv=1024; case $m in rand-*) nv=32000 ;; esac
    for b in 1 16; do
        if ! "$BUILD/bin/picolm-logits" --kv-type q8_0 --batch $b "$S/models/$m.gguf" "$R/$m.tokens.i32" "$tmp/l.f32" 2>"$tmp/err"; then
            echo "FAIL: $m kv q8_0 batch $b: $(cat "$tmp/err")"; continue
        fi
        if out=$("$BUILD/tests/test_quantize" --cmp-logits "$tmp/l.f32" "$R/$m.logits.f32" $nv 0.10 1e-3); then
            echo "PASS: $m with a q8_0 KV cache (batch $b): $out"
        else
            echo "FAIL: $m with a q8_0 KV cache (batch $b): $out"
        fi
    done
done
f16=$("$BUILD/bin/picolm" --fit models/tiny-shakespeare-q8_0.gguf --kv-type f16 2>&1 | grep '^KV cache')
q8=$("$BUILD/bin/picolm" --fit models/tiny-shakespeare-q8_0.gguf --kv-type q8_0 2>&1 | grep '^KV cache')
kb16=$(echo "$f16" | sed -n 's/.*x \([0-9.]*\) KB.*/\1/p'); kb8=$(echo "$q8" | sed -n 's/.*x \([0-9.]*\) KB.*/\1/p')
if [ -n "$kb16" ] && [ -n "$kb8" ] && awk "BEGIN{exit !($kb8 < 0.6 * $kb16)}"; then
    echo "PASS: q8_0 KV is $kb8 KB per token against $kb16 KB for f16"
else
    echo "FAIL: KV sizes: '$f16' / '$q8'"
fi
