#!/bin/sh
# 32-bit ARM and RISC-V end-to-end checks, run by `make test-armhf` and
# `make test-riscv64` (PICOLM_CROSS=armhf|riscv64, PICOLM_TEST_WRAPPER = the
# target's qemu-user) or natively on a board (PICOLM_CROSS unset: only the
# logits and generation checks):
#  - test_kernels again on other emulated CPUs: armhf: a Cortex-A7 (NEON +
#    VFPv4: the neon backend is chosen) and a Cortex-A9 (NEON without VFPv4:
#    neon must be refused, scalar runs); riscv64: V 1.0 at VLEN 128 and 256
#    (every rvv kernel against the portable reference), and no V (rvv must
#    be refused and never run);
#  - picolm-logits on a tiny-shakespeare model of each kernel family (first
#    32 positions; below), with the backend picolm picks, against
#    llama.cpp's logits;
#  - greedy generation of tiny-shakespeare-f32 (48 tokens) equal to
#    llama.cpp's greedy text.
# On a build without a cross target it prints one SKIP line.
. "${0%/*}/lib.sh"
B=$BUILD
W=$PICOLM_TEST_WRAPPER
case "$PICOLM_CROSS" in
    armhf) CPUS="cortex-a7:neon cortex-a9:scalar" ;;
    riscv64) CPUS="rv64,v=true,vext_spec=v1.0,vlen=128:rvv rv64,v=true,vext_spec=v1.0,vlen=256:rvv rv64,v=false:scalar" ;;
    *) CPUS= ;;
esac
if [ -z "$PICOLM_CROSS" ] && [ -z "$PICOLM_CROSS_NATIVE" ]; then
    echo "SKIP: t_cross: not a cross build (make test-armhf / test-riscv64; PICOLM_CROSS_NATIVE=1 on a board)"
    exit 0
fi
if [ ! -x "$B/bin/picolm-logits" ] || [ ! -d "$S/models" ]; then
    echo "SKIP: t_cross: no build in $B or no shared data in $S"
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
PY=/usr/bin/python3
havepy=0
"$PY" -c 'import numpy' 2>/dev/null && havepy=1
[ $havepy = 1 ] || echo "SKIP: t_cross: $PY has no numpy: logits not compared"

# ---- kernel checks on other CPUs -------------------------------------------
# "cpu:backend": the best backend test_kernels must find usable there
for cb in $CPUS; do
    cpu=${cb%:*}; want=${cb##*:}
    [ -x "$B/tests/test_kernels" ] || break
    PICOLM_BENCH=0 $W -cpu "$cpu" "$B/tests/test_kernels" >"$T/kt.log" 2>&1
    rc=$?
    sed -n "s/^\(PASS\|FAIL\): /\1: [$cpu] /p" "$T/kt.log"
    if grep -q '^FAIL: ' "$T/kt.log"; then fails=$((fails + 1))
    elif [ $rc -ne 0 ]; then fail "[$cpu] test_kernels exited with $rc"; tail -3 "$T/kt.log"; fi
    for b in $(ls "$B/plugins" | sed -n 's/^backend-\(.*\)\.so$/\1/p'); do
        [ "$b" = scalar ] && continue
        if [ "$b" = "$want" ]; then
            grep -q "^PASS: $b " "$T/kt.log" && ! grep -q "^SKIP: backend $b " "$T/kt.log" &&
                pass "[$cpu] backend $b runs and its kernels were checked" ||
                fail "[$cpu] backend $b was not checked there"
        else
            grep -q "^SKIP: backend $b .*CPU lacks" "$T/kt.log" &&
                pass "[$cpu] backend $b refused (CPU lacks its features)" ||
                fail "[$cpu] backend $b not refused on a CPU without its features"
        fi
    done
done

# ---- logits, the backend picolm picks ------------------------------------------
first=${CPUS%% *}
for f in $CROSS_MODELS; do
    m=$S/models/tiny-shakespeare-$f.gguf
    [ -f "$m" ] || { echo "SKIP: t_cross $f: no model"; continue; }
    head -c $((NPOS * 4)) "$R/tiny-shakespeare-$f.tokens.i32" >"$T/tok.i32"
    head -c $((NPOS * NV * 4)) "$R/tiny-shakespeare-$f.logits.f32" >"$T/ref.f32"
    # riscv64: on the first (V) CPU, so that the rvv kernels run
    case "$PICOLM_CROSS" in riscv64) cw="$W -cpu ${first%:*}" ;; *) cw=$W ;; esac
    if ! $cw "$B/bin/picolm-logits" "$m" "$T/tok.i32" "$T/out.f32" -j 1 2>"$T/err"; then
        fail "$f: picolm-logits"; cat "$T/err"; continue
    fi
    be=$(sed -n 's/.*(backend \([a-z0-9]*\)).*/\1/p' "$T/err")
    if [ $havepy = 1 ]; then
        case $f in f32 | f16) lim=0.01 ;; bf16) lim=0.03 ;; *) lim=0.10 ;; esac
        r=$("$PY" "$S/tools/cmp_logits.py" "$T/out.f32" "$T/ref.f32" $NV --max-nrmse $lim --max-kl 1e-3)
        [ $? -eq 0 ] && pass "$f: logits ($be) vs llama.cpp ($NPOS positions): $r" ||
            fail "$f: logits ($be) vs llama.cpp ($NPOS positions, nRMSE limit $lim): $r"
    fi
done

# ---- greedy generation ------------------------------------------------------------
if [ -x "$B/bin/picolm" ] && [ -f "$R/tiny-shakespeare-f32.greedy.txt" ]; then
    $cw "$B/bin/picolm" "$S/models/tiny-shakespeare-f32.gguf" -t 0 -n 48 -j 1 \
        <"$R/tiny-shakespeare.prompt.txt" >"$T/gen.txt" 2>"$T/err"
    rc=$?
    n=$(wc -c <"$R/tiny-shakespeare-f32.greedy.txt")
    be=$(sed -n 's/.*backend \([a-z0-9]*\),.*/\1/p' "$T/err")
    if [ $rc -eq 0 ] && head -c "$n" "$T/gen.txt" | cmp -s - "$R/tiny-shakespeare-f32.greedy.txt"; then
        pass "f32 greedy generation ($be, 48 tokens) equals llama.cpp's ($n bytes)"
    else
        fail "f32 greedy generation ($be) rc=$rc: got '$(head -c 60 "$T/gen.txt")'"
        tail -3 "$T/err"
    fi
fi
[ $fails -eq 0 ]
