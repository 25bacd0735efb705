/*
 * NEON GEMM tiles for prefill, written once and compiled twice like
 * neon_impl.h:
 *   gemm_base.c  NEON_DP 0: plain ASIMD (vmull_s8 + vpaddl), any ARMv8-A / ARMv7 NEON
 *   gemm_dot.c   NEON_DP 1: SDOT (ARMv8.2-A dotprod)
 * GEMM_PFX names the functions.  The neon level's rows (kernels.c) hold the
 * plain set, the dotprod level's (neon_dot.c) the SDOT one.
 *
 * A tile is TR weight rows x TC activation columns: each weight block is
 * decoded once for the TC columns and each activation block loaded once
 * for the TR rows.  Every (row, column) result goes through exactly the
 * arithmetic of the neon_impl.h vec_dot of that format (the same integer
 * lanes, the same float operations in the same order), so a gemm result is
 * bit-identical to the vec_dot one, and prefill logits equal decode's.
 *
 * Ragged edges: a tile with fewer than TR rows repeats its last row (the
 * extra results are not stored); fewer than TC columns take the tile
 * instance of that width, so one column (decode) costs no wasted work.
 */
#ifndef GEMM_PFX
#error "define GEMM_PFX and NEON_DP before including gemm_impl.h"
#endif
#include "neon_common.h"
#include "neon_gemm.h"

#define GEMM_CAT2(a, b) a##b
#define GEMM_CAT(a, b) GEMM_CAT2(a, b)
#define GFN(name) GEMM_CAT(GEMM_PFX, name)

/* acc + dot of 16 signed bytes, lane i += bytes 4i..4i+3: SDOT, or its
   exact plain-ASIMD equivalent (the lanes of neon_impl.h's DOT) */
#if NEON_DP
#define GDOT(acc, a, b) vdotq_s32((acc), (a), (b))
#else
NEON_AI int32x4_t gemm_dot_fallback(int32x4_t acc, int8x16_t a, int8x16_t b) {
    const int32x4_t lo = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    const int32x4_t hi = vpaddlq_s16(vmull_s8(vget_high_s8(a), vget_high_s8(b)));
    return vaddq_s32(acc, vpaddq_s32(lo, hi));
}
#define GDOT(acc, a, b) gemm_dot_fallback((acc), (a), (b))
#endif
#define GZERO vdupq_n_s32(0)
#define GS8(v) vreinterpretq_s8_u8(v)
#define UNROLL _Pragma("GCC unroll 8")

/* Tile shape: TR rows x up to TC columns, the column width per format
   (W_*) from instruction counts under qemu (docs/perf.md).  AArch64 has 32
   vector registers, AArch32 16 (where the levels hold no tiles: they
   counted more than vec_dot there); the plain-ASIMD dot (6 instructions
   per SDOT) needs more temporaries, and wider tiles spilled. */
#if defined(__aarch64__) && NEON_DP
#define TR 2
#define TC 4
#define W_LEGACY 4
#define W_Q4_K 4
#define W_Q6_K 4
#else
#define TR 2
#define TC 2
#define W_LEGACY 1
#define W_Q4_K 2
#define W_Q6_K 1
#endif

/* row r of the tile, clamped to the last valid one */
NEON_AI const uint8_t *tile_row(const uint8_t *w, size_t ws, int rows, int r) {
    return w + (size_t)(r < rows ? r : rows - 1) * ws;
}

/* Stores the valid rows of a tile's results res[r][c]. */
#define TILE_STORE(res, rows, nc_, dst, ds)                             \
    UNROLL for (int r_ = 0; r_ < TR; r_++)                              \
        if (r_ < (rows)) UNROLL for (int c_ = 0; c_ < (nc_); c_++)      \
            (dst)[(size_t)c_ * (ds) + r_] = (res)[r_][c_];
