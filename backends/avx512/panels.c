/*
 * The avx512 level's prefill gemm over packed 16-row panels.  A decode row
 * kernel's lane holds products of one sub-block only a few at a time, so
 * the sub-block scales cost a multiply per few products.  Here 16 weight
 * rows are first unpacked into a panel where 32-bit lane r of vector k
 * holds 4 consecutive quants (u8) of row r: vpdpbusd with 4 broadcast
 * activation bytes then accumulates a whole sub-block per row lane, and
 * the scale is applied once per sub-block (cvt + fma) for 16 rows at a
 * time.  The panel (a few KB on the stack, per call) is reused by every
 * activation column, so the unpacking cost is paid once per 16 rows x
 * superblock, not per column; this is GEMM packing as in BLAS, not a copy
 * of the model.  Used from the tuning record's column count on
 * (kquants.c, r16.c); the float steps are the row kernels', so the bits
 * are too.
 */
#include "avx512.h"

/* superblocks the packs prefetch ahead (-DPANEL_PF=N builds another for
   picolm-bench --micro to compare) */
#ifndef PANEL_PF
#define PANEL_PF 4
#endif

/* 16x16 dword transpose: in r[row] (dword k = quants 4k..4k+3 of a 64-quant
   group), out r[k] (dword row).  Two unpack stages, then 128-bit lanes. */
AI void tr16x16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    __m512i u[16]; /* u[4i + j], lane L: column 4L + j, rows 4i..4i+3 */
    for (int i = 0; i < 4; i++) {
        u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int j = 0; j < 4; j++) {
        const __m512i a = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44), b = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
        const __m512i c = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE), d = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
        r[j] = _mm512_shuffle_i32x4(a, b, 0x88);
        r[4 + j] = _mm512_shuffle_i32x4(a, b, 0xDD);
        r[8 + j] = _mm512_shuffle_i32x4(c, d, 0x88);
        r[12 + j] = _mm512_shuffle_i32x4(c, d, 0xDD);
    }
}


/* 16x16 byte transpose: in v[row], out v[byte j] (row r in byte r) */
AI void tr16x16_u8(__m128i v[16]) {
    __m128i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[i] = _mm_unpacklo_epi8(v[2 * i], v[2 * i + 1]);     /* bytes 0..7 of rows 2i, 2i+1 */
        t[i + 8] = _mm_unpackhi_epi8(v[2 * i], v[2 * i + 1]); /* bytes 8..15 */
    }
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++) { /* u[4q + i]: bytes 4q..4q+3 of rows 4i..4i+3 */
            u[8 * h + i] = _mm_unpacklo_epi16(t[8 * h + 2 * i], t[8 * h + 2 * i + 1]);
            u[8 * h + 4 + i] = _mm_unpackhi_epi16(t[8 * h + 2 * i], t[8 * h + 2 * i + 1]);
        }
    for (int q = 0; q < 4; q++) {
        const __m128i a0 = _mm_unpacklo_epi32(u[4 * q], u[4 * q + 1]), a1 = _mm_unpackhi_epi32(u[4 * q], u[4 * q + 1]);
        const __m128i b0 = _mm_unpacklo_epi32(u[4 * q + 2], u[4 * q + 3]), b1 = _mm_unpackhi_epi32(u[4 * q + 2], u[4 * q + 3]);
        v[4 * q] = _mm_unpacklo_epi64(a0, b0);
        v[4 * q + 1] = _mm_unpackhi_epi64(a0, b0);
        v[4 * q + 2] = _mm_unpacklo_epi64(a1, b1);
        v[4 * q + 3] = _mm_unpackhi_epi64(a1, b1);
    }
}

/* The scales as vectors (a byte transpose of the 16 rows' unpacked scales
   and mins, one gather for d and dmin), not as scalar stores: the panel's
   vector loads of them would wait for the stores, and the scalar work kept
   few rows' weight loads in flight at once (docs/perf.md). */
