/*
 * Q5_0_R16 (blocks.h: Q5_0 with 16 rows interleaved) against Q8_0: what the
 * avx2 (avx2/r16.h) and avx512 (avx512/q32.c) kernels share.
 *
 * A vector of the layout holds the same 4 columns of 16 rows (a ymm: 8), a
 * 32-bit lane per row: qs[j] gives two of them (low nibbles: group j, high:
 * group j + 4), qh the 5th bits of all 8 groups (bit k = group k).  The
 * weights stay unsigned, u = q + 16 in 0..31, so u x 4 activation bytes
 * broadcast needs no sign step, and
 *   sum(q * y) = sum(u * y) - 16 * sum(y)
 * with sum(y) made once per activation block (the gemm's panel).
 *
 * Numerics: the format's definition (formats/repack.c, q5_0_r16_vec_dot):
 * per row and block the exact integer sum, then acc = fma(d_r * d_y, isum,
 * acc) in block order.  vec_dot and every gemm tile do exactly that in
 * the row's lane, so they agree with the reference and with each other
 * bit for bit, whatever the batch.
 */
#ifndef PICOLM_X86_Q5R16_H
#define PICOLM_X86_Q5R16_H
#include "avx2.h"

#define Q5R_NC 8 /* activation columns per gemm tile (4: 5-15% slower per column) */
#define Q5R_RB 64      /* weight rows (4 groups) per activation panel */
#define Q5R_MAXB 1024  /* blocks of 32 per row the panel holds (n <= 32768) */

/* 16 * sum of a Q8_0 block's 32 quants (sad sums the bytes y + 128) */
AI int32_t q5r_ysum16(const block_q8_0 *y) {
    const __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)y->qs), _mm256_set1_epi8((char)0x80));
    const __m256i s = _mm256_sad_epu8(v, _mm256_setzero_si256());
    __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    t = _mm_add_epi64(t, _mm_unpackhi_epi64(t, t));
    return 16 * (_mm_cvtsi128_si32(t) - 32 * 128);
}

/* The panel of NC (<= Q5R_NC) activation rows (row c at a + c * as):
   dy[i][c] and ys[i][c] for blocks i < nb. */
static void q5r_panel(const void *a, size_t as, int NC, int64_t nb, float *dy, int32_t *ys) {
    for (int c = 0; c < NC; c++) {
        const block_q8_0 *y = (const block_q8_0 *)((const char *)a + c * as);
        for (int64_t i = 0; i < nb; i++) {
            dy[i * Q5R_NC + c] = x86_h2f(y[i].d);
            ys[i * Q5R_NC + c] = q5r_ysum16(&y[i]);
        }
    }
}

/* gemm (plugin.h): rows in runs of Q5R_RB, a panel per Q5R_NC columns of
   the run, each group of the run against it.  One column (decode) and rows
   longer than the panel go through vec_dot (the same bits): a tile reads
   each block twice (a half per pass), which only pays across columns.
   Q5R_GEMM(name, vec_dot, tile) defines it for a level's vector dot and
   tile (avx512's plain Q5_0 gemm has its own, on the same panel). */
#define Q5R_TILE(tile, k) else if (m == (k)) tile(nb, x, ac, as, dy, ys, o, ds, (k))
#define Q5R_GEMM(name, vec_dot, tile)                                                                                          \
    static void name(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst,        \
                     size_t ds) {                                                                                              \
        const int64_t nb = n / QK5_0;                                                                                          \
        if (nb > Q5R_MAXB || nc == 1) {                                                                                        \
            for (int64_t g = 0; g < nr; g += 16)                                                                               \
                for (int64_t c = 0; c < nc; c++) {                                                                             \
                    float s[16];                                                                                               \
                    vec_dot(n, s, (const char *)w + g * ws, (const char *)a + c * as);                                         \
                    for (int r = 0; r < 16; r++) dst[c * ds + g + r] = s[r];                                                   \
                }                                                                                                              \
            return;                                                                                                            \
        }                                                                                                                      \
        /* the panel on the stack (at most 64 KB): a thread-local one in a                                                     \
           dlopen'd plugin costs a __tls_get_addr per call */                                                                  \
        float dy[nb * Q5R_NC];                                                                                                 \
        int32_t ys[nb * Q5R_NC];                                                                                               \
        for (int64_t r0 = 0; r0 < nr; r0 += Q5R_RB) {                                                                         \
            const int64_t r1 = r0 + Q5R_RB < nr ? r0 + Q5R_RB : nr;                                                            \
            for (int64_t c0 = 0; c0 < nc; c0 += Q5R_NC) {                                                                      \
                const int m = nc - c0 < Q5R_NC ? (int)(nc - c0) : Q5R_NC;                                                      \
                const char *ac = (const char *)a + c0 * as;                                                                    \
                q5r_panel(ac, as, m, nb, dy, ys);                                                                              \
                for (int64_t g = r0; g < r1; g += 16) {                                                                        \
                    const void *x = (const char *)w + g * ws;                                                                  \
                    float *o = dst + c0 * ds + g;                                                                              \
                    if (m == Q5R_NC) tile(nb, x, ac, as, dy, ys, o, ds, Q5R_NC);                                               \
                    Q5R_TILE(tile, 7); Q5R_TILE(tile, 6); Q5R_TILE(tile, 5); Q5R_TILE(tile, 4);                                \
                    Q5R_TILE(tile, 3); Q5R_TILE(tile, 2); else tile(nb, x, ac, as, dy, ys, o, ds, 1);                          \
                }                                                                                                              \
            }                                                                                                                  \
        }                                                                                                                      \
    }
#endif
