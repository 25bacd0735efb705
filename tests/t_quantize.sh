#!/bin/sh
# picolm-quantize against llama-quantize's own outputs (shared/models):
# - every pure type from tiny-shakespeare-f32.gguf is byte-identical to
#   tiny-shakespeare-<type>.gguf (f32: same tensor data; its reference file
#   was not written by llama-quantize);
# - the Q4_K_M mix is byte-identical too, with the same per-tensor types;
# - every other mix gets the per-tensor types of llama.cpp's policy;
# - -j 1 and -j 2 give the same bytes; F16 input round-trips;
# - the Q4_K_M output runs: logits within the README tolerances.
. "${0%/*}/lib.sh"
Q=$BIN/picolm-quantize
need_shared "$M/tiny-shakespeare-f32.gguf"
need_built "$Q" "$BIN/picolm-gguf" "$BIN/picolm-logits" "$BUILD/tests/test_quantize"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
F32=$M/tiny-shakespeare-f32.gguf

# tensor names and types of a file, one "name TYPE" per line, sorted
types() { "$BIN/picolm-gguf" info "$1" | awk '$0 ~ /^  tensor / {t=1; next} t && NF >= 3 && $1 ~ /weight$/ {print $1, $2}' | sort; }

for t in f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs; do
    ref=$M/tiny-shakespeare-$t.gguf
    [ -f "$ref" ] || { echo "SKIP: pure $t: $ref absent"; continue; }
    if ! "$Q" "$F32" "$tmp/$t.gguf" "$t" --pure -j 2 2>"$tmp/log"; then
        echo "FAIL: pure $t: picolm-quantize failed: $(tail -1 "$tmp/log")"; continue
    fi
    if cmp -s "$tmp/$t.gguf" "$ref"; then echo "PASS: pure $t: byte-identical to llama-quantize's file"
    else echo "FAIL: pure $t: differs from $ref ($(cmp "$tmp/$t.gguf" "$ref" 2>&1 | head -1))"; fi
done

# f32 -> F32: same tensors, same data (compared through dequant), header updated
if "$Q" "$F32" "$tmp/f32.gguf" F32 --pure 2>"$tmp/log"; then
    bad=""
    for n in token_embd.weight output.weight blk.0.attn_q.weight blk.3.ffn_down.weight blk.2.attn_norm.weight; do
        "$BIN/picolm-gguf" dequant "$F32" "$n" "$tmp/a" 2>/dev/null && "$BIN/picolm-gguf" dequant "$tmp/f32.gguf" "$n" "$tmp/b" 2>/dev/null &&
            cmp -s "$tmp/a" "$tmp/b" || bad="$bad $n"
    done
    [ -z "$bad" ] && echo "PASS: F32 -> F32: tensor data unchanged" || echo "FAIL: F32 -> F32: tensor data differs:$bad"
    [ "$(types "$F32")" = "$(types "$tmp/f32.gguf")" ] && echo "PASS: F32 -> F32: same tensors" || echo "FAIL: F32 -> F32: tensor list differs"
else
    echo "FAIL: F32 -> F32: picolm-quantize failed"
fi

# Q4_K_M mix: same bytes and per-tensor types as llama-quantize's
ref=$M/tiny-shakespeare-q4_k_m.gguf
if "$Q" "$F32" "$tmp/q4_k_m.gguf" Q4_K_M -j 1 2>"$tmp/log"; then
    if [ -f "$ref" ]; then
        types "$ref" >"$tmp/want"; types "$tmp/q4_k_m.gguf" >"$tmp/got"
        if cmp -s "$tmp/want" "$tmp/got" && [ -s "$tmp/got" ]; then echo "PASS: Q4_K_M: per-tensor types match llama-quantize's ($(grep -c Q6_K "$tmp/got") Q6_K)"
        else echo "FAIL: Q4_K_M: per-tensor types differ: $(diff "$tmp/want" "$tmp/got" | grep '^[<>]' | head -3 | tr '\n' ' ')"; fi
        cmp -s "$tmp/q4_k_m.gguf" "$ref" && echo "PASS: Q4_K_M: byte-identical to llama-quantize's file" ||
            echo "FAIL: Q4_K_M: differs from $ref"
    else
        echo "SKIP: Q4_K_M: $ref absent"
    fi
    "$Q" "$F32" "$tmp/q4_k_m-j2.gguf" q4_k_m -j 2 2>/dev/null
    cmp -s "$tmp/q4_k_m.gguf" "$tmp/q4_k_m-j2.gguf" && echo "PASS: -j 1 and -j 2 write the same bytes" || echo "FAIL: -j 2 output differs from -j 1"
    grep -q '^\[ *[0-9]*/ *39\] blk.2.ffn_down.weight .*F32 -> Q6_K' "$tmp/log" && echo "PASS: progress lines name tensor and types" ||
        echo "FAIL: progress line missing: $(grep ffn_down "$tmp/log" | head -1)"
    grep -q 'bits per weight' "$tmp/log" && echo "PASS: size summary printed" || echo "FAIL: no size summary"
    # The output runs: logits on the reference tokens within the README limits
    if [ -f "$R/tiny-shakespeare-q4_k_m.tokens.i32" ]; then
        if "$BIN/picolm-logits" "$tmp/q4_k_m.gguf" "$R/tiny-shakespeare-q4_k_m.tokens.i32" "$tmp/l.f32" --batch 16 2>"$tmp/log"; then
            if out=$("$BUILD/tests/test_quantize" --cmp-logits "$tmp/l.f32" "$R/tiny-shakespeare-q4_k_m.logits.f32" 1024 0.10 1e-3); then
                echo "PASS: Q4_K_M output runs: $out"
            else echo "FAIL: Q4_K_M output logits: $out"; fi
        else echo "FAIL: picolm-logits on the Q4_K_M output: $(tail -1 "$tmp/log")"; fi
    fi
