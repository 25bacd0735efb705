/*
 * Generic test of every weight-format plugin (checkasm / test-quantize-fns
 * style).  It dlopens each build/plugins/format-*.so directly, collects the
 * formats they declare, and for each one checks:
 *   (a) block_size / type_size / name against include/picolm/blocks.h;
 *   (b) quantize -> dequantize RMSE on random data below a per-format bound;
 *   (c) reference vec_dot(quantized w, quantized a) against the float dot of
 *       the dequantized operands, for several row lengths;
 * and, with the shared data:
 *   (d) dequantize_row of the tensors in reference/dequant/index.txt, bit for
 *       bit against the gguf package's float32 output;
 *   (e) quantize_row of the f32 model's tensors against the bytes
 *       llama-quantize stored in tiny-shakespeare-<type>.gguf.
 * No format is special-cased by plugin file: whatever .so provides a type,
 * it is held to the same checks.
 */
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "plugins.h" /* PL_TYPE_MAX */
#include "picolm/blocks.h"
#include "picolm/plugin.h"
#include "testlib.h"

/* ------------------------------------------------------------------------ */
/* What blocks.h says, and the round-trip bound of each type.               */
/* RMSE is relative: rms(dequant(quant(x)) - x) / rms(x) on N(0,1) data.    */
/* The bounds sit ~1.5x above what a correct quantizer reaches (measured    */
/* values in the comments); a broken one (wrong nibble order, lost scale,   */
/* off-by-one bias) lands far above them.                                   */
/* ------------------------------------------------------------------------ */
typedef struct known_type {
    uint32_t id;
    const char *name;
    uint32_t block_size, type_size;
    double max_rmse;
} known_type;

static const known_type known[] = {
    /* bound   measured (seeded N(0,1), 16384 values) */
    {PICOLM_TYPE_F32, "F32", 1, 4, 0.0},                          /* 0: exact */
    {PICOLM_TYPE_F16, "F16", 1, 2, 4.0e-4},                       /* 2.1e-4: 11-bit significand */
    {PICOLM_TYPE_BF16, "BF16", 1, 2, 3.2e-3},                     /* 1.7e-3: 8-bit significand */
    {PICOLM_TYPE_Q8_0, "Q8_0", QK8_0, sizeof(block_q8_0), 0.008}, /* 0.0054 */
    {PICOLM_TYPE_Q8_1, "Q8_1", QK8_1, sizeof(block_q8_1), 0.008}, /* 0.0054 */
    {PICOLM_TYPE_Q8_K, "Q8_K", QK_K, sizeof(block_q8_K), 0.010},  /* 0.0068: one scale per 256 */
    {PICOLM_TYPE_Q6_K, "Q6_K", QK_K, sizeof(block_q6_K), 0.027},  /* 0.018 */
    {PICOLM_TYPE_Q5_0, "Q5_0", QK5_0, sizeof(block_q5_0), 0.063}, /* 0.042 */
    {PICOLM_TYPE_Q5_1, "Q5_1", QK5_1, sizeof(block_q5_1), 0.057}, /* 0.038 */
    {PICOLM_TYPE_Q5_K, "Q5_K", QK_K, sizeof(block_q5_K), 0.055},  /* 0.036 */
    {PICOLM_TYPE_Q4_0, "Q4_0", QK4_0, sizeof(block_q4_0), 0.125}, /* 0.086 */
    {PICOLM_TYPE_Q4_1, "Q4_1", QK4_1, sizeof(block_q4_1), 0.115}, /* 0.078 */
    {PICOLM_TYPE_Q4_K, "Q4_K", QK_K, sizeof(block_q4_K), 0.105},  /* 0.071 */
    {PICOLM_TYPE_IQ4_NL, "IQ4_NL", QK4_NL, sizeof(block_iq4_nl), 0.115}, /* 0.076 */
    {PICOLM_TYPE_IQ4_XS, "IQ4_XS", QK_K, sizeof(block_iq4_xs), 0.115},   /* 0.077 */
    {PICOLM_TYPE_Q3_K, "Q3_K", QK_K, sizeof(block_q3_K), 0.22},   /* 0.151 */
    {PICOLM_TYPE_Q2_K, "Q2_K", QK_K, sizeof(block_q2_K), 0.42},   /* 0.296 */
    /* picolm's repacked layouts: the base type's values, so its bounds;
       a grouped type's type_size is per row (blocks.h gives the group) */
    {PICOLM_TYPE_Q4_K_R, "Q4_K_R", QK_K, 148, 0.105},  /* formats/repack.c: pre-unpacked scales */
    {PICOLM_TYPE_Q4_K_R16, "Q4_K_R16", QK_K, sizeof(block_q4_K_r16) / PICOLM_ROWS_R16, 0.105},
    {PICOLM_TYPE_Q6_K_R16, "Q6_K_R16", QK_K, sizeof(block_q6_K_r16) / PICOLM_ROWS_R16, 0.027},
};
#define N_KNOWN (sizeof known / sizeof known[0])

