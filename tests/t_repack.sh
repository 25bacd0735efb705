#!/bin/sh
# The repacked Q4_K_M_R mix (formats/repack.c: Q4_K_R = Q4_K with
# pre-unpacked scales) against plain Q4_K_M from the same f32 model:
# - per-tensor types: Q4_K_M's, with every Q4_K tensor stored as Q4_K_R;
# - every tensor dequantizes to exactly the Q4_K_M tensor's floats;
# - the model runs: logits within the README tolerances of the reference;
# - same backend, same kernels: logits bit-identical to the Q4_K_M file's
#   (reference code, avx2 and avx512 when this CPU runs them), batched and not.
. "${0%/*}/lib.sh"
Q=$BIN/picolm-quantize
need_shared "$M/tiny-shakespeare-f32.gguf"
need_built "$Q" "$BIN/picolm-gguf" "$BIN/picolm-logits" "$BUILD/tests/test_quantize" "$BUILD/plugins/format-repack.so"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
F32=$M/tiny-shakespeare-f32.gguf

# per-tensor types as picolm-gguf names them (plugin types by their plugin name)
types() { "$BIN/picolm-gguf" info "$1" | awk '$0 ~ /^  tensor / {t=1; next} t && NF >= 3 && $1 ~ /weight$/ {print $1, $2}' | sort; }

"$Q" "$F32" "$tmp/k.gguf" Q4_K_M -j 2 2>"$tmp/log" || { echo "FAIL: Q4_K_M: $(tail -1 "$tmp/log")"; exit 1; }
"$Q" "$F32" "$tmp/r.gguf" Q4_K_M_R -j 2 2>"$tmp/log" || { echo "FAIL: Q4_K_M_R: picolm-quantize failed: $(tail -1 "$tmp/log")"; exit 1; }

types "$tmp/k.gguf" | sed 's/ Q4_K$/ Q4_K_R/' >"$tmp/want"; types "$tmp/r.gguf" >"$tmp/got"
nr=$(grep -c ' Q4_K_R$' "$tmp/got")
if cmp -s "$tmp/want" "$tmp/got" && [ "$nr" -gt 0 ]; then echo "PASS: Q4_K_M_R: Q4_K_M's per-tensor types, $nr Q4_K tensors as Q4_K_R"
else echo "FAIL: Q4_K_M_R types: $(diff "$tmp/want" "$tmp/got" | grep '^[<>]' | head -3 | tr '\n' ' ')"; fi
"$BIN/picolm-gguf" info "$tmp/r.gguf" | grep -q 'general.file_type' && echo "FAIL: Q4_K_M_R writes a llama.cpp general.file_type" ||
    echo "PASS: Q4_K_M_R writes no llama.cpp general.file_type (llama.cpp has no such type)"
ks=$(stat -c %s "$tmp/k.gguf"); rs=$(stat -c %s "$tmp/r.gguf")
echo "INFO: file size Q4_K_M $ks, Q4_K_M_R $rs bytes"

