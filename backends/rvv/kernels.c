/*
 * RISC-V vector 1.0 kernels (RVV intrinsics, compiled by clang with
 * -march=rv64gcv: GCC 12 has no RVV intrinsics).  V 1.0 guarantees
 * VLEN >= 128 (Zvl128b), so 16 bytes fit one LMUL=1 register group and 32
 * bytes an LMUL=2 group at every vector length; the kernels ask for exactly
 * those lengths and run unchanged at VLEN 128, 256 or more.
 *
 * The integer block sums are exact (int8 products widened to int16, summed
 * by widening reductions into int32), so the kernels differ from the
 * format plugins' reference only in the order of the float accumulation.
 * Block layouts: include/picolm/blocks.h.
 */
#include <riscv_vector.h>
#include <stdint.h>
#include <string.h>

#include "picolm/blocks.h"
#include "picolm/fp16.h"
#include "../level.h"

#define RVV_AI static inline __attribute__((always_inline))

/* sum of the int16 products of p (vl lanes), exact in int32 */
RVV_AI int32_t rvv_sum16m2(vint16m2_t p, size_t vl) {
    return __riscv_vmv_x_s_i32m1_i32(__riscv_vwredsum_vs_i16m2_i32m1(p, __riscv_vmv_v_x_i32m1(0, 1), vl));
}
RVV_AI int32_t rvv_sum16m4(vint16m4_t p, size_t vl) {
    return __riscv_vmv_x_s_i32m1_i32(__riscv_vwredsum_vs_i16m4_i32m1(p, __riscv_vmv_v_x_i32m1(0, 1), vl));
}
/* dot of 32 int8 pairs (|a*b| <= 128*128 fits int16) */
RVV_AI int32_t rvv_dot32(vint8m2_t a, const int8_t *b) {
    const size_t vl = 32;
    return rvv_sum16m4(__riscv_vwmul_vv_i16m4(a, __riscv_vle8_v_i8m2(b, vl), vl), vl);
}

static void rvv_vec_dot_q8_0(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q8_0 *x = vx, *y = vy;
    const int64_t nb = n / QK8_0;
    const size_t vl = __riscv_vsetvl_e8m2(32);
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const int32_t sumi = rvv_dot32(__riscv_vle8_v_i8m2(x[i].qs, vl), y[i].qs);
        sumf += (float)sumi * (picolm_half_to_float(x[i].d) * picolm_half_to_float(y[i].d));
    }
    *s = sumf;
}

static void rvv_vec_dot_q4_0(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    const int64_t nb = n / QK4_0;
    const size_t vl = __riscv_vsetvl_e8m1(16);
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const vuint8m1_t b = __riscv_vle8_v_u8m1(x[i].qs, vl);
        /* elements 0..15: low nibbles - 8, 16..31: high nibbles - 8 */
        const vint8m1_t lo = __riscv_vsub_vx_i8m1(__riscv_vreinterpret_v_u8m1_i8m1(__riscv_vand_vx_u8m1(b, 0x0F, vl)), 8, vl);
        const vint8m1_t hi = __riscv_vsub_vx_i8m1(__riscv_vreinterpret_v_u8m1_i8m1(__riscv_vsrl_vx_u8m1(b, 4, vl)), 8, vl);
        /* |q4*q8| <= 8*128: the two products of a lane sum within int16 */
        vint16m2_t p = __riscv_vwmul_vv_i16m2(lo, __riscv_vle8_v_i8m1(y[i].qs, vl), vl);
        p = __riscv_vwmacc_vv_i16m2(p, hi, __riscv_vle8_v_i8m1(y[i].qs + 16, vl), vl);
        sumf += (float)rvv_sum16m2(p, vl) * (picolm_half_to_float(x[i].d) * picolm_half_to_float(y[i].d));
    }
    *s = sumf;
}

