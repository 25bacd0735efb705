#!/bin/sh
# make test-tsan's server run (not a t_*.sh: tests/run.sh does not run it):
# picolm-server of a sanitized build under 16 concurrent streams (stop
# strings, logprobs, a client that leaves mid-stream, one that leaves while
# queued), then SIGTERM with streams open.  A TSan report aborts the server:
# a non-zero exit.  usage: tests/tsan_server.sh BUILD_DIR MODEL
B=$1 MODEL=$2
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
port=$((20000 + $$ % 20000))
"$B/bin/picolm-server" "$MODEL" --port $port -j 2 --slots 8 -c 512 --queue 32 >"$tmp/log" 2>&1 &
pid=$!
for i in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.1; done
post() { curl -s -N -H "Content-Type: application/json" "http://127.0.0.1:$port/v1/completions" -d "$1" "$@"; }
for i in $(seq 1 16); do
    case $((i % 4)) in
        0) body='{"prompt":"ROMEO:","max_tokens":64,"stream":true,"stop":["the","\n\n"]}' ;;
        1) body='{"prompt":"JULIET:","max_tokens":48,"stream":true,"logprobs":3}' ;;
        2) body='{"prompt":"KING:","max_tokens":400,"stream":true}' ;;
        3) body='{"prompt":"QUEEN:","max_tokens":40}' ;;
    esac
    if [ $i = 6 ] || [ $i = 15 ]; then post "$body" --max-time 0.3 >/dev/null 2>&1 &
    else post "$body" >"$tmp/out$i" 2>&1 & fi
done
# SIGTERM once 8 streams are under way (sanitized and loaded, that takes a while)
for i in $(seq 1 600); do
    [ "$(grep -l 'data: ' "$tmp"/out* 2>/dev/null | wc -l)" -ge 8 ] && break
    sleep 0.2
done
kill -TERM $pid
wait $pid
rc=$?
wait
if [ $rc -ne 0 ] || grep -q "ThreadSanitizer" "$tmp/log"; then
    echo "tsan: picolm-server: exit $rc"; grep -A30 "ThreadSanitizer" "$tmp/log" | head -60; exit 1
fi
started=$(grep -l 'data: ' "$tmp"/out* | wc -l)
done=$(grep -l '\[DONE\]' "$tmp"/out* | wc -l)
shut=$(grep -l '"finish_reason":"shutdown"' "$tmp"/out* | wc -l)
[ "$started" -ge 8 ] && [ "$done" = "$started" ] ||
    { echo "tsan: picolm-server: $started streams started, $done ended with [DONE]"; exit 1; }
echo "tsan: picolm-server: 16 concurrent requests ($started streams under way: each ended with [DONE], $shut of them by the shutdown) and SIGTERM, clean (exit 0)"
