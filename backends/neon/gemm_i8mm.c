/*
 * SMMLA (i8mm) GEMM tiles for the K-quants, AArch64 only: mk/aarch64.mk
 * compiles this file with +dotprod+i8mm; they are the i8mm level's
 * (neon_dot.c), used only when the CPU reports both.
 *
 * SMMLA multiplies a 2x8 block of int8 (two weight rows, 8 bytes each) by
 * an 8x2 one (two activation columns) into the 2x2 int32 lanes
 * [r0c0, r0c1, r1c0, r1c1]: 32 multiply-adds per instruction, twice SDOT's.
 * A tile is 2 row pairs x 2 column pairs.  The K-quant vec_dots sum integers
 * exactly per superblock and only then round (neon_impl.h), so lanes that
 * hold the whole superblock sum per (row, column) give the same integers,
 * and the same float steps afterwards give bit-identical results.  Column
 * remainders (and decode, one column) go to the SDOT tiles.
 */
#include "neon_common.h"
#include "neon_gemm.h"

#if defined(__aarch64__) && defined(__ARM_FEATURE_MATMUL_INT8)
#define UNROLL _Pragma("GCC unroll 8")
#define RP 2 /* row pairs */
#define CP 2 /* column pairs */

/* 16 bytes of row (or column) 0 and 1 -> the SMMLA operands of bytes 0..7
   (lo) and 8..15 (hi): row 0's 8 bytes, then row 1's */
NEON_AI void zip_rows(int8x16_t v0, int8x16_t v1, int8x16_t *lo, int8x16_t *hi) {
    *lo = vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(v0), vreinterpretq_s64_s8(v1)));
    *hi = vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(v0), vreinterpretq_s64_s8(v1)));
}
/* Q4_K mins: sum_j bs[j] * mn[j] (8 int16 pairs, neon_impl.h's kmins_dot) of
   rows r0, r1 x columns c0, c1, in SMMLA's lane order */
NEON_AI int32x4_t kmins_2x2(int16x8_t mr0, int16x8_t mr1, int16x8_t bc0, int16x8_t bc1) {
    const int32x4_t p00 = vmlal_high_s16(vmull_s16(vget_low_s16(mr0), vget_low_s16(bc0)), mr0, bc0);
    const int32x4_t p01 = vmlal_high_s16(vmull_s16(vget_low_s16(mr0), vget_low_s16(bc1)), mr0, bc1);
    const int32x4_t p10 = vmlal_high_s16(vmull_s16(vget_low_s16(mr1), vget_low_s16(bc0)), mr1, bc0);
    const int32x4_t p11 = vmlal_high_s16(vmull_s16(vget_low_s16(mr1), vget_low_s16(bc1)), mr1, bc1);
    return vpaddq_s32(vpaddq_s32(p00, p01), vpaddq_s32(p10, p11));
}
/* [a, a, b, b]: a per-row factor in SMMLA's lane order */
NEON_AI int32x4_t rows2_s32(int32_t a, int32_t b) { return vcombine_s32(vdup_n_s32(a), vdup_n_s32(b)); }
NEON_AI float32x4_t rows2_f32(float a, float b) { return vcombine_f32(vdup_n_f32(a), vdup_n_f32(b)); }
/* [a, b, a, b]: a per-column factor */
NEON_AI float32x4_t cols2_f32(float a, float b) {
    const float32x2_t v = vset_lane_f32(b, vdup_n_f32(a), 1);
    return vcombine_f32(v, v);
}

/* stores a 2x2 lane block for rows r, r+1 (of `rows` valid) and columns c, c+1 */
NEON_AI void store_2x2(float32x4_t v, int r, int rows, float *dst, size_t ds, int c) {
    float s[4];
    vst1q_f32(s, v);
    if (r < rows) { dst[(size_t)c * ds + r] = s[0]; dst[(size_t)(c + 1) * ds + r] = s[1]; }
    if (r + 1 < rows) { dst[(size_t)c * ds + r + 1] = s[2]; dst[(size_t)(c + 1) * ds + r + 1] = s[3]; }
}

