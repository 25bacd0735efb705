/*
 * checkasm-style test of the backend plugins: every kernel of every backend
 * this CPU can run, against the format plugins' reference code.
 *
 * - dlopens $PICOLM_BUILD/plugins/format-*.so and backend-*.so directly;
 * - backends whose cpu_required the CPU (cpu_probe(), honours
 *   PICOLM_CPU_MASK) lacks are SKIPped; backends with an init() are also
 *   re-run with the VNNI (x86) / i8mm (ARM) bits masked, so both kernel
 *   variants get checked;
 * - vec_dot on random data and several row lengths vs the format's vec_dot
 *   (weights from the format's quantize_row, activations from the reference
 *   activation quantizer), relative tolerance 1e-5 of sum |w_i * a_i|;
 * - gemm tiles with nr, nc not multiples of the tile, padded strides;
 * - act_quants byte-equal to the reference quantize_row (incl. rounding ties);
 * - primitives vs plain C;
 * - INFO lines: single-thread weight throughput (GB/s) per kernel, on a
 *   matrix larger than L2 (8 MiB) and one larger than a typical L3 (64 MiB),
 *   gemm with 4 and 64 activation columns (prefill);
 *   Q4_K/Q6_K/Q8_0 only.  PICOLM_BENCH=0 skips them (tests/run.sh's
 *   default), PICOLM_BENCH=2 times every format, longer.  Informational:
 *   the machine may be shared.
 */
#include "check.h"
#include "cpu.h"
#include "plugins.h" /* PL_TYPE_MAX */
#include "picolm/plugin.h"
#include "picolm/blocks.h"
#include "picolm/fp16.h"

#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <time.h>

/* ---- random data --------------------------------------------------------- */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd_u32(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}
static float rnd_unit(void) { return (rnd_u32() >> 8) * (1.0f / 16777216.0f); } /* [0,1) */
/* roughly Gaussian, with occasional outliers as real activations have */
static float rnd_val(void) {
    float s = rnd_unit() + rnd_unit() + rnd_unit() + rnd_unit() - 2.0f;
    if ((rnd_u32() & 63) == 0) s *= 8.0f;
    return s;
}
static void fill(float *x, int64_t n) { for (int64_t i = 0; i < n; i++) x[i] = rnd_val(); }

static double now_sec(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* ---- mock host ------------------------------------------------------------- */
static void host_log(int level, const char *msg) { (void)level; printf("# plugin log: %s\n", msg); }
static void *host_alloc(size_t size, size_t align) {
    if (align < sizeof(void *)) align = sizeof(void *);
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : 1)) return NULL;
    memset(p, 0, size);
    return p;
}
static void host_free(void *p) { free(p); }
static void host_parallel_for(const picolm_host *h, int64_t n, picolm_task_fn fn, void *ctx) { (void)h; fn(ctx, 0, n, 0); }

/* ---- plugins --------------------------------------------------------------- */
#define MAX_PLUGINS 32
static const picolm_format *fmt_by_type[PL_TYPE_MAX];
static uint32_t fmt_size[PL_TYPE_MAX]; /* its plugin's format_size: members past it are absent */
typedef struct { char file[512]; const picolm_plugin *pl; void *h; } loaded;
static loaded backends[MAX_PLUGINS];
static int n_backends;

static const picolm_plugin *load(const char *path, void **hout) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "dlopen %s%s%s", path, h ? "" : ": ", h ? "" : dlerror());
    if (!h) return NULL;
    picolm_entry_fn entry = (picolm_entry_fn)dlsym(h, PICOLM_ENTRY);
    const picolm_plugin *pl = entry ? entry() : NULL;
    CHECK(pl && pl->abi_version == PICOLM_ABI_VERSION && pl->struct_size >= sizeof(picolm_plugin) && pl->vtable,
          "%s: entry point and descriptor", path);
    if (!pl || pl->abi_version != PICOLM_ABI_VERSION || !pl->vtable) { dlclose(h); return NULL; }
    *hout = h;
    return pl;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static void load_all(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) { SKIP("no plugin directory %s (build first)", dir); return; }
    struct dirent *e;
    char path[2048];
    while ((e = readdir(d))) {
        if (!ends_with(e->d_name, ".so")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        void *h;
        if (!strncmp(e->d_name, "format-", 7)) {
            const picolm_plugin *pl = load(path, &h);
            if (!pl) continue;
            CHECK(pl->kind == PICOLM_KIND_FORMAT, "%s: kind is FORMAT", e->d_name);
            const picolm_format_vtable *vt = pl->vtable;
            for (uint32_t i = 0; i < vt->n_formats; i++) {
                const picolm_format *f = (const picolm_format *)((const char *)vt->formats + (size_t)i * vt->format_size);
                if (f->type_id < PL_TYPE_MAX && !fmt_by_type[f->type_id]) {
                    fmt_by_type[f->type_id] = f;
                    fmt_size[f->type_id] = vt->format_size;
                }
            }
        } else if (!strncmp(e->d_name, "backend-", 8) && n_backends < MAX_PLUGINS) {
            const picolm_plugin *pl = load(path, &h);
            if (!pl) continue;
            CHECK(pl->kind == PICOLM_KIND_BACKEND && pl->name, "%s: kind is BACKEND", e->d_name);
            snprintf(backends[n_backends].file, sizeof backends[n_backends].file, "%s", e->d_name);
            backends[n_backends].pl = pl;
            backends[n_backends].h = h;
            n_backends++;
        }
    }
    closedir(d);
}

static size_t row_bytes(const picolm_format *f, int64_t n) { return (size_t)(n / f->block_size) * f->type_size; }
/* rows a format converts and dots at once (plugin.h: row_group), 1 if plain */
static int64_t group_of(const picolm_format *f) {
    const uint32_t sz = fmt_size[f->type_id];
    const uint32_t g = sz >= offsetof(picolm_format, row_group) + sizeof f->row_group ? f->row_group : 0;
    return g > 1 ? g : 1;
}
#define GMAX 16
static const char *tname(uint32_t t) { return t < PL_TYPE_MAX && fmt_by_type[t] ? fmt_by_type[t]->name : "?"; }

/* sum |w_i * a_i| in double, the scale of the rounding error of a dot, for
   each row of w (one row, or a whole group of a grouped format) */
static void dot_magnitudes(const picolm_format *fw, const void *w, const picolm_format *fa, const void *a, int64_t n, double *m) {
    const int64_t g = group_of(fw);
    float *x = malloc(g * n * sizeof *x), *y = malloc(n * sizeof *y);
    fw->dequantize_row(w, x, n);
    fa->dequantize_row(a, y, n);
    for (int64_t r = 0; r < g; r++) {
        m[r] = 0;
        for (int64_t i = 0; i < n; i++) m[r] += fabs((double)x[r * n + i] * y[i]);
    }
    free(x); free(y);
}

#define REL_TOL 1e-5

/* ---- Q5_0_R16, Q4_K_R16N: layouts with numerics of their own (repack.c) --
   Their kernels must give the format's reference bits, not just come close:
   vec_dot == the reference vec_dot and gemm == vec_dot for every tile shape
   (greedy output then does not depend on the batch).  Weights are random
   bytes (every bit pattern is a valid block) with realistic scales;
   activations alternate between the reference quantizer's rows and random
   bytes (which hold the -128 the quantizer never makes).  The extremes of
   the kernels' int16 sums (4 maddubs of u = 0..31 by y = -128..127 each):
   every u = 31 (q = 15) or 0 (q = -16) against y = 127 or -128 everywhere,
   where the sum is also known exactly. */
