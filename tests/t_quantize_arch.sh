#!/bin/sh
# picolm-quantize on the newer architectures (qwen2, qwen3, llama with
# rope_freqs): an F32 model of each (tools/common/synth.c's test shapes, written by
# picolm-bench --synth) is quantized to Q4_K_M and
# - every tensor gets the type of llama.cpp's policy (llama_tensor_get_type):
#   rows of 384 are not whole 256-blocks, so K-quants fall back (Q4_K ->
#   Q5_0, Q6_K -> Q8_0); the tied token_embd is the output (Q6_K, or Q8_0
#   when its rows fall back); attn_v/ffn_down get Q6_K in the layers
#   use_more_bits picks (here blk.1); biases, norms, attn_q_norm/attn_k_norm
#   and rope_freqs stay F32; for the shapes of the shared rand-qwen3 and
#   rand-llama3 files, the types llama-quantize chose there;
# - the output loads and runs: its logits are those of the F32 model up to
#   4-bit quantization noise.
BUILD=${PICOLM_BUILD:-build}
BIN=$BUILD/bin
S=${PICOLM_SHARED:-../shared}
for b in picolm-quantize picolm-gguf picolm-logits picolm-bench; do
    [ -x "$BIN/$b" ] || { echo "FAIL: t_quantize_arch: $BIN/$b not built"; exit 1; }
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# token ids 1 5 10 100 200 1023 1792 (little-endian int32), all in a 2048 vocabulary
printf '\001\000\000\000\005\000\000\000\012\000\000\000\144\000\000\000\310\000\000\000\377\003\000\000\000\007\000\000' >"$tmp/tok.i32"

types() { "$BIN/picolm-gguf" info "$1" | awk '$0 ~ /^  tensor / {t=1; next} t && NF >= 3 && $1 ~ /(weight|bias)$/ {print $1, $2}' | sort; }

# layer L Q K V OUT GATE_UP DOWN [EXTRA...]: one layer's "name TYPE" lines
# (norms F32; each EXTRA tensor, a bias or head norm, F32)
layer() {
    l=$1; shift
    printf 'blk.%s.attn_norm.weight F32\nblk.%s.ffn_norm.weight F32\n' "$l" "$l"
    printf 'blk.%s.attn_q.weight %s\nblk.%s.attn_k.weight %s\nblk.%s.attn_v.weight %s\n' "$l" "$1" "$l" "$2" "$l" "$3"
    printf 'blk.%s.attn_output.weight %s\nblk.%s.ffn_gate.weight %s\nblk.%s.ffn_up.weight %s\nblk.%s.ffn_down.weight %s\n' \
        "$l" "$4" "$l" "$5" "$l" "$5" "$l" "$6"
    shift 6
    for x in "$@"; do printf 'blk.%s.%s F32\n' "$l" "$x"; done
}

# expect SHAPE: the policy's types (blk.1 is a use_more_bits layer)
expect() {
    echo "output_norm.weight F32"
    case $1 in
    tiny-qwen2)
        echo "token_embd.weight Q8_0"
        layer 0 Q5_0 Q5_0 Q5_0 Q5_0 Q5_0 Q4_K attn_q.bias attn_k.bias attn_v.bias
        layer 1 Q5_0 Q5_0 Q8_0 Q5_0 Q5_0 Q6_K attn_q.bias attn_k.bias attn_v.bias ;;
    tiny-qwen3) # rows of 128 and 384 fall back; attn_output's are n_head * head_dim = 512 long
        echo "token_embd.weight Q8_0"
        layer 0 Q5_0 Q5_0 Q5_0 Q4_K Q5_0 Q5_0 attn_q_norm.weight attn_k_norm.weight
        layer 1 Q5_0 Q5_0 Q8_0 Q4_K Q5_0 Q8_0 attn_q_norm.weight attn_k_norm.weight ;;
    tiny-llama3)
        echo "token_embd.weight Q6_K"
        echo "rope_freqs.weight F32"
        layer 0 Q4_K Q4_K Q4_K Q4_K Q4_K Q4_K
        layer 1 Q4_K Q4_K Q6_K Q4_K Q4_K Q6_K ;;
    esac
}

for s in tiny-qwen2 tiny-qwen3 tiny-llama3; do
    f32=$tmp/$s-f32.gguf q=$tmp/$s-q4_k_m.gguf
    if ! "$BIN/picolm-bench" --synth "$s:F32" --synth-exact --out "$f32" --backends scalar --threads 1 -p 4 -n 2 -r 1 --bw-mib 16 >"$tmp/log" 2>&1; then
        echo "FAIL: $s: F32 model not made: $(tail -1 "$tmp/log")"; continue
    fi
    if ! "$BIN/picolm-quantize" "$f32" "$q" Q4_K_M -j 2 >"$tmp/log" 2>&1; then
        echo "FAIL: $s: picolm-quantize Q4_K_M failed: $(tail -1 "$tmp/log")"; continue
    fi
    expect "$s" | sort >"$tmp/want"
    types "$q" >"$tmp/got"
    if cmp -s "$tmp/want" "$tmp/got"; then echo "PASS: $s Q4_K_M: $(wc -l <"$tmp/got") tensors in llama.cpp's policy types"
    else echo "FAIL: $s Q4_K_M: types differ from the policy: $(diff "$tmp/want" "$tmp/got" | grep '^[<>]' | head -4 | tr '\n' ' ')"; fi
    # and llama-quantize's own choice for the same shape: the shared file of
    # that shape (its token_embd was forced to 4 bits to keep it small)
    ref=$S/models/rand-${s#tiny-}-q4_k_m.gguf
    if [ -f "$ref" ]; then
        types "$ref" | grep -v '^token_embd' >"$tmp/want"
        grep -v '^token_embd' "$tmp/got" >"$tmp/got2"
        if cmp -s "$tmp/want" "$tmp/got2"; then echo "PASS: $s Q4_K_M: types equal llama-quantize's in $(basename "$ref")"
        else echo "FAIL: $s Q4_K_M: types differ from $(basename "$ref"): $(diff "$tmp/want" "$tmp/got2" | grep '^[<>]' | head -4 | tr '\n' ' ')"; fi
    fi
    if "$BIN/picolm-logits" "$f32" "$tmp/tok.i32" "$tmp/f.f32" -j 1 >"$tmp/log" 2>&1 &&
        "$BIN/picolm-logits" "$q" "$tmp/tok.i32" "$tmp/q.f32" -j 1 >>"$tmp/log" 2>&1; then
        # random N(0, 0.02) weights at 4-5 bits: measured nRMSE 0.10-0.16, KL ~1e-3
        if out=$("$BUILD/tests/test_quantize" --cmp-logits "$tmp/q.f32" "$tmp/f.f32" 2048 0.3 5e-3); then echo "PASS: $s Q4_K_M runs, near the F32 model: $out"
        else echo "FAIL: $s Q4_K_M logits far from the F32 model's: $out"; fi
    else
        echo "FAIL: $s: picolm-logits failed: $(tail -1 "$tmp/log")"
    fi
done
