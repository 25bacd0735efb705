/*
 * Row-interleaved formats Q4_K_R16 / Q6_K_R16 (formats/repack.c) against
 * their base formats in format-kquants.so (a separate plugin: the base side
 * is not the code under test).  Everything is bit for bit:
 *  - descriptor: row_group 16, per-row type_size = the base's, base_type,
 *    from_base, vec_dot_type Q8_K;
 *  - random base rows (256/512/2048 columns, random quant bits and scales,
 *    realistic fp16 d/dmin) -> from_base (padded source stride) ->
 *    dequantize_row equals the base dequantize_row of every row;
 *  - quantize_row of 16 random float rows == from_base(base quantize_row);
 *  - reference vec_dot writes exactly 16 results, each equal to the base
 *    reference vec_dot of that row, and follows a one-bit change in one row
 *    and only that row;
 *  - shared data: blk.0.attn_k of the q4_k / q6_k / q4_k_m models, repacked,
 *    dequantizes to reference/dequant/ bit for bit;
 *  - Q5_0_R16 (base Q5_0 in format-legacy.so): the same permutation checks,
 *    and its own vec_dot definition (test_q5_0_r16).
 */
/* bit-exact float expressions: no FMA contraction (as formats/kquants.c) */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "picolm/blocks.h"
#include "picolm/fp16.h"
#include "picolm/plugin.h"
#include "testlib.h"

#define G 16 /* rows per group */

static const picolm_plugin *repack_p;
static const picolm_format_vtable *vt_repack, *vt_kq;

static const picolm_format *find_in(const picolm_format_vtable *vt, uint32_t type) {
    for (uint32_t i = 0; vt && i < vt->n_formats; i++)
        if (tl_format_at(vt, i)->type_id == type) return tl_format_at(vt, i);
    return NULL;
}
static const picolm_format *any_fmt(uint32_t type) {
    const picolm_format *f = find_in(vt_kq, type);
    return f ? f : find_in(vt_repack, type);
}