static void rvv_vec_dot_q4_K(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    const int64_t nb = n / QK_K;
    const size_t vl = __riscv_vsetvl_e8m2(32);
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        uint32_t utmp[4];
        picolm_k4_scales(x[i].scales, utmp);
        const uint8_t *sc = (const uint8_t *)utmp, *mn = sc + 8;
        int32_t summ = 0;
        for (int j = 0; j < 8; j++) summ += (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]) * mn[j];
        const uint8_t *q4 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int32_t isum = 0;
        for (int j = 0; j < QK_K / 64; j++, q4 += 32, q8 += 64) {
            const vuint8m2_t b = __riscv_vle8_v_u8m2(q4, vl);
            const vint8m2_t lo = __riscv_vreinterpret_v_u8m2_i8m2(__riscv_vand_vx_u8m2(b, 0x0F, vl));
            const vint8m2_t hi = __riscv_vreinterpret_v_u8m2_i8m2(__riscv_vsrl_vx_u8m2(b, 4, vl));
            isum += rvv_dot32(lo, q8) * sc[2 * j] + rvv_dot32(hi, q8 + 32) * sc[2 * j + 1];
        }
        const float d = y[i].d * picolm_half_to_float(x[i].d), dmin = y[i].d * picolm_half_to_float(x[i].dmin);
        sumf += d * (float)isum - dmin * (float)summ;
    }
    *s = sumf;
}

/* 16 unsigned 6-bit values minus 32, dotted with 16 int8 (|q*q8| <= 32*128
   fits int16) */
RVV_AI int32_t rvv_dot16_q6(vuint8m1_t u, const int8_t *q8, size_t vl) {
    const vint8m1_t q = __riscv_vsub_vx_i8m1(__riscv_vreinterpret_v_u8m1_i8m1(u), 32, vl);
    return rvv_sum16m2(__riscv_vwmul_vv_i16m2(q, __riscv_vle8_v_i8m1(q8, vl), vl), vl);
}

static void rvv_vec_dot_q6_K(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    const int64_t nb = n / QK_K;
    const size_t vl = __riscv_vsetvl_e8m1(16);
    float sumf = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales, *q8 = y[i].qs;
        int32_t isum = 0;
        /* 128 elements per chunk; element l of its four 32-element quarters
           takes the low/high nibble of ql[l] / ql[l + 32] and bit pair
           0/2/4/6 of qh[l]; each 16 lanes have their own scale */
        for (int c = 0; c < QK_K / 128; c++, ql += 64, qh += 32, sc += 8, q8 += 128) {
            for (int g = 0; g < 2; g++) {
                const int l0 = 16 * g;
                const vuint8m1_t la = __riscv_vle8_v_u8m1(ql + l0, vl), lb = __riscv_vle8_v_u8m1(ql + 32 + l0, vl);
                const vuint8m1_t h = __riscv_vle8_v_u8m1(qh + l0, vl);
                /* RVV types are sizeless (no arrays): one quarter at a time */
                const vuint8m1_t u0 = __riscv_vor_vv_u8m1(__riscv_vand_vx_u8m1(la, 0x0F, vl), __riscv_vand_vx_u8m1(__riscv_vsll_vx_u8m1(h, 4, vl), 0x30, vl), vl);
                const vuint8m1_t u1 = __riscv_vor_vv_u8m1(__riscv_vand_vx_u8m1(lb, 0x0F, vl), __riscv_vand_vx_u8m1(__riscv_vsll_vx_u8m1(h, 2, vl), 0x30, vl), vl);
                const vuint8m1_t u2 = __riscv_vor_vv_u8m1(__riscv_vsrl_vx_u8m1(la, 4, vl), __riscv_vand_vx_u8m1(h, 0x30, vl), vl);
                const vuint8m1_t u3 = __riscv_vor_vv_u8m1(__riscv_vsrl_vx_u8m1(lb, 4, vl), __riscv_vand_vx_u8m1(__riscv_vsrl_vx_u8m1(h, 2, vl), 0x30, vl), vl);
                isum += rvv_dot16_q6(u0, q8 + l0, vl) * sc[g] + rvv_dot16_q6(u1, q8 + 32 + l0, vl) * sc[g + 2] +
                        rvv_dot16_q6(u2, q8 + 64 + l0, vl) * sc[g + 4] + rvv_dot16_q6(u3, q8 + 96 + l0, vl) * sc[g + 6];
            }
        }
        sumf += y[i].d * picolm_half_to_float(x[i].d) * (float)isum;
    }
    *s = sumf;
}

/* ---- the rvv level: weight kernels only (primitives: the scalar level's) -- */
#define K(T, A, name) PK_KERNEL(T, A, rvv_vec_dot_##name, NULL)
static const picolm_kernel rvv_kernels[] = {
    K(Q8_0, Q8_0, q8_0), K(Q4_0, Q8_0, q4_0), K(Q4_K, Q8_K, q4_K), K(Q6_K, Q8_K, q6_K),
};
PK_LEVEL(rvv, "rvv", 0, rvv_kernels, PK_COUNT(rvv_kernels), NULL, 0, NULL);
