/*
 * expf on 8 floats at once, bit for bit glibc's (>= 2.27) expf as this
 * machine's libm runs it: sysdeps/ieee754/flt-32/e_expf.c, in double, with
 * the fused multiply-adds of its x86-64 FMA variant (__expf_fma, which the
 * ifunc picks on every CPU with AVX2 and FMA):
 *   kd = fma(N/ln2, x, 0x1.8p52) - 0x1.8p52     k = round(x N/ln2), N = 32
 *   r  = fma(N/ln2, x, -kd)                     z - k, z not rounded
 *   s  = 2^(k/N): table entry k % N plus k << 47 in the exponent field
 *   y  = fma(fma(C0, r, C1), r*r, fma(C2, r, 1)) * s, rounded to float
 * and its special cases: -inf and x < log(2^-150) give +0, x below
 * log(2^-149) the smallest subnormal, NaN x + x; everything else
 * (subnormal results included) takes the main path.  Not x > log(0x1p128),
 * +inf in glibc: attention's x is <= 0.
 * Another libm (musl, an older glibc, glibc without the FMA variant) rounds
 * some results otherwise: x86_expf8_<isa>_matches_libm() tells, at run
 * time, on a sample.  tests/test_expf.c compares all x <= 0 and [0, 1].
 *
 * This header holds what the variants share (glibc's table and constants,
 * the run-time check); each level has its variant next to its kernels:
 * x86_expf8_avx2 (avx2/expf.h: two 4-double halves, a gather for the
 * table) and x86_expf8_avx512 (avx512/expf.h: one 8-double vector, the
 * table in registers).
 */
#ifndef PICOLM_X86_EXPF_H
#define PICOLM_X86_EXPF_H
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define X86_EXPF_AI static inline __attribute__((always_inline))
/* glibc's __exp2f_data (e_exp2f_data.c): T[i] = bits of 2^(i/32) minus
   i << 47, so that adding k << 47 gives the bits of 2^(k/32) */
static const uint64_t x86_expf_tab[32] __attribute__((aligned(64))) = {
    0x3ff0000000000000ull, 0x3fefd9b0d3158574ull, 0x3fefb5586cf9890full, 0x3fef9301d0125b51ull,
    0x3fef72b83c7d517bull, 0x3fef54873168b9aaull, 0x3fef387a6e756238ull, 0x3fef1e9df51fdee1ull,
    0x3fef06fe0a31b715ull, 0x3feef1a7373aa9cbull, 0x3feedea64c123422ull, 0x3feece086061892dull,
    0x3feebfdad5362a27ull, 0x3feeb42b569d4f82ull, 0x3feeab07dd485429ull, 0x3feea47eb03a5585ull,
    0x3feea09e667f3bcdull, 0x3fee9f75e8ec5f74ull, 0x3feea11473eb0187ull, 0x3feea589994cce13ull,
    0x3feeace5422aa0dbull, 0x3feeb737b0cdc5e5ull, 0x3feec49182a3f090ull, 0x3feed503b23e255dull,
    0x3feee89f995ad3adull, 0x3feeff76f2fb5e47ull, 0x3fef199bdd85529cull, 0x3fef3720dcef9069ull,
    0x3fef5818dcfba487ull, 0x3fef7c97337b9b5full, 0x3fefa4afa2a490daull, 0x3fefd0765b6e4540ull,
};
#define X86_EXPF_INVLN2N 0x1.71547652b82fep+5 /* N / ln 2 */
#define X86_EXPF_SHIFT 0x1.8p+52
#define X86_EXPF_C0 0x1.c6af84b912394p-20 /* 2^(r/N) - 1 ~ C0 r^3 + C1 r^2 + C2 r */
#define X86_EXPF_C1 0x1.ebfce50fac4f3p-13
#define X86_EXPF_C2 0x1.62e42ff0c52d6p-6
#define X86_EXPF_UFLOW -0x1.9fe368p6f   /* below: +0 */
#define X86_EXPF_MAYUFLOW -0x1.9d1d9ep6f /* below: 0x1p-149f */

/* Value i (< X86_EXPF_NPROBE) of the run-time comparison with libm: the
   boundaries of glibc's special cases and their neighbours; -0x1.f8cbb2p+5,
   the one x <= -0 where glibc's variant without FMA (the same code unfused)
   rounds otherwise; every 65521st bit pattern with the sign set (all
   exponents, -inf and NaNs); then uniform in [-104, 0], where attention's
   arguments fall. */
#define X86_EXPF_NPROBE (1u << 16)
static inline float x86_expf_probe(uint32_t i) {
    static const uint32_t hard[] = {0x80000000u, 0x80000001u, 0xff800000u, 0xffc00000u, 0xc2cff1b3u, 0xc2cff1b4u, 0xc2cff1b5u,
                                    0xc2ce8eceu, 0xc2ce8ecfu, 0xc2ce8ed0u, 0xc2afffffu, 0xc2b00000u, 0xc2b00001u, 0xc2aeac4fu,
                                    0xc2aeac50u, 0xc2aeac51u, 0x3f800000u, 0x00000000u, 0xc27c65d9u};
    const uint32_t nh = sizeof hard / sizeof hard[0];
    uint32_t b;
    if (i < nh) b = hard[i];
    else if (i < X86_EXPF_NPROBE / 2) b = 0x80000000u + i * 65521u;
    else {
        const float u = (float)((i * 2654435761u) >> 8) * 0x1p-24f;
        return -104.0f * u;
    }
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}
/* 1 when fn (8 floats) gives libm's expf bits on every probe */
#define X86_EXPF_MATCHES_LIBM(fn)                                                      \
    static inline int fn##_matches_libm(void) {                                        \
        for (uint32_t i = 0; i < X86_EXPF_NPROBE; i += 8) {                            \
            float x[8], y[8];                                                          \
            for (int k = 0; k < 8; k++) x[k] = x86_expf_probe(i + k);                  \
            _mm256_storeu_ps(y, fn(_mm256_loadu_ps(x)));                               \
            for (int k = 0; k < 8; k++) {                                              \
                const float e = expf(x[k]);                                            \
                if (memcmp(&e, &y[k], sizeof e)) return 0;                             \
            }                                                                          \
        }                                                                              \
        return 1;                                                                      \
    }

#endif
