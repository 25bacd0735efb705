#!/bin/sh
# Instructions per weight of each ARM / RISC-V weight kernel, counted under
# qemu-user: no timing is possible under emulation, the instruction count
# is the proxy.  Two figures per type: decode (16 rows x 1 activation
# column) and prefill (16 rows x NC_PREFILL columns, a batch of tokens),
# each through the path core/matmul.c takes: the backend's gemm when it has
# one, else vec_dot per row and column (tests/icount/kcount.c).  Debian
# 12's qemu ships no TCG plugins (no libinsn.so), so the count comes from
# qemu's own logs: -d in_asm lists each translated block's guest
# instructions, -d exec,nochain logs every block executed; the sum over
# executed blocks equals -singlestep's count (checked on a test loop:
# 6,022,468 both ways).  Each kernel runs twice (1 and 1+K calls); the
# difference / (K * N * ROWS * columns) removes start-up.
# Run by `make icount`; prints a Markdown table.  ONLY=PATTERN keeps the
# rows whose label matches (grep -E), e.g. ONLY=aarch64.
K=${K:-8}
N=4096
ROWS=${ROWS:-16}
NC_PREFILL=${NC_PREFILL:-16}
TYPES=${TYPES:-"Q4_K Q6_K Q8_0 Q4_0"}
tbsum='/^IN:/ { intb = 1; pc = ""; next }
intb && /^0x[0-9a-f]+:/ { if (pc == "") { pc = substr($1, 3, length($1) - 3); sub(/^0+/, "", pc); cnt[pc] = 0 } cnt[pc]++; next }
intb && /^$/ { intb = 0; next }
/^Trace/ { split($0, f, "/"); p = f[2]; sub(/^0+/, "", p); total += cnt[p] }
END { printf "%d\n", total }'
# instructions of one run: $1 build, $2 qemu + cpu ("callgrind": natively,
# valgrind's count), $3 sysroot, $4 backend, $5 type, $6 calls, $7 columns
count() {
    if [ "$2" = callgrind ]; then
        valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1/icount/kcount" "$4" "$5" "$6" $N "$7" $ROWS 2>&1 |
            sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
    else
        QEMU_LD_PREFIX=$3 $2 -d in_asm,exec,nochain -D /dev/stdout "$1/icount/kcount" "$4" "$5" "$6" $N "$7" $ROWS 2>/dev/null | awk "$tbsum"
    fi
}
# $1 label, $2 build, $3 qemu + cpu or callgrind, $4 sysroot, $5 backend
row() {
    [ -z "$ONLY" ] || echo "$1" | grep -Eq "$ONLY" || return 0
    printf '| %s |' "$1"
    for t in $TYPES; do
        for nc in 1 $NC_PREFILL; do
            a=$(count "$2" "$3" "$4" "$5" "$t" 1 $nc)
            b=$(count "$2" "$3" "$4" "$5" "$t" $((K + 1)) $nc)
            if [ -n "$a" ] && [ -n "$b" ] && [ "$b" -gt "$a" ]; then
                awk -v a="$a" -v b="$b" -v k="$K" -v n="$N" -v w="$((ROWS * nc))" 'BEGIN { printf " %.2f |", (b - a) / (k * n * w) }'
            else
                printf ' - |'
            fi
        done
    done
    printf '\n'
}
printf '| target, CPU, backend |'; for t in $TYPES; do printf ' %s decode | %s prefill |' "$t" "$t"; done; printf '\n|---|'
for t in $TYPES; do printf -- '---:|---:|'; done; printf '\n'
# x86-64 for comparison: valgrind counts natively (it has no AVX-512)
if [ -x build/icount/kcount ] && command -v valgrind >/dev/null; then
    for b in avx2 sse4; do
        row "x86-64 (this host), $b" build callgrind "" $b
    done
    row "x86-64, reference C (-O2, SSE2 baseline)" build callgrind "" reference
fi
A=/usr/aarch64-linux-gnu H=/usr/arm-linux-gnueabihf V=/usr/riscv64-linux-gnu
row "aarch64, max (dotprod, i8mm), neon" build-aarch64 "qemu-aarch64 -cpu max" $A neon
row "aarch64, Cortex-A76 (dotprod), neon" build-aarch64 "qemu-aarch64 -cpu cortex-a76" $A neon
row "aarch64, Cortex-A53, neon (plain ASIMD)" build-aarch64 "qemu-aarch64 -cpu cortex-a53" $A neon
row "aarch64, reference C (-O2)" build-aarch64 "qemu-aarch64 -cpu cortex-a53" $A reference
row "armhf, Cortex-A7, neon" build-armhf "qemu-arm -cpu cortex-a7" $H neon
row "armhf, reference C (-O2, Thumb-2)" build-armhf "qemu-arm -cpu cortex-a7" $H reference
row "riscv64, V VLEN 128, rvv" build-riscv64 "qemu-riscv64 -cpu rv64,v=true,vext_spec=v1.0,vlen=128" $V rvv
row "riscv64, V VLEN 256, rvv" build-riscv64 "qemu-riscv64 -cpu rv64,v=true,vext_spec=v1.0,vlen=256" $V rvv
row "riscv64 (rv64gc), reference C (-O2)" build-riscv64 "qemu-riscv64 -cpu rv64" $V reference