/* 2*RP rows (the last valid one repeated) x 2*CP columns */
static void tile_q4_K(int64_t n, const uint8_t *w, size_t ws, int rows, const uint8_t *a, size_t as, float *dst, size_t ds) {
    const int64_t nb = n / QK_K;
    const block_q4_K *x[2 * RP];
    const block_q8_K *y[2 * CP];
    UNROLL for (int r = 0; r < 2 * RP; r++) x[r] = (const block_q4_K *)(w + (size_t)(r < rows ? r : rows - 1) * ws);
    UNROLL for (int c = 0; c < 2 * CP; c++) y[c] = (const block_q8_K *)(a + (size_t)c * as);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t sumf[RP][CP];
    UNROLL for (int p = 0; p < RP; p++) UNROLL for (int q = 0; q < CP; q++) sumf[p][q] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < nb; i++) {
        uint32_t utmp[2 * RP][4];
        int16x8_t mn[2 * RP], bs[2 * CP];
        UNROLL for (int r = 0; r < 2 * RP; r++) {
            picolm_k4_scales(x[r][i].scales, utmp[r]);
            mn[r] = vreinterpretq_s16_u16(vmovl_u8(vld1_u8((const uint8_t *)utmp[r] + 8)));
        }
        UNROLL for (int c = 0; c < 2 * CP; c++) bs[c] = vpaddq_s16(vld1q_s16(y[c][i].bsums), vld1q_s16(y[c][i].bsums + 8));
        int32x4_t isum[RP][CP];
        UNROLL for (int p = 0; p < RP; p++) UNROLL for (int q = 0; q < CP; q++) isum[p][q] = vdupq_n_s32(0);
        for (int j = 0; j < QK_K / 64; j++) {
            /* sub-blocks 2j (low nibbles) and 2j+1 (high nibbles) */
            int32x4_t tlo[RP][CP], thi[RP][CP];
            UNROLL for (int p = 0; p < RP; p++) UNROLL for (int q = 0; q < CP; q++) tlo[p][q] = thi[p][q] = vdupq_n_s32(0);
            /* 8-byte chunks k of both sub-blocks: rows zipped in pairs, columns too */
            int8x16_t wl[RP][4], wh[RP][4], al[CP][4], ah[CP][4];
            UNROLL for (int p = 0; p < RP; p++) UNROLL for (int h = 0; h < 2; h++) {
                const uint8_t *q0 = x[2 * p][i].qs + 32 * j + 16 * h, *q1 = x[2 * p + 1][i].qs + 32 * j + 16 * h;
                const uint8x16_t b0 = vld1q_u8(q0), b1 = vld1q_u8(q1);
                zip_rows(vreinterpretq_s8_u8(vandq_u8(b0, m4)), vreinterpretq_s8_u8(vandq_u8(b1, m4)), &wl[p][2 * h], &wl[p][2 * h + 1]);
                zip_rows(vreinterpretq_s8_u8(vshrq_n_u8(b0, 4)), vreinterpretq_s8_u8(vshrq_n_u8(b1, 4)), &wh[p][2 * h], &wh[p][2 * h + 1]);
            }
            UNROLL for (int q = 0; q < CP; q++) UNROLL for (int h = 0; h < 2; h++) {
                const int8_t *a0 = y[2 * q][i].qs + 64 * j + 16 * h, *a1 = y[2 * q + 1][i].qs + 64 * j + 16 * h;
                zip_rows(vld1q_s8(a0), vld1q_s8(a1), &al[q][2 * h], &al[q][2 * h + 1]);
                zip_rows(vld1q_s8(a0 + 32), vld1q_s8(a1 + 32), &ah[q][2 * h], &ah[q][2 * h + 1]);
            }
            UNROLL for (int k = 0; k < 4; k++) UNROLL for (int p = 0; p < RP; p++) UNROLL for (int q = 0; q < CP; q++) {
                tlo[p][q] = vmmlaq_s32(tlo[p][q], wl[p][k], al[q][k]);
                thi[p][q] = vmmlaq_s32(thi[p][q], wh[p][k], ah[q][k]);
            }
            UNROLL for (int p = 0; p < RP; p++) {
                const uint8_t *s0 = (const uint8_t *)utmp[2 * p], *s1 = (const uint8_t *)utmp[2 * p + 1];
                const int32x4_t sl = rows2_s32(s0[2 * j], s1[2 * j]), sh = rows2_s32(s0[2 * j + 1], s1[2 * j + 1]);
                UNROLL for (int q = 0; q < CP; q++) isum[p][q] = vmlaq_s32(vmlaq_s32(isum[p][q], tlo[p][q], sl), thi[p][q], sh);
            }
        }
        /* the vec_dot's sumf += d * (float)isum - dmin * (float)summ, d = y.d * x.d, per lane */
        UNROLL for (int p = 0; p < RP; p++) {
            const block_q4_K *x0 = &x[2 * p][i], *x1 = &x[2 * p + 1][i];
            const float32x4_t xd = rows2_f32(neon_h2f(x0->d), neon_h2f(x1->d));
            const float32x4_t xm = rows2_f32(neon_h2f(x0->dmin), neon_h2f(x1->dmin));
            UNROLL for (int q = 0; q < CP; q++) {
                const float32x4_t yd = cols2_f32(y[2 * q][i].d, y[2 * q + 1][i].d);
                const int32x4_t summ = kmins_2x2(mn[2 * p], mn[2 * p + 1], bs[2 * q], bs[2 * q + 1]);
                const float32x4_t t = vsubq_f32(vmulq_f32(vmulq_f32(yd, xd), vcvtq_f32_s32(isum[p][q])),
                                                vmulq_f32(vmulq_f32(yd, xm), vcvtq_f32_s32(summ)));
                sumf[p][q] = vaddq_f32(sumf[p][q], t);
            }
        }
    }
    UNROLL for (int p = 0; p < RP; p++) UNROLL for (int q = 0; q < CP; q++) store_2x2(sumf[p][q], 2 * p, rows, dst, ds, 2 * q);
}

