/*
 * AArch32 (armhf: ARMv7-A NEON + VFPv4) equivalents of the AArch64-only
 * intrinsics the NEON kernels use, so that the kernels are written once.
 * Included by neon_common.h on 32-bit ARM only.  Each keeps the AArch64
 * semantics the kernels rely on:
 *  - across-vector sums/maxima and the *_high forms: lane shuffles;
 *  - vqtbl1q (16-byte table lookup): two VTBL over the same 16 bytes;
 *  - rounding conversions (FCVTAS/FCVTNS/FRINTN are ARMv8): exact for the
 *    |x| < 2^22 the kernels feed them (quantizer inputs are <= 127.5 by
 *    construction, expf arguments are clamped to +-128);
 *  - vdivq_f32: IEEE division lane by lane on VFP (a reciprocal estimate
 *    plus Newton steps would not be correctly rounded).
 * NEON arithmetic on AArch32 flushes subnormal floats to zero (the
 * "standard FPSCR value"); test_kernels checks the results against the
 * reference as on AArch64, f32_to_f16 bit for bit.
 * The double-precision accumulator of the float dot products is a scalar
 * double here (AArch32 NEON has no f64 lanes): neon_f64acc in neon_common.h.
 */
#ifndef PICOLM_NEON_A32_H
#define PICOLM_NEON_A32_H

#define NEON_A32_AI static inline __attribute__((always_inline))

NEON_A32_AI float a32_vaddvq_f32(float32x4_t v) {
    const float32x2_t p = vpadd_f32(vget_low_f32(v), vget_high_f32(v));
    return vget_lane_f32(vpadd_f32(p, p), 0);
}
NEON_A32_AI int32_t a32_vaddvq_s32(int32x4_t v) {
    const int32x2_t p = vpadd_s32(vget_low_s32(v), vget_high_s32(v));
    return vget_lane_s32(vpadd_s32(p, p), 0);
}
NEON_A32_AI float a32_vmaxvq_f32(float32x4_t v) {
    const float32x2_t p = vpmax_f32(vget_low_f32(v), vget_high_f32(v));
    return vget_lane_f32(vpmax_f32(p, p), 0);
}
NEON_A32_AI int32_t a32_vaddlvq_s8(int8x16_t v) {
    const int64x2_t s = vpaddlq_s32(vpaddlq_s16(vpaddlq_s8(v)));
    return (int32_t)(vgetq_lane_s64(s, 0) + vgetq_lane_s64(s, 1));
}
NEON_A32_AI int32x4_t a32_vpaddq_s32(int32x4_t a, int32x4_t b) {
    return vcombine_s32(vpadd_s32(vget_low_s32(a), vget_high_s32(a)), vpadd_s32(vget_low_s32(b), vget_high_s32(b)));
}
NEON_A32_AI int16x8_t a32_vpaddq_s16(int16x8_t a, int16x8_t b) {
    return vcombine_s16(vpadd_s16(vget_low_s16(a), vget_high_s16(a)), vpadd_s16(vget_low_s16(b), vget_high_s16(b)));
}
NEON_A32_AI int16x8_t a32_vmull_high_s8(int8x16_t a, int8x16_t b) {
    return vmull_s8(vget_high_s8(a), vget_high_s8(b));
}
NEON_A32_AI int32x4_t a32_vmull_high_s16(int16x8_t a, int16x8_t b) {
    return vmull_s16(vget_high_s16(a), vget_high_s16(b));
}
NEON_A32_AI int32x4_t a32_vmlal_high_s16(int32x4_t acc, int16x8_t a, int16x8_t b) {
    return vmlal_s16(acc, vget_high_s16(a), vget_high_s16(b));
}
NEON_A32_AI uint16x8_t a32_vmovl_high_u8(uint8x16_t a) { return vmovl_u8(vget_high_u8(a)); }
NEON_A32_AI uint8x16_t a32_vqtbl1q_u8(uint8x16_t t, uint8x16_t idx) {
    const uint8x8x2_t tt = {{vget_low_u8(t), vget_high_u8(t)}};
    return vcombine_u8(vtbl2_u8(tt, vget_low_u8(idx)), vtbl2_u8(tt, vget_high_u8(idx)));
}
NEON_A32_AI int8x16_t a32_vqtbl1q_s8(int8x16_t t, uint8x16_t idx) {
    return vreinterpretq_s8_u8(a32_vqtbl1q_u8(vreinterpretq_u8_s8(t), idx));
}
NEON_A32_AI float32x4_t a32_vfmaq_n_f32(float32x4_t a, float32x4_t b, float c) {
    return vfmaq_f32(a, b, vdupq_n_f32(c));
}
NEON_A32_AI float32x4_t a32_vdivq_f32(float32x4_t a, float32x4_t b) {
    float x[4], y[4];
    vst1q_f32(x, a);
    vst1q_f32(y, b);
    for (int i = 0; i < 4; i++) x[i] /= y[i];
    return vld1q_f32(x);
}
#if __ARM_ARCH < 8
/* x + 1.5*2^23 - 1.5*2^23 rounds x to an integer, ties to even (NEON's
   fixed round-to-nearest mode), for |x| < 2^22 */
NEON_A32_AI float32x4_t a32_vrndnq_f32(float32x4_t x) {
    const float32x4_t magic = vdupq_n_f32(12582912.0f);
    return vsubq_f32(vaddq_f32(x, magic), magic);
}
NEON_A32_AI int32x4_t a32_vcvtnq_s32_f32(float32x4_t x) { return vcvtq_s32_f32(a32_vrndnq_f32(x)); }
/* round half away from zero (roundf): truncate, then step away from zero
   where the dropped fraction is >= 0.5 (x - trunc(x) is exact) */
NEON_A32_AI int32x4_t a32_vcvtaq_s32_f32(float32x4_t x) {
    const int32x4_t t = vcvtq_s32_f32(x);
    const float32x4_t frac = vsubq_f32(x, vcvtq_f32_s32(t));
    const uint32x4_t up = vcgeq_f32(vabsq_f32(frac), vdupq_n_f32(0.5f));
    /* +1 or -1 by the sign of x, where up */
    const int32x4_t step = vorrq_s32(vshrq_n_s32(vreinterpretq_s32_f32(x), 31), vdupq_n_s32(1));
    return vaddq_s32(t, vandq_s32(step, vreinterpretq_s32_u32(up)));
}
#define vrndnq_f32 a32_vrndnq_f32
#define vcvtnq_s32_f32 a32_vcvtnq_s32_f32
#define vcvtaq_s32_f32 a32_vcvtaq_s32_f32
#endif

#define vaddvq_f32 a32_vaddvq_f32
#define vaddvq_s32 a32_vaddvq_s32
#define vmaxvq_f32 a32_vmaxvq_f32
#define vaddlvq_s8 a32_vaddlvq_s8
#define vpaddq_s32 a32_vpaddq_s32
#define vpaddq_s16 a32_vpaddq_s16
#define vmull_high_s8 a32_vmull_high_s8
#define vmull_high_s16 a32_vmull_high_s16
#define vmlal_high_s16 a32_vmlal_high_s16
#define vmovl_high_u8 a32_vmovl_high_u8
#define vqtbl1q_u8 a32_vqtbl1q_u8
#define vqtbl1q_s8 a32_vqtbl1q_s8
#define vfmaq_n_f32 a32_vfmaq_n_f32
#define vdivq_f32 a32_vdivq_f32
#endif
