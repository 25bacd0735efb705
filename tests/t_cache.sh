#!/bin/sh
# --cache FILE end to end: prefix reuse gives the same text as no cache;
# a file that is not a KV cache of this model (another model, another kind
# of file, a damaged one) is an error (exit 1) that leaves the file as it
# was; this model's cache that this run cannot use (another KV type) is
# replaced with a warning; an empty file is a new cache; writes are atomic.
BUILD=${PICOLM_BUILD:-build}
SHARED=${PICOLM_SHARED:-../shared}
BIN=$BUILD/bin/picolm
MODEL=models/tiny-shakespeare-q8_0.gguf
OTHER=$SHARED/models/tiny-shakespeare-q4_0.gguf
PROMPT_FILE=$SHARED/reference/logits/tiny-shakespeare.prompt.txt
if [ ! -x "$BIN" ]; then echo "SKIP: t_cache: $BIN not built"; exit 0; fi
if [ ! -f "$MODEL" ] || [ ! -f "$PROMPT_FILE" ]; then echo "SKIP: t_cache: model or shared prompt absent"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { if [ $? -eq 0 ]; then echo "PASS: $*"; else echo "FAIL: $*"; fi; }
brief() { grep -v -e '^$' -e 'picolm: load' -e 'picolm: backend' "$1" | head -c 300 | tr '\n' ' '; }
PROMPT=$(cat "$PROMPT_FILE")
C=$tmp/c.kv
# gen OUT ERR ARGS...: sampled generation of the reference prompt (seeded)
gen() { o=$1; e=$2; shift 2; "$BIN" "$MODEL" -j 1 -t 0.8 -s 3 -n 30 -p "$PROMPT" "$@" >"$o" 2>"$e"; rc=$?; }
reused() { sed -n 's/^picolm: cache: reused \([0-9]*\) of \([0-9]*\).*/\1 \2/p' "$1"; }

gen "$tmp/plain" "$tmp/e0"
gen "$tmp/o1" "$tmp/e1" --cache "$C"
[ $rc -eq 0 ] && [ -s "$C" ] && cmp -s "$tmp/o1" "$tmp/plain" && ! grep -q "reused" "$tmp/e1"
ok "first run: writes the cache file, output unchanged ($(wc -c <"$C") bytes)"
[ -z "$(ls "$tmp" | grep '\.tmp\.')" ]; ok "no temporary file is left next to the cache"

gen "$tmp/o2" "$tmp/e2" --cache "$C"
[ "$(reused "$tmp/e2")" = "204 205" ]; ok "same prompt again: reuses all but the last token ($(grep 'cache:' "$tmp/e2"))"
[ $rc -eq 0 ] && cmp -s "$tmp/o2" "$tmp/plain"; ok "same prompt, same seed: same output with the cache"
grep -q "prefill 1 token " "$tmp/e2"; ok "only one prompt token is evaluated"

# a longer prompt sharing the prefix
LONGER="$PROMPT
And so, farewell."
"$BIN" "$MODEL" -j 1 -t 0 -n 20 -p "$LONGER" >"$tmp/lp" 2>/dev/null
"$BIN" "$MODEL" -j 1 -t 0 -n 20 -p "$LONGER" --cache "$C" >"$tmp/l" 2>"$tmp/el"
set -- $(reused "$tmp/el")
[ -n "$1" ] && [ "$1" -ge 200 ] && [ "$1" -lt $(($2 - 1)) ] && cmp -s "$tmp/l" "$tmp/lp"
ok "a longer prompt reuses the shared prefix ($1 of $2) and generates the same text"

# greedy with a cache still gives llama.cpp's reference text
"$BIN" "$MODEL" -j 1 -t 0 -n 48 -p "$PROMPT" --cache "$C" >/dev/null 2>&1
"$BIN" "$MODEL" -j 1 -t 0 -n 48 -p "$PROMPT" --cache "$C" >"$tmp/g" 2>"$tmp/eg"
REF=$SHARED/reference/logits/tiny-shakespeare-q8_0.greedy.txt
n=$(wc -c <"$REF")
grep -q "reused 204 of 205" "$tmp/eg" && head -c "$n" "$tmp/g" | cmp -s - "$REF"; ok "greedy from a reused cache = the reference continuation"

