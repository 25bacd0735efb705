#!/bin/sh
# picolm-server end to end (tests/server/server.test.mjs): every endpoint,
# streaming, the chat template, 8 concurrent clients against their solo
# runs, a disconnect mid-stream, bad requests, limits, the official openai
# Node SDK and the chat page in headless chromium.  Needs node and the npm
# packages of tests/server (installed here with `npm ci` when missing), and
# the shared Qwen2-vocabulary model (a chat template, real special tokens).
. "${0%/*}/lib.sh"
BUILD=${PICOLM_BUILD:-build}
SHARED=${PICOLM_SHARED:-../shared}
BIN=$BUILD/bin/picolm-server
CLI=$BUILD/bin/picolm
MODEL=$SHARED/models/rand-qwen2-q4_0.gguf
[ -x "$BIN" ] || { echo "SKIP: t_server: $BIN not built (libmicrohttpd-dev, libjson-c-dev)"; exit 0; }
[ -f "$MODEL" ] || { echo "SKIP: t_server: $MODEL absent: SERVER TESTS NOT RUN"; exit 0; }
command -v node >/dev/null 2>&1 || { echo "SKIP: t_server: node absent: SERVER TESTS NOT RUN"; exit 0; }
if [ ! -d tests/server/node_modules/openai ] || [ ! -d tests/server/node_modules/playwright-core ]; then
    (cd tests/server && npm ci --no-audit --no-fund >/dev/null 2>&1) ||
        { echo "FAIL: t_server: npm ci in tests/server failed (the openai SDK and playwright-core are needed)"; exit 1; }
fi
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)

tmp=$(mktemp -d)
pids=
cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
KEY=test-key-$$
printf '[sampler]\ntemperature = 0\n' >"$tmp/srv.ini"

# start_server LOG ARGS... -> URL (its base URL) and PID
start_server() { log=$1; shift; serve "$log" "$BIN" "$MODEL" --api-key "$KEY" -j 1 -c 512 --config "${INI:-$tmp/srv.ini}" "$@"; }
start_server "$tmp/main.log" || { echo "FAIL: t_server: the server did not start: $(tail -3 "$tmp/main.log")"; exit 1; }
BASE=$URL MAIN_PID=$PID
# the limited server takes its limits from the INI's [server] section
printf '[sampler]\ntemperature = 0\n[server]\nmax_connections = 2\nqueue = 1\nmax_body = 4K\nslots = 1\n' >"$tmp/limited.ini"
INI=$tmp/limited.ini
start_server "$tmp/limited.log" ||
    { echo "FAIL: t_server: the limited server did not start: $(tail -3 "$tmp/limited.log")"; exit 1; }
LIMITED=$URL
INI=
start_server "$tmp/pressure.log" --slots 4 --kv-blocks 12 ||
    { echo "FAIL: t_server: the pressure server did not start: $(tail -3 "$tmp/pressure.log")"; exit 1; }
PRESSURE=$URL

# a bad [server] line is a usage error naming the file and line
printf '[server]\nport = 8080\nslots = lots\n' >"$tmp/bad.ini"
"$BIN" "$MODEL" --config "$tmp/bad.ini" >"$tmp/bad.out" 2>&1
brc=$?
if [ $brc -eq 2 ] && grep -q "bad.ini:3" "$tmp/bad.out"; then echo "PASS: server: a bad [server] value: exit 2 naming bad.ini:3"
else echo "FAIL: server: a bad [server] value: exit $brc: $(head -c 300 "$tmp/bad.out")"; fi

# what the CLI generates for the same prompt, and its prompt token count
printf 'Hello' | "$CLI" "$MODEL" -t 0 -n 24 -j 1 -c 512 >"$tmp/cli.txt" 2>"$tmp/cli.err"
CLI_PROMPT_TOKENS=$(sed -n 's/.*prefill \([0-9]*\) token.*/\1/p' "$tmp/cli.err")

