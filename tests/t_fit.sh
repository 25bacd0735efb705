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
err=$("$bin" "$model" --ram 2M -p hi -n 2 -t 0 2>&1 >/dev/null)
case "$err" in *"will not fit in ram = 2 MB"*"largest context that fits"*) echo "PASS: ram = 2M warns at start-up (2.3 MB resident, measured)" ;; *) echo "FAIL: no ram warning: $err" ;; esac
err=$("$bin" "$model" --ram 1G -p hi -n 2 -t 0 2>&1 >/dev/null)
case "$err" in *"will not fit"*) echo "FAIL: ram = 1G warned: $err" ;; *) echo "PASS: ram = 1G does not warn" ;; esac

# The plan is what a run holds at its peak (VmHWM), within 10%, for every
# shared model: the tokenizer and vocabulary tables and the sampler's lists
# are measured, not left out.  Under a sanitizer both still run and must
# report their figures, but its shadow memory, redzones and quarantine
# inflate every RSS, so the two are not compared.
S=${PICOLM_SHARED:-../shared}
for m in "$S"/models/*.gguf; do
    [ -f "$m" ] || continue
    plan=$("$bin" --fit "$m" -c 512 2>&1 | sed -n 's/^peak RSS *\([0-9.]*\) MB.*/\1/p')
    run=$("$bin" "$m" -p "Hello there" -n 32 -c 512 -j 1 2>&1 >/dev/null | sed -n 's/.*peak RSS \([0-9.]*\) MB.*/\1/p')
    if [ -n "$plan" ] && [ -n "$run" ] && [ -n "$PICOLM_SANITIZER" ]; then
        echo "SKIP: --fit ${m##*/}: plan $plan MB vs run's peak $run MB NOT COMPARED: PICOLM_SANITIZER=$PICOLM_SANITIZER inflates the RSS (shadow memory, redzones, quarantine)"
    elif [ -n "$plan" ] && [ -n "$run" ] && awk -v p="$plan" -v r="$run" 'BEGIN { exit !(p >= 0.9 * r && p <= 1.1 * r) }'; then
        echo "PASS: --fit ${m##*/}: plan $plan MB, run's peak $run MB"
    else
        echo "FAIL: --fit ${m##*/}: plan '${plan}' MB, run's peak '${run}' MB (not within 10%)"
    fi
done
m=$S/models/rand-llama3-q4_k_m.gguf
if [ -f "$m" ]; then
    out=$("$bin" --fit "$m" -c 512 --ram 40M 2>&1)
    case "$out" in *"verdict: fits at"*) echo "FAIL: rand-llama3 at --ram 40M (peak ~60 MB) is said to fit: $(printf '%s' "$out" | tail -3)" ;;
        *"verdict:"*) echo "PASS: rand-llama3 at --ram 40M: $(printf '%s' "$out" | sed -n 's/^verdict: //p')" ;;
        *) echo "FAIL: no verdict: $out" ;; esac
fi
