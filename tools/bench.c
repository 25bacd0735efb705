/*
 * picolm-bench: every requested backend, in one process, on the same model.
 * Per (backend, thread count): batched prefill tok/s, decode tok/s (mean and
 * stddev over reps, EOS ignored), the weight bandwidth decoding achieves
 * against the machine's read bandwidth measured in the same run (the memory
 * roofline of decode), and RssAnon during generation.  --micro times each
 * format x backend vec_dot kernel alone.  --synth makes a random-weight
 * model of a given shape and type first (core/synth.c).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "cli.h"
#include "cpu.h"
#include "util.h"
#include "generate.h"
#include "model.h"
#include "plugins.h"
#include "synth.h"
#include "threadpool.h"

#define MAX_LIST 32

enum { OUT_MD, OUT_CSV, OUT_JSON, OUT_SVG };

typedef struct opts {
    const char *model, *synth, *out, *plugin_dir;
    const char *formats[MAX_LIST]; /* --micro: only these formats (none = all) */
    int n_formats;
    const char *backends[MAX_LIST];
    int n_backends;
    int threads[MAX_LIST];
    int n_threads;
    int n_prompt, n_gen, reps, format, micro, synth_exact, ctx, batch, kv_type, bw_mib, micro_mib;
    double micro_s;
} opts;

