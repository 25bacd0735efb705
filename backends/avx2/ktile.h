/*
 * Gemm tiles of 1..8 activation columns for the K-quants (Q4_K, Q4_K_R,
 * Q5_K, Q6_K against Q8_K): batched decode (a few server streams) and
 * prefill.  Header-only, the avx2 level's own; the tile kernels themselves are in
 * kernels.c (one always-inline "weight row x NC columns" routine per format,
 * which is also its vec_dot at NC = 1).
 *
 * What a column costs in the tile, beyond its own products: each weight
 * block is unpacked (nibbles, 6-bit scales, fp16 d/dmin) once per tile of
 * up to KQ_NC columns, and the activation side that does not depend on the
 * weight row (each column's d as a float, the Q8_K bsums summed over
 * sub-block pairs for the mins) is made once per row block into a panel
 * (kq_sb), so that per weight row the NC products dx * dy are one vector
 * multiply and two columns share each step of the mins term.  For Q4_K,
 * Q4_K_R and Q5_K the panel also holds the columns' quants re-arranged in
 * sub-block pairs (kq_pair1/2), which halves the scale multiplies.
 *
 * The per-column arithmetic is the vec_dot's: the same exact integer in
 * every lane per superblock, then the same float fma's into the same lanes, in
 * superblock order, reduced by the same horizontal sums; so every column is
 * bit-identical to vec_dot (test_kernels checks it for every tile shape).
 */
#ifndef PICOLM_AVX2_KTILE_H
#define PICOLM_AVX2_KTILE_H
#include "../x86/avx2.h"

#define KQ_NC 8       /* activation columns per tile */
#define KQ_MAXB 128   /* superblocks per row a panel holds (n <= 32768) */
/* the fewest columns that use the pair layout (Q4_K/Q5_K): below, the copy
   of the activations per thread measured no faster in batched decode */
#define KQ_PAIR_NC 5

/* The panel of one superblock for the tile's columns (columns past the
   tile's count are zero): each column's d over 8 lanes (multiplied by the
   row's d straight from here: a d stored and re-read per row as a scalar
   waited on store forwarding), d of the column pairs (2p, 2p+1) over 4
   lanes each, and the 8 bsum pairs of each column as int16 (Q4_K/Q5_K
   mins).  For Q4_K/Q5_K the nb superblocks of a panel are followed by
   each column's quants in the pair layout (kq_pair_y), KQ_NC x QK_K bytes
   a superblock (kq_yq): apart, so that the per-row reads above stay dense. */
typedef struct __attribute__((aligned(32))) kq_sb {
    float d[KQ_NC][8];
    float d2[KQ_NC / 2][8];
    int16_t q8s[KQ_NC][8];
} kq_sb;
/* panel entries (kq_sb) per superblock: the kq_sb and its pair quants */
#define KQ_SB_PAIR (1 + KQ_NC * QK_K / (int)sizeof(kq_sb))
AI int8_t *kq_yq(const kq_sb *P, int64_t nb, int64_t i, int c) {
    return (int8_t *)(P + nb) + (i * KQ_NC + c) * QK_K;
}

/* The pair layout: two 32-element chunks a, b (weights or activations)
   interleaved by 16-bit words so that one vpaddw of two vpmaddubsw
   results leaves in int16 lane 2L the 4 products of chunk a's elements
   4L..4L+3 and in lane 2L+1 those of chunk b.  Each lane then holds a
   single Q4_K/Q5_K sub-block, so one vpmaddwd by the interleaved scales
   per sub-block pair gives in int32 lane L exactly vec_dot's integer for
   that lane (it sums the same products with the same scales), where
   vec_dot spends a vpmaddwd and a vpaddd per sub-block.  The int16 sums
   stay exact: 4 products of at most 31 * 128 (Q5_K) is 15872.  (Q6_K's
   would fit too, 4 * 63 * 128 = 32256, but measured slower there.)
   x1 = words (a0, b1, a2, b3, ...); x2 = words (a1, b0, a3, b2, ...). */
AI __m256i kq_pair1(__m256i a, __m256i b) { return _mm256_blend_epi16(a, b, 0xAA); }
AI __m256i kq_pair2(__m256i a, __m256i b) {
    const __m256i swap = _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13,
                                          2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    return _mm256_shuffle_epi8(_mm256_blend_epi16(b, a, 0xAA), swap);
}
/* a Q8_K block's 256 quants in the pair layout: chunks (64j, 64j + 32)
   as x1 then x2 (the pairs of avx2_k45_t) */
AI void kq_pair_y(int8_t *dst, const int8_t *qs) {
    for (int j = 0; j < 4; j++) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)(qs + 64 * j));
        const __m256i b = _mm256_loadu_si256((const __m256i *)(qs + 64 * j + 32));
        _mm256_store_si256((__m256i *)(dst + 64 * j), kq_pair1(a, b));
        _mm256_store_si256((__m256i *)(dst + 64 * j + 32), kq_pair2(a, b));
    }
}

/* the panel of nb superblocks for the m columns at ys (pair: with the
   quants in the pair layout): the tile reads the columns in pairs, so an
   odd m gets a zero column after it */
