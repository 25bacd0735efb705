#!/bin/sh
# --cache FILE end to end: prefix reuse gives the same text as no cache,
# files from another model / KV type and damaged files are refused with a
# message (never a crash, never a changed output), writes are atomic.
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

# another model refuses it (and is not changed by it)
if [ -f "$OTHER" ]; then
    "$BIN" "$OTHER" -j 1 -t 0 -n 20 -p "$PROMPT" >"$tmp/q4" 2>/dev/null
    cp "$C" "$tmp/q8.kv"
    "$BIN" "$OTHER" -j 1 -t 0 -n 20 -p "$PROMPT" --cache "$tmp/q8.kv" >"$tmp/q4c" 2>"$tmp/eq"; rc=$?
    [ $rc -eq 0 ] && grep -q "cache: ignoring .*different model" "$tmp/eq" && cmp -s "$tmp/q4" "$tmp/q4c"
    ok "a cache from another model (q8_0 -> q4_0) is refused with a message naming the mismatch: $(brief "$tmp/eq")"
    "$BIN" "$OTHER" -j 1 -t 0 -n 20 -p "$PROMPT" --cache "$tmp/q8.kv" >"$tmp/q4d" 2>"$tmp/eq2"
    grep -q "reused 204 of 205" "$tmp/eq2" && cmp -s "$tmp/q4" "$tmp/q4d"; ok "the refused file was replaced by this model's cache"
else
    echo "SKIP: t_cache: $OTHER absent"
fi

# another KV type
cp "$C" "$tmp/f16.kv"
"$BIN" "$MODEL" -j 1 -n 5 -p "$PROMPT" --kv-type q8_0 --cache "$tmp/f16.kv" >/dev/null 2>"$tmp/ek"; rc=$?
[ $rc -eq 0 ] && grep -q "KV type f16, but this run uses q8_0" "$tmp/ek"; ok "a cache with another KV type is refused: $(brief "$tmp/ek")"
"$BIN" "$MODEL" -j 1 -n 5 -p "$PROMPT" --kv-type q8_0 --cache "$tmp/f16.kv" >/dev/null 2>"$tmp/ek"
grep -q "reused 204 of 205" "$tmp/ek"; ok "q8_0 KV caches round-trip too"

# damaged files: refused, never a crash, output unchanged
damaged() { # LABEL EXPECT FILE
    "$BIN" "$MODEL" -j 1 -t 0.8 -s 3 -n 30 -p "$PROMPT" --cache "$3" >"$tmp/d" 2>"$tmp/ed"; rc=$?
    [ $rc -eq 0 ] && grep -q "cache: ignoring.*$2" "$tmp/ed" && cmp -s "$tmp/d" "$tmp/plain"
    ok "$1 is refused ($(grep 'cache:' "$tmp/ed" | head -1)), output unchanged"
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
: >"$tmp/empty.kv"; damaged "an empty file" "too short" "$tmp/empty.kv"
mkdir "$tmp/dir.kv"; damaged "a directory" "not a regular file" "$tmp/dir.kv"

# unwritable location: a warning, the run still succeeds
"$BIN" "$MODEL" -j 1 -n 5 -p "ROMEO:" --cache "$tmp/no/such/dir/c.kv" >"$tmp/o" 2>"$tmp/ew"; rc=$?
[ $rc -eq 0 ] && [ -s "$tmp/o" ] && grep -q "cache: not saved" "$tmp/ew"; ok "an unwritable cache path warns and still generates: $(brief "$tmp/ew")"
exit 0