/* ---- deterministic random numbers --------------------------------------- */
static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t rnd(void) {
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double unit(void) { return ((rnd() >> 11) + 0.5) * 0x1.0p-53; }
static float gauss(void) { return (float)(sqrt(-2.0 * log(unit())) * cos(6.283185307179586 * unit())); }
/* a trained model's superblock scales: d ~ 1e-4 .. 4e-3 */
static picolm_half real_d(void) { return picolm_float_to_half((float)(1e-4 * pow(40.0, unit()))); }

/* One base row of n columns: random bits everywhere, then realistic scales. */
static void random_base_row(uint32_t base, void *row, int64_t n) {
    const size_t bytes = (size_t)(n / QK_K) * (base == PICOLM_TYPE_Q4_K ? sizeof(block_q4_K) : sizeof(block_q6_K));
    uint8_t *p = row;
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rnd();
    for (int64_t b = 0; b < n / QK_K; b++) {
        if (base == PICOLM_TYPE_Q4_K) {
            block_q4_K *k = (block_q4_K *)row + b;
            k->d = real_d();
            k->dmin = real_d();
        } else {
            ((block_q6_K *)row + b)->d = real_d();
        }
    }
}

/* Value of row r, column c (0..255) of one R16 block, read as blocks.h
   describes the layout, with the base formats' float expressions. */
static float spec_value(uint32_t rid, const void *blk, int r, int c) {
    if (rid == PICOLM_TYPE_Q4_K_R16) {
        const block_q4_K_r16 *b = blk;
        const int s = c / 32, j = c % 32;              /* sub-block, position in it */
        const int k = (j % 16) / 4, i = j % 4;         /* qs[4s + k][4r + i] */
        const uint8_t byte = b->qs[4 * s + k][4 * r + i];
        const int q = j < 16 ? byte & 15 : byte >> 4;
        const int sc = ((b->scales_l[s / 2][r] >> (s % 2 ? 4 : 0)) & 15) | ((b->scales_h[s / 4][r] >> (2 * (s % 4))) & 3) << 4;
        const int mn = ((b->mins_l[s / 2][r] >> (s % 2 ? 4 : 0)) & 15) | ((b->mins_h[s / 4][r] >> (2 * (s % 4))) & 3) << 4;
        const float dj = picolm_half_to_float(b->d[r]) * sc, mj = picolm_half_to_float(b->dmin[r]) * mn;
        return dj * q - mj;
    }
    const block_q6_K_r16 *b = blk;
    const int g = c / 4, i = c % 4;                    /* group of 4 columns */
    const uint8_t lb = b->ql[g % 32][4 * r + i];
    const int lo = g < 32 ? lb & 15 : lb >> 4;
    const int hi = (b->qh[g % 16][4 * r + i] >> (2 * (g / 16))) & 3;
    return picolm_half_to_float(b->d[r]) * b->scales[c / 16][r] * ((lo | hi << 4) - 32);
}

static size_t row_bytes(const picolm_format *f, int64_t n) { return (size_t)(n / f->block_size) * f->type_size; }

/* ---- descriptor --------------------------------------------------------- */
static void test_descriptor(void) {
    static const struct { uint32_t id, base, size; const char *name; } want[] = {
        {PICOLM_TYPE_Q4_K_R16, PICOLM_TYPE_Q4_K, 144, "Q4_K_R16"},
        {PICOLM_TYPE_Q6_K_R16, PICOLM_TYPE_Q6_K, 210, "Q6_K_R16"},
    };
    CHECK(vt_repack->format_size >= offsetof(picolm_format, from_base) + sizeof(void *),
          "repack: format stride %u covers from_base", vt_repack->format_size);
    for (int i = 0; i < 2; i++) {
        const picolm_format *f = find_in(vt_repack, want[i].id);
        CHECK(f && !strcmp(f->name, want[i].name) && f->flags == PICOLM_FMT_WEIGHT && f->block_size == QK_K &&
                  f->type_size == want[i].size && f->row_group == G && f->vec_dot_type == PICOLM_TYPE_Q8_K &&
                  f->base_type == want[i].base && f->from_base && f->dequantize_row && f->quantize_row && f->vec_dot,
              "%s (%u): WEIGHT, block 256, %u bytes per row, row_group 16, base %u, from_base, vec_dot on Q8_K",
              want[i].name, want[i].id, want[i].size, want[i].base);
    }
    const picolm_format *r = find_in(vt_repack, PICOLM_TYPE_Q4_K_R);
    CHECK(r && !strcmp(r->name, "Q4_K_R") && r->row_group <= 1 && r->type_size == 148,
          "repack: Q4_K_R still there, per-row, 148 bytes");
}

/* to_base(grp) into rows `stride` apart, prefilled with 0x5A: *same = the
   rows equal src's first rb bytes, *pad_ok = nothing written between rows */
static void to_base_back(const picolm_format *f, const uint8_t *grp, const uint8_t *src, size_t stride, size_t rb, int64_t n, int *same,
                         int *pad_ok) {
    uint8_t *back = malloc(G * stride);
    memset(back, 0x5A, G * stride);
    f->to_base(grp, back, stride, n);
    *same = *pad_ok = 1;
    for (int r = 0; r < G; r++) {
        *same &= !memcmp(back + r * stride, src + r * stride, rb);
        for (size_t k = rb; k < stride; k++) *pad_ok &= back[r * stride + k] == 0x5A;
    }
    free(back);
}

/* ---- random rows -------------------------------------------------------- */
static const int64_t lens[] = {256, 512, 2048};
#define NMAX 2048
#define PAD 40 /* bytes of padding between source rows: from_base must honour src_stride */

static void test_type(uint32_t rid) {
    const picolm_format *f = find_in(vt_repack, rid);
    const picolm_format *b = f ? any_fmt(f->base_type) : NULL;
    const picolm_format *q8 = any_fmt(PICOLM_TYPE_Q8_K);
    if (!f || !b || !q8 || !f->from_base || f->row_group != G) {
        CHECK(0, "type %u: format, its base and Q8_K loaded", rid);
        return;
    }
    const size_t stride = row_bytes(b, NMAX) + PAD;
    uint8_t *src = malloc(G * stride), *grp = malloc(G * row_bytes(f, NMAX) + 64), *tmp = malloc(G * row_bytes(b, NMAX));
    float *x = malloc(G * NMAX * sizeof *x), *yr = malloc(G * NMAX * sizeof *yr), *yb = malloc(NMAX * sizeof *yb);
    float *act = malloc(NMAX * sizeof *act);
    block_q8_K *aq = malloc(NMAX / QK_K * sizeof *aq);

    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        const int64_t n = lens[li];
        const size_t rb = row_bytes(b, n), gb = G * row_bytes(f, n);

        /* 1. random base rows -> from_base -> dequantize == base dequantize */
        for (int r = 0; r < G; r++) random_base_row(b->type_id, src + r * stride, n);
        memset(grp, 0xA5, gb + 64);
        f->from_base(src, stride, grp, n);
        int tail_ok = 1;
        for (int k = 0; k < 64; k++) tail_ok &= grp[gb + k] == 0xA5;
        CHECK(tail_ok, "%s n=%lld: from_base writes exactly 16 rows' bytes (%zu)", f->name, (long long)n, gb);
        f->dequantize_row(grp, yr, n);
        int64_t diff = 0;
        for (int r = 0; r < G; r++) {
            b->dequantize_row(src + r * stride, yb, n);
            for (int64_t c = 0; c < n; c++) diff += memcmp(&yb[c], &yr[r * n + c], sizeof(float)) != 0;
        }
        CHECK(diff == 0, "%s n=%lld: dequantize(from_base(random %s rows)) == %s dequantize, bit for bit (%lld differ)",
              f->name, (long long)n, b->name, b->name, (long long)diff);

        /* to_base undoes from_base byte for byte (every bit of a Q4_K/Q6_K
           block is used, so random bytes are valid blocks), honouring its
           stride and writing nothing between rows */
        if (vt_repack->format_size >= offsetof(picolm_format, to_base) + sizeof(void *) && f->to_base) {
            int same, pad_ok;
            to_base_back(f, grp, src, stride, rb, n, &same, &pad_ok);
            CHECK(same && pad_ok, "%s n=%lld: to_base(from_base(16 random %s rows)) gives them back, byte for byte (rows %s, gaps %s)",
                  f->name, (long long)n, b->name, same ? "equal" : "DIFFER", pad_ok ? "untouched" : "WRITTEN");
        } else CHECK(0, "%s: has to_base (the core's fallback to %s kernels needs it)", f->name, b->name);

        /* the bytes are where blocks.h says: decode them with the test's
           own reading of the layout comment (not repack.c's accessors) */
        diff = 0;
        for (int r = 0; r < G; r++) {
            b->dequantize_row(src + r * stride, yb, n);
            for (int64_t c = 0; c < n; c++) {
                const float v = spec_value(rid, grp + (size_t)(c / QK_K) * G * f->type_size, r, (int)(c % QK_K));
                diff += memcmp(&v, &yb[c], sizeof v) != 0;
            }
        }
        CHECK(diff == 0, "%s n=%lld: every value sits where blocks.h puts it (%lld differ)", f->name, (long long)n, (long long)diff);

        /* 2. vec_dot: 16 results, each bit-identical to the base row's */
        for (int64_t c = 0; c < n; c++) act[c] = gauss() * (1.0f + (float)(c % 5));
        q8->quantize_row(act, aq, n);
        float s[G + 4], sb;
        for (int k = 0; k < G + 4; k++) s[k] = -12345.0f;
        f->vec_dot(n, s, grp, aq);
        int ok = 1, canary = 1;
        for (int r = 0; r < G; r++) {
            b->vec_dot(n, &sb, src + r * stride, aq);
            ok &= !memcmp(&sb, &s[r], sizeof sb) && isfinite(sb);
        }
        for (int k = G; k < G + 4; k++) canary &= s[k] == -12345.0f;
        CHECK(ok && canary, "%s n=%lld: vec_dot writes 16 results (exactly), each == %s vec_dot of the row, bit for bit",
              f->name, (long long)n, b->name);

        /* one bit of row 5's quants changed: s[5] moves, nobody else */
        const int rr = 5;
        uint8_t *row5 = src + rr * stride;
        const size_t qoff = b->type_id == PICOLM_TYPE_Q4_K ? offsetof(block_q4_K, qs) : offsetof(block_q6_K, ql);
        row5[qoff + 3] ^= 0x10;
        f->from_base(src, stride, grp, n);
        float s2[G];
        f->vec_dot(n, s2, grp, aq);
        b->vec_dot(n, &sb, row5, aq);
        int others = 1;
        for (int r = 0; r < G; r++)
            if (r != rr) others &= !memcmp(&s[r], &s2[r], sizeof(float));
        CHECK(s2[rr] != s[rr] && !memcmp(&s2[rr], &sb, sizeof sb) && others,
              "%s n=%lld: a one-bit change of row 5 moves s[5] only (%g -> %g)", f->name, (long long)n, s[rr], s2[rr]);

        /* 3. quantize_row(16 float rows) == from_base(base quantize_row) */
        for (int64_t i = 0; i < G * n; i++) x[i] = 0.02f * gauss();
        for (int r = 0; r < G; r++) x[r * n + (r * 37) % n] = 0.5f; /* an outlier per row */
        for (int64_t c = 0; c < QK_K; c++) x[3 * n + c] = 0.0f;     /* a zero superblock */
        for (int r = 0; r < G; r++) b->quantize_row(x + r * n, tmp + r * rb, n);
        uint8_t *want = malloc(gb);
        f->from_base(tmp, rb, want, n);
        memset(grp, 0x5A, gb);
        f->quantize_row(x, grp, n);
        size_t first = gb;
        for (size_t k = 0; k < gb && first == gb; k++)
            if (grp[k] != want[k]) first = k;
        CHECK(first == gb, "%s n=%lld: quantize_row(16 rows) == from_base(%s quantize_row), byte for byte%s", f->name,
              (long long)n, b->name, first == gb ? "" : " (differs)");

        /* and the quantized group's vec_dot still matches the base per row */
        f->vec_dot(n, s, grp, aq);
        ok = 1;
        for (int r = 0; r < G; r++) {
            b->vec_dot(n, &sb, tmp + r * rb, aq);
            ok &= !memcmp(&sb, &s[r], sizeof sb);
        }
        CHECK(ok, "%s n=%lld: vec_dot of quantized rows == %s vec_dot per row", f->name, (long long)n, b->name);
        free(want);
    }

    /* two groups side by side (n = 512): the second group starts at 16 rows' bytes */
    {
        const int64_t n = 512;
        const size_t rb = row_bytes(b, n), gb = G * row_bytes(f, n);
        uint8_t *rows = malloc(2 * G * rb), *two = malloc(2 * gb);
        float *y2 = malloc(2 * G * n * sizeof *y2);
        for (int r = 0; r < 2 * G; r++) random_base_row(b->type_id, rows + r * rb, n);
        f->from_base(rows, rb, two, n);
        f->from_base(rows + G * rb, rb, two + gb, n);
        f->dequantize_row(two, y2, n);
        f->dequantize_row(two + gb, y2 + G * n, n);
        int64_t diff = 0;
        for (int r = 0; r < 2 * G; r++) {
            b->dequantize_row(rows + r * rb, yb, n);
            diff += memcmp(yb, y2 + r * n, n * sizeof(float)) != 0;
        }
        CHECK(diff == 0, "%s: 32 rows as two groups dequantize to the 32 base rows (%lld rows differ)", f->name, (long long)diff);
        free(rows); free(two); free(y2);
    }
    free(src); free(grp); free(tmp); free(x); free(yr); free(yb); free(act); free(aq);
}

