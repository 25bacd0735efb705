/*
 * The avx512 level's Q4_K, Q4_K_R and Q6_K kernels (against Q8_K): the
 * decode row kernels (4 rows x 1-4 columns reduced together, from 4
 * slices), and the gemm's crossover from them to the 16-row panels
 * (panels.c) at the tuning record's column counts.  Both paths end in the
 * panels' float steps (one fma per exact integer sum per row and
 * superblock), so decode, vec_dot, small batches and prefill give the
 * same bits.
 */
#include "avx512.h"

/* mins byte k -> int16 pairs (m0 m0 m1 m1 ...), to madd against the 16 bsums */
static const uint8_t k4_mins_ctrl[16] __attribute__((aligned(16))) = { 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15 };

/* ---- decode: 4 weight rows x NC activation columns ----------------------
   The activation superblocks are loaded once for 4 rows; the rows come
   from 4 separate slices (see dec_rows_nc), i.e. 4 long sequential
   streams.  Integer lanes, summed exactly per row and superblock, then the
   panels' float steps (one fma per sum): decode, vec_dot, small batches and
   the prefill panels give the same bits.
   DEC_PF: the software prefetch distance per row stream, in bytes (0:
   none; -DDEC_PF=N builds another for picolm-bench --micro to compare).
   Decoding from the file mapping, the 4 streams cross pages of the page
   cache, and a prefetch issued early takes each page walk off the
   critical path; where the hardware prefetcher keeps up it costs nothing
   (measurements: docs/perf.md, "Tuning constants"). */
#ifndef DEC_PF
#define DEC_PF 2048
#endif
#define DEC_NC 4 /* activation columns per pass of the row kernels */
AI void dec_prefetch(const void *p) {
    if (!DEC_PF) return;
    _mm_prefetch((const char *)p + DEC_PF, _MM_HINT_T0);
    _mm_prefetch((const char *)p + DEC_PF + 64, _MM_HINT_T0);
    _mm_prefetch((const char *)p + DEC_PF + 128, _MM_HINT_T0);
}

/* The products: vpdpbusd sums 4 u8 x s8 products per dword lane, whose
   magnitude stays below 2^15 (4 x 63 x 128 at most, Q6_K), so two such
   vectors pack exactly into int16 words (vpackssdw, port 5), and one
   vpdpwssd applies the sub-block scales to both: 3 port-0 multiplies per
   128 products instead of 4 (vpmaddubsw + vpdpwssd twice).  The scale
   words follow vpackssdw's order: per 128-bit lane 4 words of the first
   vector, then 4 of the second. */
#define W4(a) 2 * (a), 2 * (a) + 1, 2 * (a), 2 * (a) + 1, 2 * (a), 2 * (a) + 1, 2 * (a), 2 * (a) + 1
#define LN(a, b) W4(a), W4(b)
/* Q4_K, 32-byte groups 2p and 2p + 1 (sub-blocks 4p, 4p + 1 and 4p + 2, 4p + 3) */
static const uint8_t k4_pk_ctrl[2][64] __attribute__((aligned(64))) = {
    { LN(0, 2), LN(0, 2), LN(1, 3), LN(1, 3) }, { LN(4, 6), LN(4, 6), LN(5, 7), LN(5, 7) },
};
/* Q6_K, a 128-element half's 8 scale words: 128-bit lane L holds sub-blocks L and L + 4 */
static const uint8_t k6_pk_ctrl[64] __attribute__((aligned(64))) = { LN(0, 4), LN(1, 5), LN(2, 6), LN(3, 7) };
#undef LN
#undef W4
/* Q6_K half h (elements 128h..128h+127) of block x as u8 0..63: w0 its
   first 64 (low nibbles of ql[64h..], qh bits 0-1 | 2-3), w1 the rest
   (high nibbles, qh bits 4-5 | 6-7); sp their 8 scale words (sc16: the
   block's 16 scales as int16) in dot_pk's order */
