#!/bin/sh
# picolm-bench --tune on the tiny Q4_K_M model: the INI it writes loads with
# picolm --config (and runs), names a backend this CPU accepts and a thread
# count from 1 to the online CPUs, and equals the decision table it printed
# (json: "chosen" and the chosen kv_type row; md: the "chosen:" line); with
# --ram, no measured or chosen setting exceeds the budget (the --fit plan);
# bad input is a clear error.
BUILD=${PICOLM_BUILD:-build}
SHARED=${PICOLM_SHARED:-../shared}
B=$BUILD/bin/picolm-bench
P=$BUILD/bin/picolm
M=$SHARED/models/tiny-shakespeare-q4_k_m.gguf
[ -x "$B" ] || { echo "FAIL: t_tune: $B not built"; exit 1; }
[ -f "$M" ] || { echo "SKIP: t_tune: no $M"; exit 0; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: t_tune: no python3 to parse the JSON"; exit 0; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ncpu=$(getconf _NPROCESSORS_ONLN)

# 1. json table + INI file
t0=$(date +%s)
if "$B" --tune "$M" -o "$tmp/t.ini" --format json >"$tmp/t.json" 2>"$tmp/t.log"; then
    echo "PASS: --tune exits 0 in $(($(date +%s) - t0)) s ($(grep -c 'tune \[' "$tmp/t.log") runs)"
else
    echo "FAIL: --tune: $(tail -3 "$tmp/t.log")"; exit 1
fi
grep -q 'about [0-9]* s left' "$tmp/t.log" && echo "PASS: progress with the time left on stderr" ||
    echo "FAIL: no progress/ETA lines on stderr"
ini() { sed -n "s/^$1 = //p" "$tmp/t.ini"; }
be=$(ini backend); th=$(ini threads); ba=$(ini batch); kv=$(ini kv_type); cx=$(ini context)
if "$P" --config "$tmp/t.ini" --dump-config >"$tmp/d.ini" 2>"$tmp/d.log" &&
   grep -qx "backend = $be" "$tmp/d.ini" && grep -qx "threads = $th" "$tmp/d.ini" && grep -qx "batch = $ba" "$tmp/d.ini" &&
   grep -qx "kv_type = $kv" "$tmp/d.ini" && grep -qx "context = $cx" "$tmp/d.ini"; then
    echo "PASS: the INI loads with picolm --config (backend $be, threads $th, batch $ba, kv_type $kv, context $cx)"
else
    echo "FAIL: picolm --config on the tuned INI: $(tail -2 "$tmp/d.log")"
fi
if [ "$be" = reference ] || "$P" --list-plugins 2>/dev/null | grep -Eq "^  $be +[0-9.]+ +(CHOSEN|ok) "; then
    echo "PASS: backend $be is one this CPU runs"
else
    echo "FAIL: backend '$be' is not an accepted backend here"
fi
[ -n "$th" ] && [ "$th" -ge 1 ] && [ "$th" -le "$ncpu" ] && echo "PASS: threads $th within 1..$ncpu" ||
    echo "FAIL: threads '$th' not within 1..$ncpu"
if out=$("$P" --config "$tmp/t.ini" "$M" -p "ROMEO:" -n 4 2>"$tmp/g.log" </dev/null) && [ -n "$out" ]; then
    echo "PASS: picolm --config runs the model with it: '$(echo "$out" | head -c 40 | tr '\n' ' ')'"
else
    echo "FAIL: picolm --config tuned.ini MODEL: $(tail -2 "$tmp/g.log")"
fi
for k in "picolm-bench --tune" "model: " "CPU: " "runner-up" "UTC" "picolm 0.1"; do
    grep -q "$k" "$tmp/t.ini" || echo "FAIL: the INI's comments lack '$k'"
done
check=$(python3 - "$tmp/t.json" "$be" "$th" "$ba" "$kv" "$cx" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
be, th, ba, kv, cx = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
c = d["chosen"]
bad = []
if (c["backend"], c["threads"], c["batch"], c["kv_type"]) != (be, th, ba, kv): bad.append("chosen %s != INI" % c)
if d["n_ctx"] != cx: bad.append("n_ctx %d != context %d" % (d["n_ctx"], cx))
kvrows = [r for r in d["rows"] if r["stage"] == "kv_type" and r["verdict"] == "chosen"]
if len(kvrows) != 1 or (kvrows[0]["backend"], kvrows[0]["threads"], kvrows[0]["batch"], kvrows[0]["kv_type"]) != (be, th, ba, kv):
    bad.append("chosen kv_type row differs from the INI")
for st in ("backend", "batch", "kv_type"):
    if not any(r["stage"] == st for r in d["rows"]): bad.append("no %s stage" % st)
best = max(r["decode_tps"] for r in d["rows"] if r["stage"] in ("backend", "threads") and r["verdict"] != "pruned")
win = [r for r in d["rows"] if r["stage"] in ("backend", "threads") and r["verdict"] == "chosen"]
if len(win) != 1 or win[0]["decode_tps"] != best or (win[0]["backend"], win[0]["threads"]) != (be, th):
    bad.append("the chosen backend/threads row is not the table's fastest")
bw = [r for r in d["rows"] if r["stage"] == "batch" and r["verdict"] == "chosen"]
if len(bw) != 1 or bw[0]["batch"] != ba or bw[0]["prefill_tps"] != max(r["prefill_tps"] for r in d["rows"] if r["stage"] == "batch"):
    bad.append("the chosen batch is not the fastest prefill of the batch stage")
if not any(r["layout"] == "Q4_K_M_R16" for r in d["rows"]): bad.append("no Q4_K_M_R16 layout measured")
print("; ".join(bad) if bad else "ok %d rows" % len(d["rows"]))
EOF
)
case $check in ok*) echo "PASS: the INI matches the json decision table ($check)";; *) echo "FAIL: json table vs INI: $check";; esac

