/*
 * K-quant format plugin (format-kquants.so): properties that the generic
 * format test does not cover.
 *  - random-data round trip: nRMSE = rms(x - deq(q(x))) / rms(x) under a
 *    per-type bound (Gaussian data, 64 super-blocks);
 *  - vec_dot against Q8_K activations equals the double-precision dot of
 *    the two dequantized operands to float rounding (2e-6 relative to
 *    sum |w_i a_i|; measured <= 5e-9);
 *  - Q8_K: bsums are the sums of 16 quants, |q| <= 127, the extreme maps to
 *    +-127, every element within d/2, zero blocks give zeros;
 *  - degenerate blocks (all zero, constant, one spike) stay finite;
 *  - with the shared data: quantize_row of every tiny-shakespeare-f32 tensor
 *    reproduces llama-quantize's bytes in tiny-shakespeare-q{2..6}_k.gguf,
 *    and dequantize_row matches reference/dequant/ bit for bit.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "picolm/blocks.h"
#include "picolm/plugin.h"
#include "testlib.h"

static const picolm_format_vtable *vt;

static const picolm_format *fmt(uint32_t type) {
    for (uint32_t i = 0; i < vt->n_formats; i++)
        if (tl_format_at(vt, i)->type_id == type) return tl_format_at(vt, i);
    return NULL;
}

/* deterministic xorshift64* + Box-Muller */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) {
    rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53;
}
static float grand(void) {
    double u1 = urand(), u2 = urand();
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static double nrmse(const float *a, const float *b, int64_t n) {
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) { double d = (double)a[i] - b[i]; e += d * d; s += (double)a[i] * a[i]; }
    return s > 0 ? sqrt(e / s) : sqrt(e / (double)n);
}

static int all_finite(const float *a, int64_t n) {
    for (int64_t i = 0; i < n; i++) if (!isfinite(a[i])) return 0;
    return 1;
}

#define NBLK 64
#define N (NBLK * QK_K)

static const struct { uint32_t type; const char *file; double max_nrmse; } ktypes[] = {
    /* Bounds on Gaussian data, ~20% above the measured 0.299, 0.153, 0.072,
       0.036 and 0.018 (each extra bit roughly halves the error). */
    { PICOLM_TYPE_Q2_K, "q2_k", 0.36 },
    { PICOLM_TYPE_Q3_K, "q3_k", 0.185 },
    { PICOLM_TYPE_Q4_K, "q4_k", 0.087 },
    { PICOLM_TYPE_Q5_K, "q5_k", 0.044 },
    { PICOLM_TYPE_Q6_K, "q6_k", 0.022 },
};
#define NK (int)(sizeof ktypes / sizeof ktypes[0])

static void test_descriptor(void) {
    CHECK(vt->n_formats == 6, "kquants: 6 formats (got %u)", vt->n_formats);
    static const uint32_t sizes[][2] = { { PICOLM_TYPE_Q2_K, 84 }, { PICOLM_TYPE_Q3_K, 110 }, { PICOLM_TYPE_Q4_K, 144 },
                                         { PICOLM_TYPE_Q5_K, 176 }, { PICOLM_TYPE_Q6_K, 210 }, { PICOLM_TYPE_Q8_K, 292 } };
    for (int i = 0; i < 6; i++) {
        const picolm_format *f = fmt(sizes[i][0]);
        CHECK(f && f->block_size == QK_K && f->type_size == sizes[i][1] && f->dequantize_row && f->quantize_row &&
                  f->vec_dot_type == PICOLM_TYPE_Q8_K,
              "kquants: type %u descriptor (block 256, %u bytes, vec_dot_type Q8_K)", sizes[i][0], sizes[i][1]);
        if (!f) continue;
        if (sizes[i][0] == PICOLM_TYPE_Q8_K)
            CHECK(f->flags == PICOLM_FMT_ACTIVATION, "kquants: Q8_K is activation-only");
        else
            CHECK(f->flags == PICOLM_FMT_WEIGHT && f->vec_dot, "kquants: %s is a weight type with a vec_dot", f->name);
    }
}

