#!/bin/sh
# picolm-quantize never destroys its input and never leaves a half-written
# output: IN and OUT naming the same file (same path, other
# spelling, symlink, hard link) is refused with IN untouched; a write error
# (file size limit) and SIGINT/SIGTERM in the middle leave no OUT (or the old
# OUT intact) and no temporary file; a new OUT's mode follows the umask.
BUILD=${PICOLM_BUILD:-build}
Q=$BUILD/bin/picolm-quantize
S=${PICOLM_SHARED:-../shared}
F32=$S/models/tiny-shakespeare-f32.gguf
[ -x "$Q" ] || { echo "FAIL: t_quantize_safe: $Q not built"; exit 1; }
if [ ! -f "$F32" ]; then
    echo "SKIP: t_quantize_safe: PICOLM_SHARED=$S has no tiny-shakespeare-f32.gguf: shared data absent"; exit 0
fi
tmp=$(mktemp -d); trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
d=$tmp/d
mkdir "$d"
cp "$F32" "$d/m.gguf"
chmod 444 "$d/m.gguf"
sum=$(cksum <"$d/m.gguf")
intact() { [ "$(cksum <"$d/m.gguf")" = "$sum" ] && [ "$(stat -c %a "$d/m.gguf")" = 444 ]; }
leftovers() { ls "$d" | grep '\.tmp\.' | tr '\n' ' '; }
# PID is writing OUT: a temporary file beside it, named or not yet (O_TMPFILE: "d/#123 (deleted)")
writing() { [ -n "$(leftovers)" ] || ls -l "/proc/$1/fd" 2>/dev/null | grep -q -- "-> $d/#"; }

# 1. the same file under four names
ln -s m.gguf "$d/link.gguf"
ln "$d/m.gguf" "$d/hard.gguf"
for out in "$d/m.gguf" "$d/./m.gguf" "$d/link.gguf" "$d/hard.gguf"; do
    "$Q" "$d/m.gguf" "$out" Q8_0 -j 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
    if [ $rc -ne 0 ] && grep -q "are the same file: refusing to overwrite the input" "$tmp/err" && intact && [ -z "$(leftovers)" ]; then
        echo "PASS: IN = $(basename "$d")/m.gguf, OUT = $(echo "$out" | sed "s|$d/||"): refused (exit $rc), IN untouched (bytes, mode 444)"
    else
        echo "FAIL: OUT $out: exit $rc, $(tail -1 "$tmp/err"); IN intact: $(intact && echo yes || echo NO); left: $(leftovers)"
    fi
done
[ -L "$d/link.gguf" ] && echo "PASS: the symlink OUT is still a symlink" || echo "FAIL: the symlink OUT was replaced"

# 2. a write error half-way (file size limit, SIGXFSZ ignored so write fails with EFBIG)
( ulimit -f 1000; trap '' XFSZ; exec "$Q" "$d/m.gguf" "$d/big.gguf" F32 -j 1 ) >/dev/null 2>"$tmp/err"; rc=$?
if [ $rc -ne 0 ] && [ ! -e "$d/big.gguf" ] && [ -z "$(leftovers)" ] && intact; then
    echo "PASS: a write error (file size limit): exit $rc, no OUT, no temporary file: $(tail -1 "$tmp/err")"
else
    echo "FAIL: write error: exit $rc, OUT exists: $([ -e "$d/big.gguf" ] && echo yes || echo no), left: $(leftovers)"
fi
# the same limit with SIGXFSZ at its default (the process dies of it): still no temporary file
( ulimit -f 1000; exec "$Q" "$d/m.gguf" "$d/big.gguf" F32 -j 1 ) >/dev/null 2>"$tmp/err"; rc=$?
[ $rc -ne 0 ] && [ ! -e "$d/big.gguf" ] && [ -z "$(leftovers)" ] &&
    echo "PASS: killed by SIGXFSZ (exit $rc): no OUT, no temporary file" ||
    echo "FAIL: SIGXFSZ: exit $rc, left: $(leftovers)"