BASE=$BASE LIMITED=$LIMITED PRESSURE=$PRESSURE KEY=$KEY CLI_TEXT=$tmp/cli.txt CLI_PROMPT_TOKENS=$CLI_PROMPT_TOKENS \
    CHAT_REF=$SHARED/reference/chat/chatml.txt CONV=$SHARED/reference/chat/conversation.txt CHROMIUM=$CHROMIUM \
    node tests/server/server.test.mjs
rc=$?

# A reply preempted under memory pressure waits longer than --idle-timeout
# for its blocks: the timeout is for silent clients, so the stream resumes
# and completes (it was closed mid-stream: curl exit 18).
if start_server "$tmp/idle.log" -c 2048 --slots 2 --kv-blocks 100 --idle-timeout 1; then
    IDLE_URL=$URL
    curl -s -H "Authorization: Bearer $KEY" -H "Content-Type: application/json" "$IDLE_URL/v1/completions" -o "$tmp/idleA.txt" \
        -d '{"prompt":"a","max_tokens":2000,"stream":true}' &
    ca=$!
    sleep 0.3
    curl -s -H "Authorization: Bearer $KEY" -H "Content-Type: application/json" "$IDLE_URL/v1/completions" -o "$tmp/idleB.txt" \
        -d '{"prompt":"b","max_tokens":1000,"stream":true,"stream_options":{"include_usage":true}}'
    cb=$?
    wait $ca
    pre=$(curl -s -H "Authorization: Bearer $KEY" "$IDLE_URL/metrics" | awk '/^picolm_preemptions_total/ { print $2 }')
    if [ $cb -eq 0 ] && grep -q '"completion_tokens":1000' "$tmp/idleB.txt" && tail -c 20 "$tmp/idleB.txt" | grep -q '\[DONE\]' &&
       [ "${pre:-0}" -ge 1 ]; then
        echo "PASS: server: a stream preempted for longer than --idle-timeout 1 resumes and completes (1000 tokens, $pre preemption)"
    else
        echo "FAIL: server: preempted stream with --idle-timeout 1: curl exit $cb, preemptions ${pre:-?}, ends '$(tail -c 80 "$tmp/idleB.txt")'"; rc=1
    fi
else
    echo "FAIL: server: the idle-timeout server did not start: $(tail -3 "$tmp/idle.log")"; rc=1
fi

# Prompt tokens go to the oldest prompt first (--prefill-chunk per step, all
# sequences together): a long prompt that came first is answered before a
# shorter one that came 0.1 s later, which then takes its ~375 steps (with a
# chunk per sequence and step, the shorter one was answered long before;
# the gap keeps the two clients' clocks out of the order under load).
if start_server "$tmp/fcfs.log" --slots 2 --prefill-chunk 2 -c 2048; then
    FCFS_URL=$URL
    long=$(awk 'BEGIN { for (i = 0; i < 360; i++) printf "the sea and the ship "; }')
    short=$(awk 'BEGIN { for (i = 0; i < 150; i++) printf "a boat on the waves "; }')
    (curl -s -H "Authorization: Bearer $KEY" -H "Content-Type: application/json" "$FCFS_URL/v1/completions" -o "$tmp/fcfsA.json" \
        -d '{"prompt":"'"$long"'","max_tokens":1}'; date +%s%N >"$tmp/fcfsA.t") &
    fa=$!
    sleep 0.1
    curl -s -H "Authorization: Bearer $KEY" -H "Content-Type: application/json" "$FCFS_URL/v1/completions" -o "$tmp/fcfsB.json" \
        -d '{"prompt":"'"$short"'","max_tokens":1}'
    date +%s%N >"$tmp/fcfsB.t"
    wait $fa
    pa=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' "$tmp/fcfsA.json"); pb=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' "$tmp/fcfsB.json")
    ta=$(cat "$tmp/fcfsA.t"); tb=$(cat "$tmp/fcfsB.t")
    if [ -n "$pa" ] && [ -n "$pb" ] && [ "$pa" -gt "$pb" ] && [ "$ta" -lt "$tb" ]; then
        echo "PASS: server: oldest prompt first: the $pa-token prompt is answered $(( (tb - ta) / 1000000 )) ms before the later $pb-token one"
    else
        echo "FAIL: server: oldest prompt first: A ($pa tokens) done at $ta, B ($pb tokens, 0.1 s later) at $tb"; rc=1
    fi