static void tile_q6_K(int64_t n, const uint8_t *w, size_t ws, int rows, const uint8_t *a, size_t as, float *dst, size_t ds) {
    const int64_t nb = n / QK_K;
    const block_q6_K *x[2 * RP];
    const block_q8_K *y[2 * CP];
    UNROLL for (int r = 0; r < 2 * RP; r++) x[r] = (const block_q6_K *)(w + (size_t)(r < rows ? r : rows - 1) * ws);
    UNROLL for (int c = 0; c < 2 * CP; c++) y[c] = (const block_q8_K *)(a + (size_t)c * as);
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30);
    const int8x16_t s32 = vdupq_n_s8(32);
    float32x4_t sumf[RP][CP];
    UNROLL for (int p = 0; p < RP; p++) UNROLL for (int q = 0; q < CP; q++) sumf[p][q] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < nb; i++) {
        int32x4_t isum[RP][CP];
        UNROLL for (int p = 0; p < RP; p++) UNROLL for (int q = 0; q < CP; q++) isum[p][q] = vdupq_n_s32(0);
        for (int ch = 0; ch < QK_K / 128; ch++) {
            UNROLL for (int g = 0; g < 8; g++) {
                /* group g's 16 values of each row (neon_impl.h's u[g]), rows paired 8 bytes at a time */
                int8x16_t wv[RP][2], av[CP][2];
                UNROLL for (int p = 0; p < RP; p++) {
                    int8x16_t u[2];
                    UNROLL for (int h = 0; h < 2; h++) {
                        const block_q6_K *b = &x[2 * p + h][i];
                        const uint8x16_t l = vld1q_u8(b->ql + 64 * ch + 16 * (g & 3)), hq = vld1q_u8(b->qh + 32 * ch + 16 * (g & 1));
                        const uint8x16_t lo = g < 4 ? vandq_u8(l, m4) : vshrq_n_u8(l, 4);
                        const uint8x16_t hb = vandq_u8(vshlq_u8(hq, vdupq_n_s8((int8_t)(4 - 2 * (g >> 1)))), m30);
                        u[h] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hb)), s32);
                    }
                    zip_rows(u[0], u[1], &wv[p][0], &wv[p][1]);
                }
                UNROLL for (int q = 0; q < CP; q++) {
                    const int8_t *a0 = y[2 * q][i].qs + 128 * ch + 16 * g, *a1 = y[2 * q + 1][i].qs + 128 * ch + 16 * g;
                    zip_rows(vld1q_s8(a0), vld1q_s8(a1), &av[q][0], &av[q][1]);
                }
                UNROLL for (int p = 0; p < RP; p++) {
                    const int32x4_t sc = rows2_s32(x[2 * p][i].scales[8 * ch + g], x[2 * p + 1][i].scales[8 * ch + g]);
                    UNROLL for (int q = 0; q < CP; q++) {
                        const int32x4_t t = vmmlaq_s32(vmmlaq_s32(vdupq_n_s32(0), wv[p][0], av[q][0]), wv[p][1], av[q][1]);
                        isum[p][q] = vmlaq_s32(isum[p][q], t, sc);
                    }
                }
            }
        }
        /* the vec_dot's sumf += y.d * x.d * (float)isum, per lane */
        UNROLL for (int p = 0; p < RP; p++) {
            const float32x4_t xd = rows2_f32(neon_h2f(x[2 * p][i].d), neon_h2f(x[2 * p + 1][i].d));
            UNROLL for (int q = 0; q < CP; q++) {
                const float32x4_t yd = cols2_f32(y[2 * q][i].d, y[2 * q + 1][i].d);
                sumf[p][q] = vaddq_f32(sumf[p][q], vmulq_f32(vmulq_f32(yd, xd), vcvtq_f32_s32(isum[p][q])));
            }
        }
    }
    UNROLL for (int p = 0; p < RP; p++) UNROLL for (int q = 0; q < CP; q++) store_2x2(sumf[p][q], 2 * p, rows, dst, ds, 2 * q);
}

