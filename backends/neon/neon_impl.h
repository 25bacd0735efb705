/*
 * AArch64 NEON weight kernels, written once and compiled twice:
 *   kernels.c    NEON_DP 0: plain ASIMD (vmull_s8 + vpadalq_s16), any ARMv8-A:
 *                the neon level
 *   neon_dot.c   NEON_DP 1: SDOT (vdotq_s32), ARMv8.2-A dotprod only: the
 *                dotprod level, which the plugin's init overlays only when
 *                the probed HWCAPs have it, so no SDOT runs on a CPU without it
 * NEON_PFX names the functions; NEON_KERNEL_LIST (neon_common.h) lists them.
 *
 * Integer sums are exact (same as the reference); only the order of the
 * float accumulation differs.  Block layouts: include/picolm/blocks.h.
 */
#ifndef NEON_PFX
#error "define NEON_PFX and NEON_DP before including neon_impl.h"
#endif
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "neon_common.h"

#define NEON_CAT2(a, b) a##b
#define NEON_CAT(a, b) NEON_CAT2(a, b)
#define FN(name) NEON_CAT(NEON_PFX, name)

/* acc + dot of 16 signed bytes, lane i += bytes 4i..4i+3 in both variants,
   so the plain kernels give bit-identical results to the SDOT ones (the
   legacy kernels convert the 4 lanes to float before reducing them) */
#if NEON_DP
#define DOT(acc, a, b) vdotq_s32((acc), (a), (b))
#else
NEON_AI int32x4_t neon_dot_fallback(int32x4_t acc, int8x16_t a, int8x16_t b) {
    /* |a*b| <= 128*128 fits int16; pairs widen to int32 before any sum */
    const int32x4_t lo = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    const int32x4_t hi = vpaddlq_s16(vmull_high_s8(a, b));
    return vaddq_s32(acc, vpaddq_s32(lo, hi));
}
#define DOT(acc, a, b) neon_dot_fallback((acc), (a), (b))
#endif

#define ZERO_I32 vdupq_n_s32(0)
#define S8(v) vreinterpretq_s8_u8(v)

/* dot of one 32-element block given as two 16-byte halves */
NEON_AI int32x4_t dot32(int8x16_t a0, int8x16_t a1, const int8_t *q8) {
    return DOT(DOT(ZERO_I32, a0, vld1q_s8(q8)), a1, vld1q_s8(q8 + 16));
}

/* ---- 32-element blocks against Q8_0 / Q8_1 ------------------------------- */
/* Two float accumulators over alternating blocks hide the FMA latency. */
#define LEGACY_LOOP(BLOCK)                                          \
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f); \
    int64_t i = 0;                                                  \
    for (; i + 1 < nb; i += 2) {                                    \
        BLOCK(i, acc0);                                             \
        BLOCK(i + 1, acc1);                                         \
    }                                                               \
    if (i < nb) BLOCK(i, acc0);

static void FN(q8_0)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q8_0 *x = vx, *y = vy;
    const int64_t nb = n / QK8_0;
#define B_Q8_0(k, acc) do { \
        const int32x4_t p = dot32(vld1q_s8(x[k].qs), vld1q_s8(x[k].qs + 16), y[k].qs); \
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), neon_h2f(x[k].d) * neon_h2f(y[k].d)); } while (0)
    LEGACY_LOOP(B_Q8_0)
#undef B_Q8_0
    *s = vaddvq_f32(vaddq_f32(acc0, acc1));
}

static void FN(q4_0)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    const int64_t nb = n / QK4_0;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t s8 = vdupq_n_s8(8);
#define B_Q4_0(k, acc) do { \
        const uint8x16_t b = vld1q_u8(x[k].qs); \
        const int8x16_t lo = vsubq_s8(S8(vandq_u8(b, m4)), s8), hi = vsubq_s8(S8(vshrq_n_u8(b, 4)), s8); \
        const int32x4_t p = dot32(lo, hi, y[k].qs); \
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), neon_h2f(x[k].d) * neon_h2f(y[k].d)); } while (0)
    LEGACY_LOOP(B_Q4_0)
#undef B_Q4_0
    *s = vaddvq_f32(vaddq_f32(acc0, acc1));
}

static void FN(q4_1)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_1 *x = vx;
    const block_q8_1 *y = vy;
    const int64_t nb = n / QK4_1;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float summ = 0.0f; /* the min's share: m * (d_y * sum(q_y)) = m * s */
