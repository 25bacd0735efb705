#!/bin/sh
# Plugin files run no code before they are checked.  A
# plugin directory holds: a .so whose ELF constructor writes a file (no
# picolm note), the same with a valid note for a CPU no machine has, one
# whose note says another ABI, a text file named foo.so and a copy of a real
# library named libz.so.  After `picolm --list-plugins` and a generation the
# constructors' files do not exist; each file is listed with its reason, and
# -v says the same on stderr.  A copy of an in-tree plugin there shadows the
# stock one ("shadowed", by which file), and --list-plugins' name column fits
# the longest name.
BUILD=${PICOLM_BUILD:-build}
BIN=$BUILD/bin
S=${PICOLM_SHARED:-../shared}
CC=${CC:-cc}
M=models/tiny-shakespeare-q8_0.gguf
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
P=$tmp/plugins
mkdir "$P"
mark=$tmp/constructor-ran
cat >"$tmp/ctor.c" <<EOF
#include <stdio.h>
#include "picolm/plugin.h"
__attribute__((constructor)) static void ctor(void) {
    FILE *f = fopen("$mark", "a");
    if (f) { fputs(NOTE_WHAT "\n", f); fclose(f); }
}
static const picolm_plugin d = {.abi_version = PICOLM_ABI_VERSION + ABI_DELTA, .struct_size = sizeof(picolm_plugin),
    .kind = PICOLM_KIND_BACKEND, .name = NOTE_WHAT, .version = "0", .cpu_required = CPU};
#ifdef WITH_NOTE
__attribute__((section(".note.picolm"), aligned(4), used)) static const picolm_elf_note note = {
    sizeof PICOLM_NOTE_NAME, sizeof(picolm_note), PICOLM_NOTE_TYPE, PICOLM_NOTE_NAME,
    {PICOLM_ABI_VERSION + ABI_DELTA, PICOLM_KIND_BACKEND, sizeof(picolm_plugin), (unsigned)CPU, (unsigned)(CPU >> 32), NOTE_WHAT}};
#endif
PICOLM_EXPORT const picolm_plugin *picolm_plugin_v1(void) { return &d; }
EOF
build() { # FILE NAME ABI_DELTA CPU [-DWITH_NOTE]
    $CC -shared -fPIC -I include -DNOTE_WHAT="\"$2\"" -DABI_DELTA="$3" -DCPU="$4" $5 "$tmp/ctor.c" -o "$P/$1" 2>"$tmp/cc.log" ||
        { echo "FAIL: cannot build $1: $(head -3 "$tmp/cc.log")"; exit 1; }
}
build backend-nonote.so nonote 0 0ull
build backend-futurecpu.so futurecpu 0 PICOLM_CPU_IMPOSSIBLE -DWITH_NOTE
build backend-abi9.so abi9 8 0ull -DWITH_NOTE
echo "this is not a shared object" >"$P/foo.so"
lib=$(ldd "$BIN/picolm" | awk '$3 ~ /^\// {print $3; exit}')
cp "$lib" "$P/libz.so"
cp "$BUILD/plugins/sampler-greedy.so" "$P/sampler-greedy.so"
echo "PASS: plugin directory with 3 constructor probes, foo.so (text), libz.so (a copy of $(basename "$lib")), a copy of greedy"

"$BIN/picolm" --plugin-dir "$P" --list-plugins >"$tmp/list" 2>&1; rc=$?
[ $rc -eq 0 ] && echo "PASS: --list-plugins with them exits 0" || echo "FAIL: --list-plugins exit $rc: $(tail -2 "$tmp/list")"
if [ -f "$M" ]; then
    "$BIN/picolm" --plugin-dir "$P" "$M" -p "ROMEO:" -n 4 -t 0 -v >"$tmp/out" 2>"$tmp/err"; rc=$?
    [ $rc -eq 0 ] && [ -s "$tmp/out" ] && echo "PASS: a generation with them works" || echo "FAIL: generation: exit $rc: $(tail -2 "$tmp/err")"
else
    echo "SKIP: t_plugin_files: $M missing: no generation"
fi
[ ! -e "$mark" ] && echo "PASS: no constructor ran: the refused files were never loaded" ||
    echo "FAIL: constructor(s) ran: $(tr '\n' ' ' <"$mark")"

expect() { # FILE REASON: listed with the reason (within 3 lines of the file name), and said by -v
    if grep -A1 "$P/$1\$" "$tmp/list" | grep -q "why: $2"; then echo "PASS: --list-plugins: $1: $2"; else
        echo "FAIL: --list-plugins does not say '$2' for $1: $(grep -A1 "$P/$1" "$tmp/list" | tr '\n' ' ')"; fi
    if [ -f "$M" ]; then
        grep "$P/$1" "$tmp/err" | grep -q "$2" && echo "PASS: -v: $1: $2" || echo "FAIL: -v does not say '$2' for $1: $(grep "$1" "$tmp/err")"
    fi
}
expect backend-nonote.so "no picolm note: not a picolm plugin"
expect backend-futurecpu.so "CPU lacks required feature(s): impossible"
expect backend-abi9.so "ABI version 9, this picolm speaks ABI 1"
expect foo.so "not an ELF file"
expect libz.so "no picolm note"
grep -q "^skipped (no picolm note this picolm can use):" "$tmp/list" && echo "PASS: files without a usable note are listed apart, as skipped" ||
    echo "FAIL: no 'skipped (no picolm note ...):' section"

# shadowing: the stock greedy (listed later) is "shadowed", by the copy found first
sh_line=$(grep -A2 '^  greedy ' "$tmp/list" | tr '\n' ' ')
if grep -q "^  greedy  *[^ ]*  *shadowed" "$tmp/list" && grep -A2 '^  greedy .*shadowed' "$tmp/list" | grep -q "shadowed by $P/sampler-greedy.so"; then
    echo "PASS: the stock greedy is 'shadowed by $P/sampler-greedy.so', not rejected"
else
    echo "FAIL: shadowing not reported: $sh_line"
fi
grep -q rejected "$tmp/list" && grep -A2 'rejected' "$tmp/list" | grep -q 'shadowed' &&
    echo "FAIL: a shadowed plugin is called rejected" || echo "PASS: no shadowed plugin is called rejected"

# the name column fits the longest name: every status starts in one column
cols=$(awk '/^  [a-z_0-9.-]+ +[^ ]+ +(ok|CHOSEN|rejected|shadowed)/ {print index($0, $3)}' "$tmp/list" | sort -u | wc -l)
[ "$cols" -eq 1 ] && echo "PASS: statuses line up in one column (names up to $(awk '/^  [a-z]/ {print length($1)}' "$tmp/list" | sort -n | tail -1) characters)" ||
    echo "FAIL: statuses in $cols different columns: $(grep -E '^  [a-z]' "$tmp/list" | head -20 | tr '\n' '|')"