AI void q6_K_half(const block_q6_K *x, __m256i sc16, int h, __m512i *w0, __m512i *w1, __m512i *sp) {
    const __m512i m4 = _mm512_set1_epi8(0xF), m30 = _mm512_set1_epi8(0x30);
    /* per 256-bit half: qh bits (0,1)|(2,3) shifted up to (4,5); (4,5)|(6,7) kept|down */
    const long long w2 = 0x0002000200020002ll, w4 = 0x0004000400040004ll;
    const __m512i L = _mm512_loadu_si512((const void *)(x->ql + 64 * h));
    const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * h)));
    *w0 = _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_and_si512(_mm512_sllv_epi16(H, _mm512_set_epi64(w2, w2, w2, w2, w4, w4, w4, w4)), m30));
    *w1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4),
                          _mm512_and_si512(_mm512_srlv_epi16(H, _mm512_set_epi64(w2, w2, w2, w2, 0, 0, 0, 0)), m30));
    *sp = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16)),
                              _mm512_load_si512((const void *)k6_pk_ctrl));
}
AI __m512i dot_pk(__m512i acc, __m512i s, __m512i w0, const int8_t *y0, __m512i w1, const int8_t *y1) {
    const __m512i z = _mm512_setzero_si512();
    return _mm512_dpwssd_epi32(acc, s, _mm512_packs_epi32(_mm512_dpbusd_epi32(z, w0, _mm512_loadu_si512((const void *)y0)),
                                                         _mm512_dpbusd_epi32(z, w1, _mm512_loadu_si512((const void *)y1))));
}

/* ---- 4 rows x NC columns, reduced together ---------------------------------
   Folding each row x column's 16 integer lanes on its own cost more than the
   products at 4 columns (extracts, hadds: port 5).  Here the items (row,
   column) of one superblock are reduced as a tree: each step halves the
   lanes of two vectors' items into one vector, with one shuffle, one blend
   and one add, so 16 items take 15 steps and end in the 16 lanes of one
   vector, where their float steps run together.  The integer sums are the
   same exact ones, so are the bits. */
/* items of 16 lanes -> 8: x's in lanes 0-7, y's in 8-15 */
AI __m512i red1(__m512i x, __m512i y) { return _mm512_add_epi32(_mm512_mask_blend_epi32(0xFF00, x, y), _mm512_shuffle_i64x2(x, y, 0x4E)); }
/* items of 8 lanes (x: a, b; y: c, d) -> 4: 128-bit lanes a, c, b, d */
AI __m512i red2(__m512i x, __m512i y) {
    return _mm512_add_epi32(_mm512_mask_blend_epi64(0xCC, x, y), _mm512_permutex2var_epi64(x, _mm512_setr_epi64(2, 3, 8, 9, 6, 7, 12, 13), y));
}
/* items of 4 lanes -> 2: 128-bit lane k holds x's item k, then y's */
AI __m512i red3(__m512i x, __m512i y) { return _mm512_add_epi32(_mm512_mask_blend_epi64(0xAA, x, y), _mm512_alignr_epi8(y, x, 8)); }
/* items of 2 lanes -> 1: lane 4k + (0, 1, 2, 3) = x's first, y's first, x's second, y's second of 128-bit lane k */
AI __m512i red4(__m512i x, __m512i y) {
    return _mm512_add_epi32(_mm512_mask_blend_epi32(0xAAAA, x, y),
                            _mm512_permutex2var_epi32(x, _mm512_setr_epi32(1, 16, 3, 18, 5, 20, 7, 22, 9, 24, 11, 26, 13, 28, 15, 30), y));
}

/* which (row, column) each lane of the reduced vectors holds, per tree
   width (1, 2, 4 columns); -1: no item (its float steps are never stored) */
static const int8_t rows4_row[4][16] = {
    { 0, -1, -1, -1, 2, -1, -1, -1, 1, -1, -1, -1, 3, -1, -1, -1 },
    { 0, -1, 2, -1, 1, -1, 3, -1, 0, -1, 2, -1, 1, -1, 3, -1 },
    { 0, 2, 1, 3, 0, 2, 1, 3, 0, 2, 1, 3, 0, 2, 1, 3 },
    { 0, 0, 0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 3, 3, 3, 3 },
};
static const int8_t rows4_col[4][16] = {
    { 0, -1, -1, -1, 0, -1, -1, -1, 0, -1, -1, -1, 0, -1, -1, -1 },
    { 0, -1, 0, -1, 0, -1, 0, -1, 1, -1, 1, -1, 1, -1, 1, -1 },
    { 0, 0, 0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 3, 3, 3, 3 },
    { 0, 2, 1, 3, 0, 2, 1, 3, 0, 2, 1, 3, 0, 2, 1, 3 },
};

