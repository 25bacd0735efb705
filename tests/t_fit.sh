#!/bin/sh
# --fit prints the memory plan; ram = ... warns at start-up when the context
# will not fit (and says the largest that does).
BUILD=${PICOLM_BUILD:-build}
bin="$BUILD/bin/picolm"; model=models/tiny-shakespeare-q8_0.gguf
out=$("$bin" --fit "$model" --ram 512M -c 128 2>&1); rc=$?
for w in "KV cache" "buffers" "resident" "largest context that fits" "verdict: fits"; do
    case "$out" in *"$w"*) echo "PASS: --fit shows '$w'" ;; *) echo "FAIL: --fit lacks '$w' (rc $rc): $out" ;; esac
done
case "$out" in *"128 tokens x 2.0 KB"*) echo "PASS: --fit sizes the KV cache for -c 128 (f16: 2 KB per token)" ;; *) echo "FAIL: KV line: $out" ;; esac
out=$("$bin" --fit "$model" --kv-type q8_0 -c 128 2>&1)
case "$out" in *"128 tokens x 1.1 KB"*) echo "PASS: q8_0 KV cache is about half" ;; *) echo "FAIL: q8_0 KV line: $out" ;; esac
err=$("$bin" "$model" --ram 3M -p hi -n 2 -t 0 2>&1 >/dev/null)
case "$err" in *"will not fit in ram = 3 MB"*"largest context that fits"*) echo "PASS: ram = 3M warns at start-up" ;; *) echo "FAIL: no ram warning: $err" ;; esac
err=$("$bin" "$model" --ram 1G -p hi -n 2 -t 0 2>&1 >/dev/null)
case "$err" in *"will not fit"*) echo "FAIL: ram = 1G warned: $err" ;; *) echo "PASS: ram = 1G does not warn" ;; esac