static void q5r16_random(const picolm_format *fw, const picolm_format *fa, uint8_t *w, int64_t groups, uint8_t *a, size_t as,
                         int64_t ncols, int64_t n) {
    const size_t gb = 16 * row_bytes(fw, n);
    for (size_t i = 0; i < groups * gb; i++) w[i] = (uint8_t)rnd_u32();
    for (int64_t b = 0; b < groups * (n / QK5_0); b++)
        for (int r = 0; r < 16; r++) ((block_q5_0_r16 *)w)[b].d[r] = picolm_float_to_half(1e-3f * (0.1f + rnd_unit()));
    float *y = malloc(n * sizeof *y);
    for (int64_t c = 0; c < ncols; c++) {
        block_q8_0 *q = (block_q8_0 *)(a + c * as);
        if (c % 2 == 0) {
            fill(y, n);
            fa->quantize_row(y, q, n);
        } else
            for (int64_t b = 0; b < n / QK8_0; b++) {
                q[b].d = picolm_float_to_half(0.05f * (0.1f + rnd_unit()));
                for (int j = 0; j < QK8_0; j++) q[b].qs[j] = (int8_t)rnd_u32();
            }
    }
    free(y);
}

typedef void (*rn16_random_fn)(const picolm_format *fw, const picolm_format *fa, uint8_t *w, int64_t groups, uint8_t *a, size_t as,
                               int64_t ncols, int64_t n);
typedef void (*rn16_extremes_fn)(const char *bname, const picolm_kernel *k, const picolm_format *fw, const picolm_format *fa);
typedef struct {
    uint32_t w, a;              /* weight layout and activation type */
    int64_t lens[6];            /* row lengths to try */
    rn16_random_fn random;      /* weights and activations */
    rn16_extremes_fn extremes;  /* the kernels' int16 sums at their limits */
} rn16_spec;

static void test_exact_rows16(const char *bname, const picolm_kernel *k, const rn16_spec *sp) {
    const picolm_format *fw = fmt_by_type[sp->w], *fa = fmt_by_type[sp->a];
    if (!fw || !fa || fw->row_group != 16) { CHECK(0, "%s %s: format with 16-row groups and its activation type loaded", bname, tname(sp->w)); return; }
    const int64_t *lens = sp->lens;
    enum { MAXG = 4, MAXC = 17 };
    int vd_same = 1, gm_same = 1;
    for (size_t li = 0; li < 6; li++) {
        const int64_t n = lens[li];
        const size_t gb = 16 * row_bytes(fw, n), as = row_bytes(fa, n) + 8; /* padded, keeping Q8_K's 4-byte alignment */
        uint8_t *W = malloc(MAXG * gb), *A = malloc(MAXC * as);
        sp->random(fw, fa, W, MAXG, A, as, MAXC, n);
        float want[MAXG][MAXC][16];
        for (int g = 0; g < MAXG; g++)
            for (int c = 0; c < MAXC; c++) {
                float got[17];
                got[16] = -12345.0f;
                fw->vec_dot(n, want[g][c], W + g * gb, A + c * as);
                k->vec_dot(n, got, W + g * gb, A + c * as);
                int r = 0;
                while (r < 16 && !memcmp(&got[r], &want[g][c][r], sizeof got[r])) r++;
                if (r < 16 || got[16] != -12345.0f) {
                    if (vd_same) printf("# %s %s vec_dot n=%lld group %d column %d row %d: %.9g, reference %.9g\n", bname, fw->name, (long long)n, g,
                                        c, r, got[r % 16], want[g][c][r % 16]);
                    vd_same = 0;
                }
            }
        /* gemm: 1..4 groups x every column count 1..9 and 17 */
        static const int ncs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 17};
        for (int ng = 1; ng <= MAXG; ng++)
            for (size_t ci = 0; ci < sizeof ncs / sizeof *ncs; ci++) {
                const int nc = ncs[ci];
                const size_t ds = 16 * ng + 5;
                float *dst = malloc(ds * (nc + 1) * sizeof *dst);
                for (size_t i = 0; i < ds * (nc + 1); i++) dst[i] = -12345.0f;
                k->gemm(n, 16 * ng, nc, W, gb / 16, A, as, dst, ds);
                for (int c = 0; c <= nc; c++)
                    for (size_t r = 0; r < ds; r++) {
                        const float got = dst[c * ds + r];
                        const int inside = c < nc && r < (size_t)(16 * ng);
                        if (inside ? memcmp(&got, &want[r / 16][c][r % 16], sizeof got) : got != -12345.0f) {
                            if (gm_same) printf("# %s %s gemm n=%lld %dx%d [%zu,%d]: %.9g, vec_dot %.9g\n", bname, fw->name, (long long)n, 16 * ng,
                                                nc, r, c, got, inside ? want[r / 16][c][r % 16] : -12345.0f);
                            gm_same = 0;
                        }
                    }
                free(dst);
            }
        free(W); free(A);
    }
    CHECK(vd_same, "%s %s vec_dot == the format's reference, bit for bit (n = %lld..%lld, 4 groups, 17 columns)", bname, fw->name,
          (long long)lens[0], (long long)lens[5]);
    CHECK(gm_same, "%s %s gemm == vec_dot, bit for bit (16..64 rows x 1..9, 17 columns, the same lengths)", bname, fw->name);
    sp->extremes(bname, k, fw, fa);
}

static void q5r16_extremes(const char *bname, const picolm_kernel *k, const picolm_format *fw, const picolm_format *fa) {

    /* extremes: |isum| per block = 32 * 16 * 128 at most, exact in float */
    const int64_t n = 4864, nb = n / QK5_0;
    const size_t gb = 16 * row_bytes(fw, n), as = row_bytes(fa, n);
    uint8_t *W = malloc(gb), *A = malloc(2 * as);
    int ext = 1;
    for (int wu = 0; wu < 2; wu++) {
        const uint8_t bits = wu ? 0xFF : 0x00; /* u = 31 or 0 everywhere */
        for (int64_t b = 0; b < nb; b++) {
            block_q5_0_r16 *x = (block_q5_0_r16 *)W + b;
            memset(x->qs, bits, sizeof x->qs);
            memset(x->qh, bits, sizeof x->qh);
            for (int r = 0; r < 16; r++) x->d[r] = picolm_float_to_half(1.0f);
        }
        for (int yc = 0; yc < 2; yc++) {
            const int8_t yv = yc ? -128 : 127;
            for (int64_t b = 0; b < nb; b++) {
                block_q8_0 *q = (block_q8_0 *)A + b;
                q->d = picolm_float_to_half(1.0f);
                memset(q->qs, (uint8_t)yv, sizeof q->qs);
            }
            memcpy(A + as, A, as);
            const float exact = (float)((wu ? 15 : -16) * yv * 32 * nb);
            float r[16], s[16], gm[2 * 16];
            fw->vec_dot(n, r, W, A);
            k->vec_dot(n, s, W, A);
            k->gemm(n, 16, 2, W, gb / 16, A, as, gm, 16);
            for (int i = 0; i < 16; i++) ext &= r[i] == exact && s[i] == exact && gm[i] == exact && gm[16 + i] == exact;
            if (!ext) printf("# %s Q5_0_R16 extreme u=%d y=%d: reference %.9g, vec_dot %.9g, gemm %.9g, exact %.9g\n", bname, wu ? 31 : 0, yv,
                             r[0], s[0], gm[0], exact);
        }
    }
    CHECK(ext, "%s Q5_0_R16 extremes (u = 0 / 31 by y = 127 / -128, n = 4864): reference, vec_dot and gemm give the exact sums", bname);
    free(W); free(A);
}

/* Q4_K_R16N: random bytes (every pattern is a valid block: 6-bit scales,
   nibbles) with realistic d and dmin; activations as for Q5_0_R16, the
   random Q8_K rows with their bsums made from their quants. */