/* ---- Q5_0_R16 (base Q5_0 in format-legacy.so) ---------------------------
 * The same permutation checks as above; its vec_dot is not Q5_0's (its own
 * float order, blocks.h), so it is checked against the test's own reading
 * of the definition: per row, acc = fmaf(d_r * d_y, isum, acc) per block. */
static const picolm_format_vtable *vt_legacy;

/* row r, column c (0..31) of one block, read as blocks.h describes it */
static int q5r16_spec_quant(const block_q5_0_r16 *b, int r, int c) {
    const int j = (c % 16) / 4, i = c % 4, k = c / 4;
    const int lo = c < 16 ? b->qs[j][4 * r + i] & 15 : b->qs[j][4 * r + i] >> 4;
    return lo | ((b->qh[4 * r + i] >> k) & 1) << 4;
}

static void test_q5_0_r16(void) {
    const picolm_format *f = find_in(vt_repack, PICOLM_TYPE_Q5_0_R16);
    const picolm_format *b = find_in(vt_legacy, PICOLM_TYPE_Q5_0), *q8 = find_in(vt_legacy, PICOLM_TYPE_Q8_0);
    CHECK(f && !strcmp(f->name, "Q5_0_R16") && f->flags == PICOLM_FMT_WEIGHT && f->block_size == 32 && f->type_size == 22 &&
              f->row_group == G && f->vec_dot_type == PICOLM_TYPE_Q8_0 && f->base_type == PICOLM_TYPE_Q5_0 && f->from_base &&
              f->to_base && f->dequantize_row && f->quantize_row && f->vec_dot,
          "Q5_0_R16 (1106): WEIGHT, block 32, 22 bytes per row, row_group 16, base Q5_0, from_base/to_base, vec_dot on Q8_0");
    if (!f || !b || !q8 || !f->to_base) return;
    static const int64_t n5[] = {32, 96, 896, 4864};
    enum { N = 4864 };
    const size_t stride = N / 32 * sizeof(block_q5_0) + PAD;
    uint8_t *src = malloc(G * stride), *grp = malloc(G * N / 32 * 22 + 64), *tmp = malloc(G * N / 32 * 22);
    float *yr = malloc(G * N * sizeof *yr), *yb = malloc(N * sizeof *yb), *x = malloc(G * N * sizeof *x);
    block_q8_0 *aq = malloc(N / 32 * sizeof *aq);
    for (size_t li = 0; li < sizeof n5 / sizeof *n5; li++) {
        const int64_t n = n5[li], nb = n / 32;
        const size_t rb = nb * sizeof(block_q5_0), gb = G * rb;
        for (int r = 0; r < G; r++) {
            for (size_t k = 0; k < rb; k++) src[r * stride + k] = (uint8_t)rnd();
            for (int64_t i = 0; i < nb; i++) ((block_q5_0 *)(src + r * stride))[i].d = real_d();
        }
        memset(grp, 0xA5, gb + 64);
        f->from_base(src, stride, grp, n);
        int tail_ok = 1;
        for (int k = 0; k < 64; k++) tail_ok &= grp[gb + k] == 0xA5;
        f->dequantize_row(grp, yr, n);
        int64_t diff = 0, where = 0;
        for (int r = 0; r < G; r++) {
            b->dequantize_row(src + r * stride, yb, n);
            for (int64_t c = 0; c < n; c++) {
                diff += memcmp(&yb[c], &yr[r * n + c], sizeof(float)) != 0;
                const block_q5_0_r16 *blk = (const block_q5_0_r16 *)grp + c / 32;
                const float v = (q5r16_spec_quant(blk, r, (int)(c % 32)) - 16) * picolm_half_to_float(blk->d[r]);
                where += memcmp(&v, &yb[c], sizeof v) != 0;
            }
        }
        CHECK(tail_ok && diff == 0 && where == 0,
              "Q5_0_R16 n=%lld: from_base writes 16 rows' bytes, dequantizes to Q5_0's floats (%lld differ), every value where blocks.h "
              "puts it (%lld differ)", (long long)n, (long long)diff, (long long)where);
        int same, pad_ok;
        to_base_back(f, grp, src, stride, rb, n, &same, &pad_ok);
        CHECK(same && pad_ok, "Q5_0_R16 n=%lld: to_base(from_base(16 random Q5_0 rows)) gives them back byte for byte, gaps untouched",
              (long long)n);

        /* vec_dot: the definition, and near Q5_0's own order */
        for (int64_t c = 0; c < n; c++) yb[c] = gauss();
        q8->quantize_row(yb, aq, n);
        float s[G + 1], sb;
        s[G] = -12345.0f;
        f->vec_dot(n, s, grp, aq);
        int def = s[G] == -12345.0f, near = 1;
        for (int r = 0; r < G; r++) {
            const block_q5_0 *row = (const block_q5_0 *)(src + r * stride);
            float acc = 0.0f;
            double mag = 0;
            for (int64_t i = 0; i < nb; i++) {
                int isum = 0;
                uint32_t qh;
                memcpy(&qh, row[i].qh, 4);
                for (int c = 0; c < 32; c++) {
                    const int q = ((row[i].qs[c % 16] >> (c < 16 ? 0 : 4)) & 15) | ((qh >> c) & 1) << 4;
                    isum += (q - 16) * aq[i].qs[c];
                    mag += fabs((double)(q - 16) * aq[i].qs[c]) * picolm_half_to_float(row[i].d) * picolm_half_to_float(aq[i].d);
                }
                acc = fmaf(picolm_half_to_float(row[i].d) * picolm_half_to_float(aq[i].d), (float)isum, acc);
            }
            def &= !memcmp(&acc, &s[r], sizeof acc);
            b->vec_dot(n, &sb, row, aq);
            near &= fabs((double)sb - s[r]) <= 1e-5 * mag;
        }
        CHECK(def && near, "Q5_0_R16 n=%lld: vec_dot writes 16 results, each the definition's bits (fmaf per block) and within 1e-5 of "
              "Q5_0's vec_dot (sum |products|)", (long long)n);

        /* quantize_row(16 float rows) == from_base(Q5_0 quantize_row) */
        for (int64_t i = 0; i < G * n; i++) x[i] = 0.02f * gauss();
        for (int64_t c = 0; c < 32; c++) x[3 * n + c] = 0.0f; /* a zero block */
        for (int r = 0; r < G; r++) b->quantize_row(x + r * n, src + r * rb, n);
        f->from_base(src, rb, tmp, n);
        memset(grp, 0x5A, gb);
        f->quantize_row(x, grp, n);
        CHECK(!memcmp(grp, tmp, gb), "Q5_0_R16 n=%lld: quantize_row(16 rows) == from_base(Q5_0 quantize_row), byte for byte", (long long)n);
    }
    free(src); free(grp); free(tmp); free(yr); free(yb); free(x); free(aq);
}

