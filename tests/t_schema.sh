#!/bin/sh
# --json-schema end to end (tests/schema/schema.test.mjs): 200 random schemas
# from the supported keywords through the real picolm binary at temperature 1
# (tiny-shakespeare, and a share on the Qwen2 and Llama 3 vocabularies), three
# seeds each at budgets from the minimum up, every output validated by ajv
# (pinned in tests/schema, installed with `npm ci` when missing); one token
# below the minimum refused; a tool-call schema; refused schemas.
BUILD=${PICOLM_BUILD:-build}
SHARED=${PICOLM_SHARED:-../shared}
BIN=$BUILD/bin/picolm
[ -x "$BIN" ] || { echo "SKIP: t_schema: $BIN not built"; exit 0; }
for m in tiny-shakespeare-q8_0 rand-qwen2-q4_0 rand-llama3-q4_k_m; do
    [ -f "$SHARED/models/$m.gguf" ] || { echo "SKIP: t_schema: $SHARED/models/$m.gguf absent: SCHEMA TESTS NOT RUN"; exit 0; }
done
command -v node >/dev/null 2>&1 || { echo "SKIP: t_schema: node absent: SCHEMA TESTS NOT RUN"; exit 0; }
if [ ! -d tests/schema/node_modules/ajv ]; then
    (cd tests/schema && npm ci --no-audit --no-fund >/dev/null 2>&1) ||
        { echo "FAIL: t_schema: npm ci in tests/schema failed (ajv is needed)"; exit 1; }
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node tests/schema/schema.test.mjs "$BIN" "$SHARED" "$tmp" 200
