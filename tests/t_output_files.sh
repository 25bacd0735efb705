#!/bin/sh
# Files the tools write through a temporary (picolm-quantize's OUT, picolm's
# --cache): an existing OUT that is not a regular file (a device node, a
# FIFO) is refused and stays what it was; a symlink OUT writes its target
# and stays a link; a writer killed with SIGKILL (no handler runs) leaves no
# temporary file behind (it has no name until it is complete).
. "${0%/*}/lib.sh"
F32=$M/tiny-shakespeare-f32.gguf
need_shared "$F32"
need_built "$BIN/picolm-quantize" "$BIN/picolm"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
d=$tmp/d; mkdir "$d"

# special files: a FIFO anyone can make; a device node when run as root
mkfifo "$d/fifo"
specials=fifo
if [ "$(id -u)" = 0 ] && mknod "$d/null" c 1 3 2>/dev/null; then specials="fifo null"; fi
for f in $specials; do
    kind=$(stat -c %F "$d/$f")
    "$BIN/picolm-quantize" "$F32" "$d/$f" Q8_0 -j 1 >"$tmp/out" 2>&1; rc=$?
    if [ $rc -ne 0 ] && [ "$(stat -c %F "$d/$f")" = "$kind" ] && grep -q "not a regular file" "$tmp/out"; then
        echo "PASS: $TEST_NAME: picolm-quantize onto a $kind: refused (exit $rc), still a $kind"
    else
        echo "FAIL: $TEST_NAME: picolm-quantize onto a $kind: exit $rc, now a $(stat -c %F "$d/$f"): $(tail -1 "$tmp/out")"
    fi
    "$BIN/picolm" models/tiny-shakespeare-q8_0.gguf -p "ROMEO:" -n 4 -t 0 --cache "$d/$f" >/dev/null 2>"$tmp/err"
    if [ "$(stat -c %F "$d/$f")" = "$kind" ]; then echo "PASS: $TEST_NAME: picolm --cache onto a $kind: still a $kind"
    else echo "FAIL: $TEST_NAME: picolm --cache replaced a $kind with a $(stat -c %F "$d/$f")"; fi
done

# a symlink: its target gets the file, the link stays
: >"$d/target.gguf"
ln -s target.gguf "$d/link.gguf"
"$BIN/picolm-quantize" "$F32" "$d/link.gguf" Q8_0 -j 1 >"$tmp/out" 2>&1; rc=$?
if [ $rc -eq 0 ] && [ -L "$d/link.gguf" ] && [ -s "$d/target.gguf" ]; then
    echo "PASS: $TEST_NAME: OUT a symlink: its target written ($(stat -c %s "$d/target.gguf") bytes), the link kept"
else
    echo "FAIL: $TEST_NAME: OUT a symlink: exit $rc, link $([ -L "$d/link.gguf" ] && echo kept || echo replaced), target $(stat -c %s "$d/target.gguf") bytes"
fi

# SIGKILL while OUT is being written: caught as soon as the writer holds a
# file in the directory (python polls its descriptors every millisecond)
command -v python3 >/dev/null 2>&1 || { echo "SKIP: $TEST_NAME: python3 absent: the SIGKILL case is not run"; exit 0; }
python3 - "$BIN/picolm-quantize" "$F32" "$d" <<'PY'
import os, signal, subprocess, sys, time
q, src, d = sys.argv[1:]
for attempt in range(5):
    p = subprocess.Popen([q, src, os.path.join(d, "killed.gguf"), "Q4_K", "-j", "1"], stderr=subprocess.DEVNULL)
    caught, end = False, time.time() + 30
    while p.poll() is None and time.time() < end and not caught:
        try:
            links = [os.readlink(f"/proc/{p.pid}/fd/{f}") for f in os.listdir(f"/proc/{p.pid}/fd")]
        except OSError:
            links = []
        if any(l.startswith(d + "/") for l in links):
            p.send_signal(signal.SIGKILL)
            caught = True
        time.sleep(0.001)
    p.wait()
    if caught:
        left = [f for f in os.listdir(d) if ".tmp." in f or f == "killed.gguf"]
        print(("PASS: t_output_files: picolm-quantize killed (SIGKILL) mid-write leaves nothing" if not left else
               f"FAIL: t_output_files: picolm-quantize killed (SIGKILL) mid-write left {left}"))
        sys.exit(0)
print("FAIL: t_output_files: picolm-quantize finished before it could be caught writing (5 tries)")
PY