static void q4rn16_random(const picolm_format *fw, const picolm_format *fa, uint8_t *w, int64_t groups, uint8_t *a, size_t as,
                          int64_t ncols, int64_t n) {
    const size_t gb = 16 * row_bytes(fw, n);
    for (size_t i = 0; i < groups * gb; i++) w[i] = (uint8_t)rnd_u32();
    for (int64_t b = 0; b < groups * (n / QK_K); b++)
        for (int r = 0; r < 16; r++) {
            ((block_q4_K_r16 *)w)[b].d[r] = picolm_float_to_half(1e-3f * (0.1f + rnd_unit()));
            ((block_q4_K_r16 *)w)[b].dmin[r] = picolm_float_to_half(1e-3f * (0.1f + rnd_unit()));
        }
    float *y = malloc(n * sizeof *y);
    for (int64_t c = 0; c < ncols; c++) {
        block_q8_K *q = (block_q8_K *)(a + c * as);
        if (c % 2 == 0) {
            fill(y, n);
            fa->quantize_row(y, q, n);
        } else
            for (int64_t b = 0; b < n / QK_K; b++) {
                q[b].d = 0.05f * (0.1f + rnd_unit());
                for (int j = 0; j < QK_K; j++) q[b].qs[j] = (int8_t)rnd_u32();
                for (int j = 0; j < QK_K / 16; j++) {
                    int sum = 0;
                    for (int l = 0; l < 16; l++) sum += q[b].qs[16 * j + l];
                    q[b].bsums[j] = (int16_t)sum;
                }
            }
    }
    free(y);
}

/* every quant 15 (or 0) with scales and mins 63 against y = 127 or -128
   everywhere: the int16 sum of a sub-block's 8 maddubs reaches
   8 * 2 * 15 * 128 = 30720, and the result is known exactly (d = dmin = 1):
   per superblock 63 * 256 * y * (q - 1). */
static void q4rn16_extremes(const char *bname, const picolm_kernel *k, const picolm_format *fw, const picolm_format *fa) {
    const int64_t n = 4864, nb = n / QK_K;
    const size_t gb = 16 * row_bytes(fw, n), as = row_bytes(fa, n);
    uint8_t *W = malloc(gb), *A = malloc(2 * as);
    int ext = 1;
    for (int wq = 0; wq < 2; wq++) {
        for (int64_t b = 0; b < nb; b++) {
            block_q4_K_r16 *x = (block_q4_K_r16 *)W + b;
            memset(x->qs, wq ? 0xFF : 0x00, sizeof x->qs);
            memset(x->scales_l, 0xFF, sizeof x->scales_l); memset(x->scales_h, 0xFF, sizeof x->scales_h);
            memset(x->mins_l, 0xFF, sizeof x->mins_l); memset(x->mins_h, 0xFF, sizeof x->mins_h);
            for (int r = 0; r < 16; r++) x->d[r] = x->dmin[r] = picolm_float_to_half(1.0f);
        }
        for (int yc = 0; yc < 2; yc++) {
            const int8_t yv = yc ? -128 : 127;
            for (int64_t b = 0; b < nb; b++) {
                block_q8_K *q = (block_q8_K *)A + b;
                q->d = 1.0f;
                memset(q->qs, (uint8_t)yv, sizeof q->qs);
                for (int j = 0; j < QK_K / 16; j++) q->bsums[j] = (int16_t)(16 * yv);
            }
            memcpy(A + as, A, as);
            const float exact = (float)(63.0 * 256 * yv * ((wq ? 15 : 0) - 1) * nb);
            float r[16], s[16], gm[2 * 16];
            fw->vec_dot(n, r, W, A);
            k->vec_dot(n, s, W, A);
            k->gemm(n, 16, 2, W, gb / 16, A, as, gm, 16);
            for (int i = 0; i < 16; i++) ext &= r[i] == exact && s[i] == exact && gm[i] == exact && gm[16 + i] == exact;
            if (!ext) printf("# %s Q4_K_R16N extreme q=%d y=%d: reference %.9g, vec_dot %.9g, gemm %.9g, exact %.9g\n", bname, wq ? 15 : 0, yv,
                             r[0], s[0], gm[0], exact);
        }
    }
    CHECK(ext, "%s Q4_K_R16N extremes (q = 0 / 15, scales and mins 63, by y = 127 / -128, n = 4864): reference, vec_dot and gemm exact",
          bname);
    free(W); free(A);
}

static const rn16_spec rn16_specs[] = {
    {PICOLM_TYPE_Q5_0_R16, PICOLM_TYPE_Q8_0, {32, 64, 96, 896, 2080, 4864}, q5r16_random, q5r16_extremes},
    {PICOLM_TYPE_Q4_K_R16N, PICOLM_TYPE_Q8_K, {256, 512, 768, 2048, 4864, 8192}, q4rn16_random, q4rn16_extremes},
};

/* ---- plain Q5_0 with row numerics (avx512 VNNI) ----------------------------
   The avx512 VNNI level runs plain Q5_0 rows with Q5_0_R16's numerics: per
   row the exact integer sum of each block, then acc = fmaf(d_x * d_y, isum,
   acc) in block order.  Its vec_dot and gemm must give exactly those bits,
   at every shape its gemm treats differently: whole 16-row groups and rows
   past them, row lengths over one unpacked chunk (32 blocks), columns in
   tiles of 8, over one activation panel (4864 columns: 48 per panel), and
   the 1-3 columns left after a panel. */
static float q5_0_rownum_dot(int64_t n, const block_q5_0 *x, const block_q8_0 *y) {
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        int isum = 0;
        for (int j = 0; j < QK5_0; j++) {
            const int q = ((x[i].qs[j % 16] >> (j < 16 ? 0 : 4)) & 0xF) | (int)((qh >> j) & 1) << 4;
            isum += (q - 16) * y[i].qs[j];
        }
        acc = fmaf(picolm_half_to_float(x[i].d) * picolm_half_to_float(y[i].d), (float)isum, acc);
    }
    return acc;
}
static void test_q5_0_rownum(const char *bname, const picolm_kernel *k) {
    const picolm_format *fa = fmt_by_type[PICOLM_TYPE_Q8_0];
    static const int64_t lens[] = {32, 896, 1056, 4864};
    static const int64_t nrs[] = {16, 35, 64};
    static const int64_t ncs[] = {1, 2, 3, 4, 5, 8, 9, 17, 50, 53, 64};
    enum { MAXR = 64, MAXC = 64 };
    int same = 1;
    float *y = malloc(4864 * sizeof *y), *want = malloc(MAXR * MAXC * sizeof *want), *dst = malloc((MAXR + 3) * (MAXC + 1) * sizeof *dst);
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        const int64_t n = lens[li], nb = n / QK5_0;
        const size_t ws = nb * sizeof(block_q5_0) + 2, as = nb * sizeof(block_q8_0) + 8; /* padded strides */
        uint8_t *W = malloc(MAXR * ws), *A = malloc(MAXC * as);
        for (size_t i = 0; i < MAXR * ws; i++) W[i] = (uint8_t)rnd_u32();
        for (int r = 0; r < MAXR; r++)
            for (int64_t b = 0; b < nb; b++) ((block_q5_0 *)(W + r * ws))[b].d = picolm_float_to_half(1e-3f * (0.1f + rnd_unit()));
        for (int c = 0; c < MAXC; c++) {
            block_q8_0 *q = (block_q8_0 *)(A + c * as);
            if (c % 2 == 0) { fill(y, n); fa->quantize_row(y, q, n); }
            else
                for (int64_t b = 0; b < nb; b++) { /* random bytes: the -128 the quantizer never makes */
                    q[b].d = picolm_float_to_half(0.05f * (0.1f + rnd_unit()));
                    for (int j = 0; j < QK8_0; j++) q[b].qs[j] = (int8_t)rnd_u32();
                }
        }
        for (int c = 0; c < MAXC; c++)
            for (int r = 0; r < MAXR; r++) {
                want[c * MAXR + r] = q5_0_rownum_dot(n, (const block_q5_0 *)(W + r * ws), (const block_q8_0 *)(A + c * as));
                float got = -12345.0f;
                if (r < 17 && c < 3) {
                    k->vec_dot(n, &got, W + r * ws, A + c * as);
                    if (memcmp(&got, &want[c * MAXR + r], sizeof got)) {
                        if (same) printf("# %s Q5_0 vec_dot n=%lld row %d column %d: %.9g, row numerics %.9g\n", bname, (long long)n, r, c, got,
                                         want[c * MAXR + r]);
                        same = 0;
                    }
                }
            }
        for (size_t ri = 0; ri < sizeof nrs / sizeof *nrs; ri++)
            for (size_t ci = 0; ci < sizeof ncs / sizeof *ncs; ci++) {
                const int64_t nr = nrs[ri], nc = ncs[ci], ds = nr + 3;
                for (int64_t i = 0; i < ds * (nc + 1); i++) dst[i] = -12345.0f;
                k->gemm(n, nr, nc, W, ws, A, as, dst, ds);
                for (int64_t c = 0; c <= nc; c++)
                    for (int64_t r = 0; r < ds; r++) {
                        const float got = dst[c * ds + r];
                        const int inside = c < nc && r < nr;
                        if (inside ? memcmp(&got, &want[c * MAXR + r], sizeof got) : got != -12345.0f) {
                            if (same) printf("# %s Q5_0 gemm n=%lld %lldx%lld [%lld,%lld]: %.9g, row numerics %.9g\n", bname, (long long)n,
                                             (long long)nr, (long long)nc, (long long)r, (long long)c, got, inside ? want[c * MAXR + r] : -12345.0f);
                            same = 0;
                        }
                    }
            }
        free(W); free(A);
    }
    CHECK(same, "%s Q5_0 vec_dot and gemm == row numerics (Q5_0_R16's), bit for bit (n = 32..4864, 16..64 rows x 1..64 columns)", bname);
    free(y); free(want); free(dst);
}

