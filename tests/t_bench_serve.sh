#!/bin/sh
# tools/bench-serve.mjs (the server benchmark) end to end on the bundled demo
# model: the JSON rows for 1 and 2 streams, every token counted, a decode rate
# for each level, no request served from the prefix cache beyond the prompts'
# common first words (each has a prompt of its own, so none can skip its
# prefill), --help, and a bad option refused.
. "${0%/*}/lib.sh"
MODEL=models/tiny-shakespeare-q8_0.gguf
[ -x "$BIN/picolm-server" ] || { echo "SKIP: $TEST_NAME: $BIN/picolm-server not built (libmicrohttpd-dev, libjson-c-dev)"; exit 0; }
command -v node >/dev/null 2>&1 || { echo "SKIP: $TEST_NAME: node absent: BENCH-SERVE NOT TESTED"; exit 0; }
[ -f "$MODEL" ] || { echo "FAIL: $TEST_NAME: $MODEL missing"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
ok() { echo "PASS: $TEST_NAME: $1"; }
bad() { echo "FAIL: $TEST_NAME: $1"; fail=1; }

node tools/bench-serve.mjs --help >"$tmp/help" 2>&1 && grep -q "^usage: node tools/bench-serve.mjs MODEL" "$tmp/help" &&
    ok "--help prints the usage and exits 0" || bad "--help: $(head -3 "$tmp/help")"
node tools/bench-serve.mjs "$MODEL" --bogus >"$tmp/bogus" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "unknown option --bogus" "$tmp/bogus" && ok "an unknown option: exit 2, named" || bad "--bogus: exit $rc: $(head -2 "$tmp/bogus")"

# two levels, two reps each: 5 requests after the warm-up, 40-token prompts
# (more than two 16-position KV blocks: a prompt served from the cache would
# count more tokens than the common stem)
if PICOLM_BUILD=$BUILD node tools/bench-serve.mjs "$MODEL" --streams 1,2 -n 8 -p 32 --reps 2 --format json -- -j 1 -c 128 \
    >"$tmp/out.json" 2>"$tmp/err"; then
    ok "bench-serve --streams 1,2 ran"
else
    bad "bench-serve failed: $(tail -5 "$tmp/err")"
fi
node -e '
const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
const say = (c, what) => console.log(`${c ? "PASS" : "FAIL"}: t_bench_serve: ${what}`);
say(j.rows.map(r => r.streams).join() === "1,2", `one row per level (${j.rows.map(r => r.streams)})`);
for (const r of j.rows) {
  say(r.tokens === 8 * r.streams, `${r.streams} stream(s): ${r.tokens} tokens, 8 each`);
  say(Number.isFinite(r.decode_tok_s) && r.decode_tok_s > 0, `${r.streams} stream(s): a decode rate (${r.decode_tok_s})`);
  /* the prompts share their first words ("Client 1..."), a few tokens the
     prefix cache may serve; a repeated prompt would add all its 40 */
  say(r.prompt_tokens_cached < 8 * r.streams, `${r.streams} stream(s): no prompt from the prefix cache (${r.prompt_tokens_cached} tokens: the common stem at most)`);
  say(r.prompt_tokens_mean >= 33, `${r.streams} stream(s): prompts of ${r.prompt_tokens_mean} tokens (over two KV blocks)`);
  say(r.kv_blocks_peak >= r.streams && r.rss_anon_mb > 0, `${r.streams} stream(s): KV blocks peak ${r.kv_blocks_peak}, RssAnon ${r.rss_anon_mb} MB`);
  say(r.ttft_p50_ms > 0 && r.ttft_p99_ms >= r.ttft_p50_ms, `${r.streams} stream(s): TTFT p50 ${r.ttft_p50_ms} <= p99 ${r.ttft_p99_ms} ms`);
}
say(j.rows[0].vs_one === 1, "the one-stream row is the unit");
' "$tmp/out.json" >"$tmp/checks" 2>&1 || bad "the JSON did not parse: $(head -3 "$tmp/checks")"
cat "$tmp/checks"
grep -q "^FAIL" "$tmp/checks" && fail=1
exit $fail