/* The same for results held as lanes: column c of row r in lane c of v[r]. */
#define TILE_STORE_LANES(v, rows, nc_, dst, ds)                         \
    do {                                                                \
        float res_[TR][TC];                                             \
        UNROLL for (int r_ = 0; r_ < TR; r_++) {                        \
            float s_[4];                                                \
            vst1q_f32(s_, (v)[r_]);                                     \
            UNROLL for (int c_ = 0; c_ < (nc_); c_++) res_[r_][c_] = s_[c_]; \
        }                                                               \
        TILE_STORE(res_, rows, nc_, dst, ds)                            \
    } while (0)

/* A gemm over tiles: rows in steps of TR, columns in steps of W <= TC,
   the column remainder by the tile instance of that width (tiles[w] for w
   columns). */
typedef void (*gemm_tile_fn)(int64_t n, const uint8_t *w, size_t ws, int rows, const uint8_t *a, size_t as, float *dst,
                             size_t ds);
NEON_AI void gemm_tiles(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst,
                        size_t ds, const gemm_tile_fn tiles[TC + 1], const int width) {
    const uint8_t *W = w, *A = a;
    for (int64_t r = 0; r < nr; r += TR) {
        const int rows = nr - r < TR ? (int)(nr - r) : TR;
        int64_t c = 0;
        for (; c + width <= nc; c += width)
            tiles[width](n, W + (size_t)r * ws, ws, rows, A + (size_t)c * as, as, dst + (size_t)c * ds + r, ds);
        if (c < nc) tiles[nc - c](n, W + (size_t)r * ws, ws, rows, A + (size_t)c * as, as, dst + (size_t)c * ds + r, ds);
    }
}

/* Instances of a tile body BODY(n, w, ws, rows, a, as, dst, ds, NC) for
   1..TC columns, and the gemm that runs them. */
#if TC == 4
#define TILE_WIDTHS(X, body) X(body, 1) X(body, 2) X(body, 3) X(body, 4)
#define TILE_TABLE(body) { NULL, body##_1, body##_2, body##_3, body##_4 }
#else
#define TILE_WIDTHS(X, body) X(body, 1) X(body, 2)
#define TILE_TABLE(body) { NULL, body##_1, body##_2 }
#endif
#define TILE_INSTANCE(body, NC)                                                                                    \
    static void body##_##NC(int64_t n, const uint8_t *w, size_t ws, int rows, const uint8_t *a, size_t as, float *dst, \
                            size_t ds) { body(n, w, ws, rows, a, as, dst, ds, NC); }
#define GEMM_FROM_TILE(name, body, width)                                                                       \
    TILE_WIDTHS(TILE_INSTANCE, body)                                                                            \
    PK_HIDDEN void GFN(name)(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, \
                               float *dst, size_t ds) {                                                         \
        static const gemm_tile_fn tiles[TC + 1] = TILE_TABLE(body);                                             \
        gemm_tiles(n, nr, nc, w, ws, a, as, dst, ds, tiles, width);                                             \
    }

/* ---- 32-element blocks against Q8_0 ----------------------------------------
   neon_impl.h's LEGACY_LOOP: block k's float partial goes into acc0 (k even)
   or acc1 (k odd), as vmlaq_n_f32(acc, (float)p, d_x * d_y); the result is
   vaddvq_f32(acc0 + acc1).  DECODE(blk, lo, hi) gives a weight block's 32
   signed values as two 16-byte halves. */