AI int rows4_w(const int NC) { return NC == 3 ? 4 : NC; } /* tree width: 3 columns as 4, the fourth zero */
AI int rows4_t(const int NC) { return NC >= 3 ? 2 : NC - 1; } /* its row of rows4_row / rows4_col */
/* the lane maps as permutation indices (no item: row 0, column 0) */
AI void rows4_maps(const int NC, __m512i *ir, __m512i *ic) {
    const int T = rows4_t(NC);
    int32_t a[16], b[16];
    for (int j = 0; j < 16; j++) a[j] = rows4_row[T][j] < 0 ? 0 : rows4_row[T][j], b[j] = rows4_col[T][j] < 0 ? 0 : rows4_col[T][j];
    *ir = _mm512_loadu_si512((const void *)a);
    *ic = _mm512_loadu_si512((const void *)b);
}
/* superblock i's 16 bsums of the columns by pairs (c0 | c1), (c2 | c3); one column: twice */
AI void rows4_bsums(const block_q8_K *const *y, int64_t i, const int NC, __m512i *p0, __m512i *p1) {
    const int W = rows4_w(NC);
    const __m256i b0 = _mm256_loadu_si256((const __m256i *)y[0][i].bsums);
    const __m256i b1 = W == 1 ? b0 : _mm256_loadu_si256((const __m256i *)y[1][i].bsums);
    *p0 = _mm512_inserti64x4(_mm512_castsi256_si512(b0), b1, 1);
    *p1 = _mm512_setzero_si512();
    if (W == 4)
        *p1 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y[2][i].bsums)),
                                 NC == 4 ? _mm256_loadu_si256((const __m256i *)y[3][i].bsums) : _mm256_setzero_si256(), 1);
}
/* each lane's column's y.d */
AI __m512 rows4_yd(const block_q8_K *const *y, int64_t i, const int NC, __m512i ic) {
    /* (set, not a float[4] through memory: 4 stores into one load stall) */
    const __m128 yd = _mm_setr_ps(y[0][i].d, NC > 1 ? y[1][i].d : 0.0f, NC > 2 ? y[2][i].d : 0.0f, NC > 3 ? y[3][i].d : 0.0f);
    return _mm512_permutexvar_ps(ic, _mm512_castps128_ps512(yd));
}
AI void rows4_store_t(const int T, __m512 acc, const int NC, float *out, size_t os) {
    if (T == 3 && NC == 4 && os == 4) { /* dec_rows_nc's 4 x 4 block: out[4c + r] is lane 4 (0 2 1 3)[r] + (0 2 1 3)[c] */
        _mm512_storeu_ps(out, _mm512_permutexvar_ps(_mm512_setr_epi32(0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15), acc));
        return;
    }
    float o[16];
    _mm512_storeu_ps(o, acc);
    for (int j = 0; j < 16; j++)
        if (rows4_row[T][j] >= 0 && rows4_col[T][j] < NC) out[rows4_col[T][j] * os + rows4_row[T][j]] = o[j];
}
AI void rows4_store(__m512 acc, const int NC, float *out, size_t os) { rows4_store_t(rows4_t(NC), acc, NC, out, os); }

/* one row's items: its column sums s[c] into the scale tree (vs), and the
   second tree's (Q4_K mins, Q6_K offsets: the int16 vector w16 against the
   columns' bsums) into vw; one column: w16 kept (w1) for a pair of rows */
AI void rows4_row_items(const __m512i *s, __m256i w16, __m512i bsp0, __m512i bsp1, const int W, __m512i *vs, __m512i *vw, __m256i *w1) {
    if (W == 1) {
        *vs = s[0];
        *w1 = w16;
        return;
    }
    const __m512i b = _mm512_broadcast_i64x4(w16);
    if (W == 2) {
        *vs = red1(s[0], s[1]);
        *vw = _mm512_madd_epi16(b, bsp0);
    } else {
        *vs = red2(red1(s[0], s[1]), red1(s[2], s[3]));
        *vw = red2(_mm512_madd_epi16(b, bsp0), _mm512_madd_epi16(b, bsp1));
    }
}
/* the 4 rows' items reduced: S (scale sums) and M (second sums) in the
   lanes of rows4_row / rows4_col */
AI void rows4_reduce(const __m512i *VS, const __m512i *VW, const __m256i *w1, __m512i bsp0, const int W, __m512i *S, __m512i *M) {
    if (W == 1) {
        const __m512i m01 = _mm512_madd_epi16(_mm512_inserti64x4(_mm512_castsi256_si512(w1[0]), w1[1], 1), bsp0);
        const __m512i m23 = _mm512_madd_epi16(_mm512_inserti64x4(_mm512_castsi256_si512(w1[2]), w1[3], 1), bsp0);
        const __m512i X = red3(red2(red1(VS[0], VS[1]), red1(VS[2], VS[3])), red2(m01, m23));
        *S = _mm512_add_epi32(X, _mm512_shuffle_epi32(X, (_MM_PERM_ENUM)0xB1)); /* S S M M per 128-bit lane */
        *M = _mm512_shuffle_epi32(*S, (_MM_PERM_ENUM)0x4E);
    } else if (W == 2) {
        *S = red4(red3(red2(VS[0], VS[1]), red2(VS[2], VS[3])), red3(red2(VW[0], VW[1]), red2(VW[2], VW[3])));
        *M = _mm512_shuffle_epi32(*S, (_MM_PERM_ENUM)0xB1);
    } else {
        *S = red4(red3(VS[0], VS[1]), red3(VS[2], VS[3]));
        *M = red4(red3(VW[0], VW[1]), red3(VW[2], VW[3]));
    }
}