#define B_Q4_1(k, acc) do { \
        const uint8x16_t b = vld1q_u8(x[k].qs); \
        const int32x4_t p = dot32(S8(vandq_u8(b, m4)), S8(vshrq_n_u8(b, 4)), y[k].qs); \
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), neon_h2f(x[k].d) * neon_h2f(y[k].d)); \
        summ += neon_h2f(x[k].m) * neon_h2f(y[k].s); } while (0)
    LEGACY_LOOP(B_Q4_1)
#undef B_Q4_1
    *s = vaddvq_f32(vaddq_f32(acc0, acc1)) + summ;
}

static void FN(q5_0)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
    const int64_t nb = n / QK5_0;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t s16 = vdupq_n_s8(16);
#define B_Q5_0(k, acc) do { \
        uint8x16_t h0, h1; \
        neon_qh5(x[k].qh, &h0, &h1); \
        const uint8x16_t b = vld1q_u8(x[k].qs); \
        const int8x16_t lo = vsubq_s8(S8(vorrq_u8(vandq_u8(b, m4), h0)), s16); \
        const int8x16_t hi = vsubq_s8(S8(vorrq_u8(vshrq_n_u8(b, 4), h1)), s16); \
        const int32x4_t p = dot32(lo, hi, y[k].qs); \
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), neon_h2f(x[k].d) * neon_h2f(y[k].d)); } while (0)
    LEGACY_LOOP(B_Q5_0)
#undef B_Q5_0
    *s = vaddvq_f32(vaddq_f32(acc0, acc1));
}

static void FN(q5_1)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_1 *x = vx;
    const block_q8_1 *y = vy;
    const int64_t nb = n / QK5_1;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float summ = 0.0f;
#define B_Q5_1(k, acc) do { \
        uint8x16_t h0, h1; \
        neon_qh5(x[k].qh, &h0, &h1); \
        const uint8x16_t b = vld1q_u8(x[k].qs); \
        const int8x16_t lo = S8(vorrq_u8(vandq_u8(b, m4), h0)); \
        const int8x16_t hi = S8(vorrq_u8(vshrq_n_u8(b, 4), h1)); \
        const int32x4_t p = dot32(lo, hi, y[k].qs); \
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), neon_h2f(x[k].d) * neon_h2f(y[k].d)); \
        summ += neon_h2f(x[k].m) * neon_h2f(y[k].s); } while (0)
    LEGACY_LOOP(B_Q5_1)
#undef B_Q5_1
    *s = vaddvq_f32(vaddq_f32(acc0, acc1)) + summ;
}

static void FN(iq4_nl)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_iq4_nl *x = vx;
    const block_q8_0 *y = vy;
    const int64_t nb = n / QK4_NL;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t kv = vld1q_s8(picolm_kvalues_iq4nl);
#define B_IQ4_NL(k, acc) do { \
        const uint8x16_t b = vld1q_u8(x[k].qs); \
        const int32x4_t p = dot32(vqtbl1q_s8(kv, vandq_u8(b, m4)), vqtbl1q_s8(kv, vshrq_n_u8(b, 4)), y[k].qs); \
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), neon_h2f(x[k].d) * neon_h2f(y[k].d)); } while (0)
    LEGACY_LOOP(B_IQ4_NL)
#undef B_IQ4_NL
    *s = vaddvq_f32(vaddq_f32(acc0, acc1));
}

/* ---- K-quants against Q8_K ------------------------------------------------ */
/* sum_j bsums[j] * mins[j / 2] (Q4_K/Q5_K: one min per 32 elements) */
NEON_AI int32_t kmins_dot(const int16_t *bsums, const uint8_t *mins8) {
    const int16x8_t bs = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
    const int16x8_t mn = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mins8)));
    return vaddvq_s32(vaddq_s32(vmull_s16(vget_low_s16(bs), vget_low_s16(mn)), vmull_high_s16(bs, mn)));
}

static void FN(q4_K)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    const int64_t nb = n / QK_K;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        uint32_t utmp[4];
        picolm_k4_scales(x[i].scales, utmp);
        const uint8_t *sc = (const uint8_t *)utmp, *mn = sc + 8;
        const int32_t summ = kmins_dot(y[i].bsums, mn);
        const uint8_t *q4 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int32x4_t isum = ZERO_I32;
        for (int j = 0; j < QK_K / 64; j++, q4 += 32, q8 += 64) {
            const uint8x16_t b0 = vld1q_u8(q4), b1 = vld1q_u8(q4 + 16);
            const int32x4_t p0 = dot32(S8(vandq_u8(b0, m4)), S8(vandq_u8(b1, m4)), q8);
            const int32x4_t p1 = dot32(S8(vshrq_n_u8(b0, 4)), S8(vshrq_n_u8(b1, 4)), q8 + 32);
            isum = vmlaq_n_s32(isum, p0, sc[2 * j]);
            isum = vmlaq_n_s32(isum, p1, sc[2 * j + 1]);
        }
        const float d = y[i].d * neon_h2f(x[i].d), dmin = y[i].d * neon_h2f(x[i].dmin);
        sumf += d * (float)vaddvq_s32(isum) - dmin * (float)summ;
    }
    *s = sumf;
}

