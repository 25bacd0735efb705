/*
 * The avx512 level's kernels for the 16-row interleaved Q4_K_R16,
 * Q4_K_R16N and Q6_K_R16 (blocks.h, x86/r16.h).  A 64-byte vector of these
 * layouts is 4 columns x 16 rows, a dword per row: the rows are already the
 * lanes, so nothing is transposed, and the panels' "packing" (panels.c) is
 * only a nibble split of one contiguous stream.  Every kernel here computes
 * the panels' integers and float steps, which are also the Q4_K / Q6_K row
 * kernels' (kquants.c): a Q4_K_M_R16 model gives exactly the Q4_K_M
 * model's logits on this backend, at any batch.
 */
#include "avx512.h"
#include "../x86/r16.h"

/* the software prefetch distance of the Q4_K_R16 tile, which reads a block
   in lane order, poorly followed by the hardware prefetcher from DRAM
   (-DR16_PF_BYTES=N builds another for picolm-bench --micro to compare) */
#ifndef R16_PF_BYTES
#define R16_PF_BYTES 8192
#endif

/* dword r = the int16 pair (a_r, b_r), from sign- or zero-extended dwords */
AI __m512i r16_pair(__m512i a, __m512i b) { return _mm512_mask_blend_epi16(0xAAAAAAAAu, a, _mm512_slli_epi32(b, 16)); }
AI __m512i r16_u8x16(__m128i v) { return _mm512_cvtepu8_epi32(v); }
AI __m512i r16_s8x16(const int8_t *p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)); }

/* Q6_K_R16 groups u + 16k (k = 0..3) as u8 0..63: ql[u], ql[u + 16] low
   nibbles, then high nibbles; qh[u] bits 2k..2k+1 */
AI void r16_q6_K_groups(const block_q6_K_r16 *b, int u, __m512i q[4]) {
    const __m512i m4 = _mm512_set1_epi8(0xF), m30 = _mm512_set1_epi8(0x30);
    const __m512i qa = _mm512_loadu_si512((const void *)b->ql[u]), qb = _mm512_loadu_si512((const void *)b->ql[u + 16]);
    const __m512i qh = _mm512_loadu_si512((const void *)b->qh[u]);
    q[0] = _mm512_or_si512(_mm512_and_si512(qa, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30));
    q[1] = _mm512_or_si512(_mm512_and_si512(qb, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 2), m30));
    q[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(qa, 4), m4), _mm512_and_si512(qh, m30));
    q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(qb, 4), m4), _mm512_and_si512(_mm512_srli_epi16(qh, 2), m30));
}


/* The panel of superblock i of the group at x0: the same panel pack_q4_K /
   pack_q6_K build from 16 separate rows. */
static void pack_q4_K_r16(panel *P, const void *x0, size_t ws, int nrows, int64_t i) {
    (void)ws, (void)nrows; /* always a whole group */
    const block_q4_K_r16 *b = (const block_q4_K_r16 *)x0 + i;
    const __m512i m4 = _mm512_set1_epi8(0xF);
    for (int v = 0; v < 32; v++) { /* qs[4s + k]: columns 32s + 4k.. (low nibbles), 32s + 16 + 4k.. (high) */
        const __m512i q = _mm512_loadu_si512((const void *)b->qs[v]);
        _mm512_store_si512((void *)P->q[8 * (v / 4) + v % 4], _mm512_and_si512(q, m4));
        _mm512_store_si512((void *)P->q[8 * (v / 4) + v % 4 + 4], _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
    }
    for (int s = 0; s < 8; s++) _mm512_store_si512((void *)P->sc[s], r16_u8x16(r16_k4_get6(b->scales_l, b->scales_h, s)));
    for (int t = 0; t < 4; t++)
        _mm512_store_si512((void *)P->mp[t], r16_pair(r16_u8x16(r16_k4_get6(b->mins_l, b->mins_h, 2 * t)),
                                                      r16_u8x16(r16_k4_get6(b->mins_l, b->mins_h, 2 * t + 1))));
    _mm512_store_ps(P->d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d)));
    _mm512_store_ps(P->dmin, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->dmin)));
}
static void pack_q6_K_r16(panel *P, const void *x0, size_t ws, int nrows, int64_t i) {
    (void)ws, (void)nrows;
    const block_q6_K_r16 *b = (const block_q6_K_r16 *)x0 + i;
    for (int u = 0; u < 16; u++) {
        __m512i q[4];
        r16_q6_K_groups(b, u, q);
        for (int k = 0; k < 4; k++) _mm512_store_si512((void *)P->q[u + 16 * k], q[k]);
    }
    for (int s = 0; s < 16; s++) _mm512_store_si512((void *)P->sc[s], r16_s8x16(b->scales[s]));
    for (int t = 0; t < 8; t++) _mm512_store_si512((void *)P->mp[t], r16_pair(r16_s8x16(b->scales[2 * t]), r16_s8x16(b->scales[2 * t + 1])));
    _mm512_store_ps(P->d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d)));
}