/* ---- K-quant extremes: the int16 sums of the avx2 tiles --------------------
   The avx2 K-quant tiles add two vpmaddubsw results of a sub-block pair in
   int16 before scaling (backends/avx2/ktile.h): 4 products of up to 63 * 128
   (Q6_K) in one lane.  Every quant at its largest (all bits set) against
   activations of all +127 or all -128 puts the most into those lanes; the
   sums must equal the exact dot (computed in double from the dequantized
   rows, relative 1e-5: the float steps round) and gemm must equal vec_dot
   in every tile width.  Columns alternate +127 / -128. */
static void test_kquant_extremes(const char *bname, const picolm_kernel *k) {
    const picolm_format *fw = fmt_by_type[k->type_id], *fa = fmt_by_type[k->vec_dot_type];
    const int64_t n = 3 * QK_K, nb = 3, nr = 3, maxc = 9;
    const size_t ws = row_bytes(fw, n), as = row_bytes(fa, n);
    uint8_t *W = malloc(nr * ws), *A = malloc(maxc * as);
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    memset(W, 0xFF, nr * ws); /* every quant, scale and min at its largest */
    for (int64_t b = 0; b < nr * nb; b++) {
        const picolm_half h = picolm_float_to_half(0.5f), hm = picolm_float_to_half(0.25f);
        if (k->type_id == PICOLM_TYPE_Q6_K) {
            block_q6_K *q = (block_q6_K *)W + b;
            for (int j = 0; j < 16; j++) q->scales[j] = (int8_t)(j & 1 ? -128 : 127);
            q->d = h;
        } else if (k->type_id == PICOLM_TYPE_Q5_K) ((block_q5_K *)W)[b].d = h, ((block_q5_K *)W)[b].dmin = hm;
        else ((block_q4_K *)W)[b].d = h, ((block_q4_K *)W)[b].dmin = hm;
    }
    for (int64_t c = 0; c < maxc; c++)
        for (int64_t b = 0; b < nb; b++) {
            block_q8_K *q = (block_q8_K *)(A + c * as) + b;
            const int v = c & 1 ? -128 : 127;
            q->d = 1.0f / 64;
            memset(q->qs, (uint8_t)v, sizeof q->qs);
            for (int j = 0; j < QK_K / 16; j++) q->bsums[j] = (int16_t)(16 * v);
        }
    int ok = 1;
    for (int64_t nc = 1; nc <= maxc; nc++) {
        float dst[3 * 9];
        k->gemm(n, nr, nc, W, ws, A, as, dst, (size_t)nr);
        for (int64_t c = 0; c < nc; c++) for (int64_t r = 0; r < nr; r++) {
            float own, ref;
            k->vec_dot(n, &own, W + r * ws, A + c * as);
            fw->vec_dot(n, &ref, W + r * ws, A + c * as);
            fw->dequantize_row(W + r * ws, x, n);
            fa->dequantize_row(A + c * as, y, n);
            double exact = 0;
            for (int64_t i = 0; i < n; i++) exact += (double)x[i] * y[i];
            const float got = dst[c * nr + r];
            const int good = !memcmp(&got, &own, sizeof got) && fabs(own - exact) <= REL_TOL * fabs(exact) &&
                             fabs(ref - exact) <= REL_TOL * fabs(exact);
            if (!good && ok) printf("# %s %s extremes %lldx%lld [%lld,%lld]: gemm %.9g, vec_dot %.9g, reference %.9g, exact %.9g\n", bname,
                                    fw->name, (long long)nr, (long long)nc, (long long)r, (long long)c, got, own, ref, exact);
            ok &= good;
        }
    }
    CHECK(ok, "%s %s extremes (all quants at their largest x activations +127 / -128, nc 1..9): gemm == vec_dot == exact", bname, fw->name);
    free(W); free(A); free(x); free(y);
}