# another model: an error naming the mismatch, the file left as it was
if [ -f "$OTHER" ]; then
    cp "$C" "$tmp/q8.kv"
    "$BIN" "$OTHER" -j 1 -t 0 -n 20 -p "$PROMPT" --cache "$tmp/q8.kv" >"$tmp/q4c" 2>"$tmp/eq"; rc=$?
    [ $rc -eq 1 ] && grep -q "cache $tmp/q8.kv: made for a different model" "$tmp/eq" && [ ! -s "$tmp/q4c" ]
    ok "a cache from another model (q8_0 -> q4_0) is an error (exit $rc) naming the mismatch: $(brief "$tmp/eq")"
    cmp -s "$C" "$tmp/q8.kv"; ok "the other model's cache file is left as it was"
    grep -q "remove it or name another file" "$tmp/eq"; ok "the message says how to go on"
else
    echo "SKIP: t_cache: $OTHER absent"
fi

# another KV type
cp "$C" "$tmp/f16.kv"
"$BIN" "$MODEL" -j 1 -n 5 -p "$PROMPT" --kv-type q8_0 --cache "$tmp/f16.kv" >/dev/null 2>"$tmp/ek"; rc=$?
[ $rc -eq 0 ] && grep -q "KV type f16, but this run uses q8_0" "$tmp/ek"; ok "this model's cache with another KV type: a warning, and this run's cache replaces it: $(brief "$tmp/ek")"
"$BIN" "$MODEL" -j 1 -n 5 -p "$PROMPT" --kv-type q8_0 --cache "$tmp/f16.kv" >/dev/null 2>"$tmp/ek"
grep -q "reused 204 of 205" "$tmp/ek"; ok "q8_0 KV caches round-trip too"

# damaged files and files of another kind: an error (exit 1, no output),
# never a crash, and the file is left as it was (a mistyped --cache
# notes.txt must not be overwritten)
damaged() { # LABEL EXPECT FILE
    [ -f "$3" ] && cp "$3" "$tmp/before"
    "$BIN" "$MODEL" -j 1 -t 0.8 -s 3 -n 30 -p "$PROMPT" --cache "$3" >"$tmp/d" 2>"$tmp/ed"; rc=$?
    [ $rc -eq 1 ] && grep -q "^picolm: cache .*$2" "$tmp/ed" && [ ! -s "$tmp/d" ] && { [ ! -f "$3" ] || cmp -s "$3" "$tmp/before"; }
    ok "$1 is an error (exit $rc: $(grep 'cache' "$tmp/ed" | head -1)), the file left as it was"
}
gen "$tmp/o3" "$tmp/e3" --cache "$C"
size=$(wc -c <"$C")
head -c $((size / 2)) "$C" >"$tmp/trunc.kv"; damaged "a truncated file" "truncated or corrupt" "$tmp/trunc.kv"
head -c 40 "$C" >"$tmp/short.kv"; damaged "a 40-byte file" "too short" "$tmp/short.kv"
cp "$C" "$tmp/flip.kv"
printf 'X' | dd of="$tmp/flip.kv" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
damaged "a file with a corrupted K/V byte" "checksum" "$tmp/flip.kv"
cp "$C" "$tmp/hdr.kv"
printf '\377\377\377\177' | dd of="$tmp/hdr.kv" bs=1 seek=52 conv=notrunc 2>/dev/null
damaged "a file claiming 2^31 tokens" "" "$tmp/hdr.kv"
head -c 5000 /dev/urandom >"$tmp/rand.kv"; damaged "random bytes" "bad magic" "$tmp/rand.kv"
printf 'my notes\n' >"$tmp/notes.txt"; damaged "a text file" "not a picolm KV cache" "$tmp/notes.txt"
# an empty file holds nothing to lose (mktemp's): it becomes the cache
: >"$tmp/empty.kv"
gen "$tmp/oe" "$tmp/ee" --cache "$tmp/empty.kv"
[ $rc -eq 0 ] && cmp -s "$tmp/oe" "$tmp/plain" && grep -q "cache: created" "$tmp/ee" && [ -s "$tmp/empty.kv" ]
ok "an empty file becomes the cache: $(grep 'cache' "$tmp/ee" | head -1)"
mkdir "$tmp/dir.kv"; damaged "a directory" "not a regular file" "$tmp/dir.kv"

# unwritable location: a warning, the run still succeeds
"$BIN" "$MODEL" -j 1 -n 5 -p "ROMEO:" --cache "$tmp/no/such/dir/c.kv" >"$tmp/o" 2>"$tmp/ew"; rc=$?
[ $rc -eq 0 ] && [ -s "$tmp/o" ] && grep -q "cache: not saved" "$tmp/ew"; ok "an unwritable cache path warns and still generates: $(brief "$tmp/ew")"
exit 0