static const known_type *find_known(uint32_t id) {
    for (size_t i = 0; i < N_KNOWN; i++)
        if (known[i].id == id) return &known[i];
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                   */
/* ------------------------------------------------------------------------ */
#define MAX_LIBS 32
#define MAX_FMTS 256

typedef struct loaded_fmt {
    picolm_format f;        /* copied, missing trailing members zeroed */
    char lib[64];           /* file it came from, for messages */
} loaded_fmt;

static void *libs[MAX_LIBS];
static int n_libs;
static loaded_fmt fmts[MAX_FMTS];
static int n_fmts;
static const loaded_fmt *by_type[PL_TYPE_MAX];

static void load_plugin(const char *dir, const char *file) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    void *h;
    char why[512];
    const picolm_entry_fn entry = tl_plugin_entry(path, &h, why, sizeof why);
    CHECK(h != NULL, "%s: dlopen (%s)", file, h ? "ok" : why);
    if (!h) return;
    CHECK(entry != NULL, "%s: exports %s", file, PICOLM_ENTRY);
    if (!entry) { dlclose(h); return; }
    const picolm_plugin *p = entry();
    int ok = p && p->abi_version == PICOLM_ABI_VERSION && p->struct_size >= sizeof(picolm_plugin) &&
             p->kind == PICOLM_KIND_FORMAT && p->name && p->version && p->vtable;
    CHECK(ok, "%s: descriptor (abi %u, kind %u, name %s)", file, p ? p->abi_version : 0,
          p ? p->kind : 0, p && p->name ? p->name : "(null)");
    if (!ok) { dlclose(h); return; }
    const picolm_format_vtable *vt = p->vtable;
    ok = vt->struct_size >= sizeof(picolm_format_vtable) && vt->n_formats > 0 && vt->formats &&
         vt->format_size >= offsetof(picolm_format, vec_dot_type);
    CHECK(ok, "%s: vtable (struct_size %u, format_size %u, n_formats %u)", file, vt->struct_size,
          vt->format_size, vt->n_formats);
    if (!ok) { dlclose(h); return; }
    if (n_libs < MAX_LIBS) libs[n_libs++] = h;
    for (uint32_t i = 0; i < vt->n_formats && n_fmts < MAX_FMTS; i++) {
        loaded_fmt *lf = &fmts[n_fmts];
        memset(lf, 0, sizeof *lf);
        size_t sz = vt->format_size < sizeof(picolm_format) ? vt->format_size : sizeof(picolm_format);
        memcpy(&lf->f, tl_format_at(vt, i), sz);
        snprintf(lf->lib, sizeof lf->lib, "%s", file);
        const picolm_format *f = &lf->f;
        ok = f->type_id < PL_TYPE_MAX && f->name && f->block_size && f->type_size && f->dequantize_row;
        CHECK(ok, "%s: format #%u has id, name, sizes and dequantize_row", file, i);
        if (!ok) continue;
        CHECK(by_type[f->type_id] == NULL, "%s: type %s (%u) declared once (also in %s)", file, f->name,
              f->type_id, by_type[f->type_id] ? by_type[f->type_id]->lib : "none");
        if (by_type[f->type_id]) continue;
        by_type[f->type_id] = lf;
        n_fmts++;
    }
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void load_all(void) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/plugins", build_dir());
    DIR *d = opendir(dir);
    CHECK(d != NULL, "plugin directory %s exists", dir);
    if (!d) return;
    char *names[MAX_LIBS];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAX_LIBS) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "format-", 7) == 0 && l > 3 && strcmp(e->d_name + l - 3, ".so") == 0)
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    CHECK(n > 0, "found %d format plugins in %s", n, dir);
    for (int i = 0; i < n; i++) {
        load_plugin(dir, names[i]);
        free(names[i]);
    }
}

static const picolm_format *fmt(uint32_t id) { return id < PL_TYPE_MAX && by_type[id] ? &by_type[id]->f : NULL; }

