#!/bin/sh
# picolm-server's tool calls and response_format json_schema, through the
# official openai Node SDK (tests/server/tools.test.mjs): calls on the
# shared Qwen2 model (Hermes-style) and Llama 3 model (its JSON calls),
# every one's arguments valid against the declared schema by ajv (pinned
# in tests/schema), tool-message round trips (the SDK's runTools among
# them), streamed deltas that assemble to the same call, and the refusals.
. "${0%/*}/lib.sh"
BUILD=${PICOLM_BUILD:-build}
SHARED=${PICOLM_SHARED:-../shared}
BIN=$BUILD/bin/picolm-server
QWEN=$SHARED/models/rand-qwen2-q4_0.gguf
LLAMA=$SHARED/models/rand-llama3-q4_k_m.gguf
[ -x "$BIN" ] || { echo "SKIP: t_server_tools: $BIN not built (libmicrohttpd-dev, libjson-c-dev)"; exit 0; }
[ -f "$QWEN" ] && [ -f "$LLAMA" ] || { echo "SKIP: t_server_tools: $QWEN or $LLAMA absent: TOOL CALL TESTS NOT RUN"; exit 0; }
command -v node >/dev/null 2>&1 || { echo "SKIP: t_server_tools: node absent: TOOL CALL TESTS NOT RUN"; exit 0; }
for d in server schema; do
    if [ ! -d tests/$d/node_modules ]; then
        (cd tests/$d && npm ci --no-audit --no-fund >/dev/null 2>&1) || { echo "FAIL: t_server_tools: npm ci in tests/$d failed"; exit 1; }
    fi
done

tmp=$(mktemp -d)
pids=
cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM

start_server() { log=$1; shift; serve "$log" "$BIN" "$@" -j 1 -c 1024 --slots 4 --queue 64; }
start_server "$tmp/qwen.log" "$QWEN" || { echo "FAIL: t_server_tools: the Qwen2 server did not start: $(tail -3 "$tmp/qwen.log")"; exit 1; }
QWEN_URL=$URL
# the Llama 3 file has no template: its family's is named
start_server "$tmp/llama.log" "$LLAMA" --chat-template llama3 ||
    { echo "FAIL: t_server_tools: the Llama 3 server did not start: $(tail -3 "$tmp/llama.log")"; exit 1; }
LLAMA_URL=$URL
QWEN_URL=$QWEN_URL LLAMA_URL=$LLAMA_URL node tests/server/tools.test.mjs
