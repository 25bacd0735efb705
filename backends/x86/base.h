/*
 * The x86 levels' common ground (sse4, avx2, avx512): nothing here needs
 * more than SSE4.1, so every x86 level includes it.  backends/x86/ holds
 * headers only, shared by the levels (not a level itself: the Makefile
 * builds a level from the .c files of backends/<level>).  Everything here is
 * always-inline or a macro: each including translation unit, built with its
 * own level's flags, gets its own copy, so nothing of one level runs in
 * another's plugin by accident.  Never included by plugin.c.
 *
 * Every weight kernel is written once as an always-inline "one weight row x
 * NC activation rows" routine (NC a compile-time constant at each call
 * site): NC = 1 is vec_dot, NC > 1 the inner loop of the gemm tile, where
 * each weight block is loaded and unpacked once and reused across NC
 * activations.  X86_WRAP makes the pair from it.
 */
#ifndef PICOLM_X86_BASE_H
#define PICOLM_X86_BASE_H
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "../level.h"
#include "picolm/blocks.h"
#include "picolm/fp16.h"

#define AI static inline __attribute__((always_inline))
/* Full unrolling of the loops over a tile's columns (and a block's parts):
   with the loops rolled, GCC -O2 keeps per-column accumulators in stack
   arrays, a load and a store per product. */
#define X86_UNROLL _Pragma("GCC unroll 16")
/* v, materialized in a register here: keeps a column's integer sum a chain
   of adds in program order (GCC otherwise reassociates an unrolled tile's
   sums into trees of products that no longer fit in the registers) */
AI __m128i x86_keep128(__m128i v) {
    __asm__("" : "+x"(v));
    return v;
}
AI float x86_hsum_ps128(__m128 r) {
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

/* vec_dot and gemm from a row template NCFN(n, x, ys, out, NC), NC <= 4.
   gemm: rows in blocks of X86_GEMM_RB (about 36 KB of Q4_K at 2048
   columns, L1/L2-resident) with the activation columns, 4 at a time, swept
   over each block: the 4 activation rows stay in L1 while the block's
   weight rows are re-read from L1/L2, instead of every column being re-read
   from L2 for every weight row (activation rows are ~8x the bytes of Q4_K
   weight rows).  One column (decode) calls the vec_dot row by row: the
   blocked loop cost IQ4_XS 40% there, and an inlined copy of the vec_dot
   measured 8% slower than the call for avx2 Q8_0 (picolm-bench --micro).
   Each column's result is the template's at any NC, so the gemm gives
   vec_dot's bits. */
#define X86_GEMM_RB 32
#define X86_WRAP(pfx, name, NCFN)                                                           \
    __attribute__((noinline)) static void pfx##_vec_dot_##name(int64_t n, float *s, const void *x, const void *y) { \
        const void *ys[1] = { y };                                                         \
        NCFN(n, x, ys, s, 1);                                                              \
    }                                                                                      \
    static void pfx##_gemm_##name(int64_t n, int64_t nr, int64_t nc, const void *w,         \
                                  size_t ws, const void *a, size_t as, float *dst,         \
                                  size_t ds) {                                             \
        if (nc == 1) { /* decode: the vec_dot row by row */                                \
            for (int64_t r = 0; r < nr; r++) pfx##_vec_dot_##name(n, dst + r, (const char *)w + r * ws, a); \
            return;                                                                        \
        }                                                                                  \
        for (int64_t r0 = 0; r0 < nr; r0 += X86_GEMM_RB) {                                 \
            const int64_t r1 = r0 + X86_GEMM_RB < nr ? r0 + X86_GEMM_RB : nr;              \
            int64_t c = 0;                                                                 \
            for (; c + 4 <= nc; c += 4) {                                                  \
                const void *ys[4];                                                         \
                for (int k = 0; k < 4; k++) ys[k] = (const char *)a + (c + k) * as;        \
                for (int64_t r = r0; r < r1; r++) {                                        \
                    float o[4];                                                            \
                    NCFN(n, (const char *)w + r * ws, ys, o, 4);                           \
                    for (int k = 0; k < 4; k++) dst[(c + k) * ds + r] = o[k];              \
                }                                                                          \
            }                                                                              \
            const int64_t m = nc - c;                                                      \
            if (!m) continue;                                                              \
            const void *ys[3];                                                             \
            for (int k = 0; k < m; k++) ys[k] = (const char *)a + (c + k) * as;            \
            for (int64_t r = r0; r < r1; r++) {                                            \
                const void *x = (const char *)w + r * ws;                                  \
                float o[3];                                                                \
                if (m == 3) NCFN(n, x, ys, o, 3);                                          \
                else if (m == 2) NCFN(n, x, ys, o, 2);                                     \
                else NCFN(n, x, ys, o, 1);                                                 \
                for (int k = 0; k < m; k++) dst[(c + k) * ds + r] = o[k];                  \
            }                                                                              \
        }                                                                                  \
    }

#endif