/* ---- kernels --------------------------------------------------------------- */
static void test_kernel(const char *bname, const picolm_kernel *k) {
    const picolm_format *fw = k->type_id < PL_TYPE_MAX ? fmt_by_type[k->type_id] : NULL;
    const picolm_format *fa = k->vec_dot_type < PL_TYPE_MAX ? fmt_by_type[k->vec_dot_type] : NULL;
    if (!fw || !fa) { SKIP("%s: kernel type %u x %u: no format plugin", bname, k->type_id, k->vec_dot_type); return; }
    CHECK(k->vec_dot != NULL, "%s %s: vec_dot present", bname, fw->name);
    if (!k->vec_dot) return;
    CHECK(fw->vec_dot_type == k->vec_dot_type, "%s %s: activation type %s is the format's (%s)", bname, fw->name,
          fa->name, tname(fw->vec_dot_type));
    if (fw->vec_dot_type != k->vec_dot_type || !fw->vec_dot) return;
    if (!fw->quantize_row || !fa->quantize_row) { SKIP("%s %s: format has no quantize_row", bname, fw->name); return; }

    const int64_t bs = fw->block_size > fa->block_size ? fw->block_size : fa->block_size;
    /* a grouped format: g rows at once, vec_dot gives g results */
    const int64_t g = group_of(fw);
    if (g > GMAX) { CHECK(0, "%s %s: row_group %lld is not one the test covers", bname, fw->name, (long long)g); return; }
    const int64_t mults[] = { 1, 3, 11, 17 };
    /* float formats: awkward lengths that exercise every tail */
    const int64_t flens[] = { 1, 7, 33, 100, 1027, 4099 };
    const int nlen = bs == 1 ? 6 : 4;
    int ok = 1;
    double worst = 0;
    for (int li = 0; li < nlen; li++) {
        const int64_t n = bs == 1 ? flens[li] : bs * mults[li];
        float *xf = malloc(g * n * sizeof *xf), *yf = malloc(n * sizeof *yf);
        void *w = calloc(g, row_bytes(fw, n)), *a = calloc(1, row_bytes(fa, n));
        for (int rep = 0; rep < 3; rep++) {
            fill(xf, g * n);
            fill(yf, n);
            fw->quantize_row(xf, w, n);
            fa->quantize_row(yf, a, n);
            float r[GMAX], s[GMAX + 1];
            double mag[GMAX];
            s[g] = -12345.0f; /* sentinel: a kernel writes g results, no more */
            fw->vec_dot(n, r, w, a);
            k->vec_dot(n, s, w, a);
            dot_magnitudes(fw, w, fa, a, n, mag);
            if (s[g] != -12345.0f) {
                if (ok) printf("# %s %s n=%lld: vec_dot wrote past its %lld results\n", bname, fw->name, (long long)n, (long long)g);
                ok = 0;
            }
            for (int64_t i = 0; i < g; i++) {
                const double err = fabs((double)s[i] - r[i]) / (mag[i] > 0 ? mag[i] : 1);
                if (err > worst) worst = err;
                if (!(err <= REL_TOL)) {
                    if (ok) printf("# %s %s n=%lld row %lld: got %.9g want %.9g (rel err %.3g)\n", bname, fw->name, (long long)n,
                                   (long long)i, s[i], r[i], err);
                    ok = 0;
                }
            }
        }
        free(xf); free(yf); free(w); free(a);
    }
    CHECK(ok, "%s %s x %s vec_dot vs reference (worst rel err %.2g)", bname, fw->name, fa->name, worst);

    if (!k->gemm) return;
    /* gemm: nr x nc tiles with padded strides and a sentinel-filled dst */
    /* row lengths: 1 block, 3, and 9 (more than two 4-superblock panel chunks);
       then 33792 (1056 blocks of 32), one tile shape only: rows longer than
       the 32768 elements an avx2 8-column tile panel holds (its fallback) */
    /* gemm and vec_dot of one backend give the same bits (prefill logits =
       decode's), except the avx512 VNNI level's 16-row panels, which round
       per superblock in another order */
    /* gemm == vec_dot bit for bit (the batch then never changes a token's
       logits): every backend, the VNNI level of avx512 included; avx512
       without VNNI keeps other orders for its 2-3 column kernels */
    const int want_same = strcmp(bname, "avx512[no-vnni]") != 0;
    int same = 1;
    for (int ni = 0; ni < 4; ni++) {
        if (ni == 3 && bs == 1) break;
        const int64_t n = bs == 1 ? 259 * (ni + 1) : ni == 3 ? 33792 : bs * (ni == 0 ? 1 : ni == 1 ? 3 : 9);
        /* 16, 37 rows: the 16-row panels of the avx512 VNNI gemm, and their
           tail; a grouped format takes whole groups of g rows */
        const int64_t nrs1[] = { 1, 3, 5, 6, 16, 37 }, nrsg[] = { g, 2 * g, 3 * g, 3 * g, g, 2 * g };
        /* columns: every remainder of the 4- and 8-column tiles, whole tiles, and
           a tile plus a remainder */
        const int64_t *nrs = g > 1 ? nrsg : nrs1, ncs[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 17 };
        const int nnc = (int)(sizeof ncs / sizeof ncs[0]);
        /* padded, but keeping 4-byte alignment: blocks with a float scale
           (Q8_K) need it, and the engine's rows always have it; a group's
           rows are contiguous (one indivisible run), so no padding there */
        const size_t ws = row_bytes(fw, n) + (g > 1 ? 0 : 64 + 4), as = row_bytes(fa, n) + 96 + 12;
        const int64_t maxr = ni == 3 ? nrs[1] : g > 1 ? 3 * g : 37, maxc = ni == 3 ? 9 : 17;
        char *W = calloc(maxr, ws), *A = calloc(maxc, as);
        float *xf = malloc(g * n * sizeof *xf);
        for (int64_t r = 0; r < maxr; r += g) { fill(xf, g * n); fw->quantize_row(xf, W + r * ws, n); }
        for (int64_t c = 0; c < maxc; c++) { fill(xf, n); fa->quantize_row(xf, A + c * as, n); }
        /* each row and column's reference dot, its vec_dot and magnitude, once
           for every tile shape below (a group's: g results at once) */
        float *want = malloc(sizeof(float) * maxr * maxc), *own = malloc(sizeof(float) * maxr * maxc);
        double *mag = malloc(sizeof(double) * maxr * maxc);
        for (int64_t c = 0; c < maxc; c++)
            for (int64_t r0 = 0; r0 < maxr; r0 += g) {
                fw->vec_dot(n, want + c * maxr + r0, W + r0 * ws, A + c * as);
                k->vec_dot(n, own + c * maxr + r0, W + r0 * ws, A + c * as);
                dot_magnitudes(fw, W + r0 * ws, fa, A + c * as, n, mag + c * maxr + r0);
            }
        if (ni == 0) { ok = 1; worst = 0; }
        for (int ri = 0; ri < 6; ri++) for (int ci = 0; ci < nnc; ci++) {
            if (ni == 3 && (ri != 1 || ncs[ci] != 9)) continue; /* 3 rows (groups) x 9 columns */
            const int64_t nr = nrs[ri], nc = ncs[ci];
            const size_t ds = (size_t)nr + 3;
            float *dst = malloc(sizeof(float) * ds * (nc + 1));
            for (size_t i = 0; i < ds * (nc + 1); i++) dst[i] = -12345.0f;
            k->gemm(n, nr, nc, W, ws, A, as, dst, ds);
            for (int64_t c = 0; c <= nc; c++) for (int64_t r = 0; r < (int64_t)ds; r++) {
                const float got = dst[c * ds + r];
                if (c == nc || r >= nr) {
                    if (got != -12345.0f) { if (ok) printf("# %s %s gemm %lldx%lld wrote outside the tile\n", bname, fw->name, (long long)nr, (long long)nc); ok = 0; }
                    continue;
                }
                const int64_t i = c * maxr + r;
                if (memcmp(&got, &own[i], sizeof got)) {
                    if (same && want_same) printf("# %s %s gemm %lldx%lld n=%lld [%lld,%lld]: got %.9g, its vec_dot %.9g\n", bname, fw->name,
                                     (long long)nr, (long long)nc, (long long)n, (long long)r, (long long)c, got, own[i]);
                    same = 0;
                }
                const double err = fabs((double)got - want[i]) / (mag[i] > 0 ? mag[i] : 1);
                if (err > worst) worst = err;
                if (!(err <= REL_TOL)) {
                    if (ok) printf("# %s %s gemm %lldx%lld [%lld,%lld]: got %.9g want %.9g\n", bname, fw->name,
                                   (long long)nr, (long long)nc, (long long)r, (long long)c, got, want[i]);
                    ok = 0;
                }
            }
            free(dst);
        }
        free(W); free(A); free(xf); free(want); free(own); free(mag);
    }
    CHECK(ok, "%s %s gemm tiles (nr %s x nc 1..17, 4 lengths, padded strides; worst rel err %.2g)", bname, fw->name,
          g > 1 ? "1..3 groups" : "1..37", worst);
    if (want_same) CHECK(same, "%s %s gemm bit-identical to its vec_dot", bname, fw->name);
    for (size_t i = 0; i < sizeof rn16_specs / sizeof *rn16_specs; i++)
        if (k->type_id == rn16_specs[i].w) test_exact_rows16(bname, k, &rn16_specs[i]);
    /* the level that gives plain Q5_0 Q5_0_R16's numerics */
    if (k->type_id == PICOLM_TYPE_Q5_0 && !strcmp(bname, "avx512")) test_q5_0_rownum(bname, k);
    if (k->type_id == PICOLM_TYPE_Q4_K || k->type_id == PICOLM_TYPE_Q5_K || k->type_id == PICOLM_TYPE_Q6_K) test_kquant_extremes(bname, k);
}