/* full column tiles by SMMLA, the rest (fewer than 2*CP columns) by SDOT */
#define I8MM_GEMM(name)                                                                                            \
    PK_HIDDEN void neon_gemm_i8mm_##name(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, \
                                         size_t as, float *dst, size_t ds) {                                       \
        const uint8_t *W = w, *A = a;                                                                              \
        const int64_t nc4 = nc - nc % (2 * CP);                                                                    \
        for (int64_t r = 0; r < nr; r += 2 * RP) {                                                                 \
            const int rows = nr - r < 2 * RP ? (int)(nr - r) : 2 * RP;                                             \
            for (int64_t c = 0; c < nc4; c += 2 * CP)                                                              \
                tile_##name(n, W + (size_t)r * ws, ws, rows, A + (size_t)c * as, as, dst + (size_t)c * ds + r, ds);    \
        }                                                                                                          \
        if (nc4 < nc) neon_gemm_dot_##name(n, nr, nc - nc4, w, ws, A + (size_t)nc4 * as, as, dst + (size_t)nc4 * ds, ds); \
    }
I8MM_GEMM(q4_K)
I8MM_GEMM(q6_K)
#elif defined(__aarch64__)
/* built without i8mm (flags overridden): the level keeps its rows, which
   then run the SDOT tiles (the same bits) */
#define I8MM_STUB(T, A, name)                                                                                      \
    PK_HIDDEN void neon_gemm_i8mm_##name(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, \
                                         size_t as, float *dst, size_t ds) {                                       \
        neon_gemm_dot_##name(n, nr, nc, w, ws, a, as, dst, ds);                                                    \
    }
NEON_GEMM_I8MM_LIST(I8MM_STUB)
#endif
