#!/bin/sh
# picolm --tools / --tool-choice / --messages end to end
# (tests/schema/tools.test.mjs): calls on the shared Qwen2 and Llama 3
# models, each printed as one line of JSON and validated by ajv (pinned in
# tests/schema, installed with `npm ci` when missing), a conversation with
# a call and its result, and the refusals.
BUILD=${PICOLM_BUILD:-build}
SHARED=${PICOLM_SHARED:-../shared}
BIN=$BUILD/bin/picolm
[ -x "$BIN" ] || { echo "SKIP: t_toolcalls: $BIN not built"; exit 0; }
for m in rand-qwen2-q4_0 rand-llama3-q4_k_m; do
    [ -f "$SHARED/models/$m.gguf" ] || { echo "SKIP: t_toolcalls: $SHARED/models/$m.gguf absent: TOOL CALL TESTS NOT RUN"; exit 0; }
done
command -v node >/dev/null 2>&1 || { echo "SKIP: t_toolcalls: node absent: TOOL CALL TESTS NOT RUN"; exit 0; }
if [ ! -d tests/schema/node_modules/ajv ]; then
    (cd tests/schema && npm ci --no-audit --no-fund >/dev/null 2>&1) ||
        { echo "FAIL: t_toolcalls: npm ci in tests/schema failed (ajv is needed)"; exit 1; }
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node tests/schema/tools.test.mjs "$BIN" "$SHARED" "$tmp"