static void usage(FILE *o) {
    fprintf(o,
            "usage: picolm-bench MODEL [options]\n"
            "       picolm-bench --synth SHAPE:TYPE [--out FILE] [options]\n"
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
            "  --micro           kernel throughput instead: per weight format x backend, GB/s of weights\n"
            "                    through vec_dot, single thread, over a random matrix larger than L2\n"
            "  --micro-mib N     size of that matrix in MiB (default 8)\n"
            "  --micro-ms N      time per measurement in ms, best of 3 (default 100)\n"
            "  --formats LIST    --micro: only these weight formats (e.g. Q4_K,Q6_K,Q8_0)\n"
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
   without a software prefetch 4 KB ahead, and the best counts: measured on
   a 2-core EPYC VM (1 Dec), on 2 MB pages 2 threads read 63-73 GB/s without
   the prefetch and 55-60 with it; on 4 KB pages the prefetch helped (30 Nov:
   29.6 vs 21.6 GB/s on one thread).  A scalar 8-word loop was compute-bound
   (17-20 GB/s per thread). */
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

/* GB/s (1e9 bytes) of the best of `passes` reads of a bytes-sized buffer. */
static double measure_bw(threadpool *pool, size_t bytes, int passes) {
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
        const double t0 = pl_now();
        threadpool_run(pool, j->n_words, bw_worker, j);
        const double dt = pl_now() - t0;
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

typedef struct micro_result {
    char format[32], backend[64], from[64];
    double gbps;
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

static int prefill(llama_ctx *c, const int32_t *t, int n, char *err, size_t errlen) {
    for (int i = 0; i < n; i += c->n_batch) {
        const int nb = n - i < c->n_batch ? n - i : c->n_batch;
        if (llama_forward(c, t + i, nb, NULL, err, errlen)) return -1;
    }
    return 0;
}

static int run_one(const opts *o, const char *path, const pl_registry *reg, const char *bname, threadpool *pool, double bw,
                   result *res, char *err, size_t errlen) {
    pl_dispatch *d = calloc(1, sizeof *d); /* large: heap */
    llama_model m;
    llama_ctx c;
    int have_m = 0, have_c = 0, rc = -1;
    int32_t *prompt = NULL;
    double *pre = NULL, *dec = NULL;
    memset(&c, 0, sizeof c);
    if (!d) { snprintf(err, errlen, "out of memory"); goto done; }
    if (registry_dispatch(reg, bname, d, err, errlen)) goto done;
    if (build_model(&m, path, d, NULL, err, errlen)) goto done;
    have_m = 1;
    int n_ctx = o->ctx > 0 ? o->ctx : (m.hp.n_ctx_train < 2048 ? m.hp.n_ctx_train : 2048);
    if (n_ctx > m.hp.n_ctx_train) n_ctx = m.hp.n_ctx_train;
    if (o->n_prompt + o->n_gen > n_ctx) {
        snprintf(err, errlen, "-p %d + -n %d tokens exceed the context of %d (-c)", o->n_prompt, o->n_gen, n_ctx);
        goto done;
    }
    const int batch = o->batch > 0 ? o->batch : 64;
    if (build_ctx(&c, &m, n_ctx, batch, o->kv_type, pool, err, errlen)) goto done;
    have_c = 1;
    const int nv = m.hp.n_vocab;
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
    if (llama_forward(&c, &t0, 1, NULL, err, errlen)) goto done;
    size_t peak_anon = 0, file_kb = 0;
    double dec_time = 0; /* all decode reps, wall clock; c.prof sums their phases */
    for (int r = 0; r < o->reps; r++) {
        c.n_past = 0; /* the cache is overwritten from position 0 */
        double a = pl_now();
        if (o->n_prompt && prefill(&c, prompt, o->n_prompt, err, errlen)) goto done;
        double b = pl_now();
        pre[r] = o->n_prompt ? o->n_prompt / (b - a) : 0;
        int32_t tok = o->n_prompt ? argmax(c.logits, nv) : t0;
        c.prof.on = 1; /* decode only */
        a = pl_now();
        for (int i = 0; i < o->n_gen; i++) {
            if (llama_forward(&c, &tok, 1, NULL, err, errlen)) goto done;
            tok = argmax(c.logits, nv); /* greedy, EOS or not */
        }
        b = pl_now();
        dec_time += b - a;
        c.prof.on = 0;
        dec[r] = o->n_gen ? o->n_gen / (b - a) : 0;
        size_t anon = 0, fk = 0;
        generate_rss(&anon, &fk, NULL); /* during generation: the context is live */
        if (anon > peak_anon) peak_anon = anon;
        if (fk > file_kb) file_kb = fk;
    }
    memset(res, 0, sizeof *res);
    snprintf(res->backend, sizeof res->backend, "%s", bname);
    res->threads = threadpool_size(pool);
    res->prefill_tokens = o->n_prompt;
    res->decode_tokens = o->n_gen;
    res->reps = o->reps;
    res->n_ctx = n_ctx;
    res->n_batch = c.n_batch;
    mean_std(pre, o->reps, &res->prefill_tps, &res->prefill_tps_std);
    mean_std(dec, o->reps, &res->decode_tps, &res->decode_tps_std);
    /* weights read per decoded token: every matrix once (weight_bytes) plus one token_embd row */
    const double bytes_tok = (double)m.weight_bytes + (double)m.tok_embd.row_bytes;
    res->gbps = res->decode_tps * bytes_tok / 1e9;
    res->mem_bw_gbps = bw;
    res->roofline = bw > 0 ? res->gbps / bw : 0;
    if (dec_time > 0 && c.prof.matmul > 0) {
        res->matmul_frac = c.prof.matmul / dec_time;
        res->attn_frac = c.prof.attention / dec_time;
        res->matmul_gbps = (double)o->n_gen * o->reps * bytes_tok / c.prof.matmul / 1e9;
    }
    res->rss_anon_mb = peak_anon / 1024.0;
    res->rss_file_mb = file_kb / 1024.0;
    res->kv_mb = (double)llama_kv_bytes_per_token(&m.hp, o->kv_type) * n_ctx / (1 << 20);
    res->ctx_mb = c.anon_bytes / (double)(1 << 20);
    rc = 0;
done:
    if (have_c) free_ctx(&c);
    if (have_m) free_model(&m);
    free(prompt);
    free(pre);
    free(dec);
    free(d);
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

static int run_micro(const opts *o, const pl_registry *reg, micro_result **out, int *n_out, char *err, size_t errlen) {
    const int64_t cols = 4096;
    pl_dispatch *ref = calloc(1, sizeof *ref), *d = calloc(1, sizeof *d);
    int cap = 64, n = 0, rc = -1;
    micro_result *res = malloc((size_t)cap * sizeof *res);
    float *x = malloc((size_t)cols * 16 * sizeof(float)), *y = malloc((size_t)cols * sizeof(float)); /* x: up to a 16-row group */
    uint8_t *mat = NULL, *act = NULL, *unp = NULL; /* unp: one group unpacked (pl_type.to_base) */
    if (!ref || !d || !res || !x || !y) { snprintf(err, errlen, "out of memory"); goto done; }
    if (registry_dispatch(reg, "reference", ref, err, errlen)) goto done;
    uint64_t s = 42;
    for (int64_t i = 0; i < cols; i++) y[i] = rng_normal(&s);
    const size_t want = (size_t)(o->micro_mib > 0 ? o->micro_mib : 8) << 20;
    for (uint32_t t = 0; t < PICOLM_TYPE_MAX; t++) {
        const picolm_format *f = ref->types[t].fmt;
        if (!f || !(f->flags & PICOLM_FMT_WEIGHT) || !f->quantize_row || cols % f->block_size) continue;
        int wanted = !o->n_formats;
        for (int i = 0; i < o->n_formats; i++) wanted |= !strcasecmp(o->formats[i], f->name);
        if (!wanted) continue;
        const size_t rb = dispatch_row_size(ref, t, cols);
        const int64_t g = ref->types[t].row_group; /* grouped layouts: quantize_row/vec_dot take g rows */
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
            if (registry_dispatch(reg, o->backends[b], d, err, errlen)) goto done;
            const pl_type *ty = &d->types[t];
            if (!ty->vec_dot || !ty->act_quant) continue;
            free(act);
            act = malloc(dispatch_row_size(d, ty->vec_dot_type, cols) + 64);
            if (!act) { snprintf(err, errlen, "out of memory"); goto done; }
            ty->act_quant(y, act, cols);
            /* a layout on its base type's kernels: time the unpacking too */
            const size_t brb = ty->to_base ? dispatch_row_size(d, ty->base_type, cols) : 0;
            free(unp);
            unp = brb ? malloc((size_t)g * brb) : NULL;
            if (brb && !unp) { snprintf(err, errlen, "out of memory"); goto done; }
            double best = 0;
            volatile float sink = 0;
            for (int pass = 0; pass < 3; pass++) {
                int64_t iters = 0;
                const double a = pl_now();
                double el;
                do {
                    float acc = 0, v[16];
                    for (int64_t r = 0; r < rows; r += g) {
                        if (unp) {
                            ty->to_base(mat + (size_t)r * rb, unp, brb, cols);
                            for (int64_t i = 0; i < g; i++) ty->vec_dot(cols, v + i, unp + (size_t)i * brb, act);
                        } else ty->vec_dot(cols, v, mat + (size_t)r * rb, act);
                        acc += v[0];
                    }
                    sink += acc;
                    iters++;
                    el = pl_now() - a;
                } while (el < o->micro_s);
                const double gb = (double)iters * rows * rb / el / 1e9;
                if (gb > best) best = gb;
            }
            (void)sink;
            if (n == cap) {
                micro_result *nr = realloc(res, (size_t)(cap *= 2) * sizeof *res);
                if (!nr) { snprintf(err, errlen, "out of memory"); goto done; }
                res = nr;
            }
            micro_result *mr = &res[n++];
            snprintf(mr->format, sizeof mr->format, "%s", f->name);
            snprintf(mr->backend, sizeof mr->backend, "%s", o->backends[b]);
            snprintf(mr->from, sizeof mr->from, "%s%s%s", ty->kernel_from ? ty->kernel_from : "reference", ty->to_base ? " via " : "",
                     ty->to_base ? d->types[ty->base_type].fmt->name : "");
            mr->gbps = best;
            fprintf(stderr, "picolm-bench: micro %-7s %-10s %7.2f GB/s (kernel: %s)\n", mr->format, mr->backend, best, mr->from);
        }
    }
    *out = res;
    *n_out = n;
    res = NULL;
    rc = 0;
done:
    free(res);
    free(ref);
    free(d);
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
        for (int i = 0; i < n; i++)
            fprintf(f, "  {\"format\": \"%s\", \"backend\": \"%s\", \"kernel_from\": \"%s\", \"threads\": 1, \"gbps\": %.4f}%s\n",
                    r[i].format, r[i].backend, r[i].from, r[i].gbps, i + 1 < n ? "," : "");
        fprintf(f, "]\n");
    } else if (o->format == OUT_CSV) {
        fprintf(f, "format,backend,kernel_from,threads,gbps\n");
        for (int i = 0; i < n; i++) fprintf(f, "%s,%s,%s,1,%.4f\n", r[i].format, r[i].backend, r[i].from, r[i].gbps);
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
        cpu_model_name(cpu, sizeof cpu);
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

static int split_list(char *s, const char **out, int max) {
    int n = 0;
    for (char *save = NULL, *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (*t) {
            if (n == max) return -1;
            out[n++] = t;
        }
    return n;
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
    opts o = {.n_prompt = 128, .n_gen = 64, .reps = 3, .format = OUT_MD, .kv_type = KV_F16, .batch = 64, .bw_mib = 1024,
              .micro_mib = 8, .micro_s = 0.1};
    char *blist = NULL, *tlist = NULL, *flist = NULL;
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
            else if (!strcmp(a, "--synth")) o.synth = v;
            else if (!strcmp(a, "--out")) o.out = v;
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
    if (!o.model && !o.synth && !o.micro) { usage(stderr); return 2; }
    o.plugin_dir = cfg.plugin_dir;
    o.kv_type = generate_kv_type(cfg.kv_type);
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
    if (o.model && o.synth) { fprintf(stderr, "picolm-bench: give a MODEL or --synth, not both\n"); return 2; }

#ifdef __GLIBC__
    /* Freed context buffers go straight back to the OS, so each backend's
       RssAnon is its own, not the high-water mark of an earlier one. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_TRIM_THRESHOLD, 256 * 1024);
#endif
    if (cli_check_env("picolm-bench")) return CLI_USAGE;
    char err[2048];
    pl_registry reg;
    if (registry_load(&reg, o.plugin_dir, err, sizeof err)) { fprintf(stderr, "picolm-bench: %s\n", err); return 1; }
    int rc = 1;
    result *res = NULL;
    micro_result *mres = NULL;
    int n_res = 0, n_mres = 0;
    threadpool *pool = NULL;

    /* Backends: the list, or reference + every accepted backend (lowest score first). */
    if (blist) {
        o.n_backends = split_list(blist, o.backends, MAX_LIST);
        if (o.n_backends <= 0) { fprintf(stderr, "picolm-bench: --backends: bad list\n"); rc = CLI_USAGE; goto out; }
    } else {
        bk all[MAX_LIST];
        int na = 0;
        for (int i = 0; i < reg.n && na < MAX_LIST; i++)
            if (reg.items[i].ok && reg.items[i].kind == PICOLM_KIND_BACKEND) all[na++] = (bk){reg.items[i].name, reg.items[i].score};
        qsort(all, (size_t)na, sizeof *all, cmp_bk);
        o.backends[o.n_backends++] = "reference";
        for (int i = 0; i < na && o.n_backends < MAX_LIST; i++) o.backends[o.n_backends++] = all[i].name;
    }
    {   /* each name must resolve now: a clear error before any long run */
        pl_dispatch *d = calloc(1, sizeof *d);
        if (!d) goto out;
        for (int b = 0; b < o.n_backends; b++)
            if (registry_dispatch(&reg, o.backends[b], d, err, sizeof err)) {
                fprintf(stderr, "picolm-bench: %s\n", err);
                free(d);
                rc = CLI_USAGE; /* a backend name that does not exist */
                goto out;
            }
        free(d);
    }
    if (tlist) {
        const char *tt[MAX_LIST];
        o.n_threads = split_list(tlist, tt, MAX_LIST);
        if (o.n_threads <= 0) { fprintf(stderr, "picolm-bench: --threads: bad list\n"); rc = CLI_USAGE; goto out; }
        for (int i = 0; i < o.n_threads; i++)
            if (parse_int(tt[i], 1, 1024, &o.threads[i])) { fprintf(stderr, "picolm-bench: --threads: bad count '%s'\n", tt[i]); rc = CLI_USAGE; goto out; }
    } else {
        o.threads[o.n_threads++] = cpu_count_online();
    }

    if (o.micro) {
        if (run_micro(&o, &reg, &mres, &n_mres, err, sizeof err)) { fprintf(stderr, "picolm-bench: %s\n", err); goto out; }
        if (!n_mres) { fprintf(stderr, "picolm-bench: --micro: no weight format with a quantizer matched\n"); goto out; }
        print_micro(&o, mres, n_mres, stdout);
        rc = cli_close_stdout("picolm-bench");
        goto out;
    }

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
            pl_dispatch *d = calloc(1, sizeof *d);
            int nt = 0; /* the largest requested thread count (the output does not depend on it) */
            for (int i = 0; i < o.n_threads; i++) nt = o.threads[i] > nt ? o.threads[i] : nt;
            threadpool *sp = threadpool_create(nt);
            registry_set_pool(&reg, sp);
            int bad = !d || !sp || registry_dispatch(&reg, "reference", d, err, sizeof err) ||
                      synth_write(o.synth, path, d, sp, o.synth_exact, stderr, err, sizeof err);
            registry_set_pool(&reg, NULL);
            threadpool_destroy(sp);
            free(d);
            if (bad) { fprintf(stderr, "picolm-bench: --synth %s: %s\n", o.synth, err); goto out; }
        }
    }

    res = calloc((size_t)o.n_backends * (size_t)o.n_threads, sizeof *res);
    if (!res) goto out;
    char cpu[96], desc[512];
    cpu_model_name(cpu, sizeof cpu);
    struct stat st;
    const double fsize = stat(path, &st) ? 0 : st.st_size / 1e6;
    for (int t = 0; t < o.n_threads; t++) {
        pool = threadpool_create(o.threads[t]);
        if (!pool) { fprintf(stderr, "picolm-bench: cannot start %d threads\n", o.threads[t]); goto out; }
        registry_set_pool(&reg, pool);
        /* bandwidth before and after this thread count's runs: the best of both */
        double bw = measure_bw(pool, (size_t)o.bw_mib << 20, 5);
        fprintf(stderr, "picolm-bench: %d thread%s: read bandwidth %.2f GB/s\n", o.threads[t], o.threads[t] == 1 ? "" : "s", bw);
        const int first = n_res;
        for (int b = 0; b < o.n_backends; b++) {
            if (run_one(&o, path, &reg, o.backends[b], pool, bw, &res[n_res], err, sizeof err)) {
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
        const double bw2 = measure_bw(pool, (size_t)o.bw_mib << 20, 3);
        if (bw2 > bw) {
            fprintf(stderr, "picolm-bench: %d thread%s: read bandwidth after the runs %.2f GB/s (used)\n", o.threads[t],
                    o.threads[t] == 1 ? "" : "s", bw2);
            for (int i = first; i < n_res; i++) {
                res[i].mem_bw_gbps = bw2;
                res[i].roofline = res[i].gbps / bw2;
            }
        }
        registry_set_pool(&reg, NULL);
        threadpool_destroy(pool);
        pool = NULL;
    }
    const char *base = strrchr(path, '/');
    snprintf(desc, sizeof desc, "%.200s, %.1f MB; CPU %s; kv %s", o.synth ? o.synth : base ? base + 1 : path, fsize, cpu,
             o.kv_type == KV_Q8_0 ? "q8_0" : "f16");
    print_results(&o, path, res, n_res, stdout, desc);
    rc = cli_close_stdout("picolm-bench");
out:
    if (pool) {
        registry_set_pool(&reg, NULL);
        threadpool_destroy(pool);
    }
    free(res);
    free(mres);
    free(blist);
    free(tlist);
    free(flist);
    registry_free(&reg);
    return rc;
}