AI void kq_panel(kq_sb *P, int64_t nb, const void *const *ys, int m, const int pair) {
    const int filled = m + (m & 1);
    for (int64_t i = 0; i < nb; i++) {
        kq_sb *p = P + i;
        for (int c = 0; c < filled; c++) {
            float d = 0;
            __m128i q8s = _mm_setzero_si128();
            if (c < m) {
                const block_q8_K *y = (const block_q8_K *)ys[c] + i;
                d = y->d;
                q8s = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y->bsums), _mm_loadu_si128((const __m128i *)(y->bsums + 8)));
                if (pair) kq_pair_y(kq_yq(P, nb, i, c), y->qs);
            }
            for (int k = 0; k < 8; k++) p->d[c][k] = d;
            for (int k = 0; k < 4; k++) p->d2[c / 2][4 * (c & 1) + k] = d;
            _mm_storeu_si128((__m128i *)p->q8s[c], q8s);
        }
    }
}

/* The tile routine of a format: TFN(n, x, ys, out, NC, P) computes out[c] =
   dot(row x, column c) for c < NC, reading the activation side from the
   panel P (NULL: from the blocks, the vec_dot).  KQ_ROWS instantiates it
   for one NC over rows [r0, r1); KQ_WRAP makes the format's vec_dot and
   gemm (PAIR: the tile reads the panel's pair-layout quants). */
typedef void (*kq_rows_fn)(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws, const void *const *ys,
                           const kq_sb *P, float *dst, size_t ds);
#define KQ_ROWS(TFN, NC)                                                                                    \
    static void TFN##_rows##NC(int64_t n, int64_t r0, int64_t r1, const void *w, size_t ws,                \
                               const void *const *ys, const kq_sb *P, float *dst, size_t ds) {             \
        if (!P) __builtin_unreachable(); /* drops the tile's vec_dot branches */                            \
        for (int64_t r = r0; r < r1; r++) {                                                                 \
            float o[NC];                                                                                    \
            TFN(n, (const char *)w + r * ws, ys, o, NC, P);                                                 \
            for (int k = 0; k < NC; k++) dst[k * ds + r] = o[k];                                            \
        }                                                                                                   \
    }

/* vec_dot: the tile at NC = 1 without a panel.  gemm: rows in blocks of
   X86_GEMM_RB with tiles of KQ_NC columns swept over each block (as
   X86_WRAP), the last nc % KQ_NC columns in one narrower tile; one column
   (decode) and rows too long for the panel take the vec_dot per row. */
#define KQ_WRAP(pfx, name, TFN, PAIR)                                                                           \
    KQ_ROWS(TFN, 1) KQ_ROWS(TFN, 2) KQ_ROWS(TFN, 3) KQ_ROWS(TFN, 4)                                         \
    KQ_ROWS(TFN, 5) KQ_ROWS(TFN, 6) KQ_ROWS(TFN, 7) KQ_ROWS(TFN, 8)                                         \
    static void pfx##_vec_dot_##name(int64_t n, float *s, const void *x, const void *y) {                  \
        const void *ys[1] = { y };                                                                         \
        TFN(n, x, ys, s, 1, NULL);                                                                         \
    }                                                                                                      \
    static void pfx##_gemm_##name(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws,              \
                                  const void *a, size_t as, float *dst, size_t ds) {                       \
        static const kq_rows_fn rows[KQ_NC + 1] = { NULL, TFN##_rows1, TFN##_rows2, TFN##_rows3,           \
                                                    TFN##_rows4, TFN##_rows5, TFN##_rows6, TFN##_rows7,    \
                                                    TFN##_rows8 };                                         \
        const int64_t nb = n / QK_K;                                                                       \
        if (nc == 1 || nb > KQ_MAXB) {                                                                     \
            for (int64_t c = 0; c < nc; c++)                                                               \
                for (int64_t r = 0; r < nr; r++)                                                           \
                    pfx##_vec_dot_##name(n, dst + c * ds + r, (const char *)w + r * ws, (const char *)a + c * as); \
            return;                                                                                        \
        }                                                                                                  \
        /* the panel on the stack (at most KQ_MAXB superblocks): a thread-local  \
           one in a dlopen'd plugin costs a __tls_get_addr per call */          \
        /* one column group (batched decode): its panel serves every row block */                        \
        kq_sb panel[nb * (PAIR && nc >= KQ_PAIR_NC ? KQ_SB_PAIR : 1)];                                     \
        const int once = nc <= KQ_NC;                                                                      \
        for (int64_t r0 = 0; r0 < nr; r0 += X86_GEMM_RB) {                                                 \
            const int64_t r1 = r0 + X86_GEMM_RB < nr ? r0 + X86_GEMM_RB : nr;                              \
            for (int64_t c0 = 0; c0 < nc; c0 += KQ_NC) {                                                   \
                const int m = nc - c0 < KQ_NC ? (int)(nc - c0) : KQ_NC;                                    \
                const void *ys[KQ_NC];                                                                     \
                for (int k = 0; k < m; k++) ys[k] = (const char *)a + (c0 + k) * as;                       \
                if (!once || !r0) kq_panel(panel, nb, ys, m, PAIR && m >= KQ_PAIR_NC);                        \
                rows[m](n, r0, r1, w, ws, ys, panel, dst + c0 * ds, ds);                                    \
            }                                                                                              \
        }                                                                                                  \
    }

#endif