/* 4 rows x NC (<= DEC_NC) activation columns y[c], out[c * os + r], row r
   at vx + r * ws: each row's weights are unpacked once for the NC columns,
   and each column gets exactly the integer sums and float steps it would
   get alone, so every batch size gives the same bits.  Weights by 32-byte
   groups (q4_K_group: low nibbles = sub-block 2g, high = 2g + 1), so that
   each column's activations are one contiguous 64-byte operand. */
AI void q4_K_rows4_t(int64_t n, const void *vx, size_t ws, const block_q8_K *const *y, float *out, size_t os, const int NC, const int R) {
    const int64_t nb = n / QK_K;
    const int W = rows4_w(NC);
    __m512i ir, ic;
    rows4_maps(NC, &ir, &ic);
    const __m512i id = _mm512_add_epi32(ir, ir), idm = _mm512_add_epi32(id, _mm512_set1_epi32(1));
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m512i bsp0, bsp1;
        rows4_bsums(y, i, NC, &bsp0, &bsp1);
        __m512i VS[4], VM[4];
        __m256i mins1[4];
        uint32_t ddw[4];
        for (int r = 0; r < 4; r++) {
            const void *x = k4_blk((const char *)vx + r * ws, i, R);
            dec_prefetch(x);
            const __m128i sm8 = k4_sm8(x, R);
            const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(sm8));
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm8, _mm_load_si128((const __m128i *)k4_mins_ctrl)));
            const uint8_t *qs = k4_qs(x, R);
            __m512i s[4] = { _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512() };
#pragma GCC unroll 2
            for (int p = 0; p < 2; p++) {
                const __m512i v0 = q4_K_group(qs, 2 * p), v1 = q4_K_group(qs, 2 * p + 1);
                const __m512i sp = _mm512_shuffle_epi8(sc, _mm512_load_si512((const void *)k4_pk_ctrl[p]));
                X86_UNROLL for (int c = 0; c < NC; c++) s[c] = dot_pk(s[c], sp, v0, y[c][i].qs + 128 * p, v1, y[c][i].qs + 128 * p + 64);
            }
            rows4_row_items(s, mins, bsp0, bsp1, W, &VS[r], &VM[r], &mins1[r]);
            memcpy(&ddw[r], x, 4); /* d, dmin: fp16 */
        }
        __m512i S, M;
        rows4_reduce(VS, VM, mins1, bsp0, W, &S, &M);
        /* the panels' float steps per lane (panel_q4_K_cols): d * y.d, dmin * y.d */
        const __m512 dd = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)ddw))); /* d0 m0 d1 m1 ... */
        const __m512 Y = rows4_yd(y, i, NC, ic);
        acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_permutexvar_ps(id, dd), Y), _mm512_cvtepi32_ps(S), acc);
        acc = _mm512_fnmadd_ps(_mm512_mul_ps(_mm512_permutexvar_ps(idm, dd), Y), _mm512_cvtepi32_ps(M), acc);
    }
    rows4_store(acc, NC, out, os);
}

/* ---- 4 rows x 3-4 columns: the columns paired by the products' pack ------
   vpackssdw can pair two columns' vpdpbusd sums (one weight vector) as well
   as two weight vectors of one column: then the scale step (vpdpwssd) also
   adds within each column, and a row's two pair vectors are 4 items of 4
   lanes after one tree step; 7 steps for the 16 items instead of 15.  The
   4 rows' scales and mins are unpacked together (one 128-bit lane each):
   the scale words of a group come by one vpermw, and the mins against the
   columns' bsums (sub-block pairs) are a 4x4x8 product of 4 vpdpwssd in the
   final lanes, with no tree.  Same integer sums, same float steps, so the
   same bits as q4_K_rows4_t; 4 rows only.  Lanes (rows4_row / rows4_col, T = 3): 128-bit
   lane L is row (0 2 1 3)[L], dword k column (0 2 1 3)[k]. */
