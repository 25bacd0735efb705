#!/bin/sh
# `make install` into a temporary prefix: the installed binary finds its
# plugins in $PREFIX/lib/picolm without any flag, and the INIs are installed.
BUILD=${PICOLM_BUILD:-build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if make -s install BUILD="$BUILD" PREFIX=/opt/picolm DESTDIR="$tmp" >"$tmp/log" 2>&1; then
    echo "PASS: make install DESTDIR=... PREFIX=/opt/picolm"
else
    echo "FAIL: make install: $(tail -3 "$tmp/log")"; exit 1
fi
root="$tmp/opt/picolm"
for f in bin/picolm bin/picolm-logits bin/picolm-gguf lib/picolm/format-kquants.so lib/picolm/backend-scalar.so \
         lib/picolm/sampler-greedy.so share/picolm/conf/default.ini include/picolm/plugin.h; do
    if [ -e "$root/$f" ]; then echo "PASS: installed $f"; else echo "FAIL: missing $f"; fi
done
# run from somewhere unrelated, with no plugin hints in the environment
out=$(cd / && env -u PICOLM_PLUGIN_DIR -u PICOLM_CONFIG "$root/bin/picolm" --list-plugins 2>&1)
case "$out" in
    *"$root/bin/../lib/picolm/format-kquants.so"*) echo "PASS: installed picolm finds its plugins in \$PREFIX/lib/picolm" ;;
    *) echo "FAIL: installed picolm does not list its plugins: $(echo "$out" | head -5)" ;;
esac
model=$(pwd)/models/tiny-shakespeare-q8_0.gguf
txt=$(cd / && env -u PICOLM_PLUGIN_DIR "$root/bin/picolm" "$model" -p "ROMEO:" -n 8 -t 0 2>/dev/null)
if [ -n "$txt" ]; then echo "PASS: installed picolm generates text"; else echo "FAIL: installed picolm generated nothing"; fi

# The engine library as installed: a program of one's own, compiled with the
# installed header and archive (flags from the installed picolm.pc), loads a
# model through the installed plugins and generates picolm's greedy text.
cat >"$tmp/app.c" <<'EOF2'
#include <stdio.h>
#include <string.h>
#include "picolm/picolm.h"
int main(int argc, char **argv) {
    char err[512];
    picolm_model_params mp = {.path = argv[1], .plugin_dir = argv[2], .threads = 1};
    picolm_model *m = picolm_model_load(&mp, err, sizeof err);
    if (!m) { fprintf(stderr, "app: %s\n", err); return 1; }
    picolm_context_params cp = {.n_ctx = 64};
    picolm_context *c = picolm_context_new(m, &cp, err, sizeof err);
    int32_t toks[64], t;
    int n = picolm_tokenize(m, argv[3], strlen(argv[3]), picolm_add_bos(m), 0, toks, 64);
    if (!c || n <= 0 || picolm_eval(c, toks, n, err, sizeof err)) { fprintf(stderr, "app: %s\n", err); return 1; }
    for (int i = 0; i < 8 && !picolm_sample(c, &t, err, sizeof err) && !picolm_is_eog(m, t); i++) {
        size_t len;
        const char *p = picolm_token_piece(m, t, &len);
        fwrite(p, 1, len, stdout);
        if (picolm_eval(c, &t, 1, err, sizeof err)) return 1;
    }
    picolm_context_free(c);
    picolm_model_free(m);
    return 0;
}
EOF2
if command -v pkg-config >/dev/null 2>&1; then
    flags=$(PKG_CONFIG_PATH="$root/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$tmp" pkg-config --cflags --libs picolm)
    # (LDFLAGS: a sanitizer build's archive needs its runtime, make test-asan sets both)
    if ${CC:-cc} $LDFLAGS -o "$tmp/app" "$tmp/app.c" $flags 2>"$tmp/cc.log"; then
        app=$(cd / && "$tmp/app" "$model" "$root/lib/picolm" "ROMEO:" 2>"$tmp/app.log")
        [ -n "$app" ] && [ "$app" = "$txt" ] &&
            echo "PASS: a program built against the installed libpicolm.a (pkg-config: $flags) generates picolm's greedy text" ||
            echo "FAIL: the program on the installed library: '$app' vs '$txt' ($(head -2 "$tmp/app.log"))"
    else
        echo "FAIL: cannot build against the installed library ($flags): $(head -3 "$tmp/cc.log")"
    fi