AI void pack_q4_K(panel *P, const void *x0, size_t ws, int nrows, int64_t i, const int R) {
    __m128i sm[16];
    for (int r = 0; r < 16; r++) sm[r] = r < nrows ? k4_sm8(k4_blk((const char *)x0 + r * ws, i, R), R) : _mm_setzero_si128();
    tr16x16_u8(sm); /* sm[s]: scale s of the 16 rows, sm[8 + s]: min s */
    for (int s = 0; s < 8; s++) _mm512_store_si512((void *)P->sc[s], _mm512_cvtepu8_epi32(sm[s]));
    for (int t = 0; t < 4; t++)
        _mm512_store_si512((void *)P->mp[t], _mm512_or_si512(_mm512_cvtepu8_epi32(sm[8 + 2 * t]),
                                                             _mm512_slli_epi32(_mm512_cvtepu8_epi32(sm[9 + 2 * t]), 16)));
    /* (d, dmin) of each row: the first dword of both layouts */
    const __m512i vidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32((int)ws));
    const __m512i dd = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), (__mmask16)((1u << nrows) - 1), vidx, k4_blk(x0, i, R), 1);
    _mm512_store_ps(P->d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd)));
    _mm512_store_ps(P->dmin, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16))));
    for (int g = 0; g < 4; g++) {
        __m512i v[16];
        for (int r = 0; r < 16; r++)
            v[r] = r < nrows ? q4_K_group(k4_qs(k4_blk((const char *)x0 + r * ws, i, R), R), g) : _mm512_setzero_si512();
        tr16x16(v);
        for (int k = 0; k < 16; k++) _mm512_store_si512((void *)P->q[16 * g + k], v[k]);
    }
}

/* Q6_K group g (elements 64g..64g+63) as u8 0..63 */
AI __m512i q6_K_group(const block_q6_K *x, int g) {
    const int h = g >> 1;
    const long long w2 = 0x0002000200020002ll, w4 = 0x0004000400040004ll;
    const __m512i m4 = _mm512_set1_epi8(0xF), m30 = _mm512_set1_epi8(0x30);
    const __m512i L = _mm512_loadu_si512((const void *)(x->ql + 64 * h));
    const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * h)));
    if (!(g & 1)) {
        const __m512i sh = _mm512_set_epi64(w2, w2, w2, w2, w4, w4, w4, w4);
        return _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_and_si512(_mm512_sllv_epi16(H, sh), m30));
    }
    const __m512i sh = _mm512_set_epi64(w2, w2, w2, w2, 0, 0, 0, 0);
    return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4), _mm512_and_si512(_mm512_srlv_epi16(H, sh), m30));
}

/* as pack_q4_K: the 16 rows' scales by a byte transpose, d by a gather */
static void pack_q6_K(panel *P, const block_q6_K *x0, size_t ws, int nrows, int64_t i) {
    __m128i sc[16];
    for (int r = 0; r < 16; r++)
        sc[r] = r < nrows ? _mm_loadu_si128((const __m128i *)((const block_q6_K *)((const char *)x0 + r * ws) + i)->scales) : _mm_setzero_si128();
    tr16x16_u8(sc);
    for (int s = 0; s < 16; s++) _mm512_store_si512((void *)P->sc[s], _mm512_cvtepi8_epi32(sc[s]));
    for (int t = 0; t < 8; t++) /* int16 pairs (scale 2t, scale 2t + 1) */
        _mm512_store_si512((void *)P->mp[t], _mm512_or_si512(_mm512_and_si512(_mm512_cvtepi8_epi32(sc[2 * t]), _mm512_set1_epi32(0xFFFF)),
                                                             _mm512_slli_epi32(_mm512_cvtepi8_epi32(sc[2 * t + 1]), 16)));
    /* d: the high half of the dword that ends the block (scales 14-15, d) */
    const __m512i vidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32((int)ws));
    const __m512i dw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), (__mmask16)((1u << nrows) - 1), vidx,
                                                   (const char *)(x0 + i) + offsetof(block_q6_K, d) - 2, 1);
    _mm512_store_ps(P->d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dw, 16))));
    for (int g = 0; g < 4; g++) {
        __m512i v[16];
        for (int r = 0; r < 16; r++)
            v[r] = r < nrows ? q6_K_group((const block_q6_K *)((const char *)x0 + r * ws) + i, g) : _mm512_setzero_si512();
        tr16x16(v);
        for (int k = 0; k < 16; k++) _mm512_store_si512((void *)P->q[16 * g + k], v[k]);
    }
}

