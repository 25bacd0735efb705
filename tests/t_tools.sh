#!/bin/sh
# The picolm-* tools as a new user meets them: picolm-logits --last and the
# context limit, picolm-perplexity -c past the model's context,
# picolm-tokenize -p and control-token names, picolm-gguf saying what is
# wrong, picolm-bench's header, picolm-quantize's log.
BUILD=${PICOLM_BUILD:-build}
SHARED=${PICOLM_SHARED:-../shared}
B=$BUILD/bin
MODEL=models/tiny-shakespeare-q8_0.gguf
REF=$SHARED/reference/logits
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; }
ok() { if [ $? -eq 0 ]; then pass "$@"; else fail "$@"; fi; }
brief() { head -c 300 "$1" | tr '\n' ' '; }

# --- picolm-logits --last K: exactly the last K rows of the full output -------
if [ -f "$REF/tiny-shakespeare-q8_0.tokens.i32" ]; then
    T=$REF/tiny-shakespeare-q8_0.tokens.i32
    "$B/picolm-logits" "$MODEL" "$T" "$tmp/all.f32" -j 1 --batch 7 2>/dev/null
    "$B/picolm-logits" "$MODEL" "$T" "$tmp/last.f32" -j 1 --batch 7 --last 5 2>"$tmp/err"; rc=$?
    sz=$(wc -c <"$tmp/last.f32")
    [ $rc -eq 0 ] && [ "$sz" -eq $((5 * 1024 * 4)) ] && tail -c "$sz" "$tmp/all.f32" | cmp -s - "$tmp/last.f32"
    ok "picolm-logits --last 5 writes the last 5 positions, equal to the full run's (batch 7 straddles the cut)"
    "$B/picolm-logits" "$MODEL" "$T" "$tmp/x.f32" -c 100 >/dev/null 2>"$tmp/err"; rc=$?
    [ $rc -eq 1 ] && grep -q "more than the context of 100" "$tmp/err"; ok "picolm-logits: more tokens than -c is refused ($(brief "$tmp/err"))"
else
    echo "SKIP: t_tools: $REF absent"
fi
python3 -c "import struct,sys; open(sys.argv[1],'wb').write(struct.pack('<300i', *([1] + [50] * 299)))" "$tmp/300.i32"
"$B/picolm-logits" "$MODEL" "$tmp/300.i32" "$tmp/x.f32" >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "the model's limit" "$tmp/err"; ok "picolm-logits: 300 tokens on a 256-context model are refused ($(brief "$tmp/err"))"
"$B/picolm-logits" "$MODEL" "$tmp/300.i32" /dev/full --last 1 -c 300 >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ]; ok "picolm-logits -c 300 on a 256 model still refuses (rc $rc)"

# --- picolm-perplexity -c past the model's context: clamped, with a warning --
H=$SHARED/models/heldout.txt
if [ -f "$H" ]; then
    "$B/picolm-perplexity" "$MODEL" "$H" -c 999 --chunks 2 -j 1 >"$tmp/p999" 2>"$tmp/err"; rc=$?
    "$B/picolm-perplexity" "$MODEL" "$H" -c 256 --chunks 2 -j 1 >"$tmp/p256" 2>/dev/null
    [ $rc -eq 0 ] && grep -q "beyond the model's limit of 256" "$tmp/err" && cmp -s "$tmp/p999" "$tmp/p256"
    ok "picolm-perplexity -c 999 warns and scores as -c 256 ($(tail -1 "$tmp/p999"))"
    "$B/picolm-perplexity" "$MODEL" "$H" --context 128 --chunks 1 -j 1 >/dev/full 2>"$tmp/err"; rc=$?
    [ $rc -eq 1 ] && grep -q "cannot write" "$tmp/err"; ok "picolm-perplexity to a full disk: exit 1"
else
    echo "SKIP: t_tools: $H absent"
fi

