#!/bin/sh
# How far llama.cpp's own logits move from the committed references in
# tests/data/families when one family rule is broken (the table in
# docs/testdata.md): metadata overrides (oracle-logits --kv) and variant
# files written by mkfamilies.py --variants. The "flash attention off" rows
# change only the rounding: they show the noise floor that an exact
# implementation has to live with.
#
#   tools/oracle/sensitivity.sh ORACLE
#
# Run after mkfamilies.sh with the same ORACLE and $FAMILIES_WORK; needs
# ../shared/tools/cmp_logits.py ($PICOLM_SHARED).
set -eu
case "${1:-}" in -h|--help) sed -n '2,13s/^# \{0,1\}//p' "$0"; exit 0;; "") sed -n '2,13s/^# \{0,1\}//p' "$0" >&2; exit 1;; esac
ORACLE=$(cd "$1" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${FAMILIES_WORK:-$ORACLE/../families-work}
CMP=${PICOLM_SHARED:-$ROOT/../shared}/tools/cmp_logits.py
D=$ROOT/tests/data/families
S=$WORK/sens
L=$WORK/bin/oracle-logits
[ -x "$L" ] || { echo "sensitivity: run mkfamilies.sh first (no $L)" >&2; exit 1; }
mkdir -p "$S"
PYTHONPATH=$ORACLE/gguf-py /usr/bin/python3 "$ROOT/tools/oracle/mkfamilies.py" --oracle "$ORACLE" \
    --gemma3-tok "$WORK/gemma3-tok" --out "$S" --variants
for v in gemma3-period7 lfm2-nostate smollm3-as-llama; do
    "$ORACLE/build/bin/llama-quantize" --token-embedding-type q4_0 "$S/$v-f32.gguf" "$S/$v-q8_0.gguf" Q8_0 2 \
        >"$S/quantize.log" 2>&1 || { cat "$S/quantize.log" >&2; exit 1; }
done

row() { # LABEL REFERENCE MODEL N_VOCAB ROWS [--kv ...]
    label=$1; ref=$D/$2.logits.f32; model=$3; nv=$4; k=$5; shift 5
    "$L" "$model" "$D/families.prompt.txt" "$S/x" --tail "$k" --greedy 0 "$@" 2>/dev/null
    printf '| %s | %s |\n' "$label" "$(/usr/bin/python3 "$CMP" "$S/x.logits.f32" "$ref" "$nv" | tail -1)"
}
G=rand-gemma3-q8_0
row "Gemma 3: the reference file itself" $G "$D/$G.gguf" 262144 4
row "Gemma 3: flash attention off (rounding only)" $G "$D/$G.gguf" 262144 4 --no-flash
row "Gemma 3: no sliding window (100000)" $G "$D/$G.gguf" 262144 4 --kv gemma3.attention.sliding_window=int:100000
row "Gemma 3: window 7 instead of 8" $G "$D/$G.gguf" 262144 4 --kv gemma3.attention.sliding_window=int:7
row "Gemma 3: window 9 instead of 8" $G "$D/$G.gguf" 262144 4 --kv gemma3.attention.sliding_window=int:9
row "Gemma 3: local layers on the global RoPE base" $G "$D/$G.gguf" 262144 4 --kv gemma3.rope.freq_base_swa=float:1000000
row "Gemma 3: global layer 6 instead of 5 (pattern 7)" $G "$S/gemma3-period7-q8_0.gguf" 262144 4
row "Gemma 3: linear RoPE scaling ignored" $G "$D/$G.gguf" 262144 4 --kv gemma3.rope.scaling.factor=float:1
row "Gemma 3: final soft-cap ignored" $G "$D/$G.gguf" 262144 4 --kv gemma3.final_logit_softcapping=float:0
row "Gemma 3: rms eps 1e-5 instead of 1e-6" $G "$D/$G.gguf" 262144 4 --kv gemma3.attention.layer_norm_rms_epsilon=float:0.00001
row "SmolLM3: flash attention off (rounding only)" rand-smollm3-q8_0 "$D/rand-smollm3-q8_0.gguf" 49152 8 --no-flash
row "SmolLM3: RoPE on every layer (read as llama)" rand-smollm3-q8_0 "$S/smollm3-as-llama-q8_0.gguf" 49152 8
row "LFM2: flash attention off (rounding only)" rand-lfm2-q8_0 "$D/rand-lfm2-q8_0.gguf" 49152 8 --no-flash
row "LFM2: conv state ignored" rand-lfm2-q8_0 "$S/lfm2-nostate-q8_0.gguf" 49152 8
