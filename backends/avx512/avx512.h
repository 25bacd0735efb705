/*
 * The avx512 level (AVX-512 F/BW/VL/DQ and VNNI, all required by the
 * plugin): what its files share.  By job:
 *   kquants.c  Q4_K, Q4_K_R, Q6_K: the decode row kernels (4 rows x 1-4
 *              columns from 4 slices) and the crossover to the panels
 *   panels.c   the 16-row panels: packing, the prefill tiles, their gemm
 *   r16.c      the 16-row interleaved Q4_K_R16, Q4_K_R16N, Q6_K_R16
 *   q32.c      the 32-element formats: Q8_0, Q5_0, Q5_0_R16
 *   attn.c     attn_f16 on 16 lanes (x86/attn.h)
 *   level.c    the level's table and its tune hook
 * Every kernel of every format gives the bits of its vec_dot at any batch
 * (test_kernels): a crossover moves time, never a result.  The rest of
 * the formats are the avx2 level's, linked into the plugin.
 */
#ifndef PICOLM_AVX512_H
#define PICOLM_AVX512_H
#include "../x86/avx2.h"

AI float x86_hsum512(__m512 v) {
    return x86_hsum_ps(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}
/* 4 bytes at p broadcast to the 16 lanes */
AI __m512i bcast32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
/* Q4_K group g (elements 64g..64g+63): low nibbles of qs[32g..], then high */
AI __m512i q4_K_group(const uint8_t *qs, int g) {
    const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * g)));
    return _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xFFFF0000u, v, 4), _mm512_set1_epi8(0xF));
}
/* Prefetch rows [0, nrows) of w, bytes [b0, b1) of each: the panels read 16
   rows at once, more streams than the hardware prefetcher follows, and
   otherwise stall on DRAM for each of them. */
AI void prefetch_rows(const void *w, size_t ws, int nrows, size_t b0, size_t b1) {
    for (int r = 0; r < nrows; r++)
        for (size_t o = b0 & ~(size_t)63; o < b1; o += 64) _mm_prefetch((const char *)w + r * ws + o, _MM_HINT_T0);
}

/* ---- the 16-row panels (panels.c) ---------------------------------------- */
#define PANEL_ROWS 16
#define PANEL_SB 4 /* superblocks per panel chunk: ~21 KB, L1-resident */
#define PANEL_NC 8 /* activation columns per register tile (docs/perf.md) */
typedef struct panel {
    uint8_t q[64][64];  /* [4-element group k][row r: 4 bytes] */
    int32_t sc[16][16]; /* [sub-block][row]: Q4_K 8 sub-blocks of 32, Q6_K 16 of 16 */
    int32_t mp[8][16];  /* [pair t][row]: int16 pairs for vpdpwssd against the
                           activation sub-block sums: Q4_K mins (4 pairs),
                           Q6_K scales (8 pairs, for the -32 offset) */
    float d[16], dmin[16];
} panel;
/* superblock i of nrows (<= 16) rows from x0, ws bytes apart, into P */
typedef void (*panel_pack_fn)(panel *P, const void *x0, size_t ws, int nrows, int64_t i);
/* acc[c] += the 16 rows' dot products over nsb panels, columns y[c] */
typedef void (*panel_cols_fn)(const panel *P, int nsb, const block_q8_K *const *y, __m512 *acc);
/* by column count - 1: the Q4_K and Q6_K tiles (Q4_K_R16 and Q6_K_R16 pack into the same panels) */
extern PK_HIDDEN const panel_cols_fn panel_q4_K_cols_tab[PANEL_NC], panel_q6_K_cols_tab[PANEL_NC];
/* dst[c * ds + r] for rows [0, nr) (nr <= 16) of the group at w, through
   pack and cols.  next_rows: rows of the following group (0 = none),
   prefetched during the last chunk.  streams: the rows' separate streams of
   bsz bytes per superblock, prefetched ahead (nr for plain rows; 1 for an
   interleaved group, one contiguous stream of bsz-byte blocks). */
PK_HIDDEN void panel_gemm(int64_t n, int nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds,
                          size_t bsz, int streams, int next_rows, panel_pack_fn pack, const panel_cols_fn *cols);
/* the gemm of plain Q4_K (R: Q4_K_R) and Q6_K rows through the panels */
PK_HIDDEN void panels_q4_K(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst,
                           size_t ds, int R);
PK_HIDDEN void panels_q6_K(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst,
                           size_t ds);

/* ---- the level's kernels (level.c's table) -------------------------------- */
#define A512_KERNEL(name)                                                                                            \
    PK_HIDDEN void avx512_vec_dot_##name(int64_t n, float *s, const void *x, const void *y);                        \
    PK_HIDDEN void avx512_gemm_##name(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, \
                                      size_t as, float *dst, size_t ds);
A512_KERNEL(q4_K) A512_KERNEL(q4_K_r) A512_KERNEL(q6_K)              /* kquants.c */
A512_KERNEL(q4_K_r16) A512_KERNEL(q4_K_r16n) A512_KERNEL(q6_K_r16)   /* r16.c */
A512_KERNEL(q8_0) A512_KERNEL(q5_0) A512_KERNEL(q5_0_r16)            /* q32.c */
#undef A512_KERNEL
PK_HIDDEN void avx512_attn_f16(const float *q, size_t q_stride, int nq, const uint16_t *k, const uint16_t *v, size_t kv_stride, int n,
                               int hd, float scale, float *y, size_t y_stride, float *mx, float *sum);

#endif