#define LEGACY_TILE(tname, WBLK, DECODE)                                                                           \
    NEON_AI void tname##_step(const WBLK *const x[TR], const block_q8_0 *const y[], int64_t k, float32x4_t acc[TR][TC], \
                              const int NC) {                                                                      \
        int8x16_t lo[TR], hi[TR];                                                                                  \
        float dx[TR], dy[TC];                                                                                      \
        UNROLL for (int r = 0; r < TR; r++) {                                                                      \
            DECODE(x[r][k], lo[r], hi[r]);                                                                         \
            dx[r] = neon_h2f(x[r][k].d);                                                                           \
        }                                                                                                          \
        UNROLL for (int c = 0; c < NC; c++) {                                                                      \
            const int8x16_t a0 = vld1q_s8(y[c][k].qs), a1 = vld1q_s8(y[c][k].qs + 16);                            \
            dy[c] = neon_h2f(y[c][k].d);                                                                           \
            UNROLL for (int r = 0; r < TR; r++) {                                                                  \
                const int32x4_t p = GDOT(GDOT(GZERO, lo[r], a0), hi[r], a1);                                      \
                acc[r][c] = vmlaq_n_f32(acc[r][c], vcvtq_f32_s32(p), dx[r] * dy[c]);                             \
            }                                                                                                      \
        }                                                                                                          \
    }                                                                                                              \
    NEON_AI void tname(int64_t n, const uint8_t *w, size_t ws, int rows, const uint8_t *a, size_t as, float *dst,  \
                       size_t ds, const int NC) {                                                                  \
        const int64_t nb = n / QK8_0;                                                                              \
        const WBLK *x[TR];                                                                                         \
        const block_q8_0 *y[TC];                                                                                   \
        UNROLL for (int r = 0; r < TR; r++) x[r] = (const WBLK *)tile_row(w, ws, rows, r);                        \
        UNROLL for (int c = 0; c < NC; c++) y[c] = (const block_q8_0 *)(a + (size_t)c * as);                      \
        float32x4_t acc0[TR][TC], acc1[TR][TC];                                                                    \
        UNROLL for (int r = 0; r < TR; r++) UNROLL for (int c = 0; c < TC; c++) acc0[r][c] = acc1[r][c] = vdupq_n_f32(0.0f); \
        int64_t k = 0;                                                                                             \
        for (; k + 1 < nb; k += 2) {                                                                               \
            tname##_step(x, y, k, acc0, NC);                                                                       \
            tname##_step(x, y, k + 1, acc1, NC);                                                                   \
        }                                                                                                          \
        if (k < nb) tname##_step(x, y, k, acc0, NC);                                                               \
        float res[TR][TC];                                                                                         \
        UNROLL for (int r = 0; r < TR; r++) UNROLL for (int c = 0; c < NC; c++)                                   \
            res[r][c] = vaddvq_f32(vaddq_f32(acc0[r][c], acc1[r][c]));                                            \
        TILE_STORE(res, rows, NC, dst, ds)                                                                         \
    }

#define DECODE_Q8_0(blk, lo, hi) do { lo = vld1q_s8((blk).qs); hi = vld1q_s8((blk).qs + 16); } while (0)
#define DECODE_Q4_0(blk, lo, hi) do {                                                          \
        const uint8x16_t b_ = vld1q_u8((blk).qs);                                              \
        lo = vsubq_s8(GS8(vandq_u8(b_, vdupq_n_u8(0x0F))), vdupq_n_s8(8));                     \
        hi = vsubq_s8(GS8(vshrq_n_u8(b_, 4)), vdupq_n_s8(8)); } while (0)
#define DECODE_Q5_0(blk, lo, hi) do {                                                          \
        uint8x16_t h0_, h1_;                                                                   \
        neon_qh5((blk).qh, &h0_, &h1_);                                                        \
        const uint8x16_t b_ = vld1q_u8((blk).qs);                                              \
        lo = vsubq_s8(GS8(vorrq_u8(vandq_u8(b_, vdupq_n_u8(0x0F)), h0_)), vdupq_n_s8(16));     \
        hi = vsubq_s8(GS8(vorrq_u8(vshrq_n_u8(b_, 4), h1_)), vdupq_n_s8(16)); } while (0)

LEGACY_TILE(tile_q8_0, block_q8_0, DECODE_Q8_0)
LEGACY_TILE(tile_q4_0, block_q4_0, DECODE_Q4_0)
LEGACY_TILE(tile_q5_0, block_q5_0, DECODE_Q5_0)
GEMM_FROM_TILE(q8_0, tile_q8_0, W_LEGACY)
GEMM_FROM_TILE(q4_0, tile_q4_0, W_LEGACY)
GEMM_FROM_TILE(q5_0, tile_q5_0, W_LEGACY)