/* acc[c] += the 16 rows' dot products over nsb panels, activation columns y[c] */
AI void panel_q4_K_cols(const panel *P, int nsb, const block_q8_K *const *y, __m512 *acc, const int NC) {
    for (int b = 0; b < nsb; b++) {
        const panel *p = P + b;
        __m512i S[PANEL_NC];
        _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++) S[c] = _mm512_setzero_si512();
        for (int s = 0; s < 8; s++) {
            __m512i ai[PANEL_NC];
            _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++) ai[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                const __m512i w = _mm512_load_si512((const void *)p->q[8 * s + k]);
                _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++) ai[c] = _mm512_dpbusd_epi32(ai[c], w, bcast32(y[c][b].qs + 32 * s + 4 * k));
            }
            const __m512i sc = _mm512_load_si512((const void *)p->sc[s]);
            _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++) S[c] = _mm512_add_epi32(S[c], _mm512_mullo_epi32(ai[c], sc));
        }
        const __m512 D = _mm512_load_ps(p->d), DM = _mm512_load_ps(p->dmin);
        _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++) {
            /* sub-block sums of the activations, as int16 pairs (s 2t, 2t+1) */
            const __m256i bs = _mm256_loadu_si256((const __m256i *)y[c][b].bsums);
            int32_t pr[8];
            _mm256_storeu_si256((__m256i *)pr, _mm256_hadd_epi16(bs, bs));
            __m512i mi = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_load_si512((const void *)p->mp[0]), _mm512_set1_epi32(pr[0]));
            mi = _mm512_dpwssd_epi32(mi, _mm512_load_si512((const void *)p->mp[1]), _mm512_set1_epi32(pr[1]));
            mi = _mm512_dpwssd_epi32(mi, _mm512_load_si512((const void *)p->mp[2]), _mm512_set1_epi32(pr[4]));
            mi = _mm512_dpwssd_epi32(mi, _mm512_load_si512((const void *)p->mp[3]), _mm512_set1_epi32(pr[5]));
            /* the row kernel's float steps, per row lane (bit-identical results) */
            const __m512 yd = _mm512_set1_ps(y[c][b].d);
            acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(D, yd), _mm512_cvtepi32_ps(S[c]), acc[c]);
            acc[c] = _mm512_fmadd_ps(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(DM, yd)), _mm512_cvtepi32_ps(mi), acc[c]);
        }
    }
}

AI void panel_q6_K_cols(const panel *P, int nsb, const block_q8_K *const *y, __m512 *acc, const int NC) {
    for (int b = 0; b < nsb; b++) {
        const panel *p = P + b;
        __m512i S[PANEL_NC];
        _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++) S[c] = _mm512_setzero_si512();
        for (int s = 0; s < 16; s++) {
            __m512i ai[PANEL_NC];
            _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++) ai[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m512i w = _mm512_load_si512((const void *)p->q[4 * s + k]);
                _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++) ai[c] = _mm512_dpbusd_epi32(ai[c], w, bcast32(y[c][b].qs + 16 * s + 4 * k));
            }
            const __m512i sc = _mm512_load_si512((const void *)p->sc[s]);
            _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++) S[c] = _mm512_add_epi32(S[c], _mm512_mullo_epi32(ai[c], sc));
        }
        const __m512 D = _mm512_load_ps(p->d);
        _Pragma("GCC unroll 8") for (int c = 0; c < NC; c++) {
            /* the -32 offset: 32 * sum_s scale_s * bsum_s, bsums already int16 pairs */
            __m512i oi = _mm512_setzero_si512();
            for (int t = 0; t < 8; t++) oi = _mm512_dpwssd_epi32(oi, _mm512_load_si512((const void *)p->mp[t]), bcast32(y[c][b].bsums + 2 * t));
            const __m512i tot = _mm512_sub_epi32(S[c], _mm512_slli_epi32(oi, 5));
            acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(D, _mm512_set1_ps(y[c][b].d)), _mm512_cvtepi32_ps(tot), acc[c]);
        }
    }
}

/* next_rows: rows of the following group (0 = none), prefetched during the
   last chunk.  streams: the rows' separate streams of bsz bytes per
   superblock, prefetched ahead (nr for plain rows; 1 for an interleaved
   group, its superblocks being one contiguous stream of bsz-byte blocks). */
