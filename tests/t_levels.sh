#!/bin/sh
# Kernel levels (backends/level.h, docs/backends.md "How a stock backend chooses its kernels"):
#  - a plugin's kernel table contains every kernel type of the plugins
#    below it in its chain (scalar < sse4 < avx2 < avx512, scalar < neon,
#    scalar < rvv): each level only overlays, it never loses a kernel;
#  - `backend = X` runs nothing above X: no instruction of backend-sse4.so
#    or backend-scalar.so names a ymm/zmm register, none of backend-avx2.so
#    a zmm register (x86-64, where objdump is installed);
#  - every backend's init states its levels (PICOLM_DEBUG=1).
B=${PICOLM_BUILD:-build}
BIN=$B/bin/picolm
if [ ! -x "$BIN" ]; then echo "SKIP: t_levels: $BIN not built"; exit 0; fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fails=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

"$BIN" --list-plugins >"$tmp/list" 2>&1
# kernel types of an accepted backend, one per line; empty when not accepted
types() {
    awk -v n="$1" '$1 == n && ($3 == "ok" || $3 == "CHOSEN") { on = 1; next }
                   on && /^  [a-z]/ { on = 0 }
                   on && /kernels:/ && $2 !~ /^\(none/ { for (i = 2; i <= NF; i++) { sub(/\+gemm$/, "", $i); print $i } }' "$tmp/list" | sort
}
chain() { # lowest first
    prev=
    for p in "$@"; do
        types "$p" >"$tmp/$p"
        if ! grep -q "^  $p  .* \(ok\|CHOSEN\)" "$tmp/list"; then continue; fi
        if [ -n "$prev" ]; then
            missing=$(comm -23 "$tmp/$prev" "$tmp/$p" | tr '\n' ' ')
            [ -z "$missing" ] && pass "$p has every kernel type of $prev ($(wc -l <"$tmp/$p") types)" ||
                fail "$p lacks $prev's kernels: $missing"
        fi
        prev=$p
    done
}
chain scalar sse4 avx2 avx512
chain scalar neon
chain scalar rvv

# no instruction above the plugin's level (x86-64)
case "$(uname -m)" in
x86_64)
    if command -v objdump >/dev/null; then
        isa() { # plugin, register pattern it must not name
            so=$B/plugins/backend-$1.so
            [ -f "$so" ] || return 0
            n=$(objdump -d --no-show-raw-insn "$so" | grep -c "%$2")
            [ "$n" = 0 ] && pass "backend-$1.so: no %$2 register in its code" || fail "backend-$1.so: $n instructions name %$2"
        }
        isa scalar ymm; isa scalar zmm; isa sse4 ymm; isa sse4 zmm; isa avx2 zmm
    else
        echo "SKIP: t_levels: no objdump"
    fi ;;
esac

# the init states its levels
for p in $(awk '/^backends:/ { on = 1; next } /^[a-z]/ { on = 0 } on && ($3 == "ok" || $3 == "CHOSEN") { print $1 }' "$tmp/list"); do
    PICOLM_DEBUG=1 "$BIN" --list-plugins >/dev/null 2>"$tmp/v"
    grep -q "$p: levels scalar" "$tmp/v" && pass "$p: init logs its levels ($(grep -o "$p: levels [^)]*" "$tmp/v" | head -1))" ||
        fail "$p: no 'levels' line from its init: $(head -2 "$tmp/v")"
done
[ $fails -eq 0 ]
