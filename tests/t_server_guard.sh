#!/bin/sh
# picolm-server against hostile and careless clients, and its command line:
# cross-site requests and DNS rebinding (Host, Origin, Content-Type, CORS),
# clients that never read or send headers slowly, refused input, seeds,
# json_object, the step loop kept free, SIGTERM draining every stream, the
# model file truncated under the server and the CLI, the default KV pool of
# a long-context model, and a soak (tests/server/guard_test.py, raw sockets
# over loopback).  Every wait is bounded.
. "${0%/*}/lib.sh"
SERVER=$BIN/picolm-server
MODEL=$M/rand-qwen2-q4_0.gguf
[ -x "$SERVER" ] || { echo "SKIP: $TEST_NAME: $SERVER not built (libmicrohttpd-dev, libjson-c-dev)"; exit 0; }
need_shared "$MODEL"
need_built "$BIN/picolm" "$BIN/picolm-bench"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: $TEST_NAME: python3 absent: SERVER GUARD TESTS NOT RUN"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# usage errors: an empty API key, overflowing or negative sizes (a server
# that wrongly accepted them could not bind: TEST-NET-3 is no address here)
NOBIND="--host 203.0.113.1 --port 9"
usage() { # NAME EXPECTED-TEXT ARGS... (env from the caller)
    name=$1 want=$2; shift 2
    out=$("$@" 2>&1); rc=$?
    case "$out" in *"$want"*) ok=1 ;; *) ok=0 ;; esac
    if [ $rc -eq 2 ] && [ $ok = 1 ]; then echo "PASS: $TEST_NAME: $name: exit 2"
    else echo "FAIL: $TEST_NAME: $name: exit $rc: $(printf '%s' "$out" | head -c 300)"; fi
}
usage "--api-key ''" "API key" "$SERVER" "$MODEL" $NOBIND --api-key ''
usage "PICOLM_API_KEY=''" "PICOLM_API_KEY" env PICOLM_API_KEY= "$SERVER" "$MODEL" $NOBIND
usage "--ram 17179869185G (overflows)" "--ram" "$SERVER" "$MODEL" $NOBIND --ram 17179869185G
usage "-n -1K" "option -n" "$SERVER" "$MODEL" $NOBIND -n -1K
usage "picolm-bench --synth huge:Q4_K_M" "unknown synth shape" "$BIN/picolm-bench" --synth huge:Q4_K_M
out=$("$SERVER" --help 2>&1)
case "$out" in *--chat-template*) echo "PASS: $TEST_NAME: --help lists --chat-template (the flag its messages name)" ;;
    *) echo "FAIL: $TEST_NAME: --help has no --chat-template" ;; esac
out=$("$SERVER" "$MODEL" --chat-template nosuch --port 1 2>&1); rc=$?
case "$out" in *"unknown option"*) echo "FAIL: $TEST_NAME: --chat-template is an unknown option" ;;
    *) if [ $rc -ne 0 ]; then echo "PASS: $TEST_NAME: --chat-template nosuch: refused by name (exit $rc)";
       else echo "FAIL: $TEST_NAME: --chat-template nosuch accepted"; fi ;; esac

# a model with Llama-3.2-1B's KV cache (16 x 8 x 64, 131072 positions)
"$BIN/picolm-bench" --synth tiny-longkv:Q4_0 --out "$tmp/longkv.gguf" -p 0 -n 1 -r 1 -j 1 -c 64 --bw-mib 16 >"$tmp/synth.log" 2>&1 ||
    echo "FAIL: $TEST_NAME: cannot synthesise tiny-longkv: $(tail -2 "$tmp/synth.log")"

SERVER=$SERVER CLI=$BIN/picolm MODEL=$MODEL LONGKV=$tmp/longkv.gguf python3 tests/server/guard_test.py
