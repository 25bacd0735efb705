#!/bin/sh
# picolm-bench end to end on a small synthetic model: --synth writes a GGUF
# that picolm loads (tokenizer included) and that is the same whatever the
# thread count; the JSON of a quick all-backends run parses and every number
# is sane; csv/md agree on the rows; the SVG charts are well-formed XML.
BUILD=${PICOLM_BUILD:-build}
B=$BUILD/bin/picolm-bench
[ -x "$B" ] || { echo "FAIL: t_bench: $B not built"; exit 1; }
PY=python3
command -v $PY >/dev/null 2>&1 || { echo "SKIP: t_bench: no python3 to parse the JSON"; exit 0; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# 1. synthesis: a real file, identical with 1 and 2 threads, reused when present
if "$B" --synth tiny:Q8_0 --out "$tmp/a.gguf" --threads 2 -p 4 -n 2 -r 1 --bw-mib 32 --backends reference >"$tmp/a.md" 2>"$tmp/a.log"; then
    echo "PASS: --synth tiny:Q8_0 wrote and benchmarked $(du -k "$tmp/a.gguf" | cut -f1) KB"
else
    echo "FAIL: --synth tiny:Q8_0: $(tail -2 "$tmp/a.log")"; exit 1
fi
"$B" --synth tiny:Q8_0 --out "$tmp/b.gguf" --threads 1 -p 4 -n 2 -r 1 --bw-mib 32 --backends reference >/dev/null 2>&1
cmp -s "$tmp/a.gguf" "$tmp/b.gguf" && echo "PASS: synthesis is deterministic (1 vs 2 threads: same bytes)" ||
    echo "FAIL: synthesis differs between 1 and 2 threads"
"$B" --synth tiny:Q8_0 --out "$tmp/a.gguf" -p 4 -n 2 -r 1 --bw-mib 32 --backends reference >/dev/null 2>"$tmp/r.log"
grep -q "reusing" "$tmp/r.log" && echo "PASS: an existing --synth file is reused" || echo "FAIL: existing --synth file not reused"
if out=$("$BUILD/bin/picolm" "$tmp/a.gguf" -p "Hello" -n 4 -t 0 2>"$tmp/g.log" </dev/null); then
    echo "PASS: picolm loads the synthetic model (tokenizer too) and generates: '$(echo "$out" | head -c 60)'"
else
    echo "FAIL: picolm on the synthetic model: $(tail -2 "$tmp/g.log")"
fi
"$B" --synth tiny:NOPE -p 1 -n 1 >/dev/null 2>"$tmp/e.log"; rc=$?
[ $rc -ne 0 ] && grep -q "NOPE" "$tmp/e.log" && echo "PASS: unknown synth type is an error: $(tail -1 "$tmp/e.log")" ||
    echo "FAIL: unknown synth type: rc $rc"
# the Q4_K_M mix matches picolm-quantize's (llama.cpp's) per-tensor policy on the same shape
"$B" --synth tiny:Q4_K_M --out "$tmp/m.gguf" -p 4 -n 2 -r 1 --bw-mib 32 --backends reference >/dev/null 2>&1
"$B" --synth tiny:F32 --out "$tmp/f.gguf" -p 4 -n 2 -r 1 --bw-mib 32 --backends reference >/dev/null 2>&1
"$BUILD/bin/picolm-quantize" "$tmp/f.gguf" "$tmp/q.gguf" Q4_K_M -j 2 >/dev/null 2>&1
types() { "$BUILD/bin/picolm-gguf" info "$1" 2>/dev/null | awk '/^  [a-z_.0-9]*weight /{print $1, $2}' | sort; }
types "$tmp/m.gguf" >"$tmp/m.t"; types "$tmp/q.gguf" >"$tmp/q.t"
n=$(wc -l <"$tmp/m.t"); n6=$(grep -c 'Q6_K' "$tmp/m.t")
if [ "$n" -eq 39 ] && [ "$n6" -gt 0 ] && cmp -s "$tmp/m.t" "$tmp/q.t"; then
    echo "PASS: --synth tiny:Q4_K_M has picolm-quantize's Q4_K_M types for all $n tensors ($n6 in Q6_K)"
else
    echo "FAIL: --synth Q4_K_M types differ from picolm-quantize's ($n tensors): $(diff "$tmp/m.t" "$tmp/q.t" | head -3 | tr '\n' ' ')"
fi

# 2. the quick all-backends run, JSON
if "$B" "$tmp/a.gguf" -p 16 -n 8 -r 1 --bw-mib 64 --format json >"$tmp/r.json" 2>"$tmp/r.log"; then
    echo "PASS: all-backends run (-p 16 -n 8 -r 1) exits 0"
else
    echo "FAIL: all-backends run: $(tail -2 "$tmp/r.log")"; exit 1
fi
$PY - "$tmp/r.json" <<'EOF'
import json, sys
try:
    rows = json.load(open(sys.argv[1]))
except Exception as e:
    print("FAIL: bench JSON does not parse: %s" % e); sys.exit(0)
print("PASS: bench JSON parses: %d rows" % len(rows))
names = [r.get("backend") for r in rows]
ok = isinstance(rows, list) and len(rows) >= 2 and "reference" in names and len(set(names)) == len(names)
print(("PASS" if ok else "FAIL") + ": one row per backend, reference included: %s" % names)
pos = ["threads", "prefill_tokens", "prefill_tps", "decode_tokens", "decode_tps", "gbps", "mem_bw_gbps",
       "roofline_fraction", "peak_rss_anon_mb"]
bad = []
for r in rows:
    for k in pos:
        v = r.get(k)
        if not isinstance(v, (int, float)) or not v > 0:
            bad.append("%s.%s=%r" % (r.get("backend"), k, v))
    if not isinstance(r.get("decode_tps_std"), (int, float)) or r["decode_tps_std"] < 0:
        bad.append("%s.decode_tps_std" % r.get("backend"))
    if r.get("prefill_tokens") != 16 or r.get("decode_tokens") != 8:
        bad.append("%s: token counts %r/%r" % (r.get("backend"), r.get("prefill_tokens"), r.get("decode_tokens")))
    # GB/s is tok/s times the bytes per token: both must agree across rows
    if r.get("decode_tps") and abs(r["gbps"] / r["decode_tps"] - rows[0]["gbps"] / rows[0]["decode_tps"]) > 1e-3 * rows[0]["gbps"] / rows[0]["decode_tps"]:
        bad.append("%s: bytes per token differ" % r.get("backend"))
    if not (0 < r.get("roofline_fraction", 0) < 5) or not (0.5 < r.get("peak_rss_anon_mb", 0) < 4096):
        bad.append("%s: roofline %r / RssAnon %r out of range" % (r.get("backend"), r.get("roofline_fraction"), r.get("peak_rss_anon_mb")))
print(("FAIL: bad fields: " + ", ".join(bad)) if bad else "PASS: every row has the fields, all > 0 and sane")
# the decode breakdown: shares of the decode time, and matmuls are part of it
bad = []
for r in rows:
    mf, af, mg = r.get("decode_matmul_fraction"), r.get("decode_attention_fraction"), r.get("matmul_gbps")
    if not all(isinstance(v, (int, float)) for v in (mf, af, mg)):
        bad.append("%s: missing %r %r %r" % (r.get("backend"), mf, af, mg)); continue
    if not (0 < mf <= 1 and 0 < af < 1 and mf + af <= 1 + 1e-9):
        bad.append("%s: fractions %r + %r" % (r.get("backend"), mf, af))
    # the same bytes over a part of the decode time: never below the whole-decode rate
    if not (mg >= r["gbps"] * (1 - 1e-6) and abs(mg * mf - r["gbps"]) <= 0.02 * r["gbps"]):
        bad.append("%s: matmul_gbps %r vs gbps %r at fraction %r" % (r.get("backend"), mg, r["gbps"], mf))
print(("FAIL: decode breakdown: " + ", ".join(bad)) if bad else "PASS: decode breakdown (matmul / attention shares, matmul GB/s) consistent in every row")
EOF

# 3. csv and md: a header and one line per backend
n=$($PY -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$tmp/r.json" 2>/dev/null)
"$B" "$tmp/a.gguf" -p 8 -n 4 -r 1 --bw-mib 32 --format csv >"$tmp/r.csv" 2>/dev/null
l=$(wc -l <"$tmp/r.csv")
[ -n "$n" ] && [ "$l" -eq $((n + 1)) ] && head -1 "$tmp/r.csv" | grep -q '^backend,threads,' && echo "PASS: csv has a header and $n rows" ||
    echo "FAIL: csv has $l lines for $n backends"
grep -q '^| reference | ' "$tmp/a.md" && echo "PASS: markdown table has the reference row" || echo "FAIL: markdown table lacks the reference row"
"$B" "$tmp/a.gguf" -p 4 -n 2 -r 1 --backends nosuchbackend >/dev/null 2>"$tmp/e.log"; rc=$?
[ $rc -ne 0 ] && grep -q "nosuchbackend" "$tmp/e.log" && echo "PASS: unknown backend is an error: $(tail -1 "$tmp/e.log")" ||
    echo "FAIL: unknown backend: rc $rc"

# 4. SVG: the micro chart and the decode chart are well-formed XML with bars
"$B" --micro --micro-ms 2 --micro-mib 1 --formats Q4_K,Q8_0,F16 --format svg >"$tmp/m.svg" 2>"$tmp/m.log" ||
    echo "FAIL: --micro --format svg: $(tail -1 "$tmp/m.log")"
"$B" "$tmp/a.gguf" -p 4 -n 2 -r 1 --bw-mib 32 --format svg >"$tmp/d.svg" 2>/dev/null
for f in m d; do
    $PY - "$tmp/$f.svg" <<'EOF'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception as e:
    print("FAIL: %s is not well-formed XML: %s" % (sys.argv[1].split("/")[-1], e)); sys.exit(0)
bars = [r for r in root.iter("{http://www.w3.org/2000/svg}rect") if r.find("{http://www.w3.org/2000/svg}title") is not None]
ok = root.tag == "{http://www.w3.org/2000/svg}svg" and len(bars) >= 2 and any(float(b.get("height")) > 0 for b in bars)
print(("PASS" if ok else "FAIL") + ": %s is well-formed SVG with %d bars" % (sys.argv[1].split("/")[-1], len(bars)))
EOF
done
$PY - "$tmp/m.svg" <<'EOF'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
labels = {t.text for t in root.iter("{http://www.w3.org/2000/svg}text")}
ok = {"Q4_K", "Q8_0", "F16", "reference"} <= labels
print(("PASS" if ok else "FAIL") + ": micro chart has the formats on x and the backends in the legend")
EOF

# --micro's gemm per column: nc 1, 2, 4, 8 for every kernel with a gemm, in JSON, CSV and markdown
"$B" --micro --micro-ms 2 --micro-mib 1 --formats Q4_K,Q8_0 --format json >"$tmp/m.json" 2>"$tmp/m.log" ||
    echo "FAIL: --micro --format json: $(tail -1 "$tmp/m.log")"
$PY - "$tmp/m.json" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
tiled = [r for r in rows if r["gemm"]]
ok = len(rows) >= 2 and tiled and all([g["nc"] for g in r["gemm"]] == [1, 2, 4, 8] and all(g["gbps_per_col"] > 0 for g in r["gemm"])
                                      for r in tiled) and not any(r["gemm"] for r in rows if r["backend"] == "reference")
print(("PASS" if ok else "FAIL") + ": --micro json: gemm per column at nc 1, 2, 4, 8 for %d of %d kernels (none for reference)" % (len(tiled), len(rows)))
EOF
"$B" --micro --micro-ms 2 --micro-mib 1 --formats Q8_0 --format csv 2>/dev/null | head -1 | grep -q ',gemm1_gbps_per_col,gemm2_gbps_per_col,gemm4_gbps_per_col,gemm8_gbps_per_col$' &&
    echo "PASS: --micro csv has the gemm columns" || echo "FAIL: --micro csv lacks the gemm columns"
"$B" --micro --micro-ms 2 --micro-mib 1 --formats Q8_0 2>/dev/null | grep -q '^| format | backend | vec_dot | gemm 1 col | gemm 2 cols | gemm 4 cols | gemm 8 cols |$' &&
    echo "PASS: --micro markdown has the gemm table" || echo "FAIL: --micro markdown lacks the gemm table"

# --sampling: the sampler chain alone; every stage timed, the stages add up to the total
if "$B" --sampling --vocab 5000,40000 -n 8 -r 1 --format json >"$tmp/s.json" 2>"$tmp/s.log"; then
    if $PY - "$tmp/s.json" <<'PYEOF'
import json, sys
rows = json.load(open(sys.argv[1]))
assert [(r["vocab"], r["logits"]) for r in rows] == [(5000, "peaked"), (5000, "flat"), (40000, "peaked"), (40000, "flat")], rows
for r in rows:
    st = r["stages_ms"]
    assert list(st) == ["candidates", "temperature", "top_p", "dist"], st
    assert r["draws"] == 8 and 0 < r["ms_min"] <= r["ms_mean"] and r["ms_mean_direct_off"] > 0, r
    assert abs(sum(st.values()) - r["ms_mean"]) <= 1e-3 * r["ms_mean"] + 1e-6, r
PYEOF
    then echo "PASS: --sampling times picolm's default chain per stage at 5000 and 40000 (peaked and flat)"
    else echo "FAIL: --sampling JSON: $(cat "$tmp/s.json" | head -3)"; fi
else
    echo "FAIL: --sampling: $(tail -2 "$tmp/s.log")"
fi
"$B" --sampling --vocab 12x >/dev/null 2>"$tmp/e.log"; rc=$?
[ $rc -eq 2 ] && grep -q "12x" "$tmp/e.log" && echo "PASS: --sampling --vocab 12x is a usage error: $(cat "$tmp/e.log")" ||
    echo "FAIL: --sampling --vocab 12x: rc $rc"
"$B" --vocab 32000 >/dev/null 2>"$tmp/e.log"; rc=$?
[ $rc -eq 2 ] && echo "PASS: --vocab without --sampling is a usage error: $(cat "$tmp/e.log")" || echo "FAIL: --vocab alone: rc $rc"