static void FN(q5_K)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_K *x = vx;
    const block_q8_K *y = vy;
    const int64_t nb = n / QK_K;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), one = vdupq_n_u8(1), two = vdupq_n_u8(2);
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        uint32_t utmp[4];
        picolm_k4_scales(x[i].scales, utmp);
        const uint8_t *sc = (const uint8_t *)utmp, *mn = sc + 8;
        const int32_t summ = kmins_dot(y[i].bsums, mn);
        const uint8_t *q5 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        /* bit 2j of qh[l] is the 5th bit of sub-block 2j, bit 2j+1 of 2j+1 */
        uint8x16_t qh0 = vld1q_u8(x[i].qh), qh1 = vld1q_u8(x[i].qh + 16);
        int32x4_t isum = ZERO_I32;
        for (int j = 0; j < QK_K / 64; j++, q5 += 32, q8 += 64) {
            const uint8x16_t b0 = vld1q_u8(q5), b1 = vld1q_u8(q5 + 16);
            const uint8x16_t l0 = vorrq_u8(vandq_u8(b0, m4), vshlq_n_u8(vandq_u8(qh0, one), 4));
            const uint8x16_t l1 = vorrq_u8(vandq_u8(b1, m4), vshlq_n_u8(vandq_u8(qh1, one), 4));
            const uint8x16_t h0 = vorrq_u8(vshrq_n_u8(b0, 4), vshlq_n_u8(vandq_u8(qh0, two), 3));
            const uint8x16_t h1 = vorrq_u8(vshrq_n_u8(b1, 4), vshlq_n_u8(vandq_u8(qh1, two), 3));
            qh0 = vshrq_n_u8(qh0, 2);
            qh1 = vshrq_n_u8(qh1, 2);
            isum = vmlaq_n_s32(isum, dot32(S8(l0), S8(l1), q8), sc[2 * j]);
            isum = vmlaq_n_s32(isum, dot32(S8(h0), S8(h1), q8 + 32), sc[2 * j + 1]);
        }
        const float d = y[i].d * neon_h2f(x[i].d), dmin = y[i].d * neon_h2f(x[i].dmin);
        sumf += d * (float)vaddvq_s32(isum) - dmin * (float)summ;
    }
    *s = sumf;
}

static void FN(q6_K)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    const int64_t nb = n / QK_K;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m30 = vdupq_n_u8(0x30);
    const int8x16_t s32 = vdupq_n_s8(32);
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales, *q8 = y[i].qs;
        int32x4_t isum = ZERO_I32;
        for (int c = 0; c < QK_K / 128; c++, ql += 64, qh += 32, sc += 8, q8 += 128) {
            const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
            const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
            /* 16-element groups of this 128-element chunk, in order */
            uint8x16_t u[8];
            u[0] = vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(h0, 4), m30));
            u[1] = vorrq_u8(vandq_u8(l1, m4), vandq_u8(vshlq_n_u8(h1, 4), m30));
            u[2] = vorrq_u8(vandq_u8(l2, m4), vandq_u8(vshlq_n_u8(h0, 2), m30));
            u[3] = vorrq_u8(vandq_u8(l3, m4), vandq_u8(vshlq_n_u8(h1, 2), m30));
            u[4] = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(h0, m30));
            u[5] = vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(h1, m30));
            u[6] = vorrq_u8(vshrq_n_u8(l2, 4), vandq_u8(vshrq_n_u8(h0, 2), m30));
            u[7] = vorrq_u8(vshrq_n_u8(l3, 4), vandq_u8(vshrq_n_u8(h1, 2), m30));
            for (int g = 0; g < 8; g++) {
                const int32x4_t p = DOT(ZERO_I32, vsubq_s8(S8(u[g]), s32), vld1q_s8(q8 + 16 * g));
                isum = vmlaq_n_s32(isum, p, sc[g]);
            }
        }
        sumf += y[i].d * neon_h2f(x[i].d) * (float)vaddvq_s32(isum);
    }
    *s = sumf;
}

