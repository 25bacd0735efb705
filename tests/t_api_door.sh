#!/bin/sh
# include/picolm/picolm.h is the only door: the CLI, picolm-server,
# picolm-bench and every tool (tools/*.c, tools/cli, tools/server,
# tools/common) reach the engine through include/picolm/ alone (picolm.h,
# plugin.h and the public blocks.h, fp16.h), never a header of core/.
#  - no file there includes a core/ header by name (the offending lines are
#    named; the check is first shown to catch one planted in a scratch copy);
#  - the build compiles tools/ without -Icore (core/ and tests/ keep it).
. "${0%/*}/lib.sh"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "PASS: $TEST_NAME: $1"; }
bad() { echo "FAIL: $TEST_NAME: $1"; fail=1; }

# core_includes DIR...: every `#include "NAME"` line under DIR whose NAME
# (its last path component) is the name of a core/ header
core_includes() {
    names=$(cd core && ls *.h | sed 's/\./\\./g' | tr '\n' '|' | sed 's/|$//')
    find "$@" -type f \( -name '*.c' -o -name '*.h' \) -exec grep -HnE "^[[:space:]]*#[[:space:]]*include[[:space:]]+\"([^\"]*/)?($names)\"" {} + 2>/dev/null
}

mkdir -p "$tmp/tools/cli" && cp tools/cli/main.c "$tmp/tools/cli/" && printf '#include "kv.h"\n' >>"$tmp/tools/cli/main.c"
mkdir -p "$tmp/tools/server" && printf '# include "../../core/sampling.h"\n' >"$tmp/tools/server/x.h"
n=$(core_includes "$tmp/tools" | wc -l)
[ "$n" -eq 2 ] && ok "the check finds a core header planted in a scratch copy of tools/ (2 lines)" ||
    bad "the check found $n of the 2 core includes planted in a scratch copy: it cannot be trusted"

core_includes tools/*.c tools/cli tools/server tools/common >"$tmp/found"
if [ -s "$tmp/found" ]; then
    bad "tools/ includes core/ headers (use include/picolm/picolm.h): $(tr '\n' ';' <"$tmp/found" | head -c 600)"
else
    ok "no file of tools/*.c, tools/cli, tools/server, tools/common includes a core/ header"
fi

# the compile lines make would run (dry run, in a scratch build directory)
cmd() { make -n BUILD="$tmp/b" "$tmp/b/obj/$1.o" 2>/dev/null | grep -- " -c $1.c"; }
for src in tools/cli/main tools/server/run tools/bench tools/common/synth; do
    line=$(cmd "$src")
    if [ -z "$line" ]; then bad "no compile line for $src.c from make -n"
    elif printf '%s\n' "$line" | grep -q -- '-Icore'; then bad "$src.c is compiled with -Icore: $line"
    else ok "$src.c is compiled without -Icore"; fi
done
cmd core/picolm | grep -q -- '-Icore' && ok "core/ keeps -Icore" || bad "core/picolm.c is not compiled with -Icore"
exit $fail