/* vpshufb controls on a row's 8 scale words: sub-block 2g's word in 128-bit
   lanes 0-1, 2g + 1's in lanes 2-3 (one vpermw per group instead was a
   quarter slower: a p5 pair of uops) */
#define SG8(w) 2 * (w), 2 * (w) + 1, 2 * (w), 2 * (w) + 1, 2 * (w), 2 * (w) + 1, 2 * (w), 2 * (w) + 1
#define SG(g) SG8(2 * (g)), SG8(2 * (g)), SG8(2 * (g)), SG8(2 * (g)), SG8(2 * (g) + 1), SG8(2 * (g) + 1), SG8(2 * (g) + 1), SG8(2 * (g) + 1)
static const uint8_t k4c_sg[4][64] __attribute__((aligned(64))) = { { SG(0) }, { SG(1) }, { SG(2) }, { SG(3) } };
#undef SG
#undef SG8
/* the 4x4x8 mins product: lane j takes dword k (mins 2k, 2k + 1) of its
   row's mins (rows by 128-bit lane) and of its column's sub-block sums
   (after vpackssdw of (c0 | c1) and (c2 | c3): dword 4 (2 (c & 1) + k / 2)
   + 2 (c / 2) + k % 2) */
#define MA(k) 0 + k, 0 + k, 0 + k, 0 + k, 8 + k, 8 + k, 8 + k, 8 + k, 4 + k, 4 + k, 4 + k, 4 + k, 12 + k, 12 + k, 12 + k, 12 + k
#define BI(c, k) (4 * (2 * ((c) & 1) + (k) / 2) + 2 * ((c) / 2) + (k) % 2)
#define MB(k) BI(0, k), BI(2, k), BI(1, k), BI(3, k)
static const int32_t k4c_ma[4][16] __attribute__((aligned(64))) = { { MA(0) }, { MA(1) }, { MA(2) }, { MA(3) } };
static const int32_t k4c_mb[4][16] __attribute__((aligned(64))) = { { MB(0), MB(0), MB(0), MB(0) }, { MB(1), MB(1), MB(1), MB(1) },
                                                                    { MB(2), MB(2), MB(2), MB(2) }, { MB(3), MB(3), MB(3), MB(3) } };
#undef MA
#undef MB
#undef BI
/* k4_unpack_sm on 4 rows, one per 128-bit lane, whose bytes 4-15 are the
   12 packed bytes (a block's first 16: d and dmin lead) */
AI __m512i k4_unpack_sm_x4(__m512i b) {
    const __m512i lo = _mm512_and_si512(_mm512_shuffle_epi8(b, _mm512_broadcast_i32x4(_mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, -1, -1, -1, -1))),
                                        _mm512_broadcast_i32x4(_mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)));
    const __m512i lo2 = _mm512_shuffle_epi8(_mm512_and_si512(_mm512_srli_epi16(b, 4), _mm512_set1_epi8(0x0F)),
                                            _mm512_broadcast_i32x4(_mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 12, 13, 14, 15)));
    const __m512i hi = _mm512_shuffle_epi8(_mm512_and_si512(_mm512_srli_epi16(b, 2), _mm512_set1_epi8(0x30)),
                                           _mm512_broadcast_i32x4(_mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11)));
    return _mm512_ternarylogic_epi32(lo, lo2, hi, 0xFE);
}
/* the first 16 bytes of 4 blocks (at byte offset o), one per 128-bit lane */
AI __m512i ld4x16(const void *const *x, size_t o) {
#define LD16(r) _mm_loadu_si128((const __m128i *)((const char *)x[r] + o))
    /* (written out: the lane must be a constant, also at -O1) */
    return _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(LD16(0)), LD16(1), 1), LD16(2), 2), LD16(3), 3);
