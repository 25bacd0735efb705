/*
 * picolm-bench: every requested backend, in one process, on the same model.
 * Per (backend, thread count): batched prefill tok/s, decode tok/s (mean and
 * stddev over reps, EOS ignored), the weight bandwidth decoding achieves
 * against the machine's read bandwidth measured in the same run (the memory
 * roofline of decode), and RssAnon during generation.  --micro times each
 * format x backend vec_dot kernel alone, and its gemm per column.  --synth
 * makes a random-weight model of a given shape and type first
 * (tools/common/synth.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "picolm/picolm.h"
#include "cli.h"
#include "generate.h"
#include "synth.h"
#include "tmp_guard.h"
#include "tool.h"

#define MAX_LIST 32

enum { OUT_MD, OUT_CSV, OUT_JSON, OUT_SVG };

typedef struct opts {
    const char *model, *synth, *out, *plugin_dir;
    const char *repacked, *ini_out, *ram; /* --tune */
    const char *formats[MAX_LIST]; /* --micro: only these formats (none = all) */
    int n_formats;
    const char *backends[MAX_LIST];
    int n_backends;
    int threads[MAX_LIST];
    int n_threads;
    int n_prompt, n_gen, reps, format, micro, tune, synth_exact, ctx, batch, kv_type, bw_mib, micro_mib;
    double micro_s;
    double max_s; /* --tune: a decode run stops after this many seconds (0 = never) */
    int decode_at; /* --tune, no prompt: decode from this position (the cache holds zeros before it) */
    int sampling;  /* --sampling: the sampler chain alone, at these vocabulary sizes */
    int vocabs[MAX_LIST];
    int n_vocabs;
} opts;

static void usage(FILE *o) {
    fprintf(o,
            "usage: picolm-bench MODEL [options]\n"
            "       picolm-bench --synth SHAPE:TYPE [--out FILE] [options]\n"
            "       picolm-bench --tune MODEL [--ram SIZE] [-c CTX] [-o FILE.ini] [--format md|json]\n"
            "Runs every requested backend in one process on the same model and reports, per backend and\n"
            "thread count: prefill tok/s, decode tok/s (mean +- stddev over reps, EOS ignored), the weight\n"
            "bandwidth decoding achieves (GB/s) and its fraction of the machine's read bandwidth (measured in\n"
            "this run with the same thread count), where decode time goes (weight matmuls, attention, the\n"
            "rest) with the weight GB/s inside the matmuls alone, and RssAnon during generation.\n"
            "options:\n"
            "  --backends LIST   comma-separated backend names (also --backend); 'reference' = no backend (format\n"
            "                    plugins' portable code); default: reference and every backend this CPU can run\n"
            "  -j, --threads LIST  comma-separated thread counts (default: all online CPUs)\n"
            "  -p N              prompt tokens (random ids, fixed seed) for prefill (default 128; 0 = none)\n"
            "  -n N              tokens to decode per rep (default 64; 0 = none)\n"
            "  -r REPS           repetitions (default 3)\n"
            "  -c, --context CTX context (default: the model's, at most 2048)\n"
            "  --batch N         prefill tokens per forward pass (default 64, as picolm's default.ini)\n"
            "  --ignore-eos      accepted for symmetry with picolm: the bench always ignores EOS\n"
            "  --format F        md (default), csv, json or svg (a grouped bar chart)\n"
            "  --tune            measure this machine's choices instead: every backend (and the model's lossless\n"
            "                    Q4_K_M_R16 and Q5_0_R16 repacks, where it has such rows) at the most threads, the\n"
            "                    far-behind dropped; 1 to the online CPUs\n"
            "                    threads; the prefill batch; kv_type f16 or q8_0 at the context; close calls run again.\n"
            "                    Prints the decision table (md or json) and writes a commented INI for picolm --config\n"
            "  -o FILE           --tune: write the INI to FILE (default stdout; the table then goes to stderr)\n"
            "  --ram SIZE        --tune: never choose a setting whose memory plan (picolm --fit) exceeds SIZE\n"
            "  --repacked FILE   --tune: the Q4_K_M_R16 copy to measure (made there if missing; default: a temp file)\n"
            "  --micro           kernel throughput instead: per weight format x backend, GB/s of weights\n"
            "                    through vec_dot, single thread, over a random matrix larger than L2; and per\n"
            "                    activation column through gemm with 1, 2, 4 and 8 columns (batched decode, prefill)\n"
            "  --micro-mib N     size of that matrix in MiB (default 8)\n"
            "  --micro-ms N      thread CPU time per measurement in ms; the fastest pass of 3 counts (default 100)\n"
            "  --formats LIST    --micro: only these weight formats (e.g. Q4_K,Q6_K,Q8_0)\n"
            "  --sampling        time the sampler chain alone instead (picolm's: temperature 0.8, top_p 0.9, dist,\n"
            "                    or --config FILE's [sampler]) per token over synthetic logits, peaked and flat,\n"
            "                    with the time of each stage and of the same chain with the direct path off\n"
            "                    (same tokens, checked); -n N x -r REPS draws of each (no model needed)\n"
            "  --vocab LIST      --sampling: vocabulary sizes (default 32000,151936)\n"
            "  --sampling MODEL  the same over MODEL's vocabulary (its pieces: what a grammar stage needs)\n"
            "  --json, --json-schema FILE|JSON  --sampling MODEL: put that grammar stage first (as picolm does);\n"
            "                    the draws write documents of at most 256 tokens, each begun anew at its end\n"
            "  --synth SHAPE:TYPE  synthesise a random-weight model first (shapes: ");
    for (const synth_shape *s = synth_shapes; s->name; s++) fprintf(o, "%s%s", s->name, s[1].name ? ", " : "");
    fprintf(o,
            ";\n"
            "                    TYPE: any weight format, e.g. Q8_0 (pure), or a llama.cpp mix: Q3_K_S/M/L,\n"
            "                    Q4_K_S/M, Q5_K_S/M, per-tensor types as picolm-quantize); reused if the file exists\n"
            "  --synth-exact     quantize every row (slow) instead of assembling rows from a pool of\n"
            "                    16384 quantized random blocks per type (same size and speed, values repeat)\n"
            "  --out FILE        where --synth writes (default $TMPDIR/picolm-synth-SHAPE-TYPE.gguf)\n"
            "  --bw-mib N        buffer of the bandwidth measurement in MiB (default 1024)\n"
            "  --plugin-dir DIR, --kv-type T (f16 or q8_0), --config FILE, -v: as in picolm (see picolm --help)\n"
            "  -h, --help        this text\n");
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (errno || e == s || *e || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */
/* ------------------------------------------------------------------------ */

static void mean_std(const double *x, int n, double *mean, double *std) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = n ? s / n : 0;
    for (int i = 0; i < n; i++) q += (x[i] - *mean) * (x[i] - *mean);
    *std = n > 1 ? sqrt(q / (n - 1)) : 0;
}

/* ------------------------------------------------------------------------ */
/* Read bandwidth: every thread streams its own slice of a buffer much        */
/* larger than the LLC; best of a few passes.                                 */
/* ------------------------------------------------------------------------ */

typedef struct bw_job {
    const uint64_t *buf;
    int64_t n_words;
    int pf;                     /* software prefetch on this pass */
    uint64_t (*read)(const uint64_t *p, int64_t i, int64_t end, int pf);
    uint64_t sums[256];
} bw_job;

/* The read loop must not be the bottleneck: vector adds, four per 64-byte
   line, 64-byte loads where the CPU has AVX-512.  Passes alternate with and
   without a software prefetch 4 KB ahead, and the best counts: on 2 MB
   pages the prefetch slows the loop, on 4 KB pages it speeds it up
   (docs/perf.md).  A scalar 8-word loop is compute-bound. */
typedef uint64_t bw_v2 __attribute__((vector_size(16)));
#define BW_PF_BYTES 4096
/* one read loop per vector width V (target: the instruction set it may use) */
#define BW_READ(name, V, target)                                                          \
    target static uint64_t name(const uint64_t *p, int64_t i, int64_t end, int pf) {      \
        V a0 = {0}, a1 = a0, a2 = a0, a3 = a0, v0, v1, v2, v3; /* named: in registers */  \
        const int64_t w = (int64_t)(sizeof(V) / 8);                                       \
        for (; i + 4 * w <= end; i += 4 * w) {                                            \
            if (pf) __builtin_prefetch((const char *)(p + i) + BW_PF_BYTES);             \
            memcpy(&v0, p + i, sizeof v0);                                                \
            memcpy(&v1, p + i + w, sizeof v1);                                            \
            memcpy(&v2, p + i + 2 * w, sizeof v2);                                        \
            memcpy(&v3, p + i + 3 * w, sizeof v3);                                        \
            a0 += v0, a1 += v1, a2 += v2, a3 += v3;                                       \
        }                                                                                 \
        a0 += a1 + a2 + a3;                                                               \
        uint64_t s = 0;                                                                   \
        for (int k = 0; k < (int)w; k++) s += a0[k];                                      \
        for (; i < end; i++) s += p[i];                                                   \
        return s;                                                                         \
    }

BW_READ(bw_read, bw_v2, )
#if defined(__x86_64__) && defined(__GNUC__)
typedef uint64_t bw_v8 __attribute__((vector_size(64)));
BW_READ(bw_read512, bw_v8, __attribute__((target("avx512f"))))
#endif

static void bw_worker(void *ctx, int64_t begin, int64_t end, int tid) {
    bw_job *j = ctx;
    j->sums[tid & 255] += j->read(j->buf, begin, end, j->pf);
}

/* GB/s (1e9 bytes) of the best of `passes` reads of a bytes-sized buffer
   on rt's threads. */
static double measure_bw(picolm_runtime *rt, size_t bytes, int passes) {
    /* on 2 MB pages where the kernel allows, as picolm maps the weights
       (gguf.c): with 4 KB pages the TLB misses cost the stream bandwidth */
    const size_t huge = (size_t)2 << 20;
    bytes = (bytes + huge - 1) / huge * huge;
    uint64_t *buf = aligned_alloc(huge, bytes);
    if (!buf) return 0;
#ifdef MADV_HUGEPAGE
    madvise(buf, bytes, MADV_HUGEPAGE);
#endif
    /* distinct data (xorshift), a precaution: pages of one constant could
       be merged by the host (KSM) and then be read from a few */
    uint64_t x = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < bytes / 8; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = x;
    }
    bw_job *j = calloc(1, sizeof *j);
    if (!j) { free(buf); return 0; }
    j->buf = buf;
    j->n_words = (int64_t)(bytes / 8);
    j->read = bw_read;
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512f")) j->read = bw_read512;
#endif
    double best = 0;
    for (int p = 0; p < 2 * passes; p++) {
        j->pf = p & 1;
        const double t0 = tool_now();
        picolm_runtime_parallel(rt, j->n_words, bw_worker, j);
        const double dt = tool_now() - t0;
        if (dt > 0 && bytes / dt / 1e9 > best) best = bytes / dt / 1e9;
    }
    volatile uint64_t sink = 0;
    for (int i = 0; i < 256; i++) sink += j->sums[i];
    (void)sink;
    free(j);
    free(buf);
    return best;
}

/* ------------------------------------------------------------------------ */
/* Results                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct result {
    char backend[64];
    int threads;
    int prefill_tokens, decode_tokens, reps, n_ctx, n_batch;
    double prefill_tps, prefill_tps_std, decode_tps, decode_tps_std;
    double gbps, mem_bw_gbps, roofline;
    double matmul_frac, attn_frac, matmul_gbps; /* decode: time in matmuls / attention, weight GB/s inside matmuls */
    double rss_anon_mb, rss_file_mb, kv_mb, ctx_mb;
} result;

/* --micro's activation column counts for gemm (decode of 1, 2, 4 server
   streams; 8 = a prefill tile) */
#define MICRO_NC 4
static const int micro_nc[MICRO_NC] = {1, 2, 4, 8};

typedef struct micro_result {
    char format[32], backend[64], from[64];
    double gbps;
    double gemm_gbps[MICRO_NC]; /* per column; 0: the kernel has no gemm */
} micro_result;