/* Q4_K_R16N: per sub-block s and column, 8 vpdpbusd give each row's
   sum(q * y) (|.| <= 32 * 15 * 128, exact), times the row's scale (vpmulld)
   into isum; the mins' msum by vpdpwssd of (min_2t, min_2t+1) pairs against
   the column's bsums pairs.  avx2_q4_K_r16n_t's sums, 16 rows at once. */
AI void q4_K_r16n_t(int64_t n, const void *vx, const void *const *vy, float *out, size_t os, const int NC) {
    const block_q4_K_r16 *x = vx;
    const int64_t nb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0xF);
    __m512 acc[R16_NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const block_q4_K_r16 *b = x + i;
        r16_prefetch((const char *)b + R16_PF_BYTES, sizeof *b);
        const block_q8_K *y[R16_NC];
        int32_t q8s[R16_NC][4];
        r16_k8_cols(vy, i, NC, y, q8s);
        __m512i isum[R16_NC], msum[R16_NC];
        for (int c = 0; c < NC; c++) isum[c] = msum[c] = _mm512_setzero_si512();
        X86_UNROLL for (int t = 0; t < 4; t++) {
            const __m512i mp = r16_pair(r16_u8x16(r16_k4_get6(b->mins_l, b->mins_h, 2 * t)),
                                        r16_u8x16(r16_k4_get6(b->mins_l, b->mins_h, 2 * t + 1)));
            for (int c = 0; c < NC; c++) msum[c] = _mm512_dpwssd_epi32(msum[c], mp, _mm512_set1_epi32(q8s[c][t]));
        }
        X86_UNROLL for (int s = 0; s < 8; s++) {
            const __m512i sc = r16_u8x16(r16_k4_get6(b->scales_l, b->scales_h, s));
            __m512i lo[4], hi[4];
            X86_UNROLL for (int k = 0; k < 4; k++) {
                const __m512i q = _mm512_loadu_si512((const void *)b->qs[4 * s + k]);
                lo[k] = _mm512_and_si512(q, m4);
                hi[k] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            }
            for (int c = 0; c < NC; c++) {
                const int8_t *q8 = y[c]->qs + 32 * s;
                __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[0], bcast32(q8));
                X86_UNROLL for (int k = 1; k < 4; k++) t = _mm512_dpbusd_epi32(t, lo[k], bcast32(q8 + 4 * k));
                X86_UNROLL for (int k = 0; k < 4; k++) t = _mm512_dpbusd_epi32(t, hi[k], bcast32(q8 + 16 + 4 * k));
                isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(t, sc));
            }
        }
        const __m512 d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        const __m512 m16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->dmin));
        for (int c = 0; c < NC; c++) {
            const __m512 dy = _mm512_set1_ps(y[c]->d);
            acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(d16, dy), _mm512_cvtepi32_ps(isum[c]), acc[c]);
            acc[c] = _mm512_fnmadd_ps(_mm512_mul_ps(m16, dy), _mm512_cvtepi32_ps(msum[c]), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + c * os, acc[c]);
}

/* Q4_K_R16 and Q4_K_R16N (the same bytes; Q4_K_R16N's numerics are the
   panels' already): the tile for 1 to 7 columns (x86/r16.h), the panels
   from the tuning record's column count on */
R16_WRAP(r16n, q4_K, q4_K_r16n_t)
void avx512_vec_dot_q4_K_r16(int64_t n, float *s, const void *x, const void *y) { r16n_vec_dot_q4_K(n, s, x, y); }
void avx512_gemm_q4_K_r16(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds) {
    if (nc < pk_tuning.panel_min_nc_r16) {
        r16n_gemm_q4_K(n, nr, nc, w, ws, a, as, dst, ds);
        return;
    }
    prefetch_rows(w, ws, 1, 0, (size_t)(n / QK_K < PANEL_SB ? n / QK_K : PANEL_SB) * sizeof(block_q4_K_r16));
    for (int64_t g = 0; g < nr; g += PANEL_ROWS)
        panel_gemm(n, PANEL_ROWS, nc, (const char *)w + g * ws, ws, a, as, dst + g, ds, sizeof(block_q4_K_r16), 1, g + PANEL_ROWS < nr,
                   pack_q4_K_r16, panel_q4_K_cols_tab);
}

/* Q6_K_R16: the panels at every column count (no tile has their float
   order); decode pays the panel's unpacking */
void avx512_gemm_q6_K_r16(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds) {
    for (int64_t g = 0; g < nr; g += PANEL_ROWS)
        panel_gemm(n, PANEL_ROWS, nc, (const char *)w + g * ws, ws, a, as, dst + g, ds, sizeof(block_q6_K_r16), 1, g + PANEL_ROWS < nr,
                   pack_q6_K_r16, panel_q6_K_cols_tab);
}
void avx512_vec_dot_q6_K_r16(int64_t n, float *s, const void *x, const void *y) { avx512_gemm_q6_K_r16(n, PANEL_ROWS, 1, x, 0, y, 0, s, 0); }