/* single-thread throughput over a weight matrix of about `bytes` (one
   buffer, allocated once: fresh pages would add page-fault time).  gemm is
   timed with 4 activation columns and reported per column, i.e. the weight
   bandwidth a token costs. */
static char *bench_buf;
static size_t bench_cap;
static double bench_kernel(const picolm_kernel *k, size_t bytes, int use_gemm) {
    /* use_gemm = number of activation columns (0: vec_dot per row) */
    const picolm_format *fw = fmt_by_type[k->type_id], *fa = fmt_by_type[k->vec_dot_type];
    const int64_t bs = fw->block_size > fa->block_size ? fw->block_size : fa->block_size;
    const int64_t n = (4096 / bs) * bs; /* a TinyLlama-ish row */
    const size_t rb = row_bytes(fw, n);
    const int64_t g = group_of(fw);
    const int64_t rows = (int64_t)(bytes / rb) / (8 * g) * (8 * g); /* whole groups, 8 distinct */
    if (bench_cap < rb * rows) {
        free(bench_buf);
        bench_cap = rb * rows;
        bench_buf = malloc(bench_cap);
        if (!bench_buf) { bench_cap = 0; return 0; }
    }
    char *W = bench_buf;
    float *xf = malloc(n * sizeof *xf);
    /* quantize a few distinct rows, replicate (the reference quantizers are slow) */
    float *xg = malloc(g * n * sizeof *xg);
    for (int64_t r = 0; r < rows; r += g) {
        if (r < 8 * g) { fill(xg, g * n); fw->quantize_row(xg, W + r * rb, n); }
        else memcpy(W + r * rb, W + (r % (8 * g)) * rb, g * rb);
    }
    free(xg);
    const int ncols = use_gemm ? use_gemm : 1;
    const size_t arb = row_bytes(fa, n);
    char *A = malloc(arb * ncols);
    for (int c = 0; c < ncols; c++) { fill(xf, n); fa->quantize_row(xf, A + c * arb, n); }
    float *out = malloc(sizeof(float) * rows * ncols);
    const char *bench = getenv("PICOLM_BENCH");
    const double min_time = bench && atoi(bench) >= 2 ? 0.5 : 0.05;
    double best = 1e30, t0 = now_sec();
    int reps = 0;
    do {
        const double t = now_sec();
        if (use_gemm) k->gemm(n, rows, ncols, W, rb, A, arb, out, rows);
        else for (int64_t r = 0; r < rows; r += g) k->vec_dot(n, out + r, W + r * rb, A);
        const double el = now_sec() - t;
        if (el < best) best = el;
        reps++;
    } while (reps < 3 || now_sec() - t0 < min_time);
    free(xf); free(A); free(out);
    return (double)rb * rows * ncols / best / 1e9;
}

/* ---- activation quantizers -------------------------------------------------- */
static void test_act_quant(const char *bname, const picolm_act_quant *q) {
    const picolm_format *f = q->type_id < PL_TYPE_MAX ? fmt_by_type[q->type_id] : NULL;
    if (!f || !f->quantize_row) { SKIP("%s: act quant type %u has no reference quantizer", bname, q->type_id); return; }
    CHECK(q->quantize_row != NULL, "%s %s: quantize_row present", bname, f->name);
    if (!q->quantize_row) return;
    const int64_t bs = f->block_size;
    int ok = 1;
    for (int mode = 0; mode < 4; mode++) for (int mi = 0; mi < 3; mi++) {
        const int64_t n = bs * (mi == 0 ? 1 : mi == 1 ? 5 : 16);
        float *x = malloc(n * sizeof *x);
        fill(x, n);
        if (mode == 1) {
            /* rounding ties: amax 127 gives scale 1 for Q8_0/Q8_1; for Q8_K a
               block maximum of -127 gives iscale 1: x.5 values must round
               like the reference (half away from zero / half to even) */
            for (int64_t i = 0; i < n; i++) x[i] = (float)((int)(rnd_u32() % 253) - 126) + 0.5f;
            for (int64_t b = 0; b < n; b += 32) x[b + (rnd_u32() % 32)] = (rnd_u32() & 1) ? 127.0f : -127.0f;
            for (int64_t b = 0; b < n; b += bs) x[b + (rnd_u32() % bs)] = -127.0f;
        } else if (mode == 2) {
            /* all-zero blocks and blocks with ties in |max| of both signs */
            for (int64_t i = 0; i < n; i++) x[i] = (i / bs) % 2 ? 0.0f : x[i];
            if (n > 4) { x[1] = 9.0f; x[3] = -9.0f; }
        } else if (mode == 3) {
            for (int64_t i = 0; i < n; i++) x[i] *= 1e-3f * (1 + (i % 7)); /* small scales, fp16 subnormal d */
            for (int64_t i = 0; i < n && i < 32; i++) x[i] *= 1e-4f;
        }
        const size_t rb = row_bytes(f, n);
        unsigned char *r = malloc(rb + 16), *s = malloc(rb + 16);
        memset(r, 0xA5, rb + 16);
        memset(s, 0xA5, rb + 16);
        f->quantize_row(x, r, n);
        q->quantize_row(x, s, n);
        if (memcmp(r, s, rb + 16)) {
            size_t at = 0;
            while (at < rb + 16 && r[at] == s[at]) at++;
            if (ok) printf("# %s %s mode %d n=%lld: first differing byte %zu (block %zu, offset %zu): %d vs ref %d\n",
                           bname, f->name, mode, (long long)n, at, at / f->type_size, at % f->type_size, s[at], r[at]);
            ok = 0;
        }
        free(x); free(r); free(s);
    }
    CHECK(ok, "%s act quant %s byte-equal to the reference (random, ties, zero blocks, tiny scales)", bname, f->name);
}