/* A grouped bar chart: groups on x, one bar per series, values in vals[g * ns + s]. */
/* dim (may be NULL): bars drawn faded (e.g. a backend without its own kernel for that format). */
static void svg_chart(FILE *o, const char *title, const char *ylabel, char (*groups)[64], int ng, char (*series)[64], int ns,
                      const double *vals, const unsigned char *dim, const char *note) {
    static const char *colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"};
    const int bar = 14, gap = 16, ml = 70, mr = 20, mt = 50, mb = 60, plot_h = 320;
    const int gw = ns * bar + gap, W = ml + mr + (ng > 0 ? ng : 1) * gw + 150, H = mt + plot_h + mb;
    double vmax = 0;
    for (int i = 0; i < ng * ns; i++)
        if (vals[i] > vmax) vmax = vals[i];
    /* a "nice" tick step (1, 2, 2.5 or 5 times a power of ten), at most 6 ticks */
    double step = 1;
    if (vmax > 0) {
        const double raw = vmax / 5, p10 = pow(10, floor(log10(raw))), m = raw / p10;
        step = (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p10;
    }
    const int nticks = vmax > 0 ? (int)ceil(vmax / step - 1e-9) : 1;
    const double ymax = step * nticks;
    fprintf(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    fprintf(o, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(o, "<text x=\"%d\" y=\"24\" font-size=\"16\" font-weight=\"bold\">%s</text>\n", ml, title);
    if (note) fprintf(o, "<text x=\"%d\" y=\"40\" font-size=\"11\" fill=\"#555\">%s</text>\n", ml, note);
    for (int t = 0; t <= nticks; t++) {
        const double y = mt + plot_h - plot_h * t / (double)nticks;
        fprintf(o, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", ml, y, ml + ng * gw, y);
        fprintf(o, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", ml - 6, y + 4, step * t);
    }
    fprintf(o, "<text transform=\"translate(18,%d) rotate(-90)\" text-anchor=\"middle\">%s</text>\n", mt + plot_h / 2, ylabel);
    for (int g = 0; g < ng; g++) {
        const int x0 = ml + g * gw + gap / 2;
        for (int s = 0; s < ns; s++) {
            const double v = vals[g * ns + s];
            const double h = v > 0 ? plot_h * v / ymax : 0;
            const int faded = dim && dim[g * ns + s];
            fprintf(o, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"%s><title>%s %s: %.3g%s</title></rect>\n",
                    x0 + s * bar, mt + plot_h - h, bar - 1, h, colors[s % 8], faded ? " fill-opacity=\"0.35\"" : "", groups[g],
                    series[s], v, faded ? " (reference fallback)" : "");
        }
        const int cx = x0 + ns * bar / 2;
        if ((int)strlen(groups[g]) * 7 < gw)
            fprintf(o, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", cx, mt + plot_h + 18, groups[g]);
        else
            fprintf(o, "<text transform=\"translate(%d,%d) rotate(-30)\" text-anchor=\"end\">%s</text>\n", cx, mt + plot_h + 14, groups[g]);
    }
    fprintf(o, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", ml, mt + plot_h, ml + ng * gw, mt + plot_h);
    fprintf(o, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", ml, mt, ml, mt + plot_h);
    const int lx = ml + ng * gw + 20;
    for (int s = 0; s < ns; s++) {
        fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", lx, mt + s * 20, colors[s % 8]);
        fprintf(o, "<text x=\"%d\" y=\"%d\">%s</text>\n", lx + 18, mt + s * 20 + 11, series[s]);
    }
    fprintf(o, "</svg>\n");
}

/* ------------------------------------------------------------------------ */
/* One (backend, threads) run                                                */
/* ------------------------------------------------------------------------ */

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* A runtime of the bench's plugins with one backend ("reference": none)
   on n threads: NULL with a message. */
static picolm_runtime *bench_runtime(const opts *o, const char *backend, int threads, char *err, size_t errlen) {
    const picolm_runtime_params p = {.plugin_dir = o->plugin_dir, .backend = backend, .threads = threads};
    return picolm_runtime_new(&p, NULL, err, errlen);
}

/* measure_bw on `threads` threads (a runtime made for it and gone after):
   -1 with a message when the threads cannot start. */
static double bench_bw(const opts *o, int threads, int passes, char *err, size_t errlen) {
    picolm_runtime *rt = bench_runtime(o, "reference", threads, err, errlen);
    const double bw = rt ? measure_bw(rt, (size_t)o->bw_mib << 20, passes) : -1;
    picolm_runtime_free(rt);
    return bw;
}

/* The model at path on rt (backend bname, named in the results). */
static int run_one(const opts *o, const char *path, picolm_runtime *rt, const char *bname, double bw, result *res, char *err,
                   size_t errlen) {
    picolm_model *m = NULL;
    picolm_context *c = NULL;
    int rc = -1;
    int32_t *prompt = NULL;
    double *pre = NULL, *dec = NULL;
    const picolm_model_params mp = {.path = path, .runtime = rt, .weights_only = 1};
    if (!(m = picolm_model_load(&mp, err, errlen))) goto done;
    const int train = picolm_n_ctx_train(m);
    int n_ctx = o->ctx > 0 ? o->ctx : (train < 2048 ? train : 2048);
    if (n_ctx > train) n_ctx = train;
    if (o->n_prompt + o->decode_at + o->n_gen > n_ctx) {
        snprintf(err, errlen, "-p %d + -n %d tokens exceed the context of %d (-c)", o->n_prompt, o->n_gen, n_ctx);
        goto done;
    }
    const int batch = o->batch > 0 ? o->batch : 64;
    const picolm_context_params cp = {.n_ctx = n_ctx, .n_batch = batch, .kv_type = o->kv_type, .no_sampler = 1};
    if (!(c = picolm_context_new(m, &cp, err, errlen))) goto done;
    picolm_seq *seq = picolm_context_seq(c);
    picolm_batch *b = picolm_context_batch(c);
    const int nv = picolm_n_vocab(m);
    prompt = malloc(((size_t)o->n_prompt + 1) * sizeof *prompt);
    pre = calloc((size_t)o->reps, sizeof *pre);
    dec = calloc((size_t)o->reps, sizeof *dec);
    if (!prompt || !pre || !dec) { snprintf(err, errlen, "out of memory"); goto done; }
    /* Random prompt ids, the same for every backend; skip the first 3 (specials). */
    uint64_t s = 0x1234567ull;
    for (int i = 0; i < o->n_prompt; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        prompt[i] = nv > 3 ? 3 + (int32_t)((s >> 33) % (uint64_t)(nv - 3)) : 0;
    }
    /* Warm-up: one token faults the mapping in and wakes the pool. */
    int32_t t0 = nv > 1 ? 1 : 0;
    if (picolm_eval(c, &t0, 1, err, errlen)) goto done;
    size_t peak_anon = 0, file_kb = 0;
    double dec_time = 0; /* all decode reps, wall clock; prof sums their phases */
    picolm_profile prof = {0};
    int n_dec = 0;       /* tokens those reps decoded */
    for (int r = 0; r < o->reps; r++) {
        picolm_seq_truncate(seq, 0); /* the cache is overwritten from position 0 */
        double a = tool_now();
        if (picolm_eval(c, prompt, o->n_prompt, err, errlen)) goto done;
        double e = tool_now();
        pre[r] = o->n_prompt ? o->n_prompt / (e - a) : 0;
        int32_t tok = o->n_prompt ? argmax(picolm_logits(c), nv) : t0;
        /* attention's time depends on the positions, not on the cached values: decode at a
           depth without paying its prefill */
        if (!o->n_prompt && picolm_seq_skip(seq, o->decode_at)) { snprintf(err, errlen, "no room to decode at %d", o->decode_at); goto done; }
        picolm_batch_profile(b, 1, NULL); /* decode only */
        a = tool_now();
        int nd = 0;
        for (int i = 0; i < o->n_gen; i++) {
            if (picolm_eval(c, &tok, 1, err, errlen)) goto done;
            tok = argmax(picolm_logits(c), nv); /* greedy, EOS or not */
            nd = i + 1;
            if (o->max_s > 0 && tool_now() - a > o->max_s) break; /* --tune: already far behind */
        }
        e = tool_now();
        dec_time += e - a;
        n_dec += nd;
        picolm_profile rep;
        picolm_batch_profile(b, 0, &rep);
        prof.matmul_s += rep.matmul_s, prof.attention_s += rep.attention_s;
        dec[r] = nd ? nd / (e - a) : 0;
        size_t anon = 0, fk = 0;
        generate_rss(&anon, &fk, NULL); /* during generation: the context is live */
        if (anon > peak_anon) peak_anon = anon;
        if (fk > file_kb) file_kb = fk;
    }
    memset(res, 0, sizeof *res);
    snprintf(res->backend, sizeof res->backend, "%s", bname);
    res->threads = picolm_runtime_threads(rt);
    res->prefill_tokens = o->n_prompt;
    res->decode_tokens = o->n_gen;
    res->reps = o->reps;
    res->n_ctx = n_ctx;
    res->n_batch = picolm_batch_size(b);
    mean_std(pre, o->reps, &res->prefill_tps, &res->prefill_tps_std);
    mean_std(dec, o->reps, &res->decode_tps, &res->decode_tps_std);
    /* weights read per decoded token: every matrix once (weight_bytes) plus one token_embd row */
    picolm_model_info mi;
    picolm_model_describe(m, &mi);
    const double bytes_tok = (double)mi.weight_bytes + (double)mi.embd_row_bytes;
    res->gbps = res->decode_tps * bytes_tok / 1e9;
    res->mem_bw_gbps = bw;
    res->roofline = bw > 0 ? res->gbps / bw : 0;
    if (dec_time > 0 && prof.matmul_s > 0) {
        res->matmul_frac = prof.matmul_s / dec_time;
        res->attn_frac = prof.attention_s / dec_time;
        res->matmul_gbps = (double)n_dec * bytes_tok / prof.matmul_s / 1e9;
    }
    res->rss_anon_mb = peak_anon / 1024.0;
    res->rss_file_mb = file_kb / 1024.0;
    picolm_memory mem;
    picolm_model_memory(m, n_ctx, batch, o->kv_type, 0, &mem);
    res->kv_mb = (double)mem.kv_per_token * n_ctx / (1 << 20);
    res->ctx_mb = mem.context / (double)(1 << 20);
    rc = 0;
done:
    picolm_context_free(c);
    picolm_model_free(m);
    free(prompt);
    free(pre);
    free(dec);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* --micro: vec_dot throughput per format x backend                           */
/* ------------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}
static float rng_normal(uint64_t *s) { /* Box-Muller; setup only */
    const double u = (rng_next(s) + 1.0) / 9007199254740993.0, v = rng_next(s) / 9007199254740992.0;
    return (float)(sqrt(-2 * log(u)) * cos(2 * M_PI * v));
}

#define MICRO_NC_MAX 8

/* One kernel over the --micro matrix: vec_dot per row (nc = 0), or gemm
   with nc activation columns in claims of 64 rows, as the 2-thread matmul
   scheduler (core/matmul.c) calls it. */
typedef struct micro_job {
    const picolm_type_info *ty;
    const uint8_t *mat;
    int64_t rows;
    size_t rb;
    int64_t g, cols;
    const uint8_t *act;
    size_t as;
    uint8_t *unp;   /* a layout on its base type's kernels: one group unpacked (brb bytes a row) */
    size_t brb;
    int nc;
} micro_job;

static float micro_pass(const micro_job *j) {
    const picolm_type_info *ty = j->ty;
    float acc = 0, v[16];
    if (!j->nc) {
        for (int64_t r = 0; r < j->rows; r += j->g) {
            if (j->unp) {
                ty->to_base(j->mat + (size_t)r * j->rb, j->unp, j->brb, j->cols);
                for (int64_t i = 0; i < j->g; i++) ty->vec_dot(j->cols, v + i, j->unp + (size_t)i * j->brb, j->act);
            } else ty->vec_dot(j->cols, v, j->mat + (size_t)r * j->rb, j->act);
            acc += v[0];
        }
        return acc;
    }
    float out[64 * MICRO_NC_MAX];
    const int64_t claim = j->unp ? j->g : 64;
    for (int64_t r = 0; r < j->rows; r += claim) {
        const int64_t nr = j->rows - r < claim ? j->rows - r : claim;
        const uint8_t *w = j->mat + (size_t)r * j->rb;
        if (j->unp) {
            ty->to_base(w, j->unp, j->brb, j->cols);
            ty->gemm(j->cols, nr, j->nc, j->unp, j->brb, j->act, j->as, out, (size_t)nr);
        } else ty->gemm(j->cols, nr, j->nc, w, j->rb, j->act, j->as, out, (size_t)nr);
        acc += out[0];
    }
    return acc;
}

/* GB/s of weight bytes per column of the fastest pass over the matrix in 3
   measurements of at least `secs` each: the fastest single pass, not the
   mean, so that a preemption or a noisy neighbour (VMs) costs nothing */
static double micro_best(const micro_job *j, double secs) {
    double best = 0;
    volatile float sink = 0;
    for (int pass = 0; pass < 3; pass++) {
        const double a = tool_thread_now();
        double t = a, el;
        do {
            sink += micro_pass(j);
            const double t1 = tool_thread_now();
            const double gb = (double)j->rows * j->rb * (j->nc ? j->nc : 1) / (t1 - t) / 1e9;
            if (t1 > t && gb > best) best = gb;
            t = t1;
            el = t1 - a;
        } while (el < secs);
    }
    (void)sink;
    return best;
}

static int run_micro(const opts *o, micro_result **out, int *n_out, char *err, size_t errlen) {
    const int64_t cols = 4096;
    int cap = 64, n = 0, rc = -1;
    micro_result *res = malloc((size_t)cap * sizeof *res);
    /* the reference code, then each backend's kernels (one thread: the kernels alone) */
    picolm_runtime *ref = NULL, *rts[MAX_LIST] = {NULL};
    /* x: up to a 16-row group; y: one activation row per gemm column */
    float *x = malloc((size_t)cols * 16 * sizeof(float)), *y = malloc((size_t)cols * MICRO_NC_MAX * sizeof(float));
    uint8_t *mat = NULL, *act = NULL, *unp = NULL; /* unp: one group unpacked (picolm_type_info.to_base) */
    if (!res || !x || !y) { snprintf(err, errlen, "out of memory"); goto done; }
    if (!(ref = bench_runtime(o, "reference", 1, err, errlen))) goto done;
    for (int b = 0; b < o->n_backends; b++)
        if (!(rts[b] = bench_runtime(o, o->backends[b], 1, err, errlen))) goto done;
    uint64_t s = 42;
    for (int64_t i = 0; i < cols * MICRO_NC_MAX; i++) y[i] = rng_normal(&s);
    const size_t want = (size_t)(o->micro_mib > 0 ? o->micro_mib : 8) << 20;
    picolm_type_info rti;
    for (int64_t t = -1; (t = picolm_runtime_next_type(ref, t)) >= 0;) {
        picolm_runtime_type(ref, (uint32_t)t, &rti);
        const picolm_format *f = rti.format;
        if (!(f->flags & PICOLM_FMT_WEIGHT) || !f->quantize_row || cols % f->block_size) continue;
        int wanted = !o->n_formats;
        for (int i = 0; i < o->n_formats; i++) wanted |= !strcasecmp(o->formats[i], f->name);
        if (!wanted) continue;
        const size_t rb = picolm_type_row_bytes(ref, (uint32_t)t, cols);
        const int64_t g = rti.row_group; /* grouped layouts: quantize_row/vec_dot take g rows */
        const int64_t rows = ((int64_t)((want + rb - 1) / rb) + 32 * g - 1) / (32 * g) * (32 * g);
        free(mat);
        mat = malloc((size_t)rows * rb);
        if (!mat) { snprintf(err, errlen, "out of memory"); goto done; }
        /* 32 distinct random rows, tiled: the content does not change the timing, the size does */
        const int distinct = (int)(32 * g);
        for (int r = 0; r < distinct; r += (int)g) {
            for (int64_t i = 0; i < cols * g; i++) x[i] = 0.02f * rng_normal(&s);
            f->quantize_row(x, mat + (size_t)r * rb, cols);
        }
        for (int64_t r = distinct; r < rows; r++) memcpy(mat + (size_t)r * rb, mat + (size_t)(r % distinct) * rb, rb);
        for (int b = 0; b < o->n_backends; b++) {
            picolm_type_info tyi;
            const picolm_type_info *ty = &tyi;
            if (picolm_runtime_type(rts[b], (uint32_t)t, &tyi) || !ty->vec_dot || !ty->act_quant) continue;
            /* MICRO_NC_MAX distinct activation rows (gemm columns), as bytes apart */
            const size_t as = picolm_type_row_bytes(rts[b], ty->act_type, cols);
            free(act);
            act = malloc(as * MICRO_NC_MAX + 64);
            if (!act) { snprintf(err, errlen, "out of memory"); goto done; }
            for (int c = 0; c < MICRO_NC_MAX; c++) ty->act_quant(y + c * cols, act + c * as, cols);
            /* a layout on its base type's kernels: time the unpacking too */
            const size_t brb = ty->to_base ? picolm_type_row_bytes(rts[b], ty->base_type, cols) : 0;
            free(unp);
            unp = brb ? malloc((size_t)g * brb) : NULL;
            if (brb && !unp) { snprintf(err, errlen, "out of memory"); goto done; }
            micro_job mj = {ty, mat, rows, rb, g, cols, act, as, unp, brb, 0};
            const double best = micro_best(&mj, o->micro_s);
            double gemm[MICRO_NC] = {0};
            for (int k = 0; k < MICRO_NC && ty->gemm; k++) {
                mj.nc = micro_nc[k];
                gemm[k] = micro_best(&mj, o->micro_s);
            }
            if (n == cap) {
                micro_result *nr = realloc(res, (size_t)(cap *= 2) * sizeof *res);
                if (!nr) { snprintf(err, errlen, "out of memory"); goto done; }
                res = nr;
            }
            micro_result *mr = &res[n++];
            snprintf(mr->format, sizeof mr->format, "%s", f->name);
            snprintf(mr->backend, sizeof mr->backend, "%s", o->backends[b]);
            picolm_type_info base;
            if (ty->to_base) picolm_runtime_type(rts[b], ty->base_type, &base);
            snprintf(mr->from, sizeof mr->from, "%s%s%s", ty->kernels_from ? ty->kernels_from : "reference", ty->to_base ? " via " : "",
                     ty->to_base ? base.format->name : "");
            mr->gbps = best;
            memcpy(mr->gemm_gbps, gemm, sizeof gemm);
            fprintf(stderr, "picolm-bench: micro %-7s %-10s %7.2f GB/s (kernel: %s)", mr->format, mr->backend, best, mr->from);
            for (int k = 0; k < MICRO_NC && ty->gemm; k++) fprintf(stderr, "%s%d: %.2f", k ? ", " : "; gemm per column, nc ", micro_nc[k], gemm[k]);
            fprintf(stderr, "\n");
        }
    }
    *out = res;
    *n_out = n;
    res = NULL;
    rc = 0;
done:
    free(res);
    picolm_runtime_free(ref);
    for (int b = 0; b < o->n_backends; b++) picolm_runtime_free(rts[b]);
    free(x);
    free(y);
    free(mat);
    free(act);
    free(unp);
    return rc;
}

static void print_micro(const opts *o, const micro_result *r, int n, FILE *f) {
    /* distinct formats in order of appearance */
    char fmts[64][64];
    int nf = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int k = 0; k < nf; k++) seen |= !strcmp(fmts[k], r[i].format);
        if (!seen && nf < 64) snprintf(fmts[nf++], 64, "%s", r[i].format);
    }
    if (o->format == OUT_JSON) {
        fprintf(f, "[\n");
        for (int i = 0; i < n; i++) {
            fprintf(f, "  {\"format\": \"%s\", \"backend\": \"%s\", \"kernel_from\": \"%s\", \"threads\": 1, \"gbps\": %.4f, \"gemm\": [",
                    r[i].format, r[i].backend, r[i].from, r[i].gbps);
            for (int k = 0; k < MICRO_NC && r[i].gemm_gbps[0] > 0; k++)
                fprintf(f, "%s{\"nc\": %d, \"gbps_per_col\": %.4f}", k ? ", " : "", micro_nc[k], r[i].gemm_gbps[k]);
            fprintf(f, "]}%s\n", i + 1 < n ? "," : "");
        }
        fprintf(f, "]\n");
    } else if (o->format == OUT_CSV) {
        fprintf(f, "format,backend,kernel_from,threads,gbps");
        for (int k = 0; k < MICRO_NC; k++) fprintf(f, ",gemm%d_gbps_per_col", micro_nc[k]);
        fprintf(f, "\n");
        for (int i = 0; i < n; i++) {
            fprintf(f, "%s,%s,%s,1,%.4f", r[i].format, r[i].backend, r[i].from, r[i].gbps);
            for (int k = 0; k < MICRO_NC; k++) {
                if (r[i].gemm_gbps[0] > 0) fprintf(f, ",%.4f", r[i].gemm_gbps[k]);
                else fprintf(f, ",");
            }
            fprintf(f, "\n");
        }
    } else if (o->format == OUT_SVG) {
        char (*series)[64] = calloc((size_t)o->n_backends, 64);
        double *v = calloc((size_t)nf * (size_t)o->n_backends + 1, sizeof *v);
        unsigned char *dim = calloc((size_t)nf * (size_t)o->n_backends + 1, 1);
        if (!series || !v || !dim) { free(series); free(v); free(dim); return; }
        for (int b = 0; b < o->n_backends; b++) snprintf(series[b], 64, "%s", o->backends[b]);
        for (int i = 0; i < n; i++)
            for (int g = 0; g < nf; g++)
                for (int b = 0; b < o->n_backends; b++)
                    if (!strcmp(fmts[g], r[i].format) && !strcmp(o->backends[b], r[i].backend)) {
                        v[g * o->n_backends + b] = r[i].gbps;
                        dim[g * o->n_backends + b] = strcmp(r[i].from, r[i].backend) && strcmp(r[i].backend, "reference");
                    }
        char note[320], cpu[96];
        picolm_cpu_name(cpu, sizeof cpu);
        snprintf(note, sizeof note, "%s; 1 thread; vec_dot over a %d MiB random matrix of 4096-wide rows; faded = reference fallback",
                 cpu, o->micro_mib);
        svg_chart(f, "picolm kernel throughput (GB/s of weights)", "GB/s", fmts, nf, series, o->n_backends, v, dim, note);
        free(dim);
        free(series);
        free(v);
    } else {
        fprintf(f, "| format |");
        for (int b = 0; b < o->n_backends; b++) fprintf(f, " %s |", o->backends[b]);
        fprintf(f, "\n|---|");
        for (int b = 0; b < o->n_backends; b++) fprintf(f, "---:|");
        fprintf(f, "\n");
        for (int g = 0; g < nf; g++) {
            fprintf(f, "| %s |", fmts[g]);
            for (int b = 0; b < o->n_backends; b++) {
                const micro_result *m = NULL;
                for (int i = 0; i < n; i++)
                    if (!strcmp(fmts[g], r[i].format) && !strcmp(o->backends[b], r[i].backend)) m = &r[i];
                if (!m) fprintf(f, " - |");
                else fprintf(f, " %.2f%s |", m->gbps, strcmp(m->from, m->backend) && strcmp(m->backend, "reference") ? "*" : "");
            }
            fprintf(f, "\n");
        }
        fprintf(f, "\nGB/s of weight bytes through vec_dot, 1 thread, %d MiB matrix. * = no kernel in that backend "
                   "(the format plugin's reference vec_dot ran).\n", o->micro_mib);
        /* gemm per column beside vec_dot: above 1.00x, a column costs less
           in a tile than alone */
        int any = 0;
        for (int i = 0; i < n; i++) any |= r[i].gemm_gbps[0] > 0;
        if (!any) return;
        fprintf(f, "\n| format | backend | vec_dot |");
        for (int k = 0; k < MICRO_NC; k++) fprintf(f, " gemm %d col%s |", micro_nc[k], micro_nc[k] > 1 ? "s" : "");
        fprintf(f, "\n|---|---|---:|");
        for (int k = 0; k < MICRO_NC; k++) fprintf(f, "---:|");
        fprintf(f, "\n");
        for (int i = 0; i < n; i++) {
            if (!(r[i].gemm_gbps[0] > 0)) continue;
            fprintf(f, "| %s | %s | %.2f |", r[i].format, r[i].backend, r[i].gbps);
            for (int k = 0; k < MICRO_NC; k++) fprintf(f, " %.2f (%.2fx) |", r[i].gemm_gbps[k], r[i].gemm_gbps[k] / r[i].gbps);
            fprintf(f, "\n");
        }
        fprintf(f, "\nGB/s of weight bytes per activation column through gemm (nc columns of the same matrix, claims "
                   "of 64 rows), and its ratio to vec_dot: above 1x a column costs less in the tile than alone.\n");
    }
}

/* ------------------------------------------------------------------------ */
/* Output of the main bench                                                  */
/* ------------------------------------------------------------------------ */

/* A JSON string literal of s (quotes, backslashes and control bytes escaped). */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void print_results(const opts *o, const char *path, const result *r, int n, FILE *f, const char *model_desc) {
    if (o->format == OUT_JSON) {
        fprintf(f, "[\n");
        for (int i = 0; i < n; i++) {
            const result *x = &r[i];
            fprintf(f, "  {\"model\": ");
            json_str(f, path);
            fprintf(f,
                    ", \"backend\": \"%s\", \"threads\": %d, \"n_ctx\": %d, \"n_batch\": %d, \"reps\": %d, "
                    "\"prefill_tokens\": %d, \"prefill_tps\": %.6g, \"prefill_tps_std\": %.6g, "
                    "\"decode_tokens\": %d, \"decode_tps\": %.6g, \"decode_tps_std\": %.6g, "
                    "\"gbps\": %.6g, \"mem_bw_gbps\": %.6g, \"roofline_fraction\": %.6g, "
                    "\"decode_matmul_fraction\": %.6g, \"decode_attention_fraction\": %.6g, \"matmul_gbps\": %.6g, "
                    "\"peak_rss_anon_mb\": %.6g, \"rss_file_mb\": %.6g, \"kv_mb\": %.6g, \"ctx_buffers_mb\": %.6g}%s\n",
                    x->backend, x->threads, x->n_ctx, x->n_batch, x->reps, x->prefill_tokens, x->prefill_tps,
                    x->prefill_tps_std, x->decode_tokens, x->decode_tps, x->decode_tps_std, x->gbps, x->mem_bw_gbps, x->roofline,
                    x->matmul_frac, x->attn_frac, x->matmul_gbps, x->rss_anon_mb, x->rss_file_mb, x->kv_mb, x->ctx_mb, i + 1 < n ? "," : "");
        }
        fprintf(f, "]\n");
    } else if (o->format == OUT_CSV) {
        fprintf(f, "backend,threads,n_ctx,n_batch,reps,prefill_tokens,prefill_tps,prefill_tps_std,decode_tokens,decode_tps,"
                   "decode_tps_std,gbps,mem_bw_gbps,roofline_fraction,decode_matmul_fraction,decode_attention_fraction,matmul_gbps,"
                   "peak_rss_anon_mb,rss_file_mb,kv_mb,ctx_buffers_mb\n");
        for (int i = 0; i < n; i++) {
            const result *x = &r[i];
            fprintf(f, "%s,%d,%d,%d,%d,%d,%.3f,%.3f,%d,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%.4f,%.3f,%.2f,%.2f,%.2f,%.2f\n", x->backend,
                    x->threads, x->n_ctx, x->n_batch, x->reps, x->prefill_tokens, x->prefill_tps, x->prefill_tps_std, x->decode_tokens,
                    x->decode_tps, x->decode_tps_std, x->gbps, x->mem_bw_gbps, x->roofline, x->matmul_frac, x->attn_frac,
                    x->matmul_gbps, x->rss_anon_mb, x->rss_file_mb,
                    x->kv_mb, x->ctx_mb);
        }
    } else if (o->format == OUT_SVG) {
        char(*groups)[64] = calloc((size_t)o->n_backends, 64);
        char(*series)[64] = calloc((size_t)o->n_threads, 64);
        double *v = calloc((size_t)o->n_backends * (size_t)o->n_threads + 1, sizeof *v);
        if (!groups || !series || !v) { free(groups); free(series); free(v); return; }
        for (int b = 0; b < o->n_backends; b++) snprintf(groups[b], 64, "%s", o->backends[b]);
        for (int t = 0; t < o->n_threads; t++) snprintf(series[t], 64, "%d thread%s", o->threads[t], o->threads[t] == 1 ? "" : "s");
        for (int i = 0; i < n; i++)
            for (int b = 0; b < o->n_backends; b++)
                for (int t = 0; t < o->n_threads; t++)
                    if (!strcmp(r[i].backend, o->backends[b]) && r[i].threads == o->threads[t]) v[b * o->n_threads + t] = r[i].decode_tps;
        svg_chart(f, "picolm decode speed (tok/s)", "tok/s", groups, o->n_backends, series, o->n_threads, v, NULL, model_desc);
        free(groups);
        free(series);
        free(v);
    } else {
        fprintf(f, "model: %s\n%s\n\n", path, model_desc);
        fprintf(f, "| backend | threads | prefill tok/s | decode tok/s | GB/s | mem GB/s | roofline | matmul GB/s | "
                   "matmul / attn / other | RssAnon MB | KV MB |\n");
        fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (int i = 0; i < n; i++) {
            const result *x = &r[i];
            fprintf(f, "| %s | %d | %.1f ± %.1f | %.2f ± %.2f | %.2f | %.2f | %.0f%% | %.2f | %.0f / %.0f / %.0f%% | %.1f | %.1f |\n",
                    x->backend, x->threads, x->prefill_tps, x->prefill_tps_std, x->decode_tps, x->decode_tps_std, x->gbps,
                    x->mem_bw_gbps, 100 * x->roofline, x->matmul_gbps, 100 * x->matmul_frac, 100 * x->attn_frac,
                    100 * (1 - x->matmul_frac - x->attn_frac), x->rss_anon_mb, x->kv_mb);
        }
        if (n)
            fprintf(f, "\n-p %d (batch %d) -n %d -r %d, context %d. GB/s = weight bytes read per decoded token x tok/s; "
                       "mem GB/s = best streaming read of a %d MiB buffer with the same threads, this run; "
                       "roofline = GB/s / mem GB/s. matmul GB/s = the same bytes over the decode time spent in the "
                       "weight matmuls; matmul / attn / other = where decode time goes. RssAnon sampled during generation.\n",
                    r[0].prefill_tokens, r[0].n_batch, r[0].decode_tokens, r[0].reps, r[0].n_ctx, o->bw_mib);
    }
}

/* ------------------------------------------------------------------------ */
/* --tune: measure the choices on this machine, write the INI                */
/* ------------------------------------------------------------------------ */

/* One measured (or refused) setting: a row of the decision table. */
typedef struct tune_row {
    const char *stage;   /* backend, threads, batch, kv_type */
    int layout;          /* index into tuner.paths: 0 = the model file as given, then its repacked copies */
    char backend[64];
    int threads, batch, kv, reps, measured;
    double prefill, decode, resident_mb;
    const char *verdict; /* "", chosen, runner-up, pruned, does not fit */
} tune_row;

typedef struct tuner {
    const opts *o;
    const char *paths[3];
    int kind[3];          /* each path's entry of tune_layout_name */
    int n_layouts, n_ctx;
    const picolm_model *m; /* the model as given (reference code): the memory plan */
    double ram;           /* bytes; 0 = no budget */
    tune_row *rows;
    int n, cap;
    int done, planned;    /* runs, for the estimate of the time left */
    double max_s;         /* decode time cap of the backend stage (0 = none) */
    int decode_at;        /* the KV stage decodes from this position */
    double t0;
} tuner;

/* the file as given, then the repacked layouts --tune tries (picolm-quantize
   targets): Q4_K_M_R16 where the file has Q4_K rows, Q5_0_R16 where it has
   Q5_0 matrices of whole row groups (Qwen2.5's fallback rows; on AVX2 that
   copy alone can beat Q4_K_M_R16, whose K-quant R16 tiles are AVX-512's) */
enum { TUNE_FILE, TUNE_Q4_K_M_R16, TUNE_Q5_0_R16 };
static const char *const tune_layout_name[3] = {"file", "Q4_K_M_R16", "Q5_0_R16"};
static const char *tune_lname(const tuner *t, int layout) { return tune_layout_name[t->kind[layout]]; }
#define TUNE_PRUNE 0.80   /* after the short run, a backend below 80% of the best decode is dropped */
/* settings this close to the best are measured again before deciding: the
   8-16 token decode runs are noisy (on a loaded 2-vCPU host 1 and 2 threads
   swapped places between runs 11% apart), the 128-token prefills less so */
#define TUNE_CLOSE_DECODE 0.85
#define TUNE_CLOSE_PREFILL 0.95
#define TUNE_KV_GAIN 1.05 /* q8_0 (lossy) only when it decodes 5% faster, or f16 does not fit */

/* Prefill and decode tok/s of one setting (reps runs of run_one). */
static int tune_run(tuner *t, int layout, const char *backend, int threads, int batch, int kv, int n_prompt, int n_gen,
                    int reps, double *prefill, double *decode, char *err, size_t errlen) {
    opts o = *t->o;
    o.n_prompt = n_prompt, o.n_gen = n_gen, o.reps = reps, o.batch = batch, o.kv_type = kv, o.ctx = t->n_ctx;
    o.decode_at = n_prompt ? 0 : t->decode_at;
    o.max_s = t->max_s;
    picolm_runtime *rt = bench_runtime(&o, backend, threads, err, errlen);
    if (!rt) return -1;
    result r;
    const int rc = run_one(&o, t->paths[layout], rt, backend, 0, &r, err, errlen);
    picolm_runtime_free(rt);
    if (rc) return -1;
    *prefill = r.prefill_tps, *decode = r.decode_tps;
    t->done++;
    const double el = tool_now() - t->t0, left = t->planned > t->done ? el / t->done * (t->planned - t->done) : 0;
    fprintf(stderr, "picolm-bench: tune [%d/%d] %-10s %-9s %2d thr, batch %3d, kv %-4s: %s %8.2f tok/s | %.0f s, about %.0f s left\n",
            t->done, t->planned > t->done ? t->planned : t->done, tune_lname(t, layout), backend, threads, batch,
            cli_kv_type_name(kv), n_prompt ? "prefill" : "decode ", n_prompt ? *prefill : *decode, el, left);
    return 0;
}

/* Add a row; measure it unless its memory plan does not fit the budget. */
static int tune_add(tuner *t, const char *stage, int layout, const char *backend, int threads, int batch, int kv, int n_prompt,
                    int n_gen, char *err, size_t errlen) {
    if (t->n == t->cap) {
        tune_row *nr = realloc(t->rows, (size_t)(t->cap = t->cap ? 2 * t->cap : 32) * sizeof *nr);
        if (!nr) return tool_fail(err, errlen, "out of memory");
        t->rows = nr;
    }
    tune_row *r = &t->rows[t->n];
    memset(r, 0, sizeof *r);
    r->stage = stage, r->layout = layout, r->threads = threads, r->batch = batch, r->kv = kv, r->verdict = "";
    snprintf(r->backend, sizeof r->backend, "%s", backend);
    r->resident_mb = generate_resident_bytes(t->m, t->n_ctx, kv, batch, threads) / (1 << 20);
    t->n++;
    if (t->ram > 0 && r->resident_mb * (1 << 20) > t->ram) {
        r->verdict = "does not fit";
        t->planned--;
        return 0;
    }
    r->reps = 1, r->measured = 1;
    return tune_run(t, layout, backend, threads, batch, kv, n_prompt, n_gen, 1, &t->rows[t->n - 1].prefill,
                    &t->rows[t->n - 1].decode, err, errlen);
}

static double tune_metric(const tune_row *r, int use_prefill) { return use_prefill ? r->prefill : r->decode; }

/* Among the measured, unpruned rows [a, b): the close calls (within
   TUNE_CLOSE_* of the best) are run twice more, in turn (paired: the same
   machine state for each), and keep the mean of their runs.  Marks and
   returns the best row; *runner_up gets the second (-1 if none). */
static int tune_decide(tuner *t, int a, int b, int use_prefill, int n_prompt, int n_gen, int *runner_up, char *err,
                       size_t errlen) {
    int best = -1;
    for (int i = a; i < b; i++)
        if (t->rows[i].measured && !*t->rows[i].verdict && (best < 0 || tune_metric(&t->rows[i], use_prefill) > tune_metric(&t->rows[best], use_prefill))) best = i;
    if (best < 0) return tool_fail(err, errlen, "no setting fits the RAM budget (see picolm --fit)");
    int close[8], nc = 0;
    const double band = use_prefill ? TUNE_CLOSE_PREFILL : TUNE_CLOSE_DECODE;
    for (int i = a; i < b && nc < 8; i++)
        if (t->rows[i].measured && !*t->rows[i].verdict && tune_metric(&t->rows[i], use_prefill) >= band * tune_metric(&t->rows[best], use_prefill))
            close[nc++] = i;
    if (nc > 1) {
        t->planned += 2 * nc;
        for (int round = 0; round < 2; round++)
            for (int k = 0; k < nc; k++) {
                tune_row *r = &t->rows[close[k]];
                double p, d;
                if (tune_run(t, r->layout, r->backend, r->threads, r->batch, r->kv, n_prompt, n_gen, 1, &p, &d, err, errlen)) return -1;
                r->prefill = (r->prefill * r->reps + p) / (r->reps + 1);
                r->decode = (r->decode * r->reps + d) / (r->reps + 1);
                r->reps++;
            }
        /* the best after the repeats, among all (a repeat may fall behind a row that was not close) */
        for (int i = a; i < b; i++)
            if (t->rows[i].measured && !*t->rows[i].verdict && tune_metric(&t->rows[i], use_prefill) > tune_metric(&t->rows[best], use_prefill)) best = i;
    }
    *runner_up = -1;
    for (int i = a; i < b; i++)
        if (i != best && t->rows[i].measured && !*t->rows[i].verdict &&
            (*runner_up < 0 || tune_metric(&t->rows[i], use_prefill) > tune_metric(&t->rows[*runner_up], use_prefill)))
            *runner_up = i;
    t->rows[best].verdict = "chosen";
    if (*runner_up >= 0) t->rows[*runner_up].verdict = "runner-up";
    return best;
}

/* A repacked copy: picolm-quantize (installed next to this binary) rearranges
   the rows of the target's base types losslessly. */
static int tune_repack(const char *model, const char *out, const char *target, const char *plugin_dir, char *err, size_t errlen) {
    char tool[4096];
    ssize_t len = readlink("/proc/self/exe", tool, sizeof tool - 32);
    if (len <= 0) return tool_fail(err, errlen, "cannot find this executable's directory");
    tool[len] = 0;
    char *slash = strrchr(tool, '/');
    snprintf(slash ? slash + 1 : tool, 32, "picolm-quantize");
    fprintf(stderr, "picolm-bench: tune: repacking %s -> %s (%s, lossless)\n", model, out, target);
    const pid_t pid = fork();
    if (pid < 0) return tool_fail(err, errlen, "fork: %s", strerror(errno));
    if (!pid) {
        const int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
        if (plugin_dir && *plugin_dir) execl(tool, tool, "--plugin-dir", plugin_dir, model, out, target, (char *)NULL);
        else execl(tool, tool, model, out, target, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
        return tool_fail(err, errlen, "%s %s %s %s failed (exit %d)", tool, model, out, target, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return 0;
}

static void tune_print_table(const tuner *t, FILE *f, int json, const char *cpu, int chosen[4]) {
    const tune_row *w = &t->rows[chosen[3]];
    if (json) {
        fprintf(f, "{\"model\": ");
        json_str(f, t->paths[0]);
        fprintf(f, ", \"cpu\": ");
        json_str(f, cpu);
        fprintf(f, ", \"online_cpus\": %d, \"n_ctx\": %d, \"ram_mb\": %.1f,\n \"chosen\": {\"layout\": \"%s\", \"backend\": \"%s\", "
                   "\"threads\": %d, \"batch\": %d, \"kv_type\": \"%s\", \"decode_tps\": %.6g},\n \"rows\": [\n",
                picolm_cpu_count(), t->n_ctx, t->ram / (1 << 20), tune_lname(t, w->layout), w->backend, w->threads, w->batch,
                cli_kv_type_name(w->kv), w->decode);
        for (int i = 0; i < t->n; i++) {
            const tune_row *r = &t->rows[i];
            fprintf(f, "  {\"stage\": \"%s\", \"layout\": \"%s\", \"backend\": \"%s\", \"threads\": %d, \"batch\": %d, \"kv_type\": \"%s\", "
                       "\"reps\": %d, \"prefill_tps\": %.6g, \"decode_tps\": %.6g, \"resident_mb\": %.3f, \"verdict\": \"%s\"}%s\n",
                    r->stage, tune_lname(t, r->layout), r->backend, r->threads, r->batch, cli_kv_type_name(r->kv), r->reps, r->prefill,
                    r->decode, r->resident_mb, r->verdict, i + 1 < t->n ? "," : "");
        }
        fprintf(f, " ]}\n");
        return;
    }
    fprintf(f, "model: %s\nCPU %s, %d online; context %d", t->paths[0], cpu, picolm_cpu_count(), t->n_ctx);
    if (t->ram > 0) fprintf(f, "; RAM budget %.0f MB", t->ram / (1 << 20));
    fprintf(f, "\n\n| stage | layout | backend | threads | batch | kv | runs | prefill tok/s | decode tok/s | resident MB | verdict |\n"
               "|---|---|---|---:|---:|---|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < t->n; i++) {
        const tune_row *r = &t->rows[i];
        fprintf(f, "| %s | %s | %s | %d | %d | %s | %d | ", r->stage, tune_lname(t, r->layout), r->backend, r->threads, r->batch,
                cli_kv_type_name(r->kv), r->reps);
        if (!r->measured) fprintf(f, "- | - |");
        else if (r->prefill > 0 && r->decode > 0) fprintf(f, "%.1f | %.2f |", r->prefill, r->decode);
        else if (r->prefill > 0) fprintf(f, "%.1f | - |", r->prefill);
        else fprintf(f, "- | %.2f |", r->decode);
        fprintf(f, " %.1f | %s |\n", r->resident_mb, r->verdict);
    }
    fprintf(f, "\nchosen: layout %s, backend %s, threads %d, batch %d, kv_type %s (decode %.2f tok/s)\n",
            tune_lname(t, w->layout), w->backend, w->threads, w->batch, cli_kv_type_name(w->kv), w->decode);
    fprintf(f, "\nbackend, threads: decode tok/s of short runs from position 0 (8 tokens; 16 for other thread counts; "
               "32 when a close call is run again: runs > 1 = the mean); batch: prefill of up to 128 tokens; kv_type: "
               "decode at position %d (half the context). Resident MB: the memory plan of picolm --fit, the mapped "
               "weights excluded. Pruned: below %.0f%% of the best decode.\n", t->n_ctx / 2, 100 * TUNE_PRUNE);
}

/* A value's comment: the measurement behind it and the runner-up. */
static void tune_because(FILE *f, const tuner *t, int c, int ru, int use_prefill, const char *what) {
    const tune_row *r = &t->rows[c];
    fprintf(f, "; %s: %s %.2f tok/s (%s, %d thr, batch %d, kv %s, %d run%s)", what, use_prefill ? "prefill" : "decode",
            tune_metric(r, use_prefill), r->backend, r->threads, r->batch, cli_kv_type_name(r->kv), r->reps, r->reps == 1 ? "" : "s");
    if (ru >= 0) {
        const tune_row *u = &t->rows[ru];
        fprintf(f, "; runner-up %s/%d thr/batch %d/%s: %.2f", u->backend, u->threads, u->batch, cli_kv_type_name(u->kv), tune_metric(u, use_prefill));
    }
    fprintf(f, "\n");
}

static void tune_write_ini(const tuner *t, FILE *f, const char *cpu, const char *ram_str, const int c[4], const int ru[4],
                           const double *best_l) {
    const tune_row *w = &t->rows[c[3]];
    char date[64];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    fprintf(f, "; picolm configuration tuned by picolm-bench --tune (picolm %s), %s\n", PICOLM_VERSION, date);
    fprintf(f, "; model: %s\n; CPU: %s, %d online CPUs; context %d", t->paths[0], cpu, picolm_cpu_count(), t->n_ctx);
    if (t->ram > 0) fprintf(f, "; RAM budget %s", ram_str);
    fprintf(f, "\n; Every value was measured on this machine with this model (tok/s, mean of the runs).\n"
               "; Use it with  picolm --config THIS.ini MODEL.gguf\n");
    for (int l = 1; l < t->n_layouts; l++)
        fprintf(f, "; layout: the %s repack of this model decodes %+.0f%% here (each at its best backend and threads)\n", tune_lname(t, l),
                best_l[0] > 0 ? 100 * (best_l[l] / best_l[0] - 1) : 0.0);
    if (t->n_layouts > 1) {
        if (w->layout)
            fprintf(f, "; layout chosen: %s; convert the model (lossless):\n;   picolm-quantize MODEL.gguf MODEL-%s.gguf %s\n", tune_lname(t, w->layout),
                    tune_lname(t, w->layout), tune_lname(t, w->layout));
        else fprintf(f, "; layout chosen: the file as it is\n");
    }
    fprintf(f, "\n[engine]\n");
    tune_because(f, t, c[0], ru[0], 0, "fastest backend");
    fprintf(f, "backend = %s\n", w->backend);
    tune_because(f, t, c[0], ru[3], 0, "fastest thread count (1 to the online CPUs)");
    fprintf(f, "threads = %d\n", w->threads);
    tune_because(f, t, c[1], ru[1], 1, "fastest prefill batch");
    fprintf(f, "batch = %d\n", w->batch);
    tune_because(f, t, c[2], ru[2], 0, w->kv == PICOLM_KV_F16 ? "f16 (exact; q8_0 only if 5% faster or f16 does not fit)"
                                                         : "q8_0 (5% faster or more, or f16 does not fit)");
    fprintf(f, "kv_type = %s\n", cli_kv_type_name(w->kv));
    fprintf(f, "; the context tuned for (-c); the memory plan (picolm --fit) needs %.1f MB resident\n", w->resident_mb);
    fprintf(f, "context = %d\n", t->n_ctx);
    if (t->ram > 0) fprintf(f, "; the RAM budget every chosen setting fits (--ram)\nram = %s\n", ram_str);
}

/* Every backend x layout at the most threads (short run, the far-behind
   pruned), then every thread count for the rest, then the prefill batch and
   the KV type at the winner.  rc as main's. */
static int run_tune(const opts *o, const char *path, const char *ram_str, const char *ini_path) {
    char err[2048], cpu[96], scratch[2][4096] = {"", ""}; /* the repacked copies made in TMPDIR */
    tuner t = {.o = o, .paths = {path}, .n_layouts = 1, .t0 = tool_now()};
    int rc = CLI_FAIL;
    uint64_t ram = 0;
    if (ram_str && config_parse_size(ram_str, &ram)) { fprintf(stderr, "picolm-bench: --ram: '%s' is not a size (e.g. 512M, 1G)\n", ram_str); return CLI_USAGE; }
    t.ram = (double)ram;
    picolm_cpu_name(cpu, sizeof cpu);
    picolm_runtime *ref = bench_runtime(o, "reference", 1, err, sizeof err);
    const picolm_model_params mp = {.path = path, .runtime = ref, .weights_only = 1};
    picolm_model *m = ref ? picolm_model_load(&mp, err, sizeof err) : NULL;
    if (!m) {
        fprintf(stderr, "picolm-bench: %s\n", err);
        picolm_runtime_free(ref);
        return CLI_FAIL;
    }
    t.m = m;
    t.n_ctx = o->ctx > 0 ? o->ctx : 2048; /* picolm's default context, capped at the model's */
    if (t.n_ctx > picolm_n_ctx_train(m)) t.n_ctx = picolm_n_ctx_train(m);
    /* short runs (decode decides backend and threads: no prompt, 8 tokens
       decoded, 16 for the thread counts, 32 for the close calls); prefill
       of 128 for the batch; 32 decoded halfway into the context for the KV type */
    const int sp = 0, sn = t.n_ctx >= 64 ? 8 : t.n_ctx >= 8 ? t.n_ctx / 8 : 1;
    FILE *ini = NULL;
    /* the repacked layouts this file has rows for (Q5_0_R16: whole groups of 16 rows) */
    int want[3] = {0, 0, 0};
    picolm_tensor g;
    for (int64_t i = 0; !picolm_gguf_tensor_at(picolm_model_gguf(m), i, &g); i++) {
        want[TUNE_Q4_K_M_R16] |= g.type == PICOLM_TYPE_Q4_K;
        want[TUNE_Q5_0_R16] |= g.type == PICOLM_TYPE_Q5_0 && g.n_dims == 2 && g.ne[1] % 16 == 0;
    }
    for (int k = TUNE_Q4_K_M_R16; k <= TUNE_Q5_0_R16; k++) {
        if (!want[k]) continue;
        char *sc = scratch[k - 1];
        const char *use = NULL; /* the copy to measure */
        struct stat st;
        /* --repacked names the Q4_K_M_R16 copy (made there if missing) */
        const char *given = k == TUNE_Q4_K_M_R16 ? o->repacked : NULL;
        if (given && !stat(given, &st)) use = given;
        else if (given) {
            if (!tune_repack(path, given, tune_layout_name[k], o->plugin_dir, err, sizeof err)) use = given;
        } else {
            const char *tmp = getenv("TMPDIR");
            snprintf(sc, sizeof scratch[0], "%s/picolm-tune-XXXXXX.gguf", tmp && *tmp ? tmp : "/tmp");
            tmp_guard_hold(1); /* Ctrl-C while tuning removes the scratch copies */
            const int fd = mkstemps(sc, 5);
            if (fd >= 0) close(fd), tmp_guard_add(sc);
            else sc[0] = 0;
            tmp_guard_hold(0);
            if (fd < 0) snprintf(err, sizeof err, "cannot create a file in %s", tmp && *tmp ? tmp : "/tmp");
            else if (!tune_repack(path, sc, tune_layout_name[k], o->plugin_dir, err, sizeof err)) use = sc;
        }
        if (use) t.kind[t.n_layouts] = k, t.paths[t.n_layouts++] = use;
        else fprintf(stderr, "picolm-bench: tune: no %s layout measured: %s\n", tune_layout_name[k], err);
    }
    t.t0 = tool_now(); /* the estimate of the time left counts the runs, not the repack */
    /* thread counts: the bench's list (main gives 1..online CPUs); the largest first */
    int tmax = 0;
    for (int i = 0; i < o->n_threads; i++) tmax = o->threads[i] > tmax ? o->threads[i] : tmax;
    /* base batch and KV type for the backend and thread stages: the largest
       batch up to 64 that fits the budget with f16, else with q8_0 */
    static const int batches[] = {32, 64, 128};
    const int n_batches = (int)(sizeof batches / sizeof batches[0]);
    int base_batch = 0, base_kv = PICOLM_KV_F16;
    for (int kv = PICOLM_KV_F16; kv <= PICOLM_KV_Q8_0 && !base_batch; kv++)
        for (int k = n_batches - 1; k >= 0 && !base_batch; k--) {
            const int b = batches[k] < t.n_ctx ? batches[k] : t.n_ctx;
            if (b <= 64 && (t.ram <= 0 || generate_resident_bytes(m, t.n_ctx, kv, b, tmax) <= t.ram)) base_batch = b, base_kv = kv;
        }
    if (!base_batch) {
        fprintf(stderr, "picolm-bench: tune: nothing fits --ram %s at context %d: the smallest plan (batch %d, kv q8_0) needs "
                "%.1f MB resident (see picolm --fit; or a smaller -c)\n", ram_str, t.n_ctx, batches[0] < t.n_ctx ? batches[0] : t.n_ctx,
                generate_resident_bytes(m, t.n_ctx, PICOLM_KV_Q8_0, batches[0] < t.n_ctx ? batches[0] : t.n_ctx, tmax) / (1 << 20));
        goto out;
    }
    t.planned = t.n_layouts * o->n_backends * o->n_threads + n_batches + 2;
    int c[4], ru[4];
    /* 1. backends (and layouts) at tmax threads, the highest score first: a
       run still decoding when the best would have finished twice over (the
       slow portable code on a big model) stops there, far behind */
    double top = 0, top_file = 0;
    for (int l = 0; l < t.n_layouts; l++) {
        for (int b = o->n_backends - 1; b >= 0; b--) {
            /* a repacked layout: only the backends not already far behind on the
               file (against the file's best: another layout's gain is no reason
               to skip this one) */
            const tune_row *r0 = l ? &t.rows[o->n_backends - 1 - b] : NULL;
            if (r0 && r0->measured && r0->decode < TUNE_PRUNE * top_file) { t.planned -= o->n_threads; continue; }
            t.max_s = top > 0 ? 2.0 * sn / top : 0;
            if (tune_add(&t, "backend", l, o->backends[b], tmax, base_batch, base_kv, sp, sn, err, sizeof err)) goto fail;
            const tune_row *r = &t.rows[t.n - 1];
            top = r->measured && r->decode > top ? r->decode : top;
        }
        if (l == 0) top_file = top;
    }
    t.max_s = 0;

    const int n1 = t.n;
    for (int i = 0; i < n1; i++)
        if (t.rows[i].measured && t.rows[i].decode < TUNE_PRUNE * top) {
            t.rows[i].verdict = "pruned";
            t.planned -= o->n_threads - 1;
        }
    /* 2. the other thread counts for what is left */
    for (int i = 0; i < n1; i++) {
        if (!t.rows[i].measured || *t.rows[i].verdict) continue;
        for (int k = 0; k < o->n_threads; k++)
            if (o->threads[k] != tmax &&
                tune_add(&t, "threads", t.rows[i].layout, t.rows[i].backend, o->threads[k], base_batch, base_kv, sp, 2 * sn, err, sizeof err))
                goto fail;
    }
    if ((c[0] = tune_decide(&t, 0, t.n, 0, sp, 4 * sn, &ru[0], err, sizeof err)) < 0) goto fail;
    const tune_row w = t.rows[c[0]];
    /* layout gain: each layout's best decode (its best backend and thread count) */
    double best_l[3] = {0, 0, 0};
    for (int i = 0; i < t.n; i++)
        if (t.rows[i].measured && t.rows[i].decode > best_l[t.rows[i].layout]) best_l[t.rows[i].layout] = t.rows[i].decode;
    /* the INI's runner-ups: the best other backend; the best other thread count of the winner */
    int ru_b = -1, ru_t = -1;
    for (int i = 0; i < t.n; i++) {
        const tune_row *r = &t.rows[i];
        if (!r->measured || i == c[0]) continue;
        if (strcmp(r->backend, w.backend) && (ru_b < 0 || r->decode > t.rows[ru_b].decode)) ru_b = i;
        if (!strcmp(r->backend, w.backend) && r->layout == w.layout && r->threads != w.threads && (ru_t < 0 || r->decode > t.rows[ru_t].decode)) ru_t = i;
    }
    /* 3. prefill batch at the winner (prefill only) */
    const int bp = t.n_ctx < 128 ? t.n_ctx : 128, b0 = t.n;
    for (int k = 0; k < n_batches; k++)
        if (batches[k] <= bp) {
            if (tune_add(&t, "batch", w.layout, w.backend, w.threads, batches[k], base_kv, bp, 0, err, sizeof err)) goto fail;
        } else t.planned--;
    if ((c[1] = tune_decide(&t, b0, t.n, 1, bp, 0, &ru[1], err, sizeof err)) < 0) goto fail;
    const int batch = t.rows[c[1]].batch;
    /* 4. KV type at the winner, decoding halfway into the context */
    const int kp = 0, k0 = t.n;
    t.decode_at = t.n_ctx / 2;
    for (int kv = PICOLM_KV_F16; kv <= PICOLM_KV_Q8_0; kv++)
        if (tune_add(&t, "kv_type", w.layout, w.backend, w.threads, batch, kv, kp, 4 * sn, err, sizeof err)) goto fail;
    if (tune_decide(&t, k0, t.n, 0, kp, 4 * sn, &ru[2], err, sizeof err) < 0) goto fail; /* repeats a close call */
    const tune_row *f16 = &t.rows[k0], *q8 = &t.rows[k0 + 1];
    c[2] = f16->measured && !(q8->measured && q8->decode >= TUNE_KV_GAIN * f16->decode) ? k0 : k0 + 1;
    ru[2] = c[2] == k0 ? k0 + 1 : k0;
    if (!t.rows[ru[2]].measured) ru[2] = -1;
    t.rows[c[2]].verdict = "chosen"; /* f16 preferred: the fastest is not always chosen */
    if (ru[2] >= 0) t.rows[ru[2]].verdict = "runner-up";
    c[3] = c[2]; /* the final setting: winner's backend, threads, layout; batch; KV type */
    ru[0] = ru_b, ru[3] = ru_t;
    tune_print_table(&t, ini_path ? stdout : stderr, o->format == OUT_JSON, cpu, c); /* stdout: the INI's when no -o */
    ini = ini_path ? fopen(ini_path, "w") : stdout;
    if (!ini) { fprintf(stderr, "picolm-bench: cannot write %s: %s\n", ini_path, strerror(errno)); goto out; }
    if (!ini_path) fprintf(ini, "\n");
    tune_write_ini(&t, ini, cpu, ram_str, c, ru, best_l);
    if (ini_path && fclose(ini)) { fprintf(stderr, "picolm-bench: writing %s: %s\n", ini_path, strerror(errno)); ini = NULL; goto out; }
    ini = NULL;
    fprintf(stderr, "picolm-bench: tune: done in %.0f s%s%s\n", tool_now() - t.t0, ini_path ? "; wrote " : "", ini_path ? ini_path : "");
    rc = CLI_OK;
    goto out;
fail:
    fprintf(stderr, "picolm-bench: tune: %s\n", err);
out:
    tmp_guard_hold(1);
    for (int k = 0; k < 2; k++)
        if (scratch[k][0]) unlink(scratch[k]);
    tmp_guard_set(NULL);
    tmp_guard_hold(0);
    picolm_model_free(m);
    picolm_runtime_free(ref);
    free(t.rows);
    return rc;
}

/* ------------------------------------------------------------------------ */

static int split_list(char *s, const char **out, int max) {
    int n = 0;
    for (char *save = NULL, *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (*t) {
            if (n == max) return -1;
            out[n++] = t;
        }
    return n;
}

/* ------------------------------------------------------------------------ */
/* --sampling: the sampler chain alone over synthetic logits                 */
/* ------------------------------------------------------------------------ */

/* Logits shaped like a language model's: a body of N(0, 2) over the whole
   vocabulary and 8 likely tokens near `lead`.  16: a peaked step (the
   nucleus is a few tokens); 6: a flat one (thousands). */
static void synth_logits(float *l, int n, float lead, uint64_t *s) {
    for (int i = 0; i < n; i += 2) { /* Box-Muller, two normals per pair of draws */
        double u[2];
        for (int k = 0; k < 2; k++) {
            *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
            u[k] = ((*s >> 11) + 0.5) * 0x1.0p-53;
        }
        const double r = sqrt(-2 * log(u[0]));
        l[i] = (float)(2 * r * cos(6.283185307179586 * u[1]));
        if (i + 1 < n) l[i + 1] = (float)(2 * r * sin(6.283185307179586 * u[1]));
    }
    for (int k = 0; k < 8; k++) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        l[*s % (uint64_t)n] = lead + (float)k * 0.25f;
    }
}

/* With a grammar stage (--json, --json-schema), the draws write documents
   of at most this many tokens, each ended by EOS or its budget. */
#define BENCH_DOC_TOKENS 256

/* model: the vocabulary is its tokenizer's (o->vocabs holds its size). */
static int run_sampling(const opts *o, picolm_runtime *rt, const picolm_config *cfg, const picolm_vocab *model, FILE *f,
                        char *err, size_t errlen) {
    static const char *const shape[2] = {"peaked", "flat"};
    const int grammar = cli_grammar(cfg) != NULL;
    int max_nv = 0, docs = 0, doc_left[2] = {BENCH_DOC_TOKENS, BENCH_DOC_TOKENS};
    for (int v = 0; v < o->n_vocabs; v++) max_nv = o->vocabs[v] > max_nv ? o->vocabs[v] : max_nv;
    float *l = malloc((size_t)max_nv * sizeof *l);
    const char **pc = calloc((size_t)max_nv, sizeof *pc);
    uint32_t *pl = calloc((size_t)max_nv, sizeof *pl);
    const int draws = o->n_gen * o->reps;
    int rc = -1;
    cli_sampler_spec *spec = calloc(1, sizeof *spec);
    if (!l || !pc || !pl || !spec) { snprintf(err, errlen, "out of memory"); goto done; }
    if (cli_sampler_spec_of(cfg, NULL, 0, spec, err, errlen)) goto done;
    if (draws <= 0) { snprintf(err, errlen, "--sampling: -n and -r must give at least one draw"); goto done; }
    if (o->format == OUT_CSV) fprintf(f, "vocab,shape,draws,ms_mean,ms_min,stage,stage_ms,ms_mean_direct_off\n");
    if (o->format == OUT_JSON) fprintf(f, "[\n");
    for (int v = 0; v < o->n_vocabs; v++) {
        const int nv = o->vocabs[v];
        const picolm_vocab vocab = model ? *model : (picolm_vocab){nv, -1, -1, pc, pl, NULL};
        /* s[0..1]: peaked, flat; s[2..3]: the same chains with the direct
           path off (every stage's apply() over the full list), drawn
           alternately first and second: an A/B in the same run, and a
           check that both draw the same tokens */
        picolm_sampler *s[4] = {NULL, NULL, NULL, NULL};
        for (int k = 0; k < 4; k++)
            if (!(s[k] = picolm_sampler_new_vocab(rt, &vocab, &spec->p, err, errlen))) goto free_s;
        double sum[4] = {0, 0, 0, 0}, best[2] = {INFINITY, INFINITY};
        uint64_t seed = 0x9e3779b97f4a7c15ull;
        for (int k = 0; k < 4; k++) picolm_sampler_timing(s[k], 1);
        picolm_sampler_direct(s[2], 0);
        picolm_sampler_direct(s[3], 0);
        for (int d = 0; d < 2 * draws; d++) { /* peaked and flat interleaved */
            const int k = d % 2;
            synth_logits(l, nv, k ? 6.0f : 16.0f, &seed);
            int32_t tok[2];
            for (int j = 0; j < 2; j++) {
                const int w = (j ^ (d / 2 % 2)) ? 2 + k : k, x = w == k ? 0 : 1;
                if (picolm_sampler_sample(s[w], l, grammar ? doc_left[k] : -1, &tok[x], err, errlen)) goto free_s;
                double t = -sum[w]; /* the counters' total less the earlier draws */
                for (int i = -1; i < picolm_sampler_n_stages(s[w]); i++) t += picolm_sampler_seconds(s[w], i);
                sum[w] += t;
                if (w == k && t < best[k]) best[k] = t;
            }
            if (tok[0] != tok[1]) {
                snprintf(err, errlen, "the direct path drew token %d, the full list %d (vocab %d, %s logits, draw %d)", (int)tok[0],
                         (int)tok[1], nv, shape[k], d / 2);
                goto free_s;
            }
            if (grammar && (tok[0] == vocab.eos_id || --doc_left[k] == 0)) { /* the document is complete: a new one */
                picolm_sampler_reset(s[k]);
                picolm_sampler_reset(s[2 + k]);
                doc_left[k] = BENCH_DOC_TOKENS;
                docs++;
                continue;
            }
            picolm_sampler_accept(s[k], tok[0]);
            picolm_sampler_accept(s[2 + k], tok[0]);
        }
        char desc[512];
        picolm_sampler_describe(s[0], desc, sizeof desc);
        if (o->format == OUT_MD) {
            fprintf(f, "%s| vocab | logits | ms/token mean | min | direct off: mean | of which, mean: candidates",
                    v ? "\n" : "");
            for (int i = 0; i < picolm_sampler_n_stages(s[0]); i++) fprintf(f, ", %s", picolm_sampler_stage(s[0], i));
            fprintf(f, " |\n|---:|---|---:|---:|---:|---|\n");
        }
        for (int k = 0; k < 2; k++) {
            const double mean = 1e3 * sum[k] / draws, off = 1e3 * sum[2 + k] / draws;
            if (o->format == OUT_MD) {
                fprintf(f, "| %d | %s | %.3f | %.3f | %.3f | %.3f", nv, shape[k], mean, 1e3 * best[k], off,
                        1e3 * picolm_sampler_seconds(s[k], -1) / draws);
                for (int i = 0; i < picolm_sampler_n_stages(s[k]); i++) fprintf(f, ", %.3f", 1e3 * picolm_sampler_seconds(s[k], i) / draws);
                fprintf(f, " |\n");
            } else if (o->format == OUT_CSV) {
                for (int i = -1; i < picolm_sampler_n_stages(s[k]); i++)
                    fprintf(f, "%d,%s,%d,%.6g,%.6g,%s,%.6g,%.6g\n", nv, shape[k], draws, mean, 1e3 * best[k],
                            i < 0 ? "candidates" : picolm_sampler_stage(s[k], i), 1e3 * picolm_sampler_seconds(s[k], i) / draws, off);
            } else {
                fprintf(f, "  {\"vocab\": %d, \"logits\": \"%s\", \"draws\": %d, \"ms_mean\": %.6g, \"ms_min\": %.6g, \"ms_mean_direct_off\": %.6g, "
                           "\"chain\": \"%s\", \"stages_ms\": {\"candidates\": %.6g", nv, shape[k], draws, mean, 1e3 * best[k], off, desc,
                        1e3 * picolm_sampler_seconds(s[k], -1) / draws);
                for (int i = 0; i < picolm_sampler_n_stages(s[k]); i++)
                    fprintf(f, ", \"%s\": %.6g", picolm_sampler_stage(s[k], i), 1e3 * picolm_sampler_seconds(s[k], i) / draws);
                fprintf(f, "}}%s\n", v + 1 < o->n_vocabs || !k ? "," : "");
            }
        }
        if (o->format == OUT_MD)
            fprintf(f, "\nchain: %s; %d draws each, CPU time of the sampling thread; peaked = 8 tokens near 16 over a body "
                       "of N(0, 2) logits, flat = the same near 6 (a nucleus of thousands); direct off = every stage over the "
                       "full candidate list (the same tokens, checked).\n", desc, draws);
        if (o->format == OUT_MD && grammar)
            fprintf(f, "Documents of at most %d tokens each, %d of them completed (EOS or budget) and a new one begun.\n",
                    BENCH_DOC_TOKENS, docs);
        for (int k = 0; k < 4; k++) picolm_sampler_free(s[k]);
        continue;
    free_s:
        for (int k = 0; k < 4; k++) picolm_sampler_free(s[k]);
        goto done;
    }
    if (o->format == OUT_JSON) fprintf(f, "]\n");
    rc = 0;
done:
    if (spec) cli_sampler_spec_free(spec);
    free(spec);
    free(l);
    free(pc);
    free(pl);
    return rc;
}


typedef struct bk {
    const char *name;
    int score;
} bk;
static int cmp_bk(const void *a, const void *b) {
    const bk *x = a, *y = b;
    return x->score != y->score ? (x->score < y->score ? -1 : 1) : strcmp(x->name, y->name);
}

int main(int argc, char **argv) {
    picolm_log_set(picolm_log_stderr, NULL); /* the engine and plugins note things on stderr */
    opts o = {.n_prompt = 128, .n_gen = 64, .reps = 3, .format = OUT_MD, .kv_type = PICOLM_KV_F16, .batch = 64, .bw_mib = 1024,
              .micro_mib = 8, .micro_s = 0.1};
    char *blist = NULL, *tlist = NULL, *flist = NULL, *vlist = NULL;
    int micro_ms = 100;
    picolm_config cfg; /* the options every tool shares (--plugin-dir, --kv-type, --config, -v) */
    char cerr[1024];
    if (config_tool_init(&cfg, argc, argv, cerr, sizeof cerr)) { fprintf(stderr, "picolm-bench: %s\n", cerr); return 2; }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return cli_close_stdout("picolm-bench"); }
        /* lists of threads and backends are the bench's own; the rest is shared */
        const int own = !strcmp(a, "-j") || !strcmp(a, "--threads") || !strcmp(a, "-t") || !strcmp(a, "--backend") ||
                        !strcmp(a, "-c") || !strcmp(a, "--context");
        const int common = own ? 0 : config_common_arg(&cfg, argc, argv, &i, cerr, sizeof cerr);
        if (common < 0) return cli_usage_error("picolm-bench", cerr);
        if (common) continue;
        if (!strcmp(a, "--micro")) { o.micro = 1; continue; }
        if (!strcmp(a, "--sampling")) { o.sampling = 1; continue; }
        if (!strcmp(a, "--json")) { cfg.json_mode = 1; continue; }
        if (!strcmp(a, "--tune")) { o.tune = 1; continue; }
        if (!strcmp(a, "--ignore-eos")) continue;
        if (!strcmp(a, "--synth-exact")) { o.synth_exact = 1; continue; }
        if (a[0] == '-' && a[1]) {
            if (i + 1 >= argc) { fprintf(stderr, "picolm-bench: %s needs a value\n", a); return 2; }
            const char *v = argv[++i];
            int bad = 0;
            if (!strcmp(a, "--backends") || !strcmp(a, "--backend")) blist = strdup(v);
            else if (!strcmp(a, "--threads") || !strcmp(a, "-j") || !strcmp(a, "-t")) tlist = strdup(v);
            else if (!strcmp(a, "-p")) bad = parse_int(v, 0, 1 << 20, &o.n_prompt);
            else if (!strcmp(a, "-n")) bad = parse_int(v, 0, 1 << 20, &o.n_gen);
            else if (!strcmp(a, "-r")) bad = parse_int(v, 1, 1000, &o.reps);
            else if (!strcmp(a, "-c") || !strcmp(a, "--context")) bad = parse_int(v, 1, 1 << 22, &o.ctx);
            else if (!strcmp(a, "--batch")) bad = parse_int(v, 1, 65536, &o.batch);
            else if (!strcmp(a, "--bw-mib")) bad = parse_int(v, 16, 1 << 20, &o.bw_mib);
            else if (!strcmp(a, "--micro-mib")) bad = parse_int(v, 1, 1 << 16, &o.micro_mib);
            else if (!strcmp(a, "--micro-ms")) bad = parse_int(v, 1, 100000, &micro_ms);
            else if (!strcmp(a, "--formats")) flist = strdup(v);
            else if (!strcmp(a, "--vocab")) vlist = (char *)v; /* parsed in place (argv is writable) */
            else if (!strcmp(a, "--json-schema")) bad = snprintf(cfg.json_schema, sizeof cfg.json_schema, "%s", v) >= (int)sizeof cfg.json_schema;
            else if (!strcmp(a, "--synth")) o.synth = v;
            else if (!strcmp(a, "--out")) o.out = v;
            else if (!strcmp(a, "-o")) o.ini_out = v;
            else if (!strcmp(a, "--ram")) o.ram = v;
            else if (!strcmp(a, "--repacked")) o.repacked = v;
            else if (!strcmp(a, "--format")) {
                if (!strcmp(v, "md")) o.format = OUT_MD;
                else if (!strcmp(v, "csv")) o.format = OUT_CSV;
                else if (!strcmp(v, "json")) o.format = OUT_JSON;
                else if (!strcmp(v, "svg")) o.format = OUT_SVG;
                else { fprintf(stderr, "picolm-bench: --format must be md, csv, json or svg\n"); return 2; }
            } else { fprintf(stderr, "picolm-bench: unknown option %s (see --help)\n", a); return 2; }
            if (bad) { fprintf(stderr, "picolm-bench: bad value '%s' for %s\n", v, a); return 2; }
            continue;
        }
        if (o.model) { fprintf(stderr, "picolm-bench: more than one model given\n"); return 2; }
        o.model = a;
    }
    if (vlist && !o.sampling) { fprintf(stderr, "picolm-bench: --vocab goes with --sampling\n"); return 2; }
    if (!o.model && !o.synth && !o.micro && !o.sampling) { usage(stderr); return 2; }
    if (!o.sampling && cli_grammar(&cfg)) { fprintf(stderr, "picolm-bench: --json and --json-schema go with --sampling\n"); return 2; }
    o.plugin_dir = cfg.plugin_dir;
    o.kv_type = cfg.kv_type;
    /* an INI's [engine] threads, backend and context, unless the flags say otherwise */
    char ini_val[64];
    if (!tlist && cfg.threads > 0 && config_is_set(&cfg, "engine", "threads")) {
        snprintf(ini_val, sizeof ini_val, "%d", cfg.threads);
        tlist = strdup(ini_val);
    }
    if (!blist && strcmp(cfg.backend, "auto")) blist = strdup(cfg.backend);
    if (!o.ctx && config_is_set(&cfg, "engine", "context")) o.ctx = cfg.context;
    o.micro_s = micro_ms / 1000.0;
    if (flist && (o.n_formats = split_list(flist, o.formats, MAX_LIST)) <= 0) {
        fprintf(stderr, "picolm-bench: --formats: bad list\n");
        return 2;
    }
    if (o.sampling) {
        const char *vv[MAX_LIST];
        o.n_vocabs = vlist ? split_list(vlist, vv, MAX_LIST) : 0;
        if (vlist && o.n_vocabs <= 0) { fprintf(stderr, "picolm-bench: --vocab: bad list\n"); return 2; }
        for (int i = 0; i < o.n_vocabs; i++)
            if (parse_int(vv[i], 2, 1 << 24, &o.vocabs[i])) { fprintf(stderr, "picolm-bench: --vocab: bad size '%s'\n", vv[i]); return 2; }
        if (!vlist) o.vocabs[o.n_vocabs++] = 32000, o.vocabs[o.n_vocabs++] = 151936;
        if (o.format == OUT_SVG) { fprintf(stderr, "picolm-bench: --sampling prints md, csv or json\n"); return 2; }
        if (o.synth || o.micro || o.tune) { fprintf(stderr, "picolm-bench: --sampling takes no --synth, --micro or --tune\n"); return 2; }
        if (o.model && vlist) { fprintf(stderr, "picolm-bench: --sampling MODEL takes the model's vocabulary: no --vocab\n"); return 2; }
        if (!o.model && cli_grammar(&cfg)) { fprintf(stderr, "picolm-bench: --sampling with --json or --json-schema needs a MODEL (its vocabulary)\n"); return 2; }
    }
    if (o.model && o.synth) { fprintf(stderr, "picolm-bench: give a MODEL or --synth, not both\n"); return 2; }
    if (o.synth) { /* an unknown shape is a usage error, found before any work */
        synth_shape sh;
        char tn[64], msg[512];
        if (synth_parse(o.synth, &sh, tn, sizeof tn, msg, sizeof msg)) { fprintf(stderr, "picolm-bench: --synth: %s\n", msg); return 2; }
    }
    if (!o.tune && (o.ini_out || o.ram || o.repacked)) { fprintf(stderr, "picolm-bench: -o, --ram and --repacked go with --tune\n"); return 2; }

#ifdef __GLIBC__
    /* Freed context buffers go straight back to the OS, so each backend's
       RssAnon is its own, not the high-water mark of an earlier one. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_TRIM_THRESHOLD, 256 * 1024);
#endif
    if (cli_check_env("picolm-bench")) return CLI_USAGE;
    char err[2048];
    /* the plugins (no backend, one thread): the backend list, the sampler chains */
    picolm_runtime *plugins = bench_runtime(&o, "reference", 1, err, sizeof err);
    if (!plugins) { fprintf(stderr, "picolm-bench: %s\n", err); return 1; }
    int rc = 1;
    result *res = NULL;
    micro_result *mres = NULL;
    int n_res = 0, n_mres = 0;

    /* Backends: the list, or reference + every accepted backend (lowest score first). */
    if (blist) {
        o.n_backends = split_list(blist, o.backends, MAX_LIST);
        if (o.n_backends <= 0) { fprintf(stderr, "picolm-bench: --backends: bad list\n"); rc = CLI_USAGE; goto out; }
    } else {
        bk all[MAX_LIST];
        static char names[MAX_LIST][64]; /* kept when the runtime that lists them is gone */
        int na = 0;
        picolm_plugin_info pi;
        for (int i = 0; na < MAX_LIST && !picolm_runtime_plugin(plugins, i, &pi); i++)
            if (pi.kind == PICOLM_KIND_BACKEND) {
                snprintf(names[na], sizeof names[na], "%s", pi.name);
                all[na] = (bk){names[na], pi.score}, na++;
            }
        qsort(all, (size_t)na, sizeof *all, cmp_bk);
        o.backends[o.n_backends++] = "reference";
        for (int i = 0; i < na && o.n_backends < MAX_LIST; i++) o.backends[o.n_backends++] = all[i].name;
    }
    for (int b = 0; b < o.n_backends; b++) { /* each name must resolve now: a clear error before any long run */
        picolm_runtime *one = bench_runtime(&o, o.backends[b], 1, err, sizeof err);
        if (!one) {
            fprintf(stderr, "picolm-bench: %s\n", err);
            rc = CLI_USAGE; /* a backend name that does not exist */
            goto out;
        }
        picolm_runtime_free(one);
    }
    if (tlist) {
        const char *tt[MAX_LIST];
        o.n_threads = split_list(tlist, tt, MAX_LIST);
        if (o.n_threads <= 0) { fprintf(stderr, "picolm-bench: --threads: bad list\n"); rc = CLI_USAGE; goto out; }
        for (int i = 0; i < o.n_threads; i++)
            if (parse_int(tt[i], 1, 1024, &o.threads[i])) { fprintf(stderr, "picolm-bench: --threads: bad count '%s'\n", tt[i]); rc = CLI_USAGE; goto out; }
    } else if (o.tune) { /* 1 .. online CPUs (every one up to 8, then powers of two and the top three) */
        const int n = picolm_cpu_count();
        for (int k = 1; k <= n && o.n_threads < MAX_LIST; k++)
            if (n <= 8 || !(k & (k - 1)) || k >= n - 2) o.threads[o.n_threads++] = k;
    } else {
        o.threads[o.n_threads++] = picolm_cpu_count();
    }

    if (o.sampling) {
        picolm_model *m = NULL;
        if (o.model) { /* its vocabulary */
            if (!(m = cli_load_model(&cfg, "picolm-bench", o.model, 1, &rc))) goto out;
            o.vocabs[0] = picolm_n_vocab(m);
            o.n_vocabs = 1;
        }
        if (run_sampling(&o, plugins, &cfg, m ? picolm_model_vocab(m) : NULL, stdout, err, sizeof err)) {
            fprintf(stderr, "picolm-bench: --sampling: %s\n", err);
            rc = 1;
        } else {
            rc = cli_close_stdout("picolm-bench");
        }
        cli_free_model(m);
        goto out;
    }
    if (o.micro) {
        if (run_micro(&o, &mres, &n_mres, err, sizeof err)) { fprintf(stderr, "picolm-bench: %s\n", err); goto out; }
        if (!n_mres) { fprintf(stderr, "picolm-bench: --micro: no weight format with a quantizer matched\n"); goto out; }
        print_micro(&o, mres, n_mres, stdout);
        rc = cli_close_stdout("picolm-bench");
        goto out;
    }

    /* the runs' memory is their own (RssAnon): no runtime beside theirs */
    picolm_runtime_free(plugins);
    plugins = NULL;

    /* --synth: make (or reuse) the model file */
    char synth_path[4096];
    const char *path = o.model;
    if (o.synth) {
        if (o.out) snprintf(synth_path, sizeof synth_path, "%s", o.out);
        else synth_default_path(o.synth, synth_path, sizeof synth_path);
        path = synth_path;
        struct stat st;
        if (!stat(path, &st)) {
            fprintf(stderr, "picolm-bench: reusing %s (delete it to synthesise again)\n", path);
        } else {
            int nt = 0; /* the largest requested thread count (the output does not depend on it) */
            for (int i = 0; i < o.n_threads; i++) nt = o.threads[i] > nt ? o.threads[i] : nt;
            picolm_runtime *sr = bench_runtime(&o, "reference", nt, err, sizeof err);
            const int bad = !sr || synth_write(o.synth, path, sr, o.synth_exact, stderr, err, sizeof err);
            picolm_runtime_free(sr);
            if (bad) { fprintf(stderr, "picolm-bench: --synth %s: %s\n", o.synth, err); goto out; }
        }
    }

    if (o.tune) {
        rc = run_tune(&o, path, o.ram, o.ini_out);
        goto out;
    }
    res = calloc((size_t)o.n_backends * (size_t)o.n_threads, sizeof *res);
    if (!res) goto out;
    char cpu[96], desc[512];
    picolm_cpu_name(cpu, sizeof cpu);
    struct stat st;
    const double fsize = stat(path, &st) ? 0 : st.st_size / 1e6;
    for (int t = 0; t < o.n_threads; t++) {
        /* bandwidth before and after this thread count's runs: the best of both */
        double bw = bench_bw(&o, o.threads[t], 5, err, sizeof err);
        if (bw < 0) { fprintf(stderr, "picolm-bench: %s\n", err); goto out; }
        fprintf(stderr, "picolm-bench: %d thread%s: read bandwidth %.2f GB/s\n", o.threads[t], o.threads[t] == 1 ? "" : "s", bw);
        const int first = n_res;
        for (int b = 0; b < o.n_backends; b++) {
            picolm_runtime *be = bench_runtime(&o, o.backends[b], o.threads[t], err, sizeof err);
            const int bad = !be || run_one(&o, path, be, o.backends[b], bw, &res[n_res], err, sizeof err);
            picolm_runtime_free(be);
            if (bad) {
                fprintf(stderr, "picolm-bench: %s, %d threads: %s\n", o.backends[b], o.threads[t], err);
                goto out;
            }
            const result *x = &res[n_res++];
            fprintf(stderr,
                    "picolm-bench: %-10s %d thr: prefill %8.2f tok/s | decode %7.2f ± %.2f tok/s | %6.2f GB/s (%.2f in matmuls; "
                    "time: matmul %.0f%%, attention %.0f%%) | RssAnon %.1f MB\n",
                    x->backend, x->threads, x->prefill_tps, x->decode_tps, x->decode_tps_std, x->gbps, x->matmul_gbps,
                    100 * x->matmul_frac, 100 * x->attn_frac, x->rss_anon_mb);
        }
        const double bw2 = bench_bw(&o, o.threads[t], 3, err, sizeof err);
        if (bw2 > bw) {
            fprintf(stderr, "picolm-bench: %d thread%s: read bandwidth after the runs %.2f GB/s (used)\n", o.threads[t],
                    o.threads[t] == 1 ? "" : "s", bw2);
            for (int i = first; i < n_res; i++) {
                res[i].mem_bw_gbps = bw2;
                res[i].roofline = res[i].gbps / bw2;
            }
        }
    }
    const char *base = strrchr(path, '/');
    snprintf(desc, sizeof desc, "%.200s, %.1f MB; CPU %s; kv %s", o.synth ? o.synth : base ? base + 1 : path, fsize, cpu,
             cli_kv_type_name(o.kv_type));
    print_results(&o, path, res, n_res, stdout, desc);
    rc = cli_close_stdout("picolm-bench");
out:
    free(res);
    free(mres);
    free(blist);
    free(tlist);
    free(flist);
    picolm_runtime_free(plugins);
    return rc;
}