void panel_gemm(int64_t n, int nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds,
                       size_t bsz, int streams, int next_rows, panel_pack_fn pack, const panel_cols_fn *cols) {
    panel P[PANEL_SB] __attribute__((aligned(64)));
    const int64_t nb = n / QK_K;
    const __mmask16 m = (__mmask16)((1u << nr) - 1);
    for (int64_t i0 = 0; i0 < nb; i0 += PANEL_SB) {
        const int nsb = (int)(nb - i0 < PANEL_SB ? nb - i0 : PANEL_SB);
        /* the next chunk (or the next group's first), a superblock per
           pack: a whole chunk's lines at once are more misses than the
           core keeps in flight, and the rest are dropped */
        for (int b = 0; b < nsb; b++) {
            const int64_t ib = i0 + b + PANEL_PF;
            if (ib < nb) prefetch_rows(w, ws, streams, (size_t)ib * bsz, (size_t)(ib + 1) * bsz);
            else if (next_rows && ib - nb < nb) prefetch_rows((const char *)w + PANEL_ROWS * ws, ws, next_rows, (size_t)(ib - nb) * bsz, (size_t)(ib - nb + 1) * bsz);
            pack(&P[b], w, ws, nr, i0 + b);
        }
        for (int64_t c = 0; c < nc; c += PANEL_NC) {
            const int k = (int)(nc - c < PANEL_NC ? nc - c : PANEL_NC);
            const block_q8_K *y[PANEL_NC];
            __m512 acc[PANEL_NC];
            for (int j = 0; j < k; j++) {
                y[j] = (const block_q8_K *)((const char *)a + (c + j) * as) + i0;
                acc[j] = i0 ? _mm512_maskz_loadu_ps(m, dst + (c + j) * ds) : _mm512_setzero_ps();
            }
            cols[k - 1](P, nsb, y, acc);
            for (int j = 0; j < k; j++) _mm512_mask_storeu_ps(dst + (c + j) * ds, m, acc[j]);
        }
    }
}

#define PANEL_COLS_FN(name, k) \
    static void name##_c##k(const panel *P, int nsb, const block_q8_K *const *y, __m512 *acc) { name(P, nsb, y, acc, k); }
#define PANEL_COLS(name)                                                                                             \
    PANEL_COLS_FN(name, 1) PANEL_COLS_FN(name, 2) PANEL_COLS_FN(name, 3) PANEL_COLS_FN(name, 4)                      \
    PANEL_COLS_FN(name, 5) PANEL_COLS_FN(name, 6) PANEL_COLS_FN(name, 7) PANEL_COLS_FN(name, 8)                      \
    const panel_cols_fn name##_tab[PANEL_NC] = { name##_c1, name##_c2, name##_c3, name##_c4,                        \
                                                 name##_c5, name##_c6, name##_c7, name##_c8 };
PANEL_COLS(panel_q4_K_cols)
PANEL_COLS(panel_q6_K_cols)

/* the plain rows' gemm: groups of 16 rows (the last one ragged) */
AI void panels_rows(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds,
                    size_t bsz, panel_pack_fn pack, const panel_cols_fn *cols) {
    prefetch_rows(w, ws, nr < PANEL_ROWS ? (int)nr : PANEL_ROWS, 0, (size_t)(n / QK_K < PANEL_SB ? n / QK_K : PANEL_SB) * bsz);
    for (int64_t r = 0; r < nr; r += PANEL_ROWS) {
        const int k = (int)(nr - r < PANEL_ROWS ? nr - r : PANEL_ROWS);
        const int64_t rn = nr - r - PANEL_ROWS;
        panel_gemm(n, k, nc, (const char *)w + r * ws, ws, a, as, dst + r, ds, bsz, k, rn <= 0 ? 0 : rn < PANEL_ROWS ? (int)rn : PANEL_ROWS,
                   pack, cols);
    }
}
static void pack_q4_K_v(panel *P, const void *x0, size_t ws, int nrows, int64_t i) { pack_q4_K(P, x0, ws, nrows, i, 0); }
static void pack_q4_K_r_v(panel *P, const void *x0, size_t ws, int nrows, int64_t i) { pack_q4_K(P, x0, ws, nrows, i, 1); }
static void pack_q6_K_v(panel *P, const void *x0, size_t ws, int nrows, int64_t i) { pack_q6_K(P, x0, ws, nrows, i); }
void panels_q4_K(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds, int R) {
    panels_rows(n, nr, nc, w, ws, a, as, dst, ds, K4_BSZ(R), R ? pack_q4_K_r_v : pack_q4_K_v, panel_q4_K_cols_tab);
}
void panels_q6_K(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds) {
    panels_rows(n, nr, nc, w, ws, a, as, dst, ds, sizeof(block_q6_K), pack_q6_K_v, panel_q6_K_cols_tab);
}