/* ---- primitives --------------------------------------------------------------- */
/* the core's portable primitives (core/ops.c), for backends without their own */
static float ref_dot_f32_f16_t(const float *a, const uint16_t *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * picolm_half_to_float(b[i]);
    return s;
}
static float round16(float x) { return picolm_half_to_float(picolm_float_to_half(x)); }
static void ref_scale_axpy_f16_t(float *y, float scale, float a, const uint16_t *v, int n) {
    for (int i = 0; i < n; i++) y[i] = round16(fmaf(a, picolm_half_to_float(v[i]), scale != 1.0f ? round16(y[i] * scale) : y[i]));
}
static int close_rel(double got, double want, double mag, double tol) {
    return fabs(got - want) <= tol * (mag > 0 ? mag : 1);
}
static void test_primitives(const char *bname, const picolm_backend_vtable *vt) {
    const int ns[] = { 1, 7, 8, 15, 16, 33, 64, 100, 257, 2048 };
    const int nn = (int)(sizeof ns / sizeof ns[0]);
    float *a = malloc(4096 * sizeof *a), *b = malloc(4096 * sizeof *b), *o = malloc(4096 * sizeof *o);
    float *o2 = malloc(4096 * sizeof *o2);
    uint16_t *h = malloc(4096 * sizeof *h), *h2 = malloc(4096 * sizeof *h2);
    int ok;
    if (vt->dot_f32) {
        ok = 1;
        for (int t = 0; t < nn; t++) {
            const int n = ns[t];
            fill(a, n); fill(b, n);
            double want = 0, mag = 0;
            for (int i = 0; i < n; i++) { want += (double)a[i] * b[i]; mag += fabs((double)a[i] * b[i]); }
            if (!close_rel(vt->dot_f32(a, b, n), want, mag, 1e-6)) ok = 0;
        }
        CHECK(ok, "%s dot_f32", bname);
    }
    if (vt->dot_f32_f16) {
        ok = 1;
        for (int t = 0; t < nn; t++) {
            const int n = ns[t];
            fill(a, n); fill(b, n);
            for (int i = 0; i < n; i++) h[i] = picolm_float_to_half(b[i]);
            double want = 0, mag = 0;
            for (int i = 0; i < n; i++) {
                const double p = (double)a[i] * picolm_half_to_float(h[i]);
                want += p; mag += fabs(p);
            }
            if (!close_rel(vt->dot_f32_f16(a, h, n), want, mag, 1e-6)) ok = 0;
        }
        CHECK(ok, "%s dot_f32_f16", bname);
    }
    if (vt->scale_axpy_f16) {
        ok = 1;
        for (int t = 0; t < nn; t++) {
            const int n = ns[t];
            fill(a, n); fill(b, n);
            for (int i = 0; i < n; i++) h[i] = picolm_float_to_half(b[i]);
            const float sc = 0.37f, al = -1.25f;
            memcpy(o, a, n * sizeof *o);
            vt->scale_axpy_f16(o, sc, al, h, n);
            /* exact semantics (plugin.h): an f16 accumulator held in floats */
            for (int i = 0; i < n; i++) {
                const float yy = picolm_half_to_float(picolm_float_to_half(a[i] * sc));
                const float want = picolm_half_to_float(picolm_float_to_half(fmaf(al, picolm_half_to_float(h[i]), yy)));
                if (o[i] != want) ok = 0;
            }
            /* scale == 1 leaves y unscaled (y is already f16-representable) */
            for (int i = 0; i < n; i++) o[i] = picolm_half_to_float(picolm_float_to_half(a[i]));
            vt->scale_axpy_f16(o, 1.0f, al, h, n);
            for (int i = 0; i < n; i++) {
                const float yy = picolm_half_to_float(picolm_float_to_half(a[i]));
                if (o[i] != picolm_half_to_float(picolm_float_to_half(fmaf(al, picolm_half_to_float(h[i]), yy)))) ok = 0;
            }
        }
        CHECK(ok, "%s scale_axpy_f16", bname);
    }
    if (vt->struct_size >= offsetof(picolm_backend_vtable, attn_f16) + sizeof(void *) && vt->attn_f16) {
        /* against the loop the core runs without it, over this backend's own
           dot_f32_f16 / scale_axpy_f16 (or the reference ones), query by
           query: head sizes with and without a specialisation, 1..12 queries
           per KV head (more than one vector of softmax states), 1..300
           positions, padded strides, states carried over from a previous call */
        const int hds[] = { 64, 128, 80, 32 }, nts[] = { 1, 7, 8, 9, 64, 300 }, nqs[] = { 1, 3, 8, 12 };
        float (*dot)(const float *, const uint16_t *, int) = vt->dot_f32_f16 ? vt->dot_f32_f16 : ref_dot_f32_f16_t;
        void (*axpy)(float *, float, float, const uint16_t *, int) = vt->scale_axpy_f16 ? vt->scale_axpy_f16 : ref_scale_axpy_f16_t;
        int close = 1, same = 1;
        double worst = 0;
        for (int hi = 0; hi < 4; hi++) for (int ti = 0; ti < 6; ti++) for (int qi = 0; qi < 4; qi++) for (int carry = 0; carry < 2; carry++) {
            const int hd = hds[hi], nt = nts[ti], nq = nqs[qi];
            const size_t stride = (size_t)hd * 4 + 8, qs = (size_t)hd + 16, ys = (size_t)hd + 8; /* padded */
            uint16_t *K = malloc(stride * nt * sizeof *K), *V = malloc(stride * nt * sizeof *V);
            float *q = malloc(qs * nq * sizeof *q), *y0 = calloc(ys * nq, sizeof *y0), *y1 = calloc(ys * nq, sizeof *y1);
            float m0[12], s0[12], m1[12], s1[12];
            for (size_t i = 0; i < stride * nt; i++) { K[i] = picolm_float_to_half(rnd_val()); V[i] = picolm_float_to_half(rnd_val()); }
            for (size_t i = 0; i < qs * nq; i++) q[i] = picolm_half_to_float(picolm_float_to_half(2.0f * rnd_val()));
            const float scale = 1.0f / sqrtf((float)hd);
            for (int j = 0; j < nq; j++) {
                m0[j] = -INFINITY; s0[j] = 0;
                if (carry) { /* a state from earlier positions: a max, an f16 accumulator */
                    m0[j] = 0.5f * j; s0[j] = 5.5f;
                    for (int i = 0; i < hd; i++) y0[j * ys + i] = picolm_half_to_float(picolm_float_to_half(rnd_val()));
                }
                m1[j] = m0[j]; s1[j] = s0[j];
            }
            memcpy(y1, y0, ys * nq * sizeof *y0);
            for (int j = 0; j < nq; j++)
                for (int t = 0; t < nt; t++) {
                    const float sc = dot(q + j * qs, K + t * stride + hd, hd) * scale;
                    float ws = 1.0f, w;
                    if (sc > m0[j]) { ws = expf(m0[j] - sc); m0[j] = sc; w = 1.0f; } else w = expf(sc - m0[j]);
                    s0[j] = s0[j] * ws + w;
                    axpy(y0 + j * ys, ws, w, V + t * stride + hd, hd);
                }
            vt->attn_f16(q, qs, nq, K + hd, V + hd, stride, nt, hd, scale, y1, ys, m1, s1);
            for (int j = 0; j < nq; j++) {
                double ymax = 0;
                for (int i = 0; i < hd; i++) ymax = fmax(ymax, fabs(y0[j * ys + i]));
                for (int i = 0; i < hd; i++) {
                    const double e = fabs((double)y1[j * ys + i] - y0[j * ys + i]) / (ymax > 0 ? ymax : 1);
                    if (e > worst) worst = e;
                    if (!(e <= 4e-3)) close = 0;
                    same &= y1[j * ys + i] == y0[j * ys + i];
                }
                for (size_t i = hd; i < ys; i++) if (y1[j * ys + i] != 0) close = 0; /* nothing written past hd */
                if (!(fabs(m1[j] - m0[j]) <= 1e-6 * fabs(m0[j]) + 1e-7 && fabs(s1[j] - s0[j]) <= 1e-5 * fabs(s0[j]))) close = 0;
                same &= m1[j] == m0[j] && s1[j] == s0[j];
            }
            free(K); free(V); free(q); free(y0); free(y1);
        }
        CHECK(close, "%s attn_f16 vs the dot/axpy loop (hd 32..128, 1..12 queries, 1..300 positions, carried state; worst |dy|/max|y| %.2g)",
              bname, worst);
        /* the in-tree versions promise more (plugin.h): the loop's arithmetic
           exactly, so that the reference continuations do not depend on it */
        CHECK(same, "%s attn_f16 bit-identical to the loop over its own primitives", bname);
    }
    if (vt->rmsnorm) {
        ok = 1;
        for (int t = 0; t < nn; t++) {
            const int n = ns[t];
            fill(a, n); fill(b, n);
            double ss = 0;
            for (int i = 0; i < n; i++) ss += (double)a[i] * a[i];
            const double inv = 1.0 / sqrt(ss / n + 1e-5);
            vt->rmsnorm(o, a, b, n, 1e-5f);
            for (int i = 0; i < n; i++) {
                const double want = a[i] * inv * b[i];
                if (!close_rel(o[i], want, fabs(want), 2e-6)) ok = 0;
            }
        }
        CHECK(ok, "%s rmsnorm", bname);
    }
    if (vt->swiglu) {
        ok = 1;
        for (int t = 0; t < nn; t++) {
            const int n = ns[t];
            fill(a, n); fill(b, n);
            for (int i = 0; i < n; i++) a[i] *= 6.0f; /* cover the sigmoid's range */
            if (n >= 8) { a[0] = 100.0f; a[1] = -100.0f; a[2] = 0.0f; a[3] = -88.5f; a[4] = 89.0f; }
            memcpy(o, a, n * sizeof *o);
            vt->swiglu(o, b, n);
            for (int i = 0; i < n; i++) {
                const double want = a[i] / (1.0 + exp(-(double)a[i])) * b[i];
                if (!close_rel(o[i], want, fabs(want), 2e-6) && !(fabs(want) < 1e-30 && fabs(o[i]) < 1e-30)) {
                    if (ok) printf("# %s swiglu(%g, %g) = %.9g want %.9g\n", bname, a[i], b[i], o[i], want);
                    ok = 0;
                }
            }
        }
        CHECK(ok, "%s swiglu", bname);
    }
    if (vt->f32_to_f16) {
        ok = 1;
        for (int t = 0; t < nn; t++) {
            const int n = ns[t];
            fill(a, n);
            for (int i = 0; i < n; i++) a[i] *= (i % 3 == 0) ? 1e-6f : (i % 3 == 1) ? 1.0f : 1e4f; /* subnormal, normal, large */
            if (n >= 8) { a[0] = 70000.0f; a[1] = -0.0f; a[2] = 65519.0f; a[3] = 65520.0f; a[4] = INFINITY; }
            for (int i = 0; i < n; i++) h[i] = picolm_float_to_half(a[i]);
            vt->f32_to_f16(h2, a, n);
            if (memcmp(h, h2, n * sizeof *h)) ok = 0;
        }
        CHECK(ok, "%s f32_to_f16 bit-exact (RNE, subnormals, overflow)", bname);
    }
    free(a); free(b); free(o); free(o2); free(h); free(h2);
}