static void FN(q2_K)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q2_K *x = vx;
    const block_q8_K *y = vy;
    const int64_t nb = n / QK_K;
    const uint8x16_t m3 = vdupq_n_u8(3), m4 = vdupq_n_u8(0x0F);
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        /* low nibble: scale of 16 elements; high nibble: their min */
        const uint8x16_t sc = vld1q_u8(x[i].scales);
        uint8_t scl[16];
        vst1q_u8(scl, vandq_u8(sc, m4));
        const uint8x16_t mins = vshrq_n_u8(sc, 4);
        const int16x8_t mn0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
        const int16x8_t mn1 = vreinterpretq_s16_u16(vmovl_high_u8(mins));
        const int16x8_t bs0 = vld1q_s16(y[i].bsums), bs1 = vld1q_s16(y[i].bsums + 8);
        int32x4_t pm = vmull_s16(vget_low_s16(bs0), vget_low_s16(mn0));
        pm = vmlal_high_s16(pm, bs0, mn0);
        pm = vmlal_s16(pm, vget_low_s16(bs1), vget_low_s16(mn1));
        pm = vmlal_high_s16(pm, bs1, mn1);
        const int32_t summs = vaddvq_s32(pm);

        const uint8_t *q2 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int32x4_t isum = ZERO_I32;
        int is = 0;
        for (int k = 0; k < QK_K / 128; k++, q2 += 32) {
            uint8x16_t qa = vld1q_u8(q2), qb = vld1q_u8(q2 + 16);
            for (int j = 0; j < 4; j++, q8 += 32, is += 2) {
                isum = vmlaq_n_s32(isum, DOT(ZERO_I32, S8(vandq_u8(qa, m3)), vld1q_s8(q8)), scl[is]);
                isum = vmlaq_n_s32(isum, DOT(ZERO_I32, S8(vandq_u8(qb, m3)), vld1q_s8(q8 + 16)), scl[is + 1]);
                qa = vshrq_n_u8(qa, 2);
                qb = vshrq_n_u8(qb, 2);
            }
        }
        const float dall = y[i].d * neon_h2f(x[i].d), dmin = y[i].d * neon_h2f(x[i].dmin);
        sumf += dall * (float)vaddvq_s32(isum) - dmin * (float)summs;
    }
    *s = sumf;
}

static void FN(q3_K)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q3_K *x = vx;
    const block_q8_K *y = vy;
    const int64_t nb = n / QK_K;
    const uint8x16_t m3 = vdupq_n_u8(3), four = vdupq_n_u8(4);
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int8_t sc[16];
        neon_q3k_scales(x[i].scales, sc);
        const uint8x16_t hm0 = vld1q_u8(x[i].hmask), hm1 = vld1q_u8(x[i].hmask + 16);
        const uint8_t *q3 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int32x4_t isum = ZERO_I32;
        int is = 0;
        for (int k = 0; k < QK_K / 128; k++, q3 += 32) {
            uint8x16_t qa = vld1q_u8(q3), qb = vld1q_u8(q3 + 16);
            for (int j = 0; j < 4; j++, q8 += 32, is += 2) {
                /* q - 4 where the hmask bit is clear */
                const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (4 * k + j)));
                const int8x16_t va = vsubq_s8(S8(vandq_u8(qa, m3)), S8(vbicq_u8(four, vtstq_u8(hm0, bit))));
                const int8x16_t vb = vsubq_s8(S8(vandq_u8(qb, m3)), S8(vbicq_u8(four, vtstq_u8(hm1, bit))));
                isum = vmlaq_n_s32(isum, DOT(ZERO_I32, va, vld1q_s8(q8)), sc[is]);
                isum = vmlaq_n_s32(isum, DOT(ZERO_I32, vb, vld1q_s8(q8 + 16)), sc[is + 1]);
                qa = vshrq_n_u8(qa, 2);
                qb = vshrq_n_u8(qb, 2);
            }
        }
        sumf += neon_h2f(x[i].d) * y[i].d * (float)vaddvq_s32(isum);
    }
    *s = sumf;
}

static void FN(iq4_xs)(int64_t n, float *s, const void *vx, const void *vy) {
    const block_iq4_xs *x = vx;
    const block_q8_K *y = vy;
    const int64_t nb = n / QK_K;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t kv = vld1q_s8(picolm_kvalues_iq4nl);
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *qs = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int32x4_t isum = ZERO_I32;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 16, q8 += 32) {
            const int ls = (((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4)) - 32;
            const uint8x16_t b = vld1q_u8(qs);
            const int32x4_t p = dot32(vqtbl1q_s8(kv, vandq_u8(b, m4)), vqtbl1q_s8(kv, vshrq_n_u8(b, 4)), q8);
            isum = vmlaq_n_s32(isum, p, ls);
        }
        sumf += neon_h2f(x[i].d) * y[i].d * (float)vaddvq_s32(isum);
    }
    *s = sumf;
}

#undef DOT
#undef FN
