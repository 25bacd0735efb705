#!/bin/sh
# AArch64 end-to-end checks of the NEON backend, run by `make test-aarch64`
# (build-aarch64 under qemu-user) or natively on an ARM board:
#  - test_kernels again on a CPU WITHOUT dotprod: qemu's Cortex-A53 model
#    (any SDOT executed there is SIGILL) and PICOLM_CPU_MASK=dotprod;
#  - picolm-logits --backend neon on a tiny-shakespeare model of each kernel
#    family (first 32 positions; below) against llama.cpp's logits, and the
#    plain-ASIMD kernels bit-identical to the SDOT ones on the same input;
#  - greedy generation (picolm -t 0) equal to llama.cpp's greedy text.
# Elsewhere (an x86 build) it prints one SKIP line.
. "${0%/*}/lib.sh"
B=$BUILD
W=$PICOLM_TEST_WRAPPER
if [ ! -f "$B/plugins/backend-neon.so" ] || [ ! -x "$B/bin/picolm-logits" ]; then
    echo "SKIP: t_aarch64: no NEON build in $B (run make test-aarch64)"
    exit 0
fi
if [ ! -d "$S/models" ]; then
    echo "SKIP: t_aarch64: PICOLM_SHARED=$S not found, shared data absent"
    exit 0
fi
R=$S/reference/logits
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
NPOS=32
NV=1024
fails=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# a qemu wrapper can emulate a CPU without dotprod
case "$W" in *qemu-aarch64*) A53="$W -cpu cortex-a53" ;; *) A53= ;; esac
PY=/usr/bin/python3
havepy=0
"$PY" -c 'import numpy' 2>/dev/null && havepy=1
[ $havepy = 1 ] || echo "SKIP: t_aarch64: $PY has no numpy: logits compared between kernel sets only"

# ---- kernel test on a CPU without dotprod --------------------------------
kt() { # label, then the command
    label=$1; shift
    env PICOLM_BENCH=0 "$@" >"$T/kt.log" 2>&1
    rc=$?
    sed -n "s/^\(PASS\|FAIL\|SKIP\): /\1: [$label] /p" "$T/kt.log"
    if grep -q '^FAIL: ' "$T/kt.log"; then fails=$((fails + 1))
    elif [ $rc -ne 0 ]; then fail "[$label] test_kernels exited with $rc"; tail -3 "$T/kt.log"; fi
    grep -q 'neon: levels scalar+neon (without dotprod' "$T/kt.log" && pass "[$label] neon init chose the plain ASIMD kernels" ||
        fail "[$label] neon init did not choose the plain ASIMD kernels"
}
if [ -x "$B/tests/test_kernels" ]; then
    kt "mask=dotprod" PICOLM_CPU_MASK=dotprod $W "$B/tests/test_kernels"
    [ -n "$A53" ] && kt "cortex-a53" $A53 "$B/tests/test_kernels"
fi

# ---- logits, both kernel sets ----------------------------------------------
# $1 label, $2 model, $3 out, rest: wrapper + env
logits() {
    out=$1; model=$2; shift 2
    "$@" "$B/bin/picolm-logits" "$model" "$T/tok.i32" "$out" --backend neon -j 1 2>"$T/err"
    rc=$?
    grep -q '(backend neon)' "$T/err" || rc=1
    [ $rc -eq 0 ] || cat "$T/err"
    return $rc
}
for f in $CROSS_MODELS; do
    m=$S/models/tiny-shakespeare-$f.gguf
    [ -f "$m" ] || { echo "SKIP: t_aarch64 $f: no model"; continue; }
    head -c $((NPOS * 4)) "$R/tiny-shakespeare-$f.tokens.i32" >"$T/tok.i32"
    head -c $((NPOS * NV * 4)) "$R/tiny-shakespeare-$f.logits.f32" >"$T/ref.f32"
    if ! logits "$T/dot.f32" "$m" $W; then fail "$f: picolm-logits --backend neon"; continue; fi
    if [ $havepy = 1 ]; then
        case $f in f32 | f16) lim=0.01 ;; bf16) lim=0.03 ;; *) lim=0.10 ;; esac
        r=$("$PY" "$S/tools/cmp_logits.py" "$T/dot.f32" "$T/ref.f32" $NV --max-nrmse $lim --max-kl 1e-3)
        [ $? -eq 0 ] && pass "$f: neon logits vs llama.cpp ($NPOS positions): $r" ||
            fail "$f: neon logits vs llama.cpp ($NPOS positions, nRMSE limit $lim): $r"
    fi
    if logits "$T/plain.f32" "$m" env PICOLM_CPU_MASK=dotprod $W && cmp -s "$T/dot.f32" "$T/plain.f32"; then
        pass "$f: plain ASIMD kernels (mask=dotprod) bit-identical to the default kernels"
    else
        fail "$f: plain ASIMD kernels (mask=dotprod) differ from the default kernels"
    fi
    case $f in q4_k_m | q8_0 | iq4_xs | q5_1)
        [ -n "$A53" ] || continue
        if logits "$T/a53.f32" "$m" $A53 && cmp -s "$T/dot.f32" "$T/a53.f32"; then
            pass "$f: on a Cortex-A53 (no dotprod) bit-identical to the default kernels"
        else
            fail "$f: on a Cortex-A53 (no dotprod) differs from the default kernels"
        fi ;;
    esac
done

# ---- generation ----------------------------------------------------------------
if [ -x "$B/bin/picolm" ]; then
    m=$S/models/tiny-shakespeare-q8_0.gguf
    prompt=$(cat "$R/tiny-shakespeare.prompt.txt")
    for mask in "" dotprod; do
        env PICOLM_CPU_MASK=$mask $W "$B/bin/picolm" "$m" -p "$prompt" -n 16 -t 0 --backend neon -j 1 >"$T/gen.txt" 2>"$T/err"
        rc=$?
        n=$(wc -c <"$T/gen.txt")
        if [ $rc -eq 0 ] && [ "$n" -ge 20 ] && head -c "$n" "$R/tiny-shakespeare-q8_0.greedy.txt" | cmp -s - "$T/gen.txt"; then
            pass "q8_0 greedy generation (neon${mask:+, mask=$mask}, 16 tokens) equals llama.cpp's: $(head -c 40 "$T/gen.txt" | tr '\n' ' ')..."
        else
            fail "q8_0 greedy generation (neon${mask:+, mask=$mask}) rc=$rc: got '$(head -c 60 "$T/gen.txt")'"
            tail -3 "$T/err"
        fi
    done
    $W "$B/bin/picolm" "$m" -p "ROMEO:" -n 16 -t 0 --backend neon -j 1 >"$T/r1.txt" 2>/dev/null
    rc1=$?
    env PICOLM_CPU_MASK=dotprod $W "$B/bin/picolm" "$m" -p "ROMEO:" -n 16 -t 0 --backend neon -j 1 >"$T/r2.txt" 2>/dev/null
    rc2=$?
    if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ -s "$T/r1.txt" ] && cmp -s "$T/r1.txt" "$T/r2.txt"; then
        pass "picolm -p ROMEO: -n 16 -t 0 --backend neon, same text with and without dotprod: $(head -c 40 "$T/r1.txt" | tr '\n' ' ')..."
    else
        fail "picolm -p ROMEO: (rc $rc1 / $rc2) or its text differs without dotprod"
    fi
else
    echo "SKIP: t_aarch64: no $B/bin/picolm: generation not checked"
fi
[ $fails -eq 0 ]