#undef LD16
}
AI void q4_K_rows4c_t(int64_t n, const void *vx, size_t ws, const block_q8_K *const *y, float *out, size_t os, const int NC, const int R) {
    const int64_t nb = n / QK_K;
    /* the lanes' columns, and rows x 2 (d, dmin pairs) */
    const __m512i ic = _mm512_setr_epi32(0, 2, 1, 3, 0, 2, 1, 3, 0, 2, 1, 3, 0, 2, 1, 3);
    const __m512i id = _mm512_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4, 2, 2, 2, 2, 6, 6, 6, 6), idm = _mm512_add_epi32(id, _mm512_set1_epi32(1));
    const __m512i z = _mm512_setzero_si512();
    const __m512i lane0 = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i lane4 = _mm512_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const void *x[4];
        for (int r = 0; r < 4; r++) x[r] = k4_blk((const char *)vx + r * ws, i, R);
        /* the 4 rows' d, dmin and scales and mins (Q4_K: the 12 packed bytes,
           read as 16 with d and dmin; Q4_K_R: unpacked), row r in 128-bit lane r */
        const __m512i head = ld4x16(x, 0);
        const __m512 dd = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi32(lane0, head)))); /* d0 m0 d1 m1 ... */
        const __m512i sm = R ? ld4x16(x, offsetof(block_q4_K_r, sc)) : k4_unpack_sm_x4(head);
        const __m512i sc = _mm512_unpacklo_epi8(sm, z), mn = _mm512_unpackhi_epi8(sm, z);
        const int8_t *q0 = y[0][i].qs, *q1 = y[1][i].qs, *q2 = y[2][i].qs, *q3 = NC == 4 ? y[3][i].qs : NULL;
        __m512i V[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            dec_prefetch(x[r]);
            const uint8_t *qs = k4_qs(x[r], R);
            const __m512i scr = _mm512_permutexvar_epi32(_mm512_add_epi32(_mm512_set1_epi32(4 * r), lane4), sc); /* row r's, in every 128-bit lane */
            __m512i a01 = z, a23 = z;
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {
                const __m512i v = q4_K_group(qs, g), sg = _mm512_shuffle_epi8(scr, _mm512_load_si512((const void *)k4c_sg[g]));
                a01 = _mm512_dpwssd_epi32(a01, sg, _mm512_packs_epi32(_mm512_dpbusd_epi32(z, v, _mm512_loadu_si512((const void *)(q0 + 64 * g))),
                                                                      _mm512_dpbusd_epi32(z, v, _mm512_loadu_si512((const void *)(q1 + 64 * g)))));
                a23 = _mm512_dpwssd_epi32(a23, sg, _mm512_packs_epi32(_mm512_dpbusd_epi32(z, v, _mm512_loadu_si512((const void *)(q2 + 64 * g))),
                                                                      NC == 4 ? _mm512_dpbusd_epi32(z, v, _mm512_loadu_si512((const void *)(q3 + 64 * g))) : z));
            }
            V[r] = red4(a01, a23); /* per 128-bit lane: columns 0 2 1 3 */
        }
        const __m512i S = red2(red1(V[0], V[1]), red1(V[2], V[3]));
        /* the columns' sub-block sums (pairs of bsums) as words */
        __m512i bsp0, bsp1;
        rows4_bsums(y, i, NC, &bsp0, &bsp1);
        const __m512i one = _mm512_set1_epi16(1), bp = _mm512_packs_epi32(_mm512_madd_epi16(bsp0, one), _mm512_madd_epi16(bsp1, one));
        __m512i M = z;
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            M = _mm512_dpwssd_epi32(M, _mm512_permutexvar_epi32(_mm512_load_si512((const void *)k4c_ma[k]), mn),
                                    _mm512_permutexvar_epi32(_mm512_load_si512((const void *)k4c_mb[k]), bp));
        const __m512 Y = rows4_yd(y, i, NC, ic);
        acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_permutexvar_ps(id, dd), Y), _mm512_cvtepi32_ps(S), acc);
        acc = _mm512_fnmadd_ps(_mm512_mul_ps(_mm512_permutexvar_ps(idm, dd), Y), _mm512_cvtepi32_ps(M), acc);
    }
    rows4_store_t(3, acc, NC, out, os);
}

/* as q4_K_rows4_t for Q6_K: the -32 offset's sums (scales x bsums) reduced
   as a second tree and taken off once per superblock, 16 items at a time */
