#!/bin/sh
# What README.md, docs/ and the code comments name must exist, and they tell
# no history (tests/docrefs.py says what it reads and checks).  First the
# checker itself on a small tree whose doc names a missing file, a missing
# function, a broken link and a date: it must report each.
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
if ! command -v python3 >/dev/null 2>&1; then echo "SKIP: t_docrefs: no python3"; exit 0; fi

mkdir -p "$T/core" "$T/docs"
printf 'int real_fn(void) { return 0; }\n' >"$T/core/a.c"
printf '%s\n' '# Doc' 'See core/a.c and core/gone.c, `core/a.c: real_fn`, `core/a.c: lost_fn`,' \
    '[link](docs/none.md), [anchor](#doc) [bad anchor](#nowhere), measured 3 Dec.' >"$T/README.md"
PICOLM_SHARED=/nonexistent python3 tests/docrefs.py --root "$T" >"$T/out" 2>&1
rc=$?
for want in "core/gone.c, which does not exist" "lost_fn in core/a.c" "docs/none.md, which does not exist" \
            "has no heading #nowhere" "history in the text"; do
    if [ $rc -ne 0 ] && grep -qF "$want" "$T/out"; then echo "PASS: the checker reports: $want"
    else echo "FAIL: the checker missed: $want (exit $rc)"; sed 's/^/    | /' "$T/out"; fi
done
if grep -qE 'real_fn|names core/a\.c,|#doc,' "$T/out"; then echo "FAIL: the checker reports what exists"; sed 's/^/    | /' "$T/out"
else echo "PASS: the checker accepts what exists"; fi

# The tree itself.
python3 tests/docrefs.py >"$T/tree" 2>&1
rc=$?
n=$(grep -vc '^#' "$T/tree")
sed -n 's/^# SKIP: /SKIP: t_docrefs: /p' "$T/tree"
if [ $rc -eq 0 ] && [ "$n" -eq 0 ]; then echo "PASS: every file, symbol and link the docs and comments name exists ($(grep '^# [0-9]' "$T/tree" | sed 's/^# //'))"
else echo "FAIL: $n references to fix (exit $rc):"; grep -v '^#' "$T/tree" | head -40 | sed 's/^/    /'; fi

# The plain grep of the brief, over the prose and the code comments alike.
if grep -rniE 'session [0-9]|[0-9]{1,2} (Nov|Dec) ' README.md docs/ core/ backends/ tools/ >"$T/grep"; then
    echo "FAIL: dates or session numbers:"; head -20 "$T/grep" | sed 's/^/    /'
else echo "PASS: no dates or session numbers in README.md, docs/, core/, backends/, tools/"; fi

# The README's size of the stripped picolm binary is today's (within 15%).
B=${PICOLM_BUILD:-build}
said=$(sed -n 's/.*stripped `picolm` binary is about \([0-9]*\) KB.*/\1/p' README.md)
if [ -z "$said" ]; then echo "FAIL: README.md no longer says the stripped picolm binary's size (this test reads it)"
elif [ ! -x "$B/bin/picolm" ] || ! command -v strip >/dev/null 2>&1; then echo "SKIP: t_docrefs: no $B/bin/picolm or no strip: size not checked"
elif [ -n "$PICOLM_SANITIZER" ] || [ -n "$PICOLM_TEST_WRAPPER" ]; then echo "SKIP: t_docrefs: a sanitizer or cross build: size not checked"
elif strip -o "$T/picolm" "$B/bin/picolm" 2>/dev/null; then
    kb=$(( $(wc -c <"$T/picolm") / 1000 ))
    if [ $((kb * 100)) -ge $((said * 85)) ] && [ $((kb * 100)) -le $((said * 115)) ]; then
        echo "PASS: README.md's stripped picolm size (about $said KB) is today's ($kb KB)"
    else echo "FAIL: README.md says the stripped picolm is about $said KB; it is $kb KB"; fi
else echo "SKIP: t_docrefs: strip failed on $B/bin/picolm (another architecture?)"; fi
