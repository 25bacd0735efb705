/*
 * 8-column gemm tiles for the 32-element formats (Q8_0, Q4_0, IQ4_NL, Q5_0
 * against Q8_0; Q4_1, Q5_1 against Q8_1): the prefill path of models whose
 * rows are not whole 256-blocks (Qwen2.5's 896), where llama.cpp's K-quant
 * mixes fall back to these formats.  Header-only, the avx2 level's own; the
 * avx512 plugin gets these tiles through the avx2 level (its own Q8_0
 * kernel replaces that one).
 *
 * Same integers and float steps as the row kernels of x86/avx2.h
 * (avx2_q5_0_nc etc.), so results are bit-identical to vec_dot: per weight
 * row and activation column one 8-lane float accumulator, fma'd per block
 * with the scale dx * dy, summed at the end by x86_hsum_ps; the Q8_1 mins
 * term accumulates separately (mul, then add) and is added last.  What
 * changes is the work per block:
 *   - each weight block is unpacked once for 8 columns instead of 4;
 *   - the activation scales (and Q8_1 sums) of the tile's 8 columns are
 *     converted to float once per tile into a [block][8] panel, so the 8
 *     products dx * dy are one vector multiply, broadcast from memory.
 * Tails (nc % 8 columns, rows too long for the panel) go through the
 * X86_WRAP gemm of the same format, which is bit-identical too.
 */
#ifndef PICOLM_AVX2_TILE8_H
#define PICOLM_AVX2_TILE8_H
#include "../x86/avx2.h"

#define T8_NC 8       /* activation columns per tile */
#define T8_MAXB 1024  /* blocks of 32 per row the panel holds (n <= 32768) */

/* one block's 8 column values (aligned vector loads) */
typedef struct __attribute__((aligned(32))) t8_f8 {
    float v[T8_NC];
} t8_f8;

/* The tile's activation panel: dy[i][c] (and sy[i][c], Q8_1's d * sum) as
   floats for blocks i < nb of the 8 columns at a, as bytes apart.  Q8_0 and
   Q8_1 both start with the half d; Q8_1's s follows it. */
AI void t8_panel(const void *a, size_t as, int64_t nb, size_t bsz, float *dy, float *sy, const int Q81) {
    for (int64_t i = 0; i < nb; i++) {
        uint16_t h[T8_NC], s[T8_NC];
        for (int c = 0; c < T8_NC; c++) {
            const uint8_t *b = (const uint8_t *)a + c * as + (size_t)i * bsz;
            memcpy(&h[c], b, 2);
            if (Q81) memcpy(&s[c], b + 2, 2);
        }
        _mm256_store_ps(dy + T8_NC * i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
        if (Q81) _mm256_store_ps(sy + T8_NC * i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)s)));
    }
}

/* One weight row x the 8 panel columns.  SIGNED: x Q8_0 with the sign trick
   (|qx| x sign(qy, qx)), else x Q8_1 unsigned plus the mins term. */
AI void t8_row(int64_t nb, const void *x, const void *a, size_t as, size_t bsz, const float *dy, const float *sy, float *out,
               const x86_unpack32_fn unpack, const int SIGNED) {
    /* (every loop over c unrolled: the accumulators stay in registers) */
    __m256 acc[T8_NC];
    _Pragma("GCC unroll 8") for (int c = 0; c < T8_NC; c++) acc[c] = _mm256_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        float dx, mx = 0;
        const __m256i qx = unpack(x, i, &dx, &mx);
        const __m256i ax = SIGNED ? _mm256_sign_epi8(qx, qx) : qx;
        float sc[T8_NC] __attribute__((aligned(32)));
        _mm256_store_ps(sc, _mm256_mul_ps(_mm256_set1_ps(dx), _mm256_load_ps(dy + T8_NC * i)));
        if (!SIGNED) accm = _mm256_add_ps(accm, _mm256_mul_ps(_mm256_set1_ps(mx), _mm256_load_ps(sy + T8_NC * i)));
        const uint8_t *yb = (const uint8_t *)a + (size_t)i * bsz + bsz - 32; /* the 32 quants end the block */
        _Pragma("GCC unroll 8") for (int c = 0; c < T8_NC; c++) {
            const __m256i qy = _mm256_loadu_si256((const __m256i *)(yb + c * as));
            const __m256i p = x86_dot_u8(ax, SIGNED ? _mm256_sign_epi8(qy, qx) : qy);
            acc[c] = _mm256_fmadd_ps(_mm256_broadcast_ss(&sc[c]), _mm256_cvtepi32_ps(p), acc[c]);
        }
    }
    float m[T8_NC];
    _mm256_storeu_ps(m, accm);
    _Pragma("GCC unroll 8") for (int c = 0; c < T8_NC; c++) out[c] = SIGNED ? x86_hsum_ps(acc[c]) : x86_hsum_ps(acc[c]) + m[c];
}

/* gemm (plugin.h): rows in blocks of X86_GEMM_RB, as X86_WRAP, with the 8-column
   tiles swept over each block; the remaining columns through TAIL. */
AI void t8_gemm(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds,
                const x86_unpack32_fn unpack, const int SIGNED, const picolm_gemm_fn tail) {
    const int64_t nb = n / 32;
    const size_t bsz = SIGNED ? sizeof(block_q8_0) : sizeof(block_q8_1);
    int64_t c0 = 0;
    if (nb <= T8_MAXB && nc >= T8_NC) {
        /* the panel on the stack: a thread-local one in a dlopen'd plugin
           costs a __tls_get_addr per call */
        t8_f8 dyv[nb], syv[SIGNED ? 1 : nb];
        float *dy = dyv[0].v, *sy = syv[0].v;
        for (int64_t r0 = 0; r0 < nr; r0 += X86_GEMM_RB) {
            const int64_t r1 = r0 + X86_GEMM_RB < nr ? r0 + X86_GEMM_RB : nr;
            for (c0 = 0; c0 + T8_NC <= nc; c0 += T8_NC) {
                const char *ac = (const char *)a + c0 * as;
                t8_panel(ac, as, nb, bsz, dy, sy, !SIGNED);
                for (int64_t r = r0; r < r1; r++) {
                    float o[T8_NC];
                    t8_row(nb, (const char *)w + r * ws, ac, as, bsz, dy, sy, o, unpack, SIGNED);
                    for (int c = 0; c < T8_NC; c++) dst[(c0 + c) * ds + r] = o[c];
                }
            }
        }
    }
    if (c0 < nc) tail(n, nr, nc - c0, w, ws, (const char *)a + c0 * as, as, dst + c0 * ds, ds);
}

/* pfx##_gemm8_##name: the 8-column tiles, tails through pfx##_gemm_##name
   (X86_WRAP, which must come first) */
#define T8_WRAP(pfx, name, SIGNED)                                                                             \
    static void pfx##_gemm8_##name(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, \
                                   size_t as, float *dst, size_t ds) {                                         \
        t8_gemm(n, nr, nc, w, ws, a, as, dst, ds, x86_u32_##name, SIGNED, pfx##_gemm_##name);                  \
    }
#endif