AI void q6_K_rows4_t(int64_t n, const void *vx, size_t ws, const block_q8_K *const *y, float *out, size_t os, const int NC) {
    const int64_t nb = n / QK_K;
    const int W = rows4_w(NC);
    __m512i ir, ic;
    rows4_maps(NC, &ir, &ic);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m512i bsp0, bsp1;
        rows4_bsums(y, i, NC, &bsp0, &bsp1);
        __m512i VS[4], VO[4];
        __m256i sc1[4];
        uint16_t dh[8] = { 0 };
        for (int r = 0; r < 4; r++) {
            const block_q6_K *x = (const block_q6_K *)((const char *)vx + r * ws) + i;
            dec_prefetch(x);
            const __m128i sc8 = _mm_loadu_si128((const __m128i *)x->scales);
            const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
            __m512i s[4] = { _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512() };
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m512i w0, w1, sp;
                q6_K_half(x, sc16, h, &w0, &w1, &sp);
                X86_UNROLL for (int c = 0; c < NC; c++) s[c] = dot_pk(s[c], sp, w0, y[c][i].qs + 128 * h, w1, y[c][i].qs + 128 * h + 64);
            }
            rows4_row_items(s, sc16, bsp0, bsp1, W, &VS[r], &VO[r], &sc1[r]);
            memcpy(&dh[r], &x->d, 2);
        }
        /* the sums less 32 x the offsets' */
        __m512i S, O;
        rows4_reduce(VS, VO, sc1, bsp0, W, &S, &O);
        const __m512i tot = _mm512_sub_epi32(S, _mm512_slli_epi32(O, 5));
        /* the panel's step (panel_q6_K_cols): one fma on the exact sum */
        const __m512 D = _mm512_permutexvar_ps(ir, _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh))));
        acc = _mm512_fmadd_ps(_mm512_mul_ps(D, rows4_yd(y, i, NC, ic)), _mm512_cvtepi32_ps(tot), acc);
    }
    rows4_store(acc, NC, out, os);
}


/* ---- one row x NC columns ---------------------------------------------------
   vec_dot, and the last nr % 4 rows of a range: the 4-row kernels' products
   (dot_pk), exact integer sums and float steps, without their tree (which
   costs more than the products for one row). */
AI void q4_K_row_t(int64_t n, const void *vx, const block_q8_K *const *y, float *out, size_t os, const int NC, const int R) {
    const int64_t nb = n / QK_K;
    float acc[DEC_NC] = { 0, 0, 0, 0 };
    for (int64_t i = 0; i < nb; i++) {
        const void *x = k4_blk(vx, i, R);
        dec_prefetch(x);
        const __m128i sm8 = k4_sm8(x, R);
        const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(sm8));
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm8, _mm_load_si128((const __m128i *)k4_mins_ctrl)));
        const uint8_t *qs = k4_qs(x, R);
        __m512i s[DEC_NC];
        X86_UNROLL for (int c = 0; c < NC; c++) s[c] = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            const __m512i v0 = q4_K_group(qs, 2 * p), v1 = q4_K_group(qs, 2 * p + 1);
            const __m512i sp = _mm512_shuffle_epi8(sc, _mm512_load_si512((const void *)k4_pk_ctrl[p]));
            X86_UNROLL for (int c = 0; c < NC; c++) s[c] = dot_pk(s[c], sp, v0, y[c][i].qs + 128 * p, v1, y[c][i].qs + 128 * p + 64);
        }
        const float d = k4_d(x), dm = k4_dmin(x);
        X86_UNROLL for (int c = 0; c < NC; c++) {
            const int32_t S = _mm512_reduce_add_epi32(s[c]);
            const int32_t M = x86_hsum_i32(_mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)y[c][i].bsums)));
            acc[c] = fmaf(d * y[c][i].d, (float)S, acc[c]);
            acc[c] = fmaf(-(dm * y[c][i].d), (float)M, acc[c]);
        }
    }
    X86_UNROLL for (int c = 0; c < NC; c++) out[c * os] = acc[c];
}
AI void q6_K_row_t(int64_t n, const void *vx, const block_q8_K *const *y, float *out, size_t os, const int NC) {
    const block_q6_K *x = vx;
    const int64_t nb = n / QK_K;
    float acc[DEC_NC] = { 0, 0, 0, 0 };
    for (int64_t i = 0; i < nb; i++) {
        dec_prefetch(x + i);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        __m512i s[DEC_NC];
        X86_UNROLL for (int c = 0; c < NC; c++) s[c] = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i w0, w1, sp;
            q6_K_half(x + i, sc16, h, &w0, &w1, &sp);
            X86_UNROLL for (int c = 0; c < NC; c++) s[c] = dot_pk(s[c], sp, w0, y[c][i].qs + 128 * h, w1, y[c][i].qs + 128 * h + 64);
        }
        const float d = x86_h2f(x[i].d);
        X86_UNROLL for (int c = 0; c < NC; c++) {
            /* the sums less 32 x the offsets' (scales x bsums) */
            const int32_t O = x86_hsum_i32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y[c][i].bsums)));
            acc[c] = fmaf(d * y[c][i].d, (float)(_mm512_reduce_add_epi32(s[c]) - 32 * O), acc[c]);
        }
    }
    X86_UNROLL for (int c = 0; c < NC; c++) out[c * os] = acc[c];
}

