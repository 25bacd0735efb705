#!/bin/sh
# picolm-server on the families with per-sequence state beyond K/V rows:
# LFM2 (a recurrent conv state, forked and restored with its sequence) and
# Gemma 3 (a sliding window shorter than the replies).  For each: replies
# served 4 at once in a pool too small for them (preemptions) equal each
# prompt served alone, bit for bit (greedy text); a prompt that begins like
# an earlier one reuses its cached prefix (at a block boundary for LFM2)
# and still gives its solo reply.
. tests/lib.sh
SRV=$BIN/picolm-server
[ -x "$SRV" ] || { echo "SKIP: t_server_families: picolm-server was not built"; exit 0; }
command -v curl >/dev/null || { echo "SKIP: t_server_families: no curl"; exit 0; }
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
rc=0

req() { # URL PROMPT MAX_TOKENS -> the reply's text (JSON-escaped as the server wrote it)
    curl -s -H "Content-Type: application/json" "$1/v1/completions" \
        -d "{\"prompt\":\"$2\",\"max_tokens\":$3,\"temperature\":0}" | sed -n 's/.*"text":"\(.*\)","logprobs".*/\1/p'
}
metric() { curl -s "$1/metrics" | awk -v k="$2" '$1 == k { print $2 }'; }

for m in rand-lfm2-q8_0 rand-gemma3-q8_0; do
    model=tests/data/families/$m.gguf
    [ -f "$model" ] || { echo "SKIP: t_server_families: $model absent"; continue; }
    port=$((20000 + $$ % 20000))
    # 4 slots of up to 160 positions in 14 blocks of 16: a reply of 100
    # tokens after a prompt of ~15 takes 8 blocks, so any two that overlap
    # in time do not fit at once (48-token replies on these tiny models
    # could finish before the next request arrived)
    "$SRV" "$model" --port $port -j 1 -c 160 --slots 4 --kv-blocks 14 >"$tmp/$m.log" 2>&1 &
    pid=$!
    URL=http://127.0.0.1:$port
    up=0
    for i in $(seq 1 100); do
        curl -s "$URL/health" >/dev/null 2>&1 && { up=1; break; }
        sleep 0.1
    done
    if [ $up = 0 ]; then echo "FAIL: $m: the server did not start: $(tail -3 "$tmp/$m.log")"; rc=1; kill $pid; continue; fi
    p0="The river runs to the sea and the sea"
    for i in 0 1 2 3; do req "$URL" "$p0 $i: the ships" 100 >"$tmp/solo$i"; done
    before=$(metric "$URL" picolm_preemptions_total)
    pids=""
    for i in 0 1 2 3; do req "$URL" "$p0 $i: the ships" 100 >"$tmp/par$i" & pids="$pids $!"; done
    for j in $pids; do wait "$j"; done
    same=0
    for i in 0 1 2 3; do [ -s "$tmp/solo$i" ] && cmp -s "$tmp/solo$i" "$tmp/par$i" && same=$((same + 1)); done
    after=$(metric "$URL" picolm_preemptions_total)
    if [ $same = 4 ] && [ "${after:-0}" -gt "${before:-0}" ]; then
        echo "PASS: $m: 4 replies at once in a pool short of blocks ($((after - before)) preemptions) = each alone, bit for bit"
    else
        echo "FAIL: $m: $same of 4 replies served together equal their solo runs; preemptions $before -> $after"; rc=1
    fi
    # a prompt that begins like the last one: its prefix comes from the cache
    c0=$(metric "$URL" picolm_prompt_tokens_cached_total)
    long="$p0 and the long road home under the stars"
    req "$URL" "$long, said one" 16 >"$tmp/a"
    c1=$(metric "$URL" picolm_prompt_tokens_cached_total)
    req "$URL" "$long, said two" 16 >"$tmp/b"
    c2=$(metric "$URL" picolm_prompt_tokens_cached_total)
    kill $pid; wait $pid 2>/dev/null
    # the same second prompt on a fresh server: nothing cached
    "$SRV" "$model" --port $port -j 1 -c 160 --slots 4 --kv-blocks 14 >>"$tmp/$m.log" 2>&1 &
    pid=$!
    for i in $(seq 1 100); do curl -s "$URL/health" >/dev/null 2>&1 && break; sleep 0.1; done
    req "$URL" "$long, said two" 16 >"$tmp/b0"
    kill $pid; wait $pid 2>/dev/null
    if [ $((c2 - c1)) -gt 0 ] && [ -s "$tmp/b" ] && cmp -s "$tmp/b" "$tmp/b0"; then
        echo "PASS: $m: a shared prefix of $((c2 - c1)) tokens comes from the cache, and the reply equals a fresh server's"
    else
        echo "FAIL: $m: cached $((c2 - c1)) tokens (after $c0 -> $c1); reply '$(cat "$tmp/b")' vs fresh '$(cat "$tmp/b0")'"; rc=1
    fi
done
exit $rc
