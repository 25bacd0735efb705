/*
 * Helpers shared by the NEON translation units (base ASIMD only: nothing
 * here may need dotprod or fp16 arithmetic).  Never included by plugin.c.
 */
#ifndef PICOLM_NEON_COMMON_H
#define PICOLM_NEON_COMMON_H
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "picolm/blocks.h"
#include "picolm/fp16.h"
#include "../level.h"

#define NEON_AI static inline __attribute__((always_inline))

#if !defined(__aarch64__)
#include "neon_a32.h"
#endif

/* Double-precision accumulator of the float dot products: two f64 lanes on
   AArch64, a scalar double on AArch32 (no f64 lanes there). */
#if defined(__aarch64__)
typedef float64x2_t neon_f64acc;
#define NEON_F64ACC_ZERO vdupq_n_f64(0.0)
NEON_AI neon_f64acc neon_flush_f64(neon_f64acc acc, float32x4_t v) {
    acc = vaddq_f64(acc, vcvt_f64_f32(vget_low_f32(v)));
    return vaddq_f64(acc, vcvt_high_f64_f32(v));
}
NEON_AI double neon_f64acc_sum(neon_f64acc acc) { return vaddvq_f64(acc); }
#else
typedef double neon_f64acc;
#define NEON_F64ACC_ZERO 0.0
NEON_AI neon_f64acc neon_flush_f64(neon_f64acc acc, float32x4_t v) {
    return acc + ((double)vgetq_lane_f32(v, 0) + vgetq_lane_f32(v, 2)) + ((double)vgetq_lane_f32(v, 1) + vgetq_lane_f32(v, 3));
}
NEON_AI double neon_f64acc_sum(neon_f64acc acc) { return acc; }
#endif

/* exact fp16 -> fp32: FCVT is base ARMv8 (no +fp16 needed) */
NEON_AI float neon_h2f(uint16_t h) {
    __fp16 f;
    memcpy(&f, &h, sizeof f);
    return (float)f;
}

/* Q5_0/Q5_1: the 32 fifth bits -> 0x10 bytes for elements 0..15 (low
   nibbles) and 16..31 (high nibbles) */
NEON_AI void neon_qh5(const uint8_t qh4[4], uint8x16_t *lo, uint8x16_t *hi) {
    static const uint8_t idx_lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    static const uint8_t idx_hi[16] = {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint32_t qh;
    memcpy(&qh, qh4, sizeof qh);
    const uint8x16_t q = vreinterpretq_u8_u32(vdupq_n_u32(qh)); /* bytes in memory order */
    const uint8x16_t b = vld1q_u8(bits), m = vdupq_n_u8(0x10);
    *lo = vandq_u8(vtstq_u8(vqtbl1q_u8(q, vld1q_u8(idx_lo)), b), m);
    *hi = vandq_u8(vtstq_u8(vqtbl1q_u8(q, vld1q_u8(idx_hi)), b), m);
}

/* Q3_K: 16 signed 6-bit scales (minus 32) from the 12 packed bytes */
NEON_AI void neon_q3k_scales(const uint8_t *s, int8_t out[16]) {
    uint32_t aux[4];
    picolm_q3_K_scales(s, aux);
    vst1q_s8(out, vsubq_s8(vreinterpretq_s8_u32(vld1q_u32(aux)), vdupq_n_s8(32)));
}

/* The weight kernels of neon_impl.h, compiled twice (the neon level in
   kernels.c, the dotprod level in neon_dot.c): weight type, activation
   type, name.  The first ones also have gemm tiles (neon_gemm.h). */
#define NEON_TILED_LIST(X) X(Q8_0, Q8_0, q8_0) X(Q4_0, Q8_0, q4_0) X(Q5_0, Q8_0, q5_0) X(Q4_K, Q8_K, q4_K) \
    X(Q6_K, Q8_K, q6_K)
#define NEON_UNTILED_LIST(X) X(Q4_1, Q8_1, q4_1) X(Q5_1, Q8_1, q5_1) X(IQ4_NL, Q8_0, iq4_nl) X(Q2_K, Q8_K, q2_K) \
    X(Q3_K, Q8_K, q3_K) X(Q5_K, Q8_K, q5_K) X(IQ4_XS, Q8_K, iq4_xs)
#define NEON_KERNEL_LIST(X) NEON_TILED_LIST(X) NEON_UNTILED_LIST(X)
#endif
