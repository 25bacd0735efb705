#!/bin/sh
# Regenerates tests/data/tools: llama-server's renders of chat requests with
# tools (tests/data/tools/*.json, OpenAI bodies) through the real templates
# of the tool-call families picolm renders, from an oracle llama.cpp build.
# See docs/testdata.md.
#
#   tools/oracle/mktools.sh ORACLE
#
# ORACLE is a llama.cpp checkout built with cmake in ORACLE/build (target
# llama-common); its ORACLE/models/templates/ has the templates.  The vocabularies
# (for the templates' bos_token) are ../shared's Qwen2 and Llama 3 models.
set -eu
case "${1:-}" in -h|--help) sed -n '2,12s/^# \{0,1\}//p' "$0"; exit 0;; "") sed -n '2,12s/^# \{0,1\}//p' "$0" >&2; exit 1;; esac
ORACLE=$(cd "$1" && pwd)
BUILD=$ORACLE/build
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SHARED=${PICOLM_SHARED:-$ROOT/../shared}
WORK=${FAMILIES_WORK:-$ORACLE/../families-work}
mkdir -p "$WORK/bin"
c++ -O2 -std=c++17 -I"$ORACLE/include" -I"$ORACLE/ggml/include" -I"$ORACLE/common" -I"$ORACLE/vendor" \
    "$ROOT/tools/oracle/oracle_tools.cpp" -o "$WORK/bin/oracle-tools" \
    -L"$BUILD/bin" -L"$BUILD/common" -lllama-common -lllama-common-base -lllama -lggml -lggml-base \
    -Wl,-rpath,"$BUILD/bin" -lpthread
D=$ROOT/tests/data/tools
T=$ORACLE/models/templates
QWEN=$SHARED/models/rand-qwen2-q4_0.gguf
LLAMA=$SHARED/models/rand-llama3-q4_k_m.gguf
# family template vocabulary date (the Llama 3.x templates print one)
while read -r fam tmpl model date; do
    for r in "$D"/*.json; do
        name=$(basename "$r" .json)
        out=$D/$fam.$name.txt
        if [ "$date" = - ]; then set -- ; else set -- --date "$(echo "$date" | tr _ ' ')"; fi
        rc=0
        "$WORK/bin/oracle-tools" "$model" "$r" "$T/$tmpl" "$out" "$@" 2>"$WORK/tools.log" || rc=$?
        if [ $rc = 2 ]; then # the template refuses it (Llama 3: two calls in one message): so must picolm
            rm -f "$out"
            grep -o 'Jinja Exception: .*' "$WORK/tools.log" | head -1 >"$D/$fam.$name.refused"
        elif [ $rc != 0 ]; then
            cat "$WORK/tools.log" >&2; exit 1
        fi
    done
done <<EOF2
qwen2.5 Qwen-Qwen2.5-7B-Instruct.jinja $QWEN -
qwen3 Qwen-Qwen3-0.6B.jinja $QWEN -
llama3.1 meta-llama-Llama-3.1-8B-Instruct.jinja $LLAMA 26_Jul_2024
llama3.2 meta-llama-Llama-3.2-3B-Instruct.jinja $LLAMA 03_Feb_2025
EOF2
echo "mktools: wrote $D"