static void test_backend(const loaded *L, uint64_t feats, const char *label) {
    const picolm_plugin *pl = L->pl;
    const picolm_backend_vtable *vt = pl->vtable;
    if (pl->init) {
        const cpu_id id = cpu_probe_id();
        picolm_host host = { PICOLM_ABI_VERSION, sizeof(picolm_host), feats, host_log, host_alloc, host_free,
                             host_parallel_for, 1, NULL, id.vendor, id.family, id.model };
        char err[256] = "";
        const int rc = pl->init(&host, err, sizeof err);
        CHECK(rc == 0, "%s: init (%s)", label, rc ? err : "ok");
        if (rc) return;
    }
    CHECK(vt->struct_size >= offsetof(picolm_backend_vtable, score) && (vt->n_kernels == 0 || vt->kernel_size >= sizeof(picolm_kernel)),
          "%s: vtable sizes", label);
    for (uint32_t i = 0; i < vt->n_kernels; i++)
        test_kernel(label, (const picolm_kernel *)((const char *)vt->kernels + (size_t)i * vt->kernel_size));
    for (uint32_t i = 0; i < vt->n_act_quants; i++)
        test_act_quant(label, (const picolm_act_quant *)((const char *)vt->act_quants + (size_t)i * vt->act_quant_size));
    if (vt->struct_size >= sizeof(picolm_backend_vtable)) test_primitives(label, vt);

    const char *bench = getenv("PICOLM_BENCH");
    if (bench && !strcmp(bench, "0")) return;
    const int all = bench && atoi(bench) >= 2;
    for (uint32_t i = 0; i < vt->n_kernels; i++) {
        const picolm_kernel *k = (const picolm_kernel *)((const char *)vt->kernels + (size_t)i * vt->kernel_size);
        /* by default only the formats of a Q4_K_M model and its R16 repack (keeps the test fast) */
        if (!all && k->type_id != PICOLM_TYPE_Q4_K && k->type_id != PICOLM_TYPE_Q6_K && k->type_id != PICOLM_TYPE_Q8_0 &&
            k->type_id != PICOLM_TYPE_Q4_K_R16 && k->type_id != PICOLM_TYPE_Q6_K_R16)
            continue;
        const picolm_format *fw = k->type_id < PL_TYPE_MAX ? fmt_by_type[k->type_id] : NULL;
        const picolm_format *fa = k->vec_dot_type < PL_TYPE_MAX ? fmt_by_type[k->vec_dot_type] : NULL;
        if (!fw || !fa || !fw->quantize_row || !fa->quantize_row || !k->vec_dot) continue;
        const double l3 = bench_kernel(k, 8u << 20, 0), mem = bench_kernel(k, 64u << 20, 0);
        const double g = k->gemm ? bench_kernel(k, 8u << 20, 4) : 0, g64 = k->gemm ? bench_kernel(k, 8u << 20, 64) : 0;
        /* gemm with one column: the decode path (the core calls it for nb = 1) */
        const double g1 = k->gemm ? bench_kernel(k, 8u << 20, 1) : 0, g1m = k->gemm ? bench_kernel(k, 64u << 20, 1) : 0;
        printf("INFO: %-16s %-8s vec_dot %6.1f GB/s (8 MiB weights) %6.1f GB/s (64 MiB)", label, fw->name, l3, mem);
        /* per column: the weight bandwidth one prompt token costs in prefill */
        if (k->gemm) printf("  gemm 1 col %6.1f / %6.1f (8 / 64 MiB), 4 cols %6.1f, 64 cols %6.1f GB/s/col (8 MiB)", g1, g1m, g, g64);
        printf("\n");
    }
}

int main(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/plugins", build_dir());
    load_all(dir);
    int nfmt = 0;
    for (int t = 0; t < PL_TYPE_MAX; t++) nfmt += fmt_by_type[t] != NULL;
    CHECK(nfmt > 0 && n_backends > 0, "found %d format types and %d backends in %s", nfmt, n_backends, dir);
    const uint64_t feats = cpu_probe();
    char fs[512];
    cpu_features_str(feats, fs, sizeof fs);
    printf("# CPU features: %s\n", fs);
    const char *bench = getenv("PICOLM_BENCH");
    if (!bench || strcmp(bench, "0")) {
        /* the reference code as a baseline */
        static const uint32_t hot[] = { PICOLM_TYPE_Q4_K, PICOLM_TYPE_Q6_K, PICOLM_TYPE_Q8_0 };
        for (int i = 0; i < 3; i++) {
            const picolm_format *f = fmt_by_type[hot[i]];
            if (!f || !f->vec_dot || !f->quantize_row || f->vec_dot_type >= PL_TYPE_MAX || !fmt_by_type[f->vec_dot_type]) continue;
            const picolm_kernel k = { f->type_id, f->vec_dot_type, f->vec_dot, NULL };
            printf("INFO: %-16s %-8s vec_dot %6.1f GB/s (8 MiB weights)\n", "reference", f->name, bench_kernel(&k, 8u << 20, 0));
        }
    }
    for (int i = 0; i < n_backends; i++) {
        const picolm_plugin *pl = backends[i].pl;
        const uint64_t missing = pl->cpu_required & ~feats;
        if (missing) {
            cpu_features_str(missing, fs, sizeof fs);
            SKIP("backend %s (%s): CPU lacks %s", pl->name, backends[i].file, fs);
            continue;
        }
        test_backend(&backends[i], feats, pl->name);
        /* the same plugin on a CPU without VNNI (x86) or i8mm (ARM): init
           must pick the other kernels */
        const uint64_t novnni = feats & ~(PICOLM_CPU_AVX512VNNI | PICOLM_CPU_AVXVNNI | PICOLM_CPU_ARM_I8MM);
        if (pl->init && novnni != feats) {
            char label[96];
            snprintf(label, sizeof label, "%s[%s]", pl->name, (feats & PICOLM_CPU_ARM_I8MM) ? "no-i8mm" : "no-vnni");
            test_backend(&backends[i], novnni, label);
            const cpu_id id = cpu_probe_id();
            picolm_host host = { PICOLM_ABI_VERSION, sizeof(picolm_host), feats, host_log, host_alloc, host_free,
                                 host_parallel_for, 1, NULL, id.vendor, id.family, id.model };
            char err[256];
            pl->init(&host, err, sizeof err); /* restore the best kernels */
        }
    }
    free(bench_buf);
    return CHECK_DONE();
}
