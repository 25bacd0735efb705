#!/bin/sh
# `make static` (mk/static.mk): build/static/picolm is one statically linked
# file with every in-tree plugin built in.  Checks:
#  - ldd finds no dynamic dependency; --list-plugins lists every in-tree
#    format, backend and sampler as built-in and nothing from a directory;
#  - the README demo command writes the same text as the dynamic build, and
#    greedy generation of tiny-shakespeare-f32 gives llama.cpp's text;
#  - a plugin .so in $PICOLM_PLUGIN_DIR still loads and shadows the built-in
#    of its name (and generates with it);
#  - each cross build build/static-TARGET/picolm (make static TARGET=...)
#    runs under its qemu-user WITHOUT a target sysroot and gives llama.cpp's
#    greedy text of tiny-shakespeare-f32.
# Without build/static/picolm it prints one SKIP line (make static first).
B=${PICOLM_BUILD:-build}
S=${PICOLM_SHARED:-../shared}
R=$S/reference/logits
P=build/static/picolm
if [ ! -x "$P" ]; then
    echo "SKIP: t_static: no $P (run make static)"
    exit 0
fi
if [ -n "$PICOLM_SANITIZER" ]; then
    echo "SKIP: t_static: the static binaries are not sanitized (checked by the plain make test)"
    exit 0
fi
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

ldd "$P" >"$T/ldd" 2>&1
grep -q "not a dynamic executable\|statically linked" "$T/ldd" && pass "ldd $P: $(head -1 "$T/ldd" | tr -s ' \t' ' ')" ||
    fail "ldd $P lists dependencies: $(head -3 "$T/ldd" | tr '\n' ' ')"

"$P" --list-plugins >"$T/list" 2>&1
want=0; got=0
for src in formats/*.c plugins/*.c backends/*/plugin.c; do
    case $src in backends/*) kind=backend; name=${src#backends/}; name=${name%/plugin.c} ;;
                 *) kind=x; name=$(basename "$src" .c) ;; esac
    # a backend this machine's build leaves out (BACKENDS) is not expected
    [ $kind = backend ] && [ ! -f "$B/plugins/backend-$name.so" ] && continue
    want=$((want + 1))
done
got=$(grep -c '^ *(built in)$' "$T/list")
[ "$got" -ge "$want" ] && ! grep -q '\.so$' "$T/list" && grep -q '^searched: built in$' "$T/list" &&
    pass "--list-plugins: $got plugins, all built-in (in-tree sources: $want)" ||
    fail "--list-plugins shows $got built-in plugins, $want in-tree sources, or a directory: $(grep -m2 '\.so$' "$T/list")"

M=models/tiny-shakespeare-q8_0.gguf
if [ -x "$B/bin/picolm" ]; then
    "$P" "$M" -p "ROMEO:" -n 120 >"$T/s.txt" 2>"$T/s.err"; rc=$?
    "$B/bin/picolm" "$M" -p "ROMEO:" -n 120 >"$T/d.txt" 2>/dev/null
    [ $rc -eq 0 ] && [ -s "$T/s.txt" ] && cmp -s "$T/s.txt" "$T/d.txt" &&
        pass "README demo (-p ROMEO: -n 120): the same text as the dynamic build: $(head -c 40 "$T/s.txt" | tr '\n' ' ')..." ||
        fail "README demo rc=$rc: static and dynamic texts differ ($(head -c 40 "$T/s.txt" | tr '\n' ' '))"
fi

greedy() { # label, then the command running picolm
    label=$1; shift
    [ -f "$R/tiny-shakespeare-f32.greedy.txt" ] || { echo "SKIP: t_static: no shared reference text"; return; }
    "$@" "$S/models/tiny-shakespeare-f32.gguf" -t 0 -n 48 -j 1 <"$R/tiny-shakespeare.prompt.txt" >"$T/g.txt" 2>"$T/g.err"
    rc=$?
    n=$(wc -c <"$R/tiny-shakespeare-f32.greedy.txt")
    be=$(sed -n 's/.*backend \([a-z0-9]*\),.*/\1/p' "$T/g.err")
    [ $rc -eq 0 ] && head -c "$n" "$T/g.txt" | cmp -s - "$R/tiny-shakespeare-f32.greedy.txt" &&
        pass "$label: f32 greedy text ($be) equals llama.cpp's ($n bytes)" ||
        { fail "$label: f32 greedy text rc=$rc: '$(head -c 50 "$T/g.txt" | tr '\n' ' ')'"; tail -2 "$T/g.err"; }
}
greedy "static" "$P"

# out-of-tree plugins shadow built-ins: the dynamic build's greedy sampler
if [ -f "$B/plugins/sampler-greedy.so" ]; then
    mkdir "$T/pd" && cp "$B/plugins/sampler-greedy.so" "$T/pd/"
    PICOLM_PLUGIN_DIR=$T/pd "$P" --list-plugins >"$T/list2" 2>&1
    grep -A1 '^  greedy ' "$T/list2" | grep -q "$T/pd/sampler-greedy.so" &&
        grep -A2 '^  greedy .*shadowed' "$T/list2" | grep -q "shadowed by $T/pd/sampler-greedy.so" &&
        pass "a sampler .so in PICOLM_PLUGIN_DIR loads and shadows the built-in greedy" ||
        fail "PICOLM_PLUGIN_DIR's greedy did not shadow the built-in: $(grep -A2 '^  greedy ' "$T/list2" | tr '\n' ' ')"
    greedy "static + greedy sampler from PICOLM_PLUGIN_DIR" env PICOLM_PLUGIN_DIR="$T/pd" "$P"
fi

for t in aarch64:qemu-aarch64 armhf:qemu-arm riscv64:qemu-riscv64; do
    tgt=${t%%:*}; q=${t#*:}
    [ -x "build/static-$tgt/picolm" ] || { echo "SKIP: t_static: no build/static-$tgt/picolm (make static TARGET=$tgt)"; continue; }
    command -v "$q" >/dev/null || { echo "SKIP: t_static: no $q"; continue; }
    # no -L / QEMU_LD_PREFIX: a static binary needs no target sysroot
    cpu=
    [ "$tgt" = riscv64 ] && cpu="-cpu rv64,v=true,vext_spec=v1.0,vlen=128"
    env -u QEMU_LD_PREFIX "$q" $cpu "build/static-$tgt/picolm" --list-plugins >"$T/l3" 2>&1 &&
        ! grep -q '\.so$' "$T/l3" && pass "static-$tgt: --list-plugins under $q, all built-in ($(grep -c '(built in)' "$T/l3") plugins)" ||
        fail "static-$tgt: --list-plugins failed under $q: $(tail -2 "$T/l3")"
    greedy "static-$tgt under $q" env -u QEMU_LD_PREFIX "$q" $cpu "build/static-$tgt/picolm"
done
[ $fails -eq 0 ]