else
    echo "SKIP: no pkg-config here: the installed library is not checked"
fi

# GNU install-strip: the same files, programs and plugins stripped, still working.
s="$tmp/strip"
if make -s install-strip BUILD="$BUILD" PREFIX=/opt/picolm DESTDIR="$s" >"$tmp/log2" 2>&1; then
    echo "PASS: make install-strip DESTDIR=... PREFIX=/opt/picolm"
else
    echo "FAIL: make install-strip: $(tail -3 "$tmp/log2")"
fi
sroot="$s/opt/picolm"
a=$(cd "$root" && find . | sort); b=$(cd "$sroot" 2>/dev/null && find . | sort)
[ -n "$b" ] && [ "$a" = "$b" ] && echo "PASS: install-strip installs the same $(echo "$b" | wc -l) paths as install" ||
    echo "FAIL: install-strip installs other paths: $(echo "$a" "$b" | tr ' ' '\n' | sort | uniq -u | head -3 | tr '\n' ' ')"
unstripped=""; checked=0
for f in "$sroot"/bin/* "$sroot"/lib/picolm/*.so; do
    [ -f "$f" ] && checked=$((checked + 1))
    readelf -S "$f" 2>/dev/null | grep -q ' \.symtab ' && unstripped="$unstripped $(basename "$f")"
done
[ -z "$unstripped" ] && [ "$checked" -gt 20 ] && [ -n "$(readelf -S "$root/bin/picolm" | grep ' \.symtab ')" ] &&
    echo "PASS: all $checked programs and plugins are stripped by install-strip (not by install)" ||
    echo "FAIL: not stripped ($checked checked):$unstripped"
[ "$(stat -c %a "$sroot/bin/picolm")" = 755 ] && [ "$(stat -c %a "$sroot/share/picolm/conf/default.ini")" = 644 ] &&
    echo "PASS: modes 755 for programs, 644 for data" || echo "FAIL: modes $(stat -c %a "$sroot/bin/picolm") / $(stat -c %a "$sroot/share/picolm/conf/default.ini")"
txt2=$(cd / && env -u PICOLM_PLUGIN_DIR "$sroot/bin/picolm" "$model" -p "ROMEO:" -n 8 -t 0 2>/dev/null)
[ -n "$txt2" ] && [ "$txt2" = "$txt" ] && echo "PASS: the stripped picolm loads its stripped plugins and generates the same text" ||
    echo "FAIL: stripped picolm: '$txt2' vs '$txt'"
[ ! -e /opt/picolm ] && echo "PASS: nothing was written outside DESTDIR (/opt/picolm does not exist)" ||
    echo "FAIL: /opt/picolm exists: DESTDIR not honoured (or left from elsewhere)"

# GNU uninstall with the same DESTDIR: every installed file and picolm's own
# directories go; a foreign file in bin/ and the shared directories stay.
touch "$s/opt/picolm/bin/other-tool"
if make -s uninstall BUILD="$BUILD" PREFIX=/opt/picolm DESTDIR="$s" >"$tmp/log3" 2>&1; then
    echo "PASS: make uninstall DESTDIR=... PREFIX=/opt/picolm"
else
    echo "FAIL: make uninstall: $(tail -3 "$tmp/log3")"
fi
left=$(cd "$sroot" && find . -mindepth 1 | sort | tr '\n' ' ')
[ "$left" = "./bin ./bin/other-tool ./include ./lib ./lib/pkgconfig ./share " ] &&
    echo "PASS: uninstall removed every installed file and the picolm directories, kept a foreign file" ||
    echo "FAIL: after uninstall: $left"