/* Fewer columns than the crossover (decode, small batches): the row kernels,
   DEC_NC columns at a time, 4 rows per call taken from 4 equal contiguous
   slices of the range (rows r, r + m, r + 2m, r + 3m), so that each is one
   long sequential stream: adjacent rows would restart the hardware
   prefetcher at every group (3x slower from DRAM, docs/perf.md).  The last
   nr % 4 rows one at a time, and at one column every row where rows have
   fewer superblocks than the record's dec_slices_min_nb_*: the slices of a
   64-row claim are then short streams, each starting cold, and one stream
   of single rows was faster.  FMT 0: Q4_K, 1: Q4_K_R, 2: Q6_K. */
AI void dec_rows_nc(int64_t n, int64_t nr, const void *w, size_t ws, const block_q8_K *const *ys, float *dst, size_t ds, const int NC,
                    const int FMT) {
    const int min_nb = FMT == 2 ? pk_tuning.dec_slices_min_nb_q6_K : pk_tuning.dec_slices_min_nb_q4_K;
    const int64_t m = NC == 1 && n / QK_K < min_nb ? 0 : nr / 4;
    float o[DEC_NC * 4];
    for (int64_t r = 0; r < m; r++) {
        const char *x = (const char *)w + r * ws;
        if (FMT == 2) q6_K_rows4_t(n, x, ws * (size_t)m, ys, o, 4, NC);
        else if (NC >= 3) q4_K_rows4c_t(n, x, ws * (size_t)m, ys, o, 4, NC, FMT);
        else q4_K_rows4_t(n, x, ws * (size_t)m, ys, o, 4, NC, FMT);
        for (int c = 0; c < NC; c++)
            for (int k = 0; k < 4; k++) dst[c * ds + k * m + r] = o[c * 4 + k];
    }
    for (int64_t r = m * 4; r < nr; r++) {
        const char *x = (const char *)w + r * ws;
        if (FMT == 2) q6_K_row_t(n, x, ys, dst + r, ds, NC);
        else q4_K_row_t(n, x, ys, dst + r, ds, NC, FMT);
    }
}
AI void dec_cols(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds, const int FMT) {
    for (int64_t c0 = 0; c0 < nc; c0 += DEC_NC) {
        const int m = nc - c0 < DEC_NC ? (int)(nc - c0) : DEC_NC;
        const block_q8_K *ys[DEC_NC];
        for (int c = 0; c < m; c++) ys[c] = (const block_q8_K *)((const char *)a + (c0 + c) * as);
        float *o = dst + c0 * ds;
        if (m == 1) dec_rows_nc(n, nr, w, ws, ys, o, ds, 1, FMT);
        else if (m == 2) dec_rows_nc(n, nr, w, ws, ys, o, ds, 2, FMT);
        else if (m == 3) dec_rows_nc(n, nr, w, ws, ys, o, ds, 3, FMT);
        else dec_rows_nc(n, nr, w, ws, ys, o, ds, 4, FMT);
    }
}


/* ---- the kernels ------------------------------------------------------------ */
void avx512_vec_dot_q4_K(int64_t n, float *s, const void *x, const void *y) {
    const block_q8_K *ys[1] = {y};
    q4_K_row_t(n, x, ys, s, 0, 1, 0);
}
void avx512_vec_dot_q4_K_r(int64_t n, float *s, const void *x, const void *y) {
    const block_q8_K *ys[1] = {y};
    q4_K_row_t(n, x, ys, s, 0, 1, 1);
}
void avx512_vec_dot_q6_K(int64_t n, float *s, const void *x, const void *y) {
    const block_q8_K *ys[1] = {y};
    q6_K_row_t(n, x, ys, s, 0, 1);
}
/* gemm: the row kernels below the record's crossover, the panels from it */
void avx512_gemm_q4_K(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds) {
    if (nc < pk_tuning.panel_min_nc_q4_K) dec_cols(n, nr, nc, w, ws, a, as, dst, ds, 0);
    else panels_q4_K(n, nr, nc, w, ws, a, as, dst, ds, 0);
}
void avx512_gemm_q4_K_r(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds) {
    if (nc < pk_tuning.panel_min_nc_q4_K) dec_cols(n, nr, nc, w, ws, a, as, dst, ds, 1);
    else panels_q4_K(n, nr, nc, w, ws, a, as, dst, ds, 1);
}
void avx512_gemm_q6_K(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds) {
    if (nc < pk_tuning.panel_min_nc_q6_K) dec_cols(n, nr, nc, w, ws, a, as, dst, ds, 2);
    else panels_q6_K(n, nr, nc, w, ws, a, as, dst, ds);
}
