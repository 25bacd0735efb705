#!/usr/bin/env python3
"""The README's speed table, regenerated: `make bench-report`.

For each model (a shape synthesised by `picolm-bench --synth SHAPE:TYPE`, or
a GGUF file) runs picolm-bench with the backends side by side in one process
and, when LLAMA_BENCH names a llama-bench binary, llama.cpp's llama-bench on
the same file with the same thread count and run shape, one after the
other.  Prints a Markdown block: the command, the host, and one table.

Environment (make variables of the same names):
  BENCH_MODELS    shapes or files (default: tinyllama, qwen2.5-0.5b, gemma3-1b, lfm2-700m, Q4_K_M)
  BENCH_BACKENDS  picolm backends (default: every SIMD backend this CPU runs)
  BENCH_THREADS   threads (default: the online CPUs)
  BENCH_ARGS      run shape (default: -p 128 -n 64 -r 3)
  LLAMA_BENCH     path to llama.cpp's llama-bench (optional)
  PICOLM_BUILD    build directory (default: build)
"""
import csv
import io
import os
import platform
import shlex
import subprocess
import sys

BUILD = os.environ.get("PICOLM_BUILD", "build")
BENCH = os.path.join(BUILD, "bin", "picolm-bench")


def run(cmd):
    print("bench-report: " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("bench-report: %s failed (exit %d):\n%s" % (cmd[0], r.returncode, r.stderr[-2000:]))
    return r.stdout, r.stderr


def plugins():
    """the CPU line, the feature line and the backends this CPU runs (not scalar), from picolm --list-plugins"""
    out, _ = run([os.path.join(BUILD, "bin", "picolm"), "--list-plugins"])
    cpu, feats, names, section = "", "", [], ""
    for line in out.splitlines():
        if line.startswith("CPU: "):
            cpu = line[5:].strip()
        elif line.startswith("features: "):
            feats = line[10:].strip()
        elif line and not line.startswith(" "):
            section = line.rstrip(":")
        f = line.split()
        if section == "backends" and len(f) >= 3 and line.startswith("  ") and not line.startswith("   ") \
                and f[2] in ("ok", "CHOSEN") and f[0] != "scalar":
            names.append((int(f[4]) if len(f) > 4 and f[3] == "score" else 0, f[0]))
    return cpu, feats, [n for _, n in sorted(names)]


def host(cpu, feats):
    simd = [f for f in feats.split() if f in ("avx2", "avx512f", "avx512vnni", "neon", "dotprod", "i8mm", "rvv")]
    load = os.getloadavg()[0]
    return "%s (%s), %d CPUs online, Linux %s, load average %.1f at the start" % (
        cpu or platform.machine(), " ".join(simd) or "no SIMD", os.cpu_count() or 1, platform.release(), load)


def main():
    models = (os.environ.get("BENCH_MODELS") or "tinyllama:Q4_K_M qwen2.5-0.5b:Q4_K_M gemma3-1b:Q4_K_M lfm2-700m:Q4_K_M").split()
    threads = os.environ.get("BENCH_THREADS", "") or str(os.cpu_count() or 1)
    shape = shlex.split(os.environ.get("BENCH_ARGS", "") or "-p 128 -n 64 -r 3")
    cpu, feats, found = plugins()
    backends = os.environ.get("BENCH_BACKENDS", "").replace(" ", ",") or ",".join(found)
    llama = os.environ.get("LLAMA_BENCH", "")
    if not backends:
        sys.exit("bench-report: no backend to measure (BENCH_BACKENDS)")
    opt = dict(zip(shape[::2], shape[1::2]))
    rows, note = [], host(cpu, feats)
    tmp = os.environ.get("TMPDIR") or "/tmp"
    for m in models:
        synth = ":" in m and not os.path.exists(m)
        path = os.path.join(tmp, "picolm-synth-%s.gguf" % m.replace(":", "-")) if synth else m
        src = ["--synth", m, "--out", path] if synth else [m]
        out, _ = run([BENCH] + src + ["--backends", backends, "-j", threads, "--format", "csv"] + shape)
        label = m.replace(":", " ") if synth else os.path.basename(m)
        for r in csv.DictReader(io.StringIO(out)):
            rows.append((label, "picolm " + r["backend"], float(r["prefill_tps"]), float(r["decode_tps"]),
                         "%.1f (%.0f%% of %.1f)" % (float(r["gbps"]), 100 * float(r["roofline_fraction"]), float(r["mem_bw_gbps"]))))
        if llama:
            lo, _ = run([llama, "-m", path, "-t", threads, "-p", opt.get("-p", "128"), "-n", opt.get("-n", "64"),
                         "-r", opt.get("-r", "3"), "-o", "csv"])
            pp = tg = 0.0
            for r in csv.DictReader(io.StringIO(lo)):
                if int(r.get("n_prompt", 0) or 0) > 0 and int(r.get("n_gen", 0) or 0) == 0:
                    pp = float(r["avg_ts"])
                elif int(r.get("n_gen", 0) or 0) > 0 and int(r.get("n_prompt", 0) or 0) == 0:
                    tg = float(r["avg_ts"])
            rows.append((label, "llama.cpp (llama-bench)", pp, tg, ""))
    cmd = "make bench-report" + "".join(
        ' %s="%s"' % (k, os.environ[k]) for k in ("BENCH_MODELS", "BENCH_BACKENDS", "BENCH_THREADS", "BENCH_ARGS", "LLAMA_BENCH")
        if os.environ.get(k))
    print("`%s`: picolm-bench %s, %s threads, on %s." % (cmd, " ".join(shape), threads, note))
    print()
    print("| model | engine | prefill tok/s | decode tok/s | decode GB/s (% of measured read bandwidth) |")
    print("|---|---|---:|---:|---:|")
    for label, eng, pp, tg, bw in rows:
        print("| %s | %s | %.1f | %.1f | %s |" % (label, eng, pp, tg, bw))


if __name__ == "__main__":
    main()