# 3. interrupted while writing: an existing OUT keeps its old bytes, a new one never appears
for sig in INT TERM; do
    for out in "$d/old.gguf" "$d/new.gguf"; do
        caught=0
        for try in 1 2 3 4 5; do
            rm -f "$d/new.gguf"; printf 'old contents\n' >"$d/old.gguf"
            # (a background job of a script starts with SIGINT ignored: give it the default back)
            env --default-signal=INT,TERM "$Q" "$d/m.gguf" "$out" Q4_K_M -j 1 >/dev/null 2>"$tmp/err" &
            pid=$!
            i=0
            while [ $i -lt 500 ] && ! writing $pid && kill -0 $pid 2>/dev/null; do sleep 0.01; i=$((i + 1)); done
            if writing $pid && kill -s $sig $pid 2>/dev/null; then
                wait $pid; rc=$?; caught=1; break
            fi
            wait $pid
        done
        if [ $caught -eq 0 ]; then
            echo "SKIP: t_quantize_safe: SIG$sig: the conversion always finished before the temporary file was seen"; continue
        fi
        name=$(basename "$out")
        if [ $rc -ne 0 ] && [ -z "$(leftovers)" ] && intact &&
            { { [ "$name" = old.gguf ] && [ "$(cat "$out")" = "old contents" ]; } || { [ "$name" = new.gguf ] && [ ! -e "$out" ]; }; }; then
            echo "PASS: SIG$sig while writing $name: exit $rc, $([ "$name" = old.gguf ] && echo "the old OUT intact" || echo "no OUT"), no temporary file, IN untouched"
        else
            echo "FAIL: SIG$sig while writing $name: exit $rc, left: $(leftovers), OUT: $(head -c 20 "$out" 2>/dev/null | tr -cd '[:print:]')"
        fi
    done
done

# 4. the mode of a new OUT follows the umask, as for any new file
for um in 022 077 002; do
    rm -f "$d/u.gguf"
    (umask $um; exec "$Q" "$d/m.gguf" "$d/u.gguf" Q8_0 -j 1) >/dev/null 2>&1
    want=$(printf '%o' $((0666 & ~0$um)))
    got=$(stat -c %a "$d/u.gguf" 2>/dev/null)
    [ "$got" = "$want" ] && echo "PASS: umask $um: OUT mode $got" || echo "FAIL: umask $um: OUT mode '$got', want $want"
done

# 5. the other tools that write a file next to a model they read: picolm-gguf
#    dequant and picolm-logits refuse an OUT that is their model (or tokens)
#    instead of truncating the mapped file under themselves (which died of SIGBUS)
TOK=$S/reference/logits/tiny-shakespeare-q8_0.tokens.i32
cp "$TOK" "$d/tok.i32"
tsum=$(cksum <"$d/tok.i32")
for cmd in "gguf dequant $d/m.gguf output_norm.weight $d/link.gguf" "logits $d/m.gguf $d/tok.i32 $d/hard.gguf" \
           "logits $d/m.gguf $d/tok.i32 $d/./tok.i32"; do
    set -- $cmd
    tool=$1; shift
    "$BUILD/bin/picolm-$tool" "$@" >/dev/null 2>"$tmp/err"; rc=$?
    if [ $rc -eq 2 ] && grep -q "are the same file: refusing to overwrite" "$tmp/err" && intact && [ "$(cksum <"$d/tok.i32")" = "$tsum" ]; then
        echo "PASS: picolm-$tool $(echo "$*" | sed "s|$d/||g"): refused (exit 2), inputs untouched"
    else
        echo "FAIL: picolm-$tool $*: exit $rc, $(tail -1 "$tmp/err"); model intact: $(intact && echo yes || echo NO)"
    fi
done