# 2. md (default) with the INI on stdout, the table on stderr; --ram respected
if "$B" --tune "$M" --ram 5M -c 256 >"$tmp/r.ini" 2>"$tmp/r.md"; then
    line=$(grep '^chosen: ' "$tmp/r.md")
    rbe=$(sed -n 's/^backend = //p' "$tmp/r.ini"); rth=$(sed -n 's/^threads = //p' "$tmp/r.ini")
    rba=$(sed -n 's/^batch = //p' "$tmp/r.ini"); rkv=$(sed -n 's/^kv_type = //p' "$tmp/r.ini")
    case $line in
    *"backend $rbe, threads $rth, batch $rba, kv_type $rkv "*) echo "PASS: md table's chosen line equals the INI ($line)";;
    *) echo "FAIL: md chosen line '$line' vs INI backend $rbe threads $rth batch $rba kv $rkv";;
    esac
    grep -qx 'ram = 5M' "$tmp/r.ini" && echo "PASS: the INI keeps the RAM budget (ram = 5M)" || echo "FAIL: no ram = 5M in the INI"
    # every measured row's plan fits 5 MiB; some setting was refused
    over=$(awk -F'|' '/^\| (backend|threads|batch|kv_type) /{gsub(/ /,"",$11); gsub(/ /,"",$9); gsub(/ /,"",$10); if (($9 != "-" || $10 != "-") && $11 + 0 > 5.0) print}' "$tmp/r.md" | wc -l)
    nofit=$(grep -c 'does not fit' "$tmp/r.md")
    [ "$over" -eq 0 ] && [ "$nofit" -gt 0 ] && echo "PASS: --ram 5M: $nofit settings refused by the --fit plan, none measured above it" ||
        echo "FAIL: --ram 5M: $over measured rows above the budget, $nofit refused"
    # picolm --fit measures its runtime tables' RSS, which a sanitizer inflates
    "$P" --config "$tmp/r.ini" "$M" --fit >"$tmp/fit.txt" 2>&1
    if grep -q '^verdict: fits' "$tmp/fit.txt"; then echo "PASS: picolm --fit with the INI: $(grep '^verdict' "$tmp/fit.txt")"
    elif [ -n "$PICOLM_SANITIZER" ] && grep -q '^verdict: ' "$tmp/fit.txt"; then
        echo "SKIP: picolm --fit with the --ram INI: '$(grep '^verdict' "$tmp/fit.txt")' NOT CHECKED: PICOLM_SANITIZER=$PICOLM_SANITIZER inflates the measured runtime to $(sed -n 's/^runtime *\([0-9.]*\) MB.*/\1/p' "$tmp/fit.txt") MB"
    else echo "FAIL: picolm --fit with the --ram INI: $(tail -1 "$tmp/fit.txt")"; fi
else
    echo "FAIL: --tune --ram 5M: $(tail -3 "$tmp/r.md")"
fi

