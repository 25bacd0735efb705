/*
 * The 16-row interleaved layouts (blocks.h: Q4_K_R16, Q6_K_R16, Q4_K_R16N,
 * Q5_0_R16): what the avx2 and avx512 levels' kernels for them share.  A
 * 64-byte vector of the layout holds the same 4 columns of 16 rows, a
 * 32-bit lane per row; the activations' 4 bytes of those columns are
 * broadcast to the lanes, so each row's dot product of the 4 columns
 * lands in its own lane.  The kernels: avx2/r16.h, avx512/r16.c.
 */
#ifndef PICOLM_X86_R16_H
#define PICOLM_X86_R16_H
#include "avx2.h"

#define R16_NC 4 /* widest gemm tile (activation columns) of R16_WRAP */

/* a hint: never faults, past the end included */
AI void r16_prefetch(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}

/* 6-bit field of sub-block s of the 16 rows: low 4 bits in lo[s/2] (nibble
   s&1), high 2 bits in hi[s/4] bits 2(s%4).. */
AI __m128i r16_k4_get6(const uint8_t lo[][16], const uint8_t hi[][16], int s) {
    __m128i l = _mm_loadu_si128((const __m128i *)lo[s / 2]);
    if (s & 1) l = _mm_srli_epi16(l, 4);
    __m128i h = _mm_loadu_si128((const __m128i *)hi[s / 4]);
    switch (s % 4) { /* bits 2k..2k+1 -> bits 4..5 */
    case 0: h = _mm_slli_epi16(h, 4); break;
    case 1: h = _mm_slli_epi16(h, 2); break;
    case 2: break;
    default: h = _mm_srli_epi16(h, 2); break;
    }
    return _mm_or_si128(_mm_and_si128(l, _mm_set1_epi8(0x0F)), _mm_and_si128(h, _mm_set1_epi8(0x30)));
}

/* superblock i of the NC activation columns vy[c]: y[c], and q8s[c][t] =
   (bsum of sub-block 2t, of 2t + 1) as an int16 pair */
AI void r16_k8_cols(const void *const *vy, int64_t i, const int NC, const block_q8_K **y, int32_t (*q8s)[4]) {
    for (int c = 0; c < NC; c++) {
        y[c] = (const block_q8_K *)vy[c] + i;
        const __m128i q = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[c]->bsums), _mm_loadu_si128((const __m128i *)(y[c]->bsums + 8)));
        _mm_storeu_si128((__m128i *)q8s[c], q);
    }
}

/* vec_dot / gemm from a group template TFN(n, x, ys, out, os, NC), NC <= R16_NC. */
/* vec_dot: s[0..16) for the group at x.  gemm: nr a multiple of 16, w at a
   group start, row r at w + r * ws (a group is 16 rows); the group (36 KB of
   Q4_K_R16 at 4096 columns) stays in L1/L2 while the activation columns
   stream past it, R16_NC at a time. */
#define R16_WRAP(pfx, name, TFN)                                                             \
    static void pfx##_vec_dot_##name(int64_t n, float *s, const void *x, const void *y) {   \
        const void *ys[1] = { y };                                                          \
        TFN(n, x, ys, s, 16, 1);                                                            \
    }                                                                                       \
    static void pfx##_gemm_##name(int64_t n, int64_t nr, int64_t nc, const void *w,          \
                                  size_t ws, const void *a, size_t as, float *dst,          \
                                  size_t ds) {                                              \
        for (int64_t g = 0; g + 16 <= nr; g += 16) {                                        \
            const void *x = (const char *)w + g * ws;                                       \
            int64_t c = 0;                                                                  \
            const void *ys[R16_NC];                                                         \
            for (; c + R16_NC <= nc; c += R16_NC) {                                         \
                for (int k = 0; k < R16_NC; k++) ys[k] = (const char *)a + (c + k) * as;    \
                TFN(n, x, ys, dst + c * ds + g, ds, R16_NC);                                \
            }                                                                               \
            const int m = (int)(nc - c);                                                    \
            for (int k = 0; k < m; k++) ys[k] = (const char *)a + (c + k) * as;             \
            if (m == 3) TFN(n, x, ys, dst + c * ds + g, ds, 3);                             \
            else if (m == 2) TFN(n, x, ys, dst + c * ds + g, ds, 2);                        \
            else if (m == 1) TFN(n, x, ys, dst + c * ds + g, ds, 1);                        \
        }                                                                                   \
    }
#endif