/* ---- K-quants against Q8_K ---------------------------------------------------
   Per superblock the vec_dot sums integers (exact, any lane order), then
   does sumf += d * (float)isum - dmin * (float)summ with d = y.d * x.d:
   elementwise float operations, here on a vector of the tile's columns. */

/* the integer totals of TC int32x4 sums, column c in lane c */
NEON_AI int32x4_t hsum_cols(const int32x4_t v[TC]) {
#if TC == 4
    return vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3]));
#else
    const int32x4_t p = vpaddq_s32(v[0], v[1]);
    return vpaddq_s32(p, p);
#endif
}
/* lane c = the Q8_K d of column c, i */
NEON_AI float32x4_t col_d(const block_q8_K *const y[TC], int64_t i, const int NC) {
    float d[4] = {0, 0, 0, 0};
    UNROLL for (int c = 0; c < NC; c++) d[c] = y[c][i].d;
    return vld1q_f32(d);
}

NEON_AI void tile_q4_K(int64_t n, const uint8_t *w, size_t ws, int rows, const uint8_t *a, size_t as, float *dst,
                       size_t ds, const int NC) {
    const int64_t nb = n / QK_K;
    const block_q4_K *x[TR];
    const block_q8_K *y[TC];
    UNROLL for (int r = 0; r < TR; r++) x[r] = (const block_q4_K *)tile_row(w, ws, rows, r);
    UNROLL for (int c = 0; c < NC; c++) y[c] = (const block_q8_K *)(a + (size_t)c * as);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t sumf[TR];
    UNROLL for (int r = 0; r < TR; r++) sumf[r] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < nb; i++) {
        uint32_t utmp[TR][4];
        int16x8_t mn[TR], bs[TC];
        UNROLL for (int r = 0; r < TR; r++) {
            picolm_k4_scales(x[r][i].scales, utmp[r]);
            mn[r] = vreinterpretq_s16_u16(vmovl_u8(vld1_u8((const uint8_t *)utmp[r] + 8)));
        }
        UNROLL for (int c = 0; c < NC; c++) bs[c] = vpaddq_s16(vld1q_s16(y[c][i].bsums), vld1q_s16(y[c][i].bsums + 8));
        int32x4_t isum[TR][TC];
        UNROLL for (int r = 0; r < TR; r++) UNROLL for (int c = 0; c < TC; c++) isum[r][c] = GZERO;
        for (int j = 0; j < QK_K / 64; j++) {
            int8x16_t q[TR][4];
            UNROLL for (int r = 0; r < TR; r++) {
                const uint8x16_t b0 = vld1q_u8(x[r][i].qs + 32 * j), b1 = vld1q_u8(x[r][i].qs + 32 * j + 16);
                q[r][0] = GS8(vandq_u8(b0, m4));
                q[r][1] = GS8(vandq_u8(b1, m4));
                q[r][2] = GS8(vshrq_n_u8(b0, 4));
                q[r][3] = GS8(vshrq_n_u8(b1, 4));
            }
            UNROLL for (int c = 0; c < NC; c++) {
                const int8_t *q8 = y[c][i].qs + 64 * j;
                const int8x16_t a0 = vld1q_s8(q8), a1 = vld1q_s8(q8 + 16), a2 = vld1q_s8(q8 + 32), a3 = vld1q_s8(q8 + 48);
                UNROLL for (int r = 0; r < TR; r++) {
                    const uint8_t *sc = (const uint8_t *)utmp[r];
                    const int32x4_t p0 = GDOT(GDOT(GZERO, q[r][0], a0), q[r][1], a1);
                    const int32x4_t p1 = GDOT(GDOT(GZERO, q[r][2], a2), q[r][3], a3);
                    isum[r][c] = vmlaq_n_s32(isum[r][c], p0, sc[2 * j]);
                    isum[r][c] = vmlaq_n_s32(isum[r][c], p1, sc[2 * j + 1]);
                }
            }
        }
        const float32x4_t yd = col_d(y, i, NC);
        UNROLL for (int r = 0; r < TR; r++) {
            int32_t summ[4] = {0, 0, 0, 0};
            UNROLL for (int c = 0; c < NC; c++) summ[c] = kmins_dot16(bs[c], mn[r]);
            const float32x4_t d = vmulq_n_f32(yd, neon_h2f(x[r][i].d)), dmin = vmulq_n_f32(yd, neon_h2f(x[r][i].dmin));
            const float32x4_t t = vsubq_f32(vmulq_f32(d, vcvtq_f32_s32(hsum_cols(isum[r]))),
                                            vmulq_f32(dmin, vcvtq_f32_s32(vld1q_s32(summ))));
            sumf[r] = vaddq_f32(sumf[r], t);
        }
    }
    TILE_STORE_LANES(sumf, rows, NC, dst, ds);
}
GEMM_FROM_TILE(q4_K, tile_q4_K, W_Q4_K)