# --- picolm-tokenize -p, control tokens by name --------------------------------
"$B/picolm-tokenize" "$MODEL" -p "ROMEO:" >"$tmp/a" 2>"$tmp/err"; rc=$?
printf 'ROMEO:' >"$tmp/t.txt"; "$B/picolm-tokenize" "$MODEL" "$tmp/t.txt" >"$tmp/b" 2>/dev/null
[ $rc -eq 0 ] && [ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b"; ok "picolm-tokenize -p TEXT = the same text from a file ($(cat "$tmp/a"))"
"$B/picolm-tokenize" "$MODEL" --special --pieces -p "hi</s>" >"$tmp/a" 2>/dev/null
grep -q "^1:<s> .* 2:</s>$" "$tmp/a"; ok "--pieces shows control tokens by name ($(cat "$tmp/a"))"
"$B/picolm-tokenize" --help | head -2 | grep -q -- "--pieces"; ok "picolm-tokenize's usage line lists --pieces"

# --- picolm-gguf says what is wrong ----------------------------------------------
for c in "frob $MODEL:unknown command 'frob'" "info:info: missing MODEL" "info $MODEL extra:unexpected argument 'extra'" \
         "dequant $MODEL:dequant: missing TENSOR"; do
    args=${c%%:*}; want=${c#*:}
    "$B/picolm-gguf" $args >/dev/null 2>"$tmp/err"; rc=$?
    [ $rc -eq 2 ] && grep -q "$want" "$tmp/err"; ok "picolm-gguf $args: exit 2, '$want'"
done

# --- picolm-bench names the model; picolm-quantize's log lines up ----------------
"$B/picolm-bench" "$MODEL" -j 1 --backend scalar -p 4 -n 2 -r 1 --bw-mib 16 >"$tmp/bench" 2>/dev/null; rc=$?
[ $rc -eq 0 ] && grep -q "^tiny-shakespeare-q8_0.gguf, " "$tmp/bench"; ok "picolm-bench's header names the model ($(sed -n 2p "$tmp/bench"))"
printf '[engine]\nthreads = 1\nbackend = scalar\n' >"$tmp/b.ini"
"$B/picolm-bench" "$MODEL" --config "$tmp/b.ini" -p 4 -n 2 -r 1 --bw-mib 16 >"$tmp/bench" 2>/dev/null; rc=$?
[ $rc -eq 0 ] && [ "$(grep -c '^| [a-z]' "$tmp/bench")" = 2 ] && grep -q '^| scalar | 1 |' "$tmp/bench"
ok "picolm-bench --config: the INI's [engine] threads and backend apply ($(grep '^| scalar' "$tmp/bench" | cut -c1-20))"
F32=$SHARED/models/tiny-shakespeare-f32.gguf
if [ -f "$F32" ]; then
    "$B/picolm-quantize" "$F32" "$tmp/q.gguf" Q4_K_M -j 1 2>"$tmp/log" >/dev/null
    grep '^\[' "$tmp/log" >"$tmp/lines"
    ! grep -q -e 'q4_K' -e 'q6_K' -e 'f32 ' "$tmp/lines" && grep -q 'F32 -> Q6_K' "$tmp/lines"; ok "picolm-quantize spells every type one way (Q6_K, F32)"
fi
Q4K=$SHARED/models/tiny-shakespeare-q4_k.gguf
if [ -f "$Q4K" ]; then
    # a repack mixes 4- and 8-letter type names (Q4_K, Q4_K_R16)
    "$B/picolm-quantize" "$Q4K" "$tmp/r.gguf" Q4_K_R16 -j 1 2>"$tmp/log" >/dev/null
    grep '^\[' "$tmp/log" >"$tmp/lines"
    [ -s "$tmp/lines" ] && [ "$(awk '{ print index($0, "->") }' "$tmp/lines" | sort -u | wc -l)" -eq 1 ] &&
        [ "$(awk '{ print index($0, " MB") }' "$tmp/lines" | sort -u | wc -l)" -eq 1 ] && ! grep -q q4_k_r16 "$tmp/lines"
    ok "picolm-quantize's columns line up ($(sed -n 1p "$tmp/lines"))"
fi
exit 0