static void test_roundtrip_and_dot(void) {
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *a = malloc(N * sizeof *a), *ad = malloc(N * sizeof *ad);
    void *q = malloc((size_t)NBLK * 292), *qa = malloc((size_t)NBLK * sizeof(block_q8_K));
    const picolm_format *q8 = fmt(PICOLM_TYPE_Q8_K);
    for (int i = 0; i < N; i++) x[i] = grand();
    for (int i = 0; i < N; i++) a[i] = grand() * (1.0f + (float)(i % 7)); /* uneven activations */
    q8->quantize_row(a, qa, N);
    q8->dequantize_row(qa, ad, N);

    for (int t = 0; t < NK; t++) {
        const picolm_format *f = fmt(ktypes[t].type);
        if (!f) continue;
        memset(q, 0xAB, (size_t)NBLK * f->type_size);
        f->quantize_row(x, q, N);
        f->dequantize_row(q, y, N);
        double e = nrmse(x, y, N);
        CHECK(e <= ktypes[t].max_nrmse, "%s: random round-trip nRMSE %.4f <= %.3f", f->name, e, ktypes[t].max_nrmse);

        /* vec_dot vs the exact dot of the dequantized operands */
        double ref = 0, mag = 0;
        for (int i = 0; i < N; i++) { ref += (double)y[i] * ad[i]; mag += fabs((double)y[i] * ad[i]); }
        float s = NAN;
        f->vec_dot(N, &s, q, qa);
        double rel = fabs((double)s - ref) / mag;
        CHECK(isfinite(s) && rel <= 2e-6, "%s: vec_dot %.6f vs dequantized dot %.6f (error %.2e of sum|w*a|)", f->name, s,
              ref, rel);

        /* and per single block (n = 256), several offsets */
        int ok = 1;
        for (int b = 0; b < NBLK; b += 9) {
            const void *qb = (const char *)q + (size_t)b * f->type_size;
            const void *ab = (const char *)qa + (size_t)b * sizeof(block_q8_K);
            double r = 0, m = 0;
            for (int i = 0; i < QK_K; i++) { r += (double)y[b * QK_K + i] * ad[b * QK_K + i]; m += fabs((double)y[b * QK_K + i] * ad[b * QK_K + i]); }
            float sb;
            f->vec_dot(QK_K, &sb, qb, ab);
            if (!(fabs((double)sb - r) <= 2e-6 * m + 1e-30)) ok = 0;
        }
        CHECK(ok, "%s: vec_dot on single blocks matches the dequantized dot", f->name);

        /* a dot that ignores the weights' low bits or mins would fail this:
           flipping one quant must move the result by about that product */
        float s2;
        unsigned char *qb = q;
        /* offset of the first quant byte: qs (Q2_K/Q3_K/Q4_K/Q5_K), ql (Q6_K) */
        static const size_t qoffs[] = { 16, 32, 16, 48, 0 };
        size_t qoff = qoffs[t];
        qb[qoff] ^= 0x01;
        f->dequantize_row(q, y, N);
        ref = 0;
        for (int i = 0; i < N; i++) ref += (double)y[i] * ad[i];
        f->vec_dot(N, &s2, q, qa);
        CHECK(s2 != s && fabs((double)s2 - ref) <= 2e-6 * mag, "%s: vec_dot follows a one-bit change of the weights", f->name);
    }
    free(x); free(y); free(a); free(ad); free(q); free(qa);
}

static void test_q8k(void) {
    const picolm_format *f = fmt(PICOLM_TYPE_Q8_K);
    if (!f) return;
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    block_q8_K *q = malloc(NBLK * sizeof *q);
    for (int i = 0; i < N; i++) x[i] = grand() * 3.0f;
    for (int i = 0; i < QK_K; i++) x[5 * QK_K + i] = 0.0f; /* block 5: all zero */
    memset(q, 0x5A, NBLK * sizeof *q);                    /* stale bsums must be overwritten */
    f->quantize_row(x, q, N);
    f->dequantize_row(q, y, N);
    int bsum_ok = 1, range_ok = 1, ext_ok = 1, err_ok = 1;
    for (int b = 0; b < NBLK; b++) {
        float amax = 0;
        int has127 = 0;
        for (int j = 0; j < QK_K; j++) {
            int v = q[b].qs[j];
            if (v < -127 || v > 127) range_ok = 0;
            if (v == 127 || v == -127) has127 = 1;
            if (fabsf(x[b * QK_K + j]) > amax) amax = fabsf(x[b * QK_K + j]);
            if (fabsf(y[b * QK_K + j] - x[b * QK_K + j]) > 0.5f * fabsf(q[b].d) * 1.0001f) err_ok = 0;
        }
        if (amax > 0 && (!has127 || fabsf(fabsf(q[b].d) * 127.0f - amax) > 1e-5f * amax)) ext_ok = 0;
        for (int g = 0; g < QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += q[b].qs[g * 16 + j];
            if (s != q[b].bsums[g]) bsum_ok = 0;
        }
    }
    CHECK(bsum_ok, "Q8_K: every bsums[g] equals the sum of its 16 quants");
    CHECK(range_ok, "Q8_K: quants lie in [-127, 127]");
    CHECK(ext_ok, "Q8_K: the largest magnitude maps to +-127 and |d|*127 == amax");
    CHECK(err_ok, "Q8_K: every element dequantizes within d/2");
    int zero_ok = q[5].d == 0.0f;
    for (int j = 0; j < QK_K; j++) zero_ok &= q[5].qs[j] == 0 && y[5 * QK_K + j] == 0.0f;
    for (int g = 0; g < QK_K / 16; g++) zero_ok &= q[5].bsums[g] == 0;
    CHECK(zero_ok, "Q8_K: an all-zero block gives d = 0, zero quants and zero bsums");
    free(x); free(y); free(q);
}