/* ---- shared data -------------------------------------------------------- */
static int type_size(void *ctx, uint32_t type, uint32_t *bs, uint32_t *ts) {
    (void)ctx;
    static const uint32_t other[][3] = {{0, 1, 4}, {1, 1, 2}, {30, 1, 2}};
    const picolm_format *f = any_fmt(type);
    if (f) { *bs = f->block_size; *ts = f->type_size; return 1; }
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if (other[i][0] == type) { *bs = other[i][1]; *ts = other[i][2]; return 1; }
    return 0;
}

static void shared_vector(const char *dir, const char *model, uint32_t rid) {
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/models/tiny-shakespeare-%s.gguf", dir, model);
    gguf_file g;
    if (build_gguf(&g, path, NULL, err, sizeof err) || gguf_bind_types(&g, type_size, NULL, err, sizeof err)) {
        CHECK(0, "open %s: %s", path, err);
        return;
    }
    const picolm_format *f = find_in(vt_repack, rid);
    const gguf_tensor *t = gguf_find_tensor(&g, "blk.0.attn_k.weight");
    snprintf(path, sizeof path, "%s/reference/dequant/tiny-shakespeare-%s.blk.0.attn_k.weight.f32", dir, model);
    size_t rsize;
    float *ref = tl_slurp(path, &rsize);
    if (!f || !t || t->type != f->base_type || !ref || rsize != (size_t)t->nelements * sizeof(float) || t->ne[1] % G) {
        CHECK(0, "%s: blk.0.attn_k is %s with a multiple of 16 rows, and %s holds its floats", model, f ? any_fmt(f->base_type)->name : "?",
              path);
        free(ref);
        free_gguf(&g);
        return;
    }
    const int64_t n = t->ne[0], rows = t->ne[1];
    const size_t rb = row_bytes(f, n);
    uint8_t *grp = malloc(G * rb);
    float *y = malloc((size_t)G * n * sizeof *y);
    int64_t diff = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += G) {
        f->from_base((const uint8_t *)t->data + r0 * rb, rb, grp, n);
        f->dequantize_row(grp, y, n);
        for (int64_t i = 0; i < G * n; i++) diff += memcmp(&y[i], &ref[r0 * n + i], sizeof(float)) != 0;
    }
    CHECK(diff == 0, "%s: blk.0.attn_k (%lld x %lld) repacked as %s dequantizes to reference/dequant bit for bit (%lld differ)",
          model, (long long)rows, (long long)n, f->name, (long long)diff);
    free(grp); free(y); free(ref);
    free_gguf(&g);
}

