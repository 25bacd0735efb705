#!/bin/sh
# [limits] in the INI: a model declaring more than allowed is refused with
# a message naming the limit; the defaults accept it.
BUILD=${PICOLM_BUILD:-build}
bin="$BUILD/bin/picolm"; model=models/tiny-shakespeare-q8_0.gguf
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '[limits]\nmax_tensors = 10\n' > "$tmp/few.ini"
err=$("$bin" "$model" --config "$tmp/few.ini" -p hi -n 1 2>&1 >/dev/null); rc=$?
case "$rc:$err" in
    1:*"tensor count 39 exceeds the limit 10"*) echo "PASS: max_tensors = 10 refuses a 39-tensor model ($err)" ;;
    *) echo "FAIL: max_tensors = 10: rc $rc: $err" ;;
esac
printf '[limits]\nmax_string = 4\n' > "$tmp/short.ini"
err=$("$bin" "$model" --config "$tmp/short.ini" -p hi -n 1 2>&1 >/dev/null); rc=$?
case "$rc:$err" in
    1:*"longer than the limit max_string"*) echo "PASS: max_string = 4 refuses the model ($err)" ;;
    *) echo "FAIL: max_string = 4: rc $rc: $err" ;;
esac
printf '[limits]\nmax_tensors = lots\n' > "$tmp/bad.ini"
err=$("$bin" "$model" --config "$tmp/bad.ini" -p hi -n 1 2>&1 >/dev/null); rc=$?
case "$rc:$err" in
    2:*"bad.ini:2:"*) echo "PASS: malformed limit names file and line ($err)" ;;
    *) echo "FAIL: malformed limit: rc $rc: $err" ;;
esac
out=$("$bin" "$model" --config conf/default.ini -p "ROMEO:" -n 4 -t 0 2>/dev/null)
[ -n "$out" ] && echo "PASS: default limits accept the demo model" || echo "FAIL: default limits refuse the demo model"
"$bin" "$model" --config "$tmp/few.ini" --dump-config 2>/dev/null | grep -q '^max_tensors = 10$' \
    && echo "PASS: --dump-config shows max_tensors = 10" || echo "FAIL: --dump-config lacks max_tensors"