else
    echo "FAIL: Q4_K_M: picolm-quantize failed: $(tail -1 "$tmp/log")"
fi

# Other mixes on this model (4 layers, n_gqa 2).  Signature: output token_embd
# attn_v(0..3) ffn_down(0..3) attn_output.0 attn_q.0 ffn_up.0 (llama.cpp's policy)
sig() {
    f=$1; types "$f" >"$tmp/ty"
    s=""
    for n in output token_embd blk.0.attn_v blk.1.attn_v blk.2.attn_v blk.3.attn_v blk.0.ffn_down blk.1.ffn_down \
             blk.2.ffn_down blk.3.ffn_down blk.0.attn_output blk.0.attn_q blk.0.ffn_up; do
        s="$s $(awk -v n="$n.weight" '$1 == n {print $2}' "$tmp/ty")"
    done
    echo $s
}
while read -r mix want; do
    [ -n "$mix" ] || continue
    if "$Q" "$F32" "$tmp/m.gguf" "$mix" 2>"$tmp/log"; then
        got=$(sig "$tmp/m.gguf")
        [ "$got" = "$want" ] && echo "PASS: mix $mix: per-tensor types as llama.cpp's policy" || echo "FAIL: mix $mix: got '$got', want '$want'"
    else
        echo "FAIL: mix $mix: picolm-quantize failed: $(tail -1 "$tmp/log")"
    fi
done <<'EOF'
Q2_K   Q6_K Q2_K Q3_K Q3_K Q3_K Q3_K Q3_K Q3_K Q3_K Q3_K Q3_K Q2_K Q2_K
Q3_K_S Q6_K Q3_K Q3_K Q3_K Q3_K Q3_K Q3_K Q3_K Q3_K Q3_K Q3_K Q3_K Q3_K
Q3_K_M Q6_K Q3_K Q5_K Q5_K Q4_K Q4_K Q4_K Q4_K Q4_K Q4_K Q4_K Q3_K Q3_K
Q3_K_L Q6_K Q3_K Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K Q3_K Q3_K
Q4_K_S Q6_K Q4_K Q5_K Q5_K Q5_K Q5_K Q4_K Q4_K Q4_K Q4_K Q4_K Q4_K Q4_K
Q5_K_S Q6_K Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K
Q5_K_M Q6_K Q5_K Q5_K Q5_K Q6_K Q6_K Q5_K Q5_K Q6_K Q6_K Q5_K Q5_K Q5_K
Q4_0   Q6_K Q4_0 Q4_0 Q4_0 Q4_0 Q4_0 Q4_0 Q4_0 Q4_0 Q4_0 Q4_0 Q4_0 Q4_0
Q8_0   Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0
IQ4_XS Q6_K IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS
F16    F16 F16 F16 F16 F16 F16 F16 F16 F16 F16 F16 F16 F16
EOF

# general.file_type and quantization_version as llama-quantize writes them
"$Q" "$F32" "$tmp/m.gguf" Q5_K_S 2>/dev/null
"$BIN/picolm-gguf" info "$tmp/m.gguf" | grep -q 'general.file_type  *u32  *16$' && echo "PASS: Q5_K_S sets general.file_type 16" ||
    echo "FAIL: Q5_K_S: general.file_type is not 16"

# F16 input: F16 -> F16 copies (same bytes as the input), F16 -> Q8_0 via dequant
if [ -f "$M/tiny-shakespeare-f16.gguf" ]; then
    "$Q" "$M/tiny-shakespeare-f16.gguf" "$tmp/h.gguf" F16 2>/dev/null
    cmp -s "$tmp/h.gguf" "$M/tiny-shakespeare-f16.gguf" && echo "PASS: F16 input -> F16: identical file" || echo "FAIL: F16 -> F16 differs from its input"
    "$Q" "$M/tiny-shakespeare-bf16.gguf" "$tmp/b.gguf" F32 2>/dev/null &&
        "$BIN/picolm-gguf" dequant "$M/tiny-shakespeare-bf16.gguf" blk.1.ffn_up.weight "$tmp/a" 2>/dev/null &&
        "$BIN/picolm-gguf" dequant "$tmp/b.gguf" blk.1.ffn_up.weight "$tmp/b" 2>/dev/null &&
        cmp -s "$tmp/a" "$tmp/b" && echo "PASS: BF16 input -> F32: exact widening" || echo "FAIL: BF16 -> F32 is not the exact widening"
fi

# refusals never leave a file behind
"$Q" "$M/tiny-shakespeare-q8_0.gguf" "$tmp/r.gguf" Q4_0 2>"$tmp/log"; rc=$?
[ $rc -eq 1 ] && [ ! -e "$tmp/r.gguf" ] && ! ls "$tmp" | grep -q '\.tmp\.' && grep -q "requantizing" "$tmp/log" &&
    echo "PASS: quantized input refused, nothing written" || echo "FAIL: quantized input: rc $rc, $(cat "$tmp/log")"
"$Q" --help | grep -q 'Q4_K_M' && echo "PASS: --help lists the mixes" || echo "FAIL: --help"