static void test_shared(void) {
    const char *dir = shared_dir("repack16: shared dequantization vectors");
    if (!dir) return;
    shared_vector(dir, "q4_k", PICOLM_TYPE_Q4_K_R16);
    shared_vector(dir, "q4_k_m", PICOLM_TYPE_Q4_K_R16);
    shared_vector(dir, "q6_k", PICOLM_TYPE_Q6_K_R16);
}

static const picolm_plugin *open_plugin(const char *file, void **h) {
    char path[4096], why[512];
    snprintf(path, sizeof path, "%s/plugins/%s", build_dir(), file);
    const picolm_entry_fn entry = tl_plugin_entry(path, h, why, sizeof why);
    const picolm_plugin *p = entry ? entry() : NULL;
    CHECK(p && p->abi_version == PICOLM_ABI_VERSION && p->kind == PICOLM_KIND_FORMAT && p->vtable, "%s: loads (%s)", file, why);
    return p && p->vtable ? p : NULL;
}

int main(void) {
    void *hr = NULL, *hk = NULL, *hl = NULL;
    repack_p = open_plugin("format-repack.so", &hr);
    const picolm_plugin *kp = open_plugin("format-kquants.so", &hk);
    const picolm_plugin *lp = open_plugin("format-legacy.so", &hl);
    if (!repack_p || !kp || !lp) return 1;
    vt_repack = repack_p->vtable;
    vt_kq = kp->vtable;
    vt_legacy = lp->vtable;
    test_descriptor();
    test_type(PICOLM_TYPE_Q4_K_R16);
    test_type(PICOLM_TYPE_Q6_K_R16);
    test_q5_0_r16();
    test_shared();
    dlclose(hr);
    dlclose(hk);
    dlclose(hl);
    return CHECK_DONE();
}