# dequantized tensors: bit for bit
# same_dequant FILE AWK_TYPE_TEST WHAT: every tensor of FILE whose type
# (in $tmp/got) passes the test dequantizes to the Q4_K_M tensor's floats
same_dequant() {
    bad=""; n=0
    for t in $(awk "\$2 $2 {print \$1}" "$tmp/got"); do
        "$BIN/picolm-gguf" dequant "${BASE:-$tmp/k.gguf}" "$t" "$tmp/a" 2>/dev/null && "$BIN/picolm-gguf" dequant "$1" "$t" "$tmp/b" 2>/dev/null &&
            [ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b" || bad="$bad $t"
        n=$((n + 1))
    done
    [ -z "$bad" ] && [ "$n" -gt 0 ] && echo "PASS: $n $3 tensors dequantize to exactly the $(basename "${BASE:-Q4_K_M}" .gguf) tensors' floats" ||
        echo "FAIL: dequantized $3 tensors differ from Q4_K_M's (of $n):$bad"
}
same_dequant "$tmp/r.gguf" '== "Q4_K_R"' Q4_K_R

tok=$R/tiny-shakespeare-q4_k_m.tokens.i32
ref=$R/tiny-shakespeare-q4_k_m.logits.f32
[ -f "$tok" ] || { echo "SKIP: logits: $tok absent"; exit 0; }
# the bit-identity checks compare two files on the same tokens: the first 77
# (a 64-token batch and a tail of 13, the whole prompt's tail) take every
# kernel path the whole prompt does
head -c 308 "$tok" >"$tmp/short.i32"
# runs_within NAME FILE: the model's logits within the tolerances of llama.cpp's
runs_within() {
    if "$BIN/picolm-logits" "$2" "$tok" "$tmp/x.f32" --batch 16 -j 2 2>"$tmp/log"; then
        if out=$("$BUILD/tests/test_quantize" --cmp-logits "$tmp/x.f32" "$ref" 1024 0.10 1e-3); then echo "PASS: $1 runs: $out"
        else echo "FAIL: $1 logits vs reference: $out"; fi
    else echo "FAIL: picolm-logits on $1: $(tail -1 "$tmp/log")"; fi
}
# same_logits NAME FILE BACKENDS: logits identical to the Q4_K_M file's on
# each backend, batch 1 (decode kernels) and 64 (prefill gemm); the Q4_K_M
# file's logits are computed once per backend and batch
same_logits() {
    for be in $3; do
        for bt in 1 64; do
            k=$tmp/k-$be-$bt.f32
            if { [ -s "$k" ] || "$BIN/picolm-logits" "$tmp/k.gguf" "$tmp/short.i32" "$k" --batch $bt --backend $be -j 2 2>"$tmp/log"; } &&
                "$BIN/picolm-logits" "$2" "$tmp/short.i32" "$tmp/x.f32" --batch $bt --backend $be -j 2 2>>"$tmp/log"; then
                cmp -s "$k" "$tmp/x.f32" && echo "PASS: $be, batch $bt: $1 logits identical to Q4_K_M's" ||
                    echo "FAIL: $be, batch $bt: $1 logits differ from Q4_K_M's ($("$BUILD/tests/test_quantize" --cmp-logits "$tmp/x.f32" "$k" 1024 0.10 1e-3))"
            else echo "FAIL: picolm-logits --backend $be: $(tail -1 "$tmp/log")"; fi
        done
    done
}
runs_within Q4_K_M_R "$tmp/r.gguf"

# Same kernels over the same values: identical logits (batch 1 = decode
# kernels, batch 64 = prefill gemm), on the backends this CPU runs.
backends="reference"
grep -q avx2 /proc/cpuinfo 2>/dev/null && grep -q fma /proc/cpuinfo && backends="$backends avx2"
grep -q avx512 /proc/cpuinfo 2>/dev/null && grep -q avx512_vnni /proc/cpuinfo && backends="$backends avx512"
same_logits Q4_K_M_R "$tmp/r.gguf" "$backends"

# ---- Q4_K_M_R16: Q4_K and Q6_K stored 16 rows interleaved (row groups) ----
# - per-tensor types: Q4_K_M's, Q4_K -> Q4_K_R16 and Q6_K -> Q6_K_R16, except
#   token_embd (read one row at a time) which keeps its type;
# - quantizing the f32 model and losslessly repacking the Q4_K_M file give
#   the same file, byte for byte;
# - every R16 tensor dequantizes to exactly the base tensor's floats;
# - logits within the tolerances, and identical to Q4_K_M's on the backends
#   whose R16 kernels are built to match their row kernels;
# - a quantized input is refused unless TYPE is a repacked layout.
"$Q" "$F32" "$tmp/g.gguf" Q4_K_M_R16 -j 2 2>"$tmp/log" || { echo "FAIL: Q4_K_M_R16: picolm-quantize failed: $(tail -1 "$tmp/log")"; exit 1; }
types "$tmp/k.gguf" | sed -e '/^token_embd/!s/ Q4_K$/ Q4_K_R16/' -e '/^token_embd/!s/ Q6_K$/ Q6_K_R16/' >"$tmp/want"; types "$tmp/g.gguf" >"$tmp/got"
n4=$(grep -c ' Q4_K_R16$' "$tmp/got"); n6=$(grep -c ' Q6_K_R16$' "$tmp/got")
if cmp -s "$tmp/want" "$tmp/got" && [ "$n4" -gt 0 ] && [ "$n6" -gt 0 ]; then
    echo "PASS: Q4_K_M_R16: Q4_K_M's per-tensor types, $n4 Q4_K_R16 and $n6 Q6_K_R16 tensors, token_embd as is"
else echo "FAIL: Q4_K_M_R16 types: $(diff "$tmp/want" "$tmp/got" | grep '^[<>]' | head -3 | tr '\n' ' ')"; fi

if "$Q" "$tmp/k.gguf" "$tmp/gb.gguf" Q4_K_M_R16 -j 2 2>"$tmp/log"; then
    grep -q 'repacking (lossless)' "$tmp/log" && cmp -s "$tmp/g.gguf" "$tmp/gb.gguf" &&
        echo "PASS: repacking the Q4_K_M file gives the file quantized from f32, byte for byte" ||
        echo "FAIL: repacked Q4_K_M -> Q4_K_M_R16 differs from the f32 -> Q4_K_M_R16 file ($(cmp "$tmp/g.gguf" "$tmp/gb.gguf" 2>&1 | head -1))"
else echo "FAIL: picolm-quantize Q4_K_M -> Q4_K_M_R16 (repack): $(tail -1 "$tmp/log")"; fi

if "$Q" "$tmp/k.gguf" "$tmp/x.gguf" Q4_K_M -j 2 2>"$tmp/log"; then echo "FAIL: requantizing Q4_K_M as Q4_K_M was accepted"
else grep -q 'only be repacked' "$tmp/log" && echo "PASS: a quantized input with a plain TYPE is refused: $(tail -1 "$tmp/log" | cut -c1-100)..." ||
    echo "FAIL: requantizing refused without saying why: $(tail -1 "$tmp/log")"; fi
if "$Q" "$M/tiny-shakespeare-q8_0.gguf" "$tmp/x.gguf" Q4_K_M_R16 -j 2 2>"$tmp/log"; then echo "FAIL: repacking a Q8_0 model as Q4_K_M_R16 was accepted"
else grep -q 'no tensor' "$tmp/log" && echo "PASS: a model with nothing to repack is refused: $(tail -1 "$tmp/log")" ||
    echo "FAIL: Q8_0 -> Q4_K_M_R16 refused without saying why: $(tail -1 "$tmp/log")"; fi

same_dequant "$tmp/g.gguf" '~ /_R16$/' R16

runs_within Q4_K_M_R16 "$tmp/g.gguf"

# reference, scalar, avx2 and avx512 (whose R16 kernels mirror their Q4_K /
# Q6_K ones), and sse4, which has no R16 kernels: the core runs its Q4_K /
# Q6_K kernels on groups unpacked by the format's to_base
r16_backends="reference scalar"
grep -q avx2 /proc/cpuinfo 2>/dev/null && grep -q fma /proc/cpuinfo && r16_backends="$r16_backends avx2"
grep -q avx512 /proc/cpuinfo 2>/dev/null && grep -q avx512_vnni /proc/cpuinfo && r16_backends="$r16_backends avx512"
if grep -q sse4_1 /proc/cpuinfo 2>/dev/null; then
    r16_backends="$r16_backends sse4"
    if echo "Hello" | "$BIN/picolm" "$tmp/g.gguf" -n 4 --backend sse4 2>"$tmp/log" >/dev/null; then
        grep -q 'no Q4_K_R16 kernels: running its Q4_K kernels on unpacked row groups' "$tmp/log" &&
            echo "PASS: sse4 runs Q4_K_R16 on its Q4_K kernels and says so" || echo "FAIL: no note of the unpacked fallback on sse4: $(head -1 "$tmp/log")"
    else echo "FAIL: picolm --backend sse4 on Q4_K_M_R16: $(tail -1 "$tmp/log")"; fi
fi
same_logits Q4_K_M_R16 "$tmp/g.gguf" "$r16_backends"

# ---- Q5_0_R16: Q5_0 stored 16 rows interleaved, numerics of its own ----
# Q4_K_M_R16 also repacks Q5_0 tensors (what Q4_K_M falls back to for rows
# not a multiple of 256, e.g. Qwen2.5's 896).  On the llama.cpp Q5_0 model:
# - types: every Q5_0 matrix but token_embd as Q5_0_R16; values unchanged;
# - logits within the tolerances of llama.cpp's (the format's reference
#   code, and avx2's kernels, which must give the same bits);
# - batch 1 (vec_dot) and 64 (gemm tiles) give identical logits, and they
#   stay near the Q5_0 file's: Q5_0_R16 rounds its float sums in another
#   order, which this small model amplifies as much as a change of backend
#   does (Q5_0 on avx2 vs reference: nRMSE 0.035, max |dlogit| 0.15), so
#   the bound is the README's.
Q50=$M/tiny-shakespeare-q5_0.gguf
tok=$R/tiny-shakespeare-q5_0.tokens.i32
ref=$R/tiny-shakespeare-q5_0.logits.f32
if [ ! -f "$Q50" ] || [ ! -f "$ref" ]; then echo "SKIP: Q5_0_R16: $Q50 or its reference logits absent"; exit 0; fi
if "$Q" "$Q50" "$tmp/f.gguf" Q4_K_M_R16 -j 2 2>"$tmp/log"; then
    types "$Q50" | sed -e '/^token_embd/!s/ Q5_0$/ Q5_0_R16/' >"$tmp/want"; types "$tmp/f.gguf" >"$tmp/got"
    n5=$(grep -c ' Q5_0_R16$' "$tmp/got")
    if cmp -s "$tmp/want" "$tmp/got" && [ "$n5" -gt 0 ]; then echo "PASS: Q5_0 model -> Q4_K_M_R16: $n5 Q5_0 tensors as Q5_0_R16, token_embd as is"
    else echo "FAIL: Q5_0 -> Q4_K_M_R16 types: $(diff "$tmp/want" "$tmp/got" | grep '^[<>]' | head -3 | tr '\n' ' ')"; fi
    BASE=$Q50 same_dequant "$tmp/f.gguf" '== "Q5_0_R16"' Q5_0_R16
    runs_within "Q5_0_R16 (default backend)" "$tmp/f.gguf"
    for be in reference $(grep -q avx2 /proc/cpuinfo 2>/dev/null && grep -q fma /proc/cpuinfo && echo avx2); do
        if "$BIN/picolm-logits" "$tmp/f.gguf" "$tok" "$tmp/b1.f32" --batch 1 --backend $be -j 2 2>"$tmp/log" &&
            "$BIN/picolm-logits" "$tmp/f.gguf" "$tok" "$tmp/b64.f32" --batch 64 --backend $be -j 2 2>>"$tmp/log" &&
            "$BIN/picolm-logits" "$Q50" "$tok" "$tmp/q.f32" --batch 64 --backend $be -j 2 2>>"$tmp/log"; then
            if out=$("$BUILD/tests/test_quantize" --cmp-logits "$tmp/b64.f32" "$ref" 1024 0.10 1e-3); then echo "PASS: $be: Q5_0_R16 logits vs llama.cpp's: $out"
            else echo "FAIL: $be: Q5_0_R16 logits vs llama.cpp's: $out"; fi
            cmp -s "$tmp/b1.f32" "$tmp/b64.f32" && echo "PASS: $be: Q5_0_R16 logits at batch 1 and 64 identical" ||
                echo "FAIL: $be: Q5_0_R16 logits depend on the batch"
            if out=$("$BUILD/tests/test_quantize" --cmp-logits "$tmp/b64.f32" "$tmp/q.f32" 1024 0.10 1e-3); then echo "PASS: $be: Q5_0_R16 logits near the Q5_0 file's: $out"
            else echo "FAIL: $be: Q5_0_R16 logits vs the Q5_0 file's: $out"; fi
            command -v python3 >/dev/null && python3 -c "import array,sys; a=array.array('f',open(sys.argv[1],'rb').read()); b=array.array('f',open(sys.argv[2],'rb').read()); print('INFO: $be: max |logit(Q5_0_R16) - logit(Q5_0)| = %.3g over %d logits' % (max(abs(x-y) for x,y in zip(a,b)), len(a)))" "$tmp/b64.f32" "$tmp/q.f32"
        else echo "FAIL: picolm-logits --backend $be on Q5_0_R16: $(tail -1 "$tmp/log")"; fi
    done
else echo "FAIL: picolm-quantize Q5_0 -> Q4_K_M_R16: $(tail -1 "$tmp/log")"; fi
# the layout alone (TYPE Q5_0_R16) repacks the Q5_0 matrices and nothing
# else: the same file here (a Q5_0 model has no K-quants to repack)
if "$Q" "$Q50" "$tmp/p.gguf" Q5_0_R16 -j 2 2>"$tmp/log"; then
    cmp -s "$tmp/p.gguf" "$tmp/f.gguf" && echo "PASS: TYPE Q5_0_R16 repacks the Q5_0 model as Q4_K_M_R16 does, byte for byte" ||
        echo "FAIL: TYPE Q5_0_R16 and Q4_K_M_R16 repacks of the Q5_0 model differ"
else echo "FAIL: picolm-quantize Q5_0 -> Q5_0_R16: $(tail -1 "$tmp/log")"; fi