/* Degenerate inputs: no NaN/Inf, zeros stay zeros, a spike survives. */
static void test_degenerate(void) {
    float x[4 * QK_K], y[4 * QK_K];
    unsigned char q[4 * 292];
    for (int i = 0; i < QK_K; i++) x[i] = 0.0f;                   /* zeros */
    for (int i = 0; i < QK_K; i++) x[QK_K + i] = -0.75f;          /* constant negative */
    for (int i = 0; i < QK_K; i++) x[2 * QK_K + i] = i == 77 ? 40.0f : 0.0f; /* one spike */
    for (int i = 0; i < QK_K; i++) x[3 * QK_K + i] = 1e-20f * (float)((i % 5) - 2); /* tiny */
    for (int t = 0; t < NK; t++) {
        const picolm_format *f = fmt(ktypes[t].type);
        if (!f) continue;
        f->quantize_row(x, q, 4 * QK_K);
        f->dequantize_row(q, y, 4 * QK_K);
        int zeros = 1;
        for (int i = 0; i < QK_K; i++) zeros &= y[i] == 0.0f;
        CHECK(all_finite(y, 4 * QK_K) && zeros, "%s: degenerate blocks stay finite, zeros stay zero", f->name);
        CHECK(fabsf(y[2 * QK_K + 77] - 40.0f) < 0.05f * 40.0f && fabsf(y[QK_K + 3] + 0.75f) < 0.1f,
              "%s: a lone spike (%.3f ~ 40) and a constant block (%.3f ~ -0.75) survive", f->name, y[2 * QK_K + 77],
              y[QK_K + 3]);
    }
}

/* ---- shared data: exact reproduction of llama.cpp's files -------------- */

static int type_size(void *ctx, uint32_t type, uint32_t *bs, uint32_t *ts) {
    (void)ctx;
    /* non-K types the files may also hold (norms are F32); facts of GGUF */
    static const uint32_t other[][3] = { { 0, 1, 4 }, { 1, 1, 2 }, { 30, 1, 2 }, { 2, 32, 18 }, { 3, 32, 20 },
                                         { 6, 32, 22 }, { 7, 32, 24 }, { 8, 32, 34 }, { 20, 32, 18 }, { 23, 256, 136 } };
    const picolm_format *f = fmt(type);
    if (f) { *bs = f->block_size; *ts = f->type_size; return 1; }
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if (other[i][0] == type) { *bs = other[i][1]; *ts = other[i][2]; return 1; }
    return 0;
}

static int open_model(gguf_file *g, const char *dir, const char *name) {
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/models/tiny-shakespeare-%s.gguf", dir, name);
    if (build_gguf(g, path, NULL, err, sizeof err) || gguf_bind_types(g, type_size, NULL, err, sizeof err)) {
        CHECK(0, "open %s: %s", path, err);
        return -1;
    }
    return 0;
}

/* Quantize the F32 twin of every tensor of gq whose type is `type` and
   compare with gq's bytes.  Returns the number compared. */
static int check_requant(const gguf_file *f32, const gguf_file *gq, uint32_t type, const char *label) {
    const picolm_format *f = fmt(type);
    int n_cmp = 0, n_same = 0;
    char first_bad[256] = "";
    for (uint64_t i = 0; i < gq->n_tensors; i++) {
        const gguf_tensor *tq = &gq->tensors[i];
        if (tq->type != type) continue;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)tq->name.len, tq->name.ptr);
        const gguf_tensor *tf = gguf_find_tensor(f32, name);
        if (!tf || tf->type != PICOLM_TYPE_F32 || tf->nelements != tq->nelements) {
            CHECK(0, "%s %s: %s has no F32 twin of the same shape", label, f->name, name);
            continue;
        }
        /* row by row: under emulation every tl_row_step()-th row */
        const int64_t n = tf->ne[0], rows = tf->nelements / n;
        const size_t rb = tq->nbytes / (size_t)rows;
        unsigned char *buf = malloc(rb);
        int same = 1;
        for (int64_t r = 0; r < rows && same; r += tl_row_step()) {
            const unsigned char *want = (const unsigned char *)tq->data + (size_t)r * rb;
            f->quantize_row((const float *)tf->data + r * n, buf, n);
            if (memcmp(buf, want, rb) == 0) continue;
            same = 0;
            if (!first_bad[0]) {
                size_t k = 0;
                while (buf[k] == want[k]) k++;
                k += (size_t)r * rb;
                snprintf(first_bad, sizeof first_bad, "%.100s, first difference at byte %zu (block %zu)", name, k,
                         k / f->type_size);
            }
        }
        n_cmp++;
        n_same += same;
        free(buf);
    }
    if (n_cmp)
        CHECK(n_same == n_cmp, "%s %s: quantize_row reproduces llama-quantize's bytes (%d/%d tensors)%s%s", label,
              f->name, n_same, n_cmp, first_bad[0] ? ": " : "", first_bad);
    return n_cmp;
}

