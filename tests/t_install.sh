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