/* ------------------------------------------------------------------------ */
/* Random data                                                               */
/* ------------------------------------------------------------------------ */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_u64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double rng_unit(void) { return ((rng_u64() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
static float rng_gauss(void) {
    return (float)(sqrt(-2.0 * log(rng_unit())) * cos(6.283185307179586 * rng_unit()));
}
static void fill_gauss(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = scale * rng_gauss();
}

static size_t row_bytes(const picolm_format *f, int64_t n) { return (size_t)(n / f->block_size) * f->type_size; }
/* rows a grouped format converts at once (plugin.h: row_group); the copy in
   fmts[] has members past the plugin's format_size zeroed */
static int64_t group_of(const picolm_format *f) { return f->row_group > 1 ? f->row_group : 1; }

/* ------------------------------------------------------------------------ */
/* (a) layout                                                                */
/* ------------------------------------------------------------------------ */
static void test_layout(void) {
    for (int i = 0; i < n_fmts; i++) {
        const picolm_format *f = &fmts[i].f;
        const known_type *k = find_known(f->type_id);
        if (!k) {
            SKIP("%s (%u, %s): no blocks.h entry to compare against", f->name, f->type_id, fmts[i].lib);
            continue;
        }
        CHECK(f->block_size == k->block_size && f->type_size == k->type_size && strcmp(f->name, k->name) == 0,
              "%s layout: block %u (want %u), %u bytes (want %u), name %s (%s)", k->name, f->block_size,
              k->block_size, f->type_size, k->type_size, f->name, fmts[i].lib);
        CHECK(f->flags & (PICOLM_FMT_WEIGHT | PICOLM_FMT_ACTIVATION), "%s flags 0x%x name a role", k->name, f->flags);
        if (f->flags & PICOLM_FMT_WEIGHT) {
            CHECK(f->vec_dot != NULL, "%s is a weight type with a vec_dot", k->name);
            const picolm_format *a = fmt(f->vec_dot_type);
            if (a) CHECK((a->flags & PICOLM_FMT_ACTIVATION) && a->quantize_row,
                         "%s: its vec_dot_type %s is an activation type with a quantizer", k->name, a->name);
        }
        if (f->flags & PICOLM_FMT_ACTIVATION)
            CHECK(f->quantize_row != NULL, "%s is an activation type with a quantize_row", k->name);
    }
    for (size_t i = 0; i < N_KNOWN; i++)
        if (!fmt(known[i].id)) SKIP("no loaded plugin provides %s: its checks are skipped", known[i].name);
}

/* ------------------------------------------------------------------------ */
/* (b) round trip                                                            */
/* ------------------------------------------------------------------------ */
static void test_roundtrip(void) {
    enum { N = 64 * 256, GMAX = 16 };
    /* edge data: 4 stretches of 4 blocks per row, GMAX rows for a grouped type */
    const size_t cap = (size_t)GMAX * 4 * 4 * 256;
    float *x = malloc(cap * sizeof *x), *y = malloc(cap * sizeof *y);
    void *q = malloc(cap * 8);
    for (int i = 0; i < n_fmts; i++) {
        const picolm_format *f = &fmts[i].f;
        const known_type *k = find_known(f->type_id);
        if (!f->quantize_row || !k) continue;
        const int64_t g = group_of(f);
        if (g > GMAX || N % (g * f->block_size)) {
            CHECK(0, "%s: row_group %lld is not one the test covers", f->name, (long long)g);
            continue;
        }
        rng_state = 1234;
        fill_gauss(x, N, 1.0f);
        /* a grouped type converts g rows of N / g at once */
        f->quantize_row(x, q, N / g);
        f->dequantize_row(q, y, N / g);
        double se = 0, sx = 0;
        int finite = 1;
        for (int j = 0; j < N; j++) {
            se += (double)(y[j] - x[j]) * (y[j] - x[j]);
            sx += (double)x[j] * x[j];
            finite &= isfinite(y[j]);
        }
        const double rmse = sqrt(se / sx);
        CHECK(finite && rmse <= k->max_rmse, "%s round trip: relative RMSE %.3g <= %.3g", f->name, rmse, k->max_rmse);

        /* awkward data: zeros, a constant, tiny and huge values, one outlier
           per block; the result must stay finite and the zeros stay zero
           (in every row of a group) */
        const int64_t nb = 4 * (f->block_size > 32 ? f->block_size : 32), L = 4 * nb;
        for (int64_t r = 0; r < g; r++) {
            float *xr = x + r * L;
            for (int64_t j = 0; j < nb; j++) xr[j] = 0.0f;
            for (int64_t j = nb; j < 2 * nb; j++) xr[j] = 0.75f;
            for (int64_t j = 2 * nb; j < 3 * nb; j++) xr[j] = 1e-6f * rng_gauss();
            for (int64_t j = 3 * nb; j < 4 * nb; j++) xr[j] = (j % 37 == 0 ? 100.0f : 1.0f) * rng_gauss();
        }
        f->quantize_row(x, q, L);
        f->dequantize_row(q, y, L);
        int zeros = 1;
        finite = 1;
        double cerr = 0;
        for (int64_t r = 0; r < g; r++) {
            const float *yr = y + r * L;
            for (int64_t j = 0; j < L; j++) finite &= isfinite(yr[j]);
            for (int64_t j = 0; j < nb; j++) zeros &= yr[j] == 0.0f;
            for (int64_t j = nb; j < 2 * nb; j++) cerr = fmax(cerr, fabs(yr[j] - 0.75));
        }
        CHECK(finite && zeros && cerr <= 0.75 * 2 * k->max_rmse + 1e-6,
              "%s edge data: finite %d, zeros kept %d, constant error %.3g", f->name, finite, zeros, cerr);
    }
    free(x);
    free(y);
    free(q);
}

/* ------------------------------------------------------------------------ */
/* (c) vec_dot                                                               */
/* ------------------------------------------------------------------------ */
/* Activation types that carry a precomputed fp16 block sum (ggml's Q8_1:
   s = fp16(d * sum(qs))).  A weight type with a per-block offset m (Q4_1,
   Q5_1) uses m * s in its dot product, so its result legitimately differs
   from the float dot of the dequantized rows by m * (s - d*sum(qs)): at
   most |m| * 2^-11 * |block sum| (plus 2^-25 if s is subnormal), with |m|
   bounded by the block's largest |w|.  That term is added to the bound. */
static int act_has_f16_sum(uint32_t id) { return id == PICOLM_TYPE_Q8_1; }

static void test_vec_dot(void) {
    /* row lengths; those that are not a multiple of both block sizes are
       skipped for that pair.  A grouped type (row_group g) is tested on g
       rows at once: its vec_dot gives g results. */
    static const int64_t lens[] = {32, 96, 256, 512 + 256, 2048 + 32, 4096 + 256, 11008};
    enum { GMAX = 16 };
    const int64_t nmax = 11008;
    float *w = malloc(GMAX * nmax * sizeof *w), *a = malloc(nmax * sizeof *a);
    float *wd = malloc(GMAX * nmax * sizeof *wd), *ad = malloc(nmax * sizeof *ad);
    void *wq = malloc(GMAX * nmax * 8), *aq = malloc(nmax * 8);
    for (int i = 0; i < n_fmts; i++) {
        const picolm_format *f = &fmts[i].f;
        if (!(f->flags & PICOLM_FMT_WEIGHT) || !f->vec_dot || !f->quantize_row) continue;
        const picolm_format *act = fmt(f->vec_dot_type);
        if (!act || !act->quantize_row) {
            SKIP("%s vec_dot: its activation type %u is not loaded", f->name, f->vec_dot_type);
            continue;
        }
        const int64_t g = group_of(f);
        if (g > GMAX) { CHECK(0, "%s: row_group %lld is not one the test covers", f->name, (long long)g); continue; }
        int tested = 0;
        double worst = 0, worst_ratio = 0;
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const int64_t n = lens[li];
            if (n % f->block_size || n % act->block_size) continue;
            rng_state = 777 + (uint64_t)n;
            for (int rep = 0; rep < 4; rep++) {
                fill_gauss(w, g * n, rep == 1 ? 0.02f : 1.0f);
                fill_gauss(a, n, rep == 2 ? 30.0f : 1.0f);
                if (rep == 3) for (int64_t j = 0; j < g * n; j++) w[j] += 0.5f; /* biased rows */
                f->quantize_row(w, wq, n);
                act->quantize_row(a, aq, n);
                f->dequantize_row(wq, wd, n);
                act->dequantize_row(aq, ad, n);
                float got[GMAX];
                for (int64_t r = 0; r < g; r++) got[r] = NAN;
                f->vec_dot(n, got, wq, aq);
                for (int64_t r = 0; r < g; r++) {
                    const float *wr = wd + r * n;
                    double ref = 0, mag = 0, sum_term = 0;
                    for (int64_t j = 0; j < n; j++) {
                        ref += (double)wr[j] * ad[j];
                        mag += fabs((double)wr[j] * ad[j]);
                    }
                    if (act_has_f16_sum(act->type_id)) {
                        for (int64_t b = 0; b < n; b += act->block_size) {
                            double wmax = 0, asum = 0;
                            for (int64_t j = b; j < b + act->block_size; j++) {
                                wmax = fmax(wmax, fabs(wr[j]));
                                asum += ad[j];
                            }
                            sum_term += wmax * (fabs(asum) * 0x1p-11 + 0x1p-25);
                        }
                    }
                    /* relative to sum|w*a| so that a cancelling sum is not
                       held to an impossible bound */
                    const double err = fabs(got[r] - ref);
                    const double bound = 1e-4 * mag + sum_term + 1e-30;
                    const double rel = err / (mag > 0 ? mag : 1);
                    if (!(rel <= worst)) worst = rel;
                    if (!(err / bound <= worst_ratio)) worst_ratio = err / bound;
                    tested++;
                }
            }
        }
        if (!tested) {
            SKIP("%s vec_dot: no test length is a multiple of blocks %u and %u", f->name, f->block_size, act->block_size);
            continue;
        }
        CHECK(worst_ratio <= 1.0,
              "%s x %s vec_dot vs float dot of dequantized rows, %d rows: worst |err| / sum|w*a| = %.3g, "
              "worst err / bound = %.3g (bound 1e-4 * sum|w*a|%s)",
              f->name, act->name, tested, worst, worst_ratio,
              act_has_f16_sum(act->type_id) ? " + fp16 block-sum rounding" : "");
    }
    free(w); free(a); free(wd); free(ad); free(wq); free(aq);
}

/* ------------------------------------------------------------------------ */
/* GGUF helpers                                                              */
/* ------------------------------------------------------------------------ */
static int type_size_cb(void *ctx, uint32_t type, uint32_t *bs, uint32_t *ts) {
    (void)ctx;
    const picolm_format *f = fmt(type);
    if (!f) return 0;
    *bs = f->block_size;
    *ts = f->type_size;
    return 1;
}

/* 0 on success; otherwise prints a SKIP (missing type/file) and returns -1 */
static int open_model(gguf_file *g, const char *shared, const char *file, const char *what) {
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/models/%s", shared, file);
    if (build_gguf(g, path, NULL, err, sizeof err)) {
        CHECK(0, "%s: build_gguf %s: %s", what, file, err);
        return -1;
    }
    if (gguf_bind_types(g, type_size_cb, NULL, err, sizeof err)) {
        SKIP("%s: %s: %s", what, file, err);
        free_gguf(g);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* (d) dequantization against the gguf package, bit for bit                  */
/* ------------------------------------------------------------------------ */
static void test_dequant_reference(const char *shared) {
    char path[4096];
    snprintf(path, sizeof path, "%s/reference/dequant/index.txt", shared);
    FILE *idx = fopen(path, "r");
    CHECK(idx != NULL, "open %s", path);
    if (!idx) return;
    char model[512], tname[512], ref[512];
    int lines = 0;
    while (fscanf(idx, "%511s %511s %511s", model, tname, ref) == 3) {
        lines++;
        gguf_file g;
        if (open_model(&g, shared, model, "dequant reference")) continue;
        const gguf_tensor *t = gguf_find_tensor(&g, tname);
        CHECK(t != NULL, "%s: has tensor %s", model, tname);
        if (!t) { free_gguf(&g); continue; }
        const picolm_format *f = fmt(t->type);
        size_t rsize = 0;
        snprintf(path, sizeof path, "%s/reference/dequant/%s", shared, ref);
        char *want = tl_slurp(path, &rsize);
        CHECK(want && rsize == (size_t)t->nelements * sizeof(float), "%s: reference %s holds %lld floats", model, ref,
              (long long)t->nelements);
        if (want && rsize == (size_t)t->nelements * sizeof(float)) {
            float *got = malloc(rsize);
            f->dequantize_row(t->data, got, t->nelements);
            int64_t first = -1;
            for (int64_t j = 0; j < t->nelements && first < 0; j++)
                if (memcmp(&got[j], want + j * sizeof(float), sizeof(float))) first = j;
            float wv = 0;
            if (first >= 0) memcpy(&wv, want + first * sizeof(float), sizeof wv);
            if (first < 0)
                CHECK(1, "%s dequantize_row bit-exact on %s %s (%lld floats)", f->name, model, tname,
                      (long long)t->nelements);
            else
                CHECK(0, "%s dequantize_row bit-exact on %s %s: first mismatch at %lld: %.9g, want %.9g", f->name,
                      model, tname, (long long)first, (double)got[first], (double)wv);
            free(got);
        }
        free(want);
        free_gguf(&g);
    }
    fclose(idx);
    CHECK(lines > 0, "index.txt lists %d tensors", lines);
}

/* ------------------------------------------------------------------------ */
/* (e) quantize_row against llama-quantize                                   */
/* ------------------------------------------------------------------------ */
static void test_quantize_reference(const char *shared) {
    gguf_file src;
    if (open_model(&src, shared, "tiny-shakespeare-f32.gguf", "quantize reference")) return;
    for (int i = 0; i < n_fmts; i++) {
        const picolm_format *f = &fmts[i].f;
        if (!(f->flags & PICOLM_FMT_WEIGHT) || !f->quantize_row) continue;
        char file[256];
        int l = snprintf(file, sizeof file, "tiny-shakespeare-");
        for (const char *c = f->name; *c && l < 200; c++) file[l++] = (char)tolower((unsigned char)*c);
        snprintf(file + l, sizeof file - (size_t)l, ".gguf");
        char path[4096];
        snprintf(path, sizeof path, "%s/models/%s", shared, file);
        FILE *probe = fopen(path, "rb");
        if (!probe) { SKIP("%s quantize reference: no %s", f->name, file); continue; }
        fclose(probe);
        gguf_file dst;
        if (open_model(&dst, shared, file, "quantize reference")) continue;
        int64_t blocks = 0, bad_blocks = 0, tensors = 0;
        double max_err = 0; /* largest |ours - theirs| after dequantization, if not exact */
        char first_bad[384] = "";
        for (uint64_t ti = 0; ti < dst.n_tensors; ti++) {
            const gguf_tensor *t = &dst.tensors[ti];
            if (t->type != f->type_id) continue;
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
            const gguf_tensor *s = gguf_find_tensor(&src, name);
            if (!s || s->type != PICOLM_TYPE_F32 || s->nelements != t->nelements || s->ne[0] != t->ne[0]) {
                CHECK(0, "%s: tensor %s has an f32 original of the same shape", file, name);
                continue;
            }
            tensors++;
            const int64_t n = t->ne[0], rows = t->nelements / n;
            const size_t rb = row_bytes(f, n);
            uint8_t *q = malloc(rb);
            float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
            for (int64_t r = 0; r < rows; r += tl_row_step()) {
                const float *x = (const float *)s->data + r * n;
                const uint8_t *want = (const uint8_t *)t->data + r * rb;
                f->quantize_row(x, q, n);
                if (!memcmp(q, want, rb)) { blocks += n / f->block_size; continue; }
                for (int64_t bi = 0; bi < n / f->block_size; bi++, blocks++) {
                    if (!memcmp(q + bi * f->type_size, want + bi * f->type_size, f->type_size)) continue;
                    if (!bad_blocks++) snprintf(first_bad, sizeof first_bad, "%s row %lld block %lld", name, (long long)r, (long long)bi);
                }
                f->dequantize_row(q, a, n);
                f->dequantize_row(want, b, n);
                for (int64_t j = 0; j < n; j++) max_err = fmax(max_err, fabs((double)a[j] - b[j]));
            }
            free(q); free(a); free(b);
        }
        CHECK(tensors > 0 && bad_blocks == 0,
              "%s quantize_row byte-exact vs llama-quantize: %lld of %lld blocks differ in %lld tensors%s%s (max dequantized diff %.3g)",
              f->name, (long long)bad_blocks, (long long)blocks, (long long)tensors, bad_blocks ? ", first at " : "",
              first_bad, max_err);
        free_gguf(&dst);
    }
    free_gguf(&src);
}

int main(void) {
    load_all();
    printf("# %d formats from %d plugins:", n_fmts, n_libs);
    for (int i = 0; i < n_fmts; i++) printf(" %s", fmts[i].f.name);
    printf("\n");
    test_layout();
    test_roundtrip();
    test_vec_dot();
    const char *shared = shared_dir("test_formats shared-data checks");
    if (shared) {
        test_dequant_reference(shared);
        test_quantize_reference(shared);
    }
    for (int i = 0; i < n_libs; i++) dlclose(libs[i]);
    return CHECK_DONE();
}
