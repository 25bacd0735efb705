/*
 * AVX2 kernels for Q5_0_R16 (blocks.h: Q5_0 with 16 rows interleaved)
 * against Q8_0, header-only like x86_avx2_r16.h (include it after
 * x86_avx2.h, from a translation unit built with AVX2/FMA/F16C flags).
 *
 * A ymm holds the same 4 columns of 8 rows, a 32-bit lane per row: the
 * half h of qs[j] gives two of them (low nibbles: group j, high: group
 * j + 4), the half of qh the 5th bits of all 8 groups (bit k = group k, moved
 * to bit 4 by one shift each).  The weights stay unsigned, u = q + 16 in
 * 0..31, so maddubs(u, 4 activation bytes broadcast) needs no sign step, and
 *   sum(q * y) = sum(u * y) - 16 * sum(y)
 * with sum(y) made once per activation block (the gemm's panel).
 *
 * Numerics: the format's definition (formats/repack.c, q5_0_r16_vec_dot):
 * per row and block the exact integer sum, then acc = fma(d_r * d_y, isum,
 * acc) in block order.  vec_dot and every gemm tile do exactly that in
 * the row's lane, so they agree with the reference and with each other
 * bit for bit, whatever the batch.
 */
#ifndef PICOLM_X86_AVX2_Q5R16_H
#define PICOLM_X86_AVX2_Q5R16_H
#include "x86_avx2.h"
#include "x86_avx2_r16.h" /* r16_bcast4, r16_prefetch */

#ifndef Q5R_NC
#define Q5R_NC 8 /* activation columns per gemm tile (4: 5-15% slower per column) */
#endif
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

/* Rows 8h..8h+7 (lanes) of block b against NC activation blocks: q8[c] the
   32 quants, dy[c] the scale, ys16[c] = 16 * sum of the quants. */
AI void q5r_half(const block_q5_0_r16 *b, const int h, const int8_t *const *q8, const float *dy, const int32_t *ys16,
                 __m256 *acc, const int NC) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10), ones = _mm256_set1_epi16(1);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
    /* bit k of every byte to bit 4: a 16-bit shift by at most 4 brings
       nothing across the byte boundary into bit 4 */
    const __m256i hb[8] = {_mm256_slli_epi16(qh, 4), _mm256_slli_epi16(qh, 3), _mm256_slli_epi16(qh, 2), _mm256_slli_epi16(qh, 1),
                           qh, _mm256_srli_epi16(qh, 1), _mm256_srli_epi16(qh, 2), _mm256_srli_epi16(qh, 3)};
    __m256i u[8];
    X86_UNROLL for (int j = 0; j < 4; j++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs[j] + 32 * h));
        u[j] = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_and_si256(hb[j], m10));
        u[j + 4] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm256_and_si256(hb[j + 4], m10));
    }
    const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b->d + 8 * h)));
    X86_UNROLL for (int c = 0; c < NC; c++) {
        /* int16 sums of 4 maddubs: each lane |u0 y0 + u1 y1| <= 2 * 31 * 128
           = 7936, so 4 of them <= 31744 < 32768 (even at y = -128) */
        __m256i lo = _mm256_maddubs_epi16(u[0], r16_bcast4(q8[c]));
        __m256i hi = _mm256_maddubs_epi16(u[4], r16_bcast4(q8[c] + 16));
        X86_UNROLL for (int g = 1; g < 4; g++) {
            lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(u[g], r16_bcast4(q8[c] + 4 * g)));
            hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(u[g + 4], r16_bcast4(q8[c] + 16 + 4 * g)));
        }
        const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(lo, ones), _mm256_madd_epi16(hi, ones));
        const __m256i isum = _mm256_sub_epi32(s, _mm256_set1_epi32(ys16[c]));
        acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(d8, _mm256_set1_ps(dy[c])), _mm256_cvtepi32_ps(isum), acc[c]);
    }
}

#ifndef Q5R_NO_AVX2 /* the avx512 TU takes the panel and the gemm driver only */
/* vec_dot: s[0..16) = the group at vx against one Q8_0 row */
static void avx2_vec_dot_q5_0_r16(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_0_r16 *x = vx;
    const block_q8_0 *y = vy;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / QK5_0; i++) {
        r16_prefetch(x + i + 4, sizeof *x); /* a hint: never faults, past the end included */
        const int8_t *q8 = y[i].qs;
        const float dy = x86_h2f(y[i].d);
        const int32_t ys = q5r_ysum16(&y[i]);
        q5r_half(x + i, 0, &q8, &dy, &ys, &acc[0], 1);
        q5r_half(x + i, 1, &q8, &dy, &ys, &acc[1], 1);
    }
    _mm256_storeu_ps(s, acc[0]);
    _mm256_storeu_ps(s + 8, acc[1]);
}

#endif

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

#ifndef Q5R_NO_AVX2
/* out[c * os + r] for the group at vx, r < 16, against NC panel columns */
AI void q5r_tile(int64_t nb, const void *vx, const void *a, size_t as, const float *dy, const int32_t *ys, float *out, size_t os,
                 const int NC) {
    const block_q5_0_r16 *x = vx;
    for (int h = 0; h < 2; h++) {
        __m256 acc[Q5R_NC];
        X86_UNROLL for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
        for (int64_t i = 0; i < nb; i++) {
            const int8_t *q8[Q5R_NC];
            X86_UNROLL for (int c = 0; c < NC; c++) q8[c] = ((const block_q8_0 *)((const char *)a + c * as))[i].qs;
            q5r_half(x + i, h, q8, dy + i * Q5R_NC, ys + i * Q5R_NC, acc, NC);
        }
        X86_UNROLL for (int c = 0; c < NC; c++) _mm256_storeu_ps(out + c * os + 8 * h, acc[c]);
    }
}

#endif

/* gemm (plugin.h): rows in runs of Q5R_RB, a panel per Q5R_NC columns of
   the run, each group of the run against it.  One column (decode) and rows
   longer than the panel go through vec_dot (the same bits): a tile reads
   each block twice (a half per pass), which only pays across columns.
   Q5R_GEMM(name, vec_dot, tile) defines it for a backend's vec_dot and tile
   (the avx512 VNNI level has its own, on the same panel). */
#define Q5R_TILE(tile, k) else if (m == (k)) tile(nb, x, ac, as, dy, ys, o, ds, (k))
#if Q5R_NC > 4
#define Q5R_TILES_5_7(tile) Q5R_TILE(tile, 7); Q5R_TILE(tile, 6); Q5R_TILE(tile, 5); Q5R_TILE(tile, 4);
#else
#define Q5R_TILES_5_7(tile)
#endif
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
                    Q5R_TILES_5_7(tile)                                                                                        \
                    Q5R_TILE(tile, 3); Q5R_TILE(tile, 2); else tile(nb, x, ac, as, dy, ys, o, ds, 1);                          \
                }                                                                                                              \
            }                                                                                                                  \
        }                                                                                                                      \
    }
#ifndef Q5R_NO_AVX2
Q5R_GEMM(avx2_gemm_q5_0_r16, avx2_vec_dot_q5_0_r16, q5r_tile)
#endif
#endif