# 3. Ctrl-C while measuring removes the scratch repacked copies (TMPDIR)
# sigint_tune MODEL NAME COPIES: SIGINT once measuring has begun; PASS when
# COPIES scratch files existed, none is left, no INI was written, and the
# process died of the signal
sigint_tune() {
    mkdir "$tmp/$2"
    # (a background job of a script starts with SIGINT ignored: give it the default back)
    TMPDIR="$tmp/$2" env --default-signal=INT "$B" --tune "$1" -o "$tmp/$2.ini" >/dev/null 2>"$tmp/$2.log" &
    pid=$!
    i=0
    while [ $i -lt 300 ] && ! grep -q 'tune \[' "$tmp/$2.log" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    had=$(ls "$tmp/$2" | wc -l)
    kill -INT $pid; wait $pid; rc=$?
    left=$(ls "$tmp/$2" | wc -l)
    [ "$had" -eq "$3" ] && [ "$left" -eq 0 ] && [ $rc -ge 128 ] && [ ! -e "$tmp/$2.ini" ] &&
        echo "PASS: SIGINT during --tune ($(basename "$1")): its $had scratch copies are removed, exit $rc" ||
        echo "FAIL: SIGINT during --tune ($(basename "$1")): $had scratch file(s) before (want $3), $left after, exit $rc"
}
sigint_tune "$M" td 1

# 3b. a file with Q4_K and Q5_0 rows (Qwen2.5's mix, tiny): both repacked layouts are
#     measured, the INI names each one's gain, and Ctrl-C removes both scratch copies
Q="$tmp/tq.gguf"
"$B" --synth tiny-qwen2:Q4_K_M --out "$Q" -p 0 -n 0 -r 1 --backends avx2,reference >/dev/null 2>&1
if [ ! -f "$Q" ]; then
    echo "FAIL: --synth tiny-qwen2:Q4_K_M made no file"
elif "$B" --tune "$Q" -o "$tmp/q.ini" --format json >"$tmp/q.json" 2>"$tmp/q.log"; then
    layouts=$(python3 -c 'import json,sys; print(" ".join(sorted({r["layout"] for r in json.load(open(sys.argv[1]))["rows"]})))' "$tmp/q.json")
    [ "$layouts" = "Q4_K_M_R16 Q5_0_R16 file" ] && echo "PASS: --tune on a Q4_K + Q5_0 file measures layouts: $layouts" ||
        echo "FAIL: --tune on a Q4_K + Q5_0 file measured layouts '$layouts'"
    grep -q "^; layout: the Q4_K_M_R16 repack" "$tmp/q.ini" && grep -q "^; layout: the Q5_0_R16 repack" "$tmp/q.ini" &&
        grep -q "^; layout chosen: " "$tmp/q.ini" && echo "PASS: the INI names both layouts' gains and the one chosen" ||
        echo "FAIL: the INI's layout lines: $(grep '^; layout' "$tmp/q.ini" | tr '\n' ' ')"
    sigint_tune "$Q" td2 2
else
    echo "FAIL: --tune on a Q4_K + Q5_0 file: $(tail -3 "$tmp/q.log")"
fi

# 4. bad input
"$B" --tune "$M" --ram 1M -o "$tmp/x.ini" >/dev/null 2>"$tmp/e.log"; rc=$?
[ $rc -eq 1 ] && grep -q 'nothing fits --ram 1M' "$tmp/e.log" && [ ! -s "$tmp/x.ini" ] &&
    echo "PASS: --ram 1M: $(tail -1 "$tmp/e.log")" || echo "FAIL: --ram 1M: rc $rc, $(tail -1 "$tmp/e.log")"
"$B" --tune "$M" --ram lots >/dev/null 2>"$tmp/e.log"; rc=$?
[ $rc -eq 2 ] && grep -q "lots" "$tmp/e.log" && echo "PASS: bad --ram is a usage error" || echo "FAIL: bad --ram: rc $rc"
"$B" --tune "$tmp/missing.gguf" >/dev/null 2>"$tmp/e.log"; rc=$?
[ $rc -eq 1 ] && grep -q "missing.gguf" "$tmp/e.log" && echo "PASS: missing model: $(tail -1 "$tmp/e.log")" ||
    echo "FAIL: missing model: rc $rc, $(tail -1 "$tmp/e.log")"
"$B" "$M" -o "$tmp/y.ini" >/dev/null 2>"$tmp/e.log"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--tune" "$tmp/e.log" && echo "PASS: -o without --tune is a usage error" || echo "FAIL: -o without --tune: rc $rc"
