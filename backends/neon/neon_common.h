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
#include "picolm/plugin.h"

#define NEON_AI static inline __attribute__((always_inline))
#define NEON_HIDDEN __attribute__((visibility("hidden")))

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

/* Q4_K/Q5_K 12 packed bytes -> bytes 0..7 = 8 scales, 8..15 = 8 mins
   (little-endian word shuffle, equal to get_scale_min_k4 per index) */
NEON_AI void neon_k4_scales(const uint8_t *packed, uint32_t utmp[4]) {
    const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
    memcpy(utmp, packed, 12);
    utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = utmp[1] & kmask1;
    utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
    utmp[2] = uaux;
    utmp[0] &= kmask1;
}

/* Q3_K: 16 signed 6-bit scales (minus 32) from the 12 packed bytes */
NEON_AI void neon_q3k_scales(const uint8_t *s, int8_t out[16]) {
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    uint32_t aux[4];
    memcpy(aux, s, 12);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    vst1q_s8(out, vsubq_s8(vreinterpretq_s8_u32(vld1q_u32(aux)), vdupq_n_s8(32)));
}

/* The kernel sets of neon_base.c / neon_dot.c (same signatures). */
#define NEON_KERNEL_LIST(X) X(q8_0) X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(iq4_nl) \
    X(q2_K) X(q3_K) X(q4_K) X(q5_K) X(q6_K) X(iq4_xs)
#define NEON_DECL_BASE(name) NEON_HIDDEN void neon_base_##name(int64_t n, float *s, const void *vx, const void *vy);
#define NEON_DECL_DOT(name) NEON_HIDDEN void neon_dot_##name(int64_t n, float *s, const void *vx, const void *vy);
NEON_KERNEL_LIST(NEON_DECL_BASE)
NEON_KERNEL_LIST(NEON_DECL_DOT)

/* 1 when neon_dot.c was really compiled with dotprod (see mk/aarch64.mk) */
extern NEON_HIDDEN const int picolm_neon_dot_built;
#endif