else
    echo "FAIL: server: the --prefill-chunk 4 server did not start: $(tail -3 "$tmp/fcfs.log")"; rc=1
fi

# --ram: the whole server stays within its budget (+ 10 MB) at 8 streams.
# The budget is what the server says the weights, buffers and code take,
# plus 8.5 MB for the KV pool.
"$BIN" "$MODEL" --port 1 --ram 1M -j 1 -c 512 --slots 8 --config "$tmp/srv.ini" >"$tmp/ram0.log" 2>&1
r0=$?
rest=$(sed -n 's/.*take \([0-9.]*\) MB.*/\1/p' "$tmp/ram0.log")
if [ $r0 -eq 1 ] && [ -n "$rest" ]; then echo "PASS: server: --ram 1M is refused, saying what the rest takes ($rest MB)"
else echo "FAIL: server: --ram 1M: exit $r0: $(head -c 300 "$tmp/ram0.log")"; rc=1; fi
ram=$(awk -v r="${rest:-100}" 'BEGIN { printf "%d", r + 8.5 }')
if start_server "$tmp/ram.log" --slots 8 --ram "${ram}M"; then
    RAM_URL=$URL RAM_PID=$PID
    cps=
    for i in 1 2 3 4 5 6 7 8; do
        curl -s -H "Authorization: Bearer $KEY" -H "Content-Type: application/json" "$RAM_URL/v1/completions" -o "$tmp/ram$i.json" -w '%{http_code}\n' \
            -d '{"prompt":"Stream '$i' tells a long story about the sea and","max_tokens":96}' >"$tmp/ramc$i" &
        cps="$cps $!"
    done
    peak=0 kvmax=0
    while :; do
        alive=0
        for p in $cps; do kill -0 "$p" 2>/dev/null && alive=1; done
        v=$(awk '/^VmRSS/ { print $2 }' "/proc/$RAM_PID/status" 2>/dev/null)
        [ "${v:-0}" -gt "$peak" ] && peak=$v
        k=$(curl -s -H "Authorization: Bearer $KEY" "$RAM_URL/metrics" | awk '/^picolm_kv_blocks_used/ { print $2 }')
        [ "${k:-0}" -gt "$kvmax" ] && kvmax=$k
        [ $alive = 0 ] && break
        sleep 0.05
    done
    ok200=$(cat "$tmp"/ramc* | grep -c '^200$')
    pool=$(sed -n 's/.*KV pool: \([0-9]*\) blocks.*/\1/p' "$tmp/ram.log")
    if [ "$ok200" = 8 ] && [ "$kvmax" -gt 0 ] && [ "$peak" -le $(( (ram + 10) * 1024 )) ]; then
        echo "PASS: server: --ram ${ram}M, 8 streams: peak VmRSS $((peak / 1024)) MB <= budget + 10 MB (KV pool $pool blocks, $kvmax in use at most)"
    else
        echo "FAIL: server: --ram ${ram}M, 8 streams: $ok200/8 OK, peak VmRSS $((peak / 1024)) MB, KV blocks $kvmax of $pool"; rc=1
    fi
else
    echo "FAIL: server: did not start with --ram ${ram}M: $(tail -3 "$tmp/ram.log")"; rc=1
fi

# the server survived all of it, and stops cleanly on SIGTERM
if curl -sf "$BASE/health" >/dev/null; then echo "PASS: server: still serving after the suite"; else echo "FAIL: server: not serving after the suite"; rc=1; fi
kill -TERM "$MAIN_PID"
if wait "$MAIN_PID"; then echo "PASS: server: SIGTERM stops it with status 0"; else echo "FAIL: server: SIGTERM exit status $?: $(tail -2 "$tmp/main.log")"; rc=1; fi
exit $rc