NEON_AI void tile_q6_K(int64_t n, const uint8_t *w, size_t ws, int rows, const uint8_t *a, size_t as, float *dst,
                       size_t ds, const int NC) {
    const int64_t nb = n / QK_K;
    const block_q6_K *x[TR];
    const block_q8_K *y[TC];
    UNROLL for (int r = 0; r < TR; r++) x[r] = (const block_q6_K *)tile_row(w, ws, rows, r);
    UNROLL for (int c = 0; c < NC; c++) y[c] = (const block_q8_K *)(a + (size_t)c * as);
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30);
    const int8x16_t s32 = vdupq_n_s8(32);
    float32x4_t sumf[TR];
    UNROLL for (int r = 0; r < TR; r++) sumf[r] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < nb; i++) {
        int32x4_t isum[TR][TC];
        UNROLL for (int r = 0; r < TR; r++) UNROLL for (int c = 0; c < TC; c++) isum[r][c] = GZERO;
        for (int ch = 0; ch < QK_K / 128; ch++) {
            /* the 16-element groups g of this 128-element chunk, as neon_impl.h's u[g] */
            UNROLL for (int g = 0; g < 8; g++) {
                int8x16_t u[TR];
                UNROLL for (int r = 0; r < TR; r++) {
                    const uint8_t *ql = x[r][i].ql + 64 * ch + 16 * (g & 3), *qh = x[r][i].qh + 32 * ch + 16 * (g & 1);
                    const uint8x16_t l = vld1q_u8(ql), h = vld1q_u8(qh);
                    /* low nibbles for g < 4, high after; qh bits 2(g/2), 2(g/2)+1 as bits 4, 5 */
                    const uint8x16_t lo = g < 4 ? vandq_u8(l, m4) : vshrq_n_u8(l, 4);
                    const uint8x16_t hb = vandq_u8(vshlq_u8(h, vdupq_n_s8((int8_t)(4 - 2 * (g >> 1)))), m30);
                    u[r] = vsubq_s8(GS8(vorrq_u8(lo, hb)), s32);
                }
                UNROLL for (int c = 0; c < NC; c++) {
                    const int8x16_t a0 = vld1q_s8(y[c][i].qs + 128 * ch + 16 * g);
                    UNROLL for (int r = 0; r < TR; r++)
                        isum[r][c] = vmlaq_n_s32(isum[r][c], GDOT(GZERO, u[r], a0), x[r][i].scales[8 * ch + g]);
                }
            }
        }
        const float32x4_t yd = col_d(y, i, NC);
        UNROLL for (int r = 0; r < TR; r++)
            sumf[r] = vaddq_f32(sumf[r], vmulq_f32(vmulq_n_f32(yd, neon_h2f(x[r][i].d)), vcvtq_f32_s32(hsum_cols(isum[r]))));
    }
    TILE_STORE_LANES(sumf, rows, NC, dst, ds);
}
GEMM_FROM_TILE(q6_K, tile_q6_K, W_Q6_K)

#undef GDOT
#undef GFN
#undef TR
#undef TC
#undef W_LEGACY
#undef W_Q4_K
#undef W_Q6_K
