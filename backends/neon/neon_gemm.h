/*
 * The NEON GEMM tile sets (prefill), AArch64 only: gemm_base.c (plain
 * ASIMD) in the neon level's rows (kernels.c), gemm_dot.c (SDOT) in the
 * dotprod level's, gemm_i8mm.c (SMMLA) in the i8mm level's (neon_dot.c).
 * Never included by plugin.c.
 */
#ifndef PICOLM_NEON_GEMM_H
#define PICOLM_NEON_GEMM_H
#include "neon_common.h"

/* NEON_TILED_LIST (neon_common.h) has the base and SDOT tiles */
#define NEON_GEMM_I8MM_LIST(X) X(Q4_K, Q8_K, q4_K) X(Q6_K, Q8_K, q6_K)
#define NEON_GEMM_DECL(pfx, name)                                                                                    \
    PK_HIDDEN void pfx##name(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, \
                             float *dst, size_t ds);
#define NEON_GEMM_DECL_BASE(T, A, name) NEON_GEMM_DECL(neon_gemm_base_, name)
#define NEON_GEMM_DECL_DOT(T, A, name) NEON_GEMM_DECL(neon_gemm_dot_, name)
#define NEON_GEMM_DECL_I8MM(T, A, name) NEON_GEMM_DECL(neon_gemm_i8mm_, name)
NEON_TILED_LIST(NEON_GEMM_DECL_BASE)
NEON_TILED_LIST(NEON_GEMM_DECL_DOT)
NEON_GEMM_I8MM_LIST(NEON_GEMM_DECL_I8MM)

/* Q4_K: sum_j bsums[j] * mins[j / 2] as neon_impl.h's kmins_dot, from one
   column's 8 pair sums of bsums and a row's 8 widened mins */
NEON_AI int32_t kmins_dot16(int16x8_t bs, int16x8_t mn) {
    return vaddvq_s32(vaddq_s32(vmull_s16(vget_low_s16(bs), vget_low_s16(mn)), vmull_high_s16(bs, mn)));
}

#endif