/* dequantize_row of gq's blk.0.attn_k.weight against reference/dequant/. */
static void check_dequant_ref(const char *dir, const gguf_file *gq, const char *file) {
    const gguf_tensor *tk = gguf_find_tensor(gq, "blk.0.attn_k.weight");
    const picolm_format *f = tk ? fmt(tk->type) : NULL;
    char rpath[4096];
    snprintf(rpath, sizeof rpath, "%s/reference/dequant/tiny-shakespeare-%s.blk.0.attn_k.weight.f32", dir, file);
    size_t rsize;
    float *ref = tl_slurp(rpath, &rsize);
    if (!f || !ref) {
        CHECK(0, "%s: blk.0.attn_k has no K type, or %s is missing", file, rpath);
        free(ref);
        return;
    }
    const int complete = rsize / sizeof *ref >= (size_t)tk->nelements; /* holds the whole tensor */
    float *out = malloc((size_t)tk->nelements * sizeof *out);
    f->dequantize_row(tk->data, out, tk->nelements);
    int64_t diff = 0;
    for (int64_t i = 0; complete && i < tk->nelements; i++) diff += memcmp(&ref[i], &out[i], 4) != 0;
    CHECK(complete && diff == 0,
          "%s %s: dequantize_row matches reference/dequant bit for bit (%lld of %lld differ)", file, f->name,
          (long long)diff, (long long)tk->nelements);
    free(ref); free(out);
}

static void test_shared(void) {
    const char *dir = shared_dir("kquants: llama.cpp reproduction");
    if (!dir) return;
    gguf_file f32;
    if (open_model(&f32, dir, "f32")) return;

    /* "pure" files: every matrix (30 per file) in one K type; < 1 s in all */
    for (int t = 0; t < NK; t++) {
        gguf_file gq;
        if (open_model(&gq, dir, ktypes[t].file)) continue;
        int n = check_requant(&f32, &gq, ktypes[t].type, ktypes[t].file);
        CHECK(n >= 28, "%s: holds %d tensors of its type (want all 30 matrices)", ktypes[t].file, n);
        check_dequant_ref(dir, &gq, ktypes[t].file);
        free_gguf(&gq);
    }

    /* Q4_K_M mixes Q4_K with Q6_K (output, attn_v, ffn_down): both reproduce */
    gguf_file gm;
    if (!open_model(&gm, dir, "q4_k_m")) {
        int n4 = check_requant(&f32, &gm, PICOLM_TYPE_Q4_K, "q4_k_m");
        int n6 = check_requant(&f32, &gm, PICOLM_TYPE_Q6_K, "q4_k_m");
        CHECK(n4 > 0 && n6 > 0, "q4_k_m: holds Q4_K (%d) and Q6_K (%d) tensors", n4, n6);
        check_dequant_ref(dir, &gm, "q4_k_m");
        free_gguf(&gm);
    }
    free_gguf(&f32);
}

int main(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/plugins/format-kquants.so", build_dir());
    void *h;
    char why[512];
    const picolm_entry_fn entry = tl_plugin_entry(path, &h, why, sizeof why);
    if (!h) { CHECK(0, "dlopen %s: %s", path, why); return 1; }
    const picolm_plugin *p = entry ? entry() : NULL;
    CHECK(p && p->abi_version == PICOLM_ABI_VERSION && p->kind == PICOLM_KIND_FORMAT && p->vtable,
          "kquants: plugin descriptor (ABI %u, format kind)", PICOLM_ABI_VERSION);
    if (!p || !p->vtable) return 1;
    vt = p->vtable;
    CHECK(vt->format_size >= sizeof(picolm_format), "kquants: format stride");

    test_descriptor();
    test_roundtrip_and_dot();
    test_q8k();
    test_degenerate();
    test_shared();
    dlclose(h);
    return CHECK_DONE();
}
