/*
 * The avx512 level (F/BW/VL/DQ) and its VNNI variant level: 512-bit Q4_K,
 * Q6_K and Q8_0 (the formats of a Q4_K_M model), Q4_K_R and the 16-row
 * interleaved Q4_K_R16 / Q6_K_R16, and attn_f16 on 16 lanes; everything else
 * is the avx2 level's, linked into the plugin (backends/level.h).  The
 * variant (vpdpwssd / vpdpbusd) is overlaid when the host reports
 * AVX512_VNNI; the plain kernels are still tested (the no-vnni pass of
 * tests/test_kernels.c).  The plugin nevertheless requires VNNI: see
 * plugin.c (clang emits vpdpwssd on its own under -mavx512vnni).
 */
#include "../x86/avx2.h"
#include "../x86/q5r16.h"
#include "../x86/r16.h"
#include "expf.h"

AI float x86_hsum512(__m512 v) {
    return x86_hsum_ps(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

/* ---- Q4_K x Q8_K --------------------------------------------------------- */
/* int16 word k of each 128-bit lane broadcast: lanes 0-1 take word a, 2-3 word b */
static const uint8_t k4_ctrl[4][64] __attribute__((aligned(64))) = {
#define L16(k) 2*(k), 2*(k)+1, 2*(k), 2*(k)+1, 2*(k), 2*(k)+1, 2*(k), 2*(k)+1, 2*(k), 2*(k)+1, 2*(k), 2*(k)+1, 2*(k), 2*(k)+1, 2*(k), 2*(k)+1
#define C4(a, b) { L16(a), L16(a), L16(b), L16(b) }
    C4(0, 1), C4(2, 3), C4(4, 5), C4(6, 7)
};
/* mins byte k -> int16 pairs (m0 m0 m1 m1 ...), to madd against the 16 bsums */
static const uint8_t k4_mins_ctrl[16] __attribute__((aligned(16))) = { 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15 };

/* acc + the scale madd, as two instructions: these are the kernels of the
   level without VNNI (the VNNI level's fuse them: vpdpwssd) */
AI __m512i madd_acc(__m512i acc, __m512i s, __m512i p) { return _mm512_add_epi32(acc, _mm512_madd_epi16(s, p)); }

AI void q4_K_512(int64_t n, const void *vx, const void *const *vy, float *out, const int NC, const int R) {
    const int64_t nb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0xF);
    __m512 acc[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps() };
    __m256 accm[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    for (int64_t i = 0; i < nb; i++) {
        const void *xb = k4_blk(vx, i, R);
        const uint8_t *qs = k4_qs(xb, R);
        const __m128i sm8 = k4_sm8(xb, R);
        const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(sm8));
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm8, _mm_load_si128((const __m128i *)k4_mins_ctrl)));
        const float dx = k4_d(xb), mx = k4_dmin(xb);
        __m512i sumi[4] = { _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512() };
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            /* 32 bytes -> elements 64j..64j+63: low nibbles, then high nibbles */
            __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * j)));
            v = _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xFFFF0000u, v, 4), m4);
            const __m512i s = _mm512_shuffle_epi8(sc, _mm512_load_si512((const void *)k4_ctrl[j]));
            for (int c = 0; c < NC; c++) {
                const int8_t *q8 = ((const block_q8_K *)vy[c])[i].qs + 64 * j;
                const __m512i p = _mm512_maddubs_epi16(v, _mm512_loadu_si512((const void *)q8));
                sumi[c] = madd_acc(sumi[c], s, p);
            }
        }
        for (int c = 0; c < NC; c++) {
            const block_q8_K *y = (const block_q8_K *)vy[c] + i;
            const __m256i pm = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)y->bsums));
            accm[c] = _mm256_fmadd_ps(_mm256_set1_ps(mx * y->d), _mm256_cvtepi32_ps(pm), accm[c]);
            acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(dx * y->d), _mm512_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) out[c] = x86_hsum512(acc[c]) - x86_hsum_ps(accm[c]);
}

/* ---- Q6_K x Q8_K --------------------------------------------------------- */
/* 16 int8 scales -> bytes 8L..8L+7 = scale (4t + L) for the 4 lanes of a
   64-element group t (t = 0..3 over the superblock) */
static const uint8_t k6_ctrl[4][32] __attribute__((aligned(32))) = {
#define B8(k) k, k, k, k, k, k, k, k
    { B8(0), B8(1), B8(2), B8(3) }, { B8(4), B8(5), B8(6), B8(7) },
    { B8(8), B8(9), B8(10), B8(11) }, { B8(12), B8(13), B8(14), B8(15) },
};

AI void q6_K_512(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) {
    const block_q6_K *x = vx;
    const int64_t nb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0xF), m30 = _mm512_set1_epi8(0x30);
    /* per 256-bit half: shift qh bits (0,1)|(2,3) up to (4,5), and (4,5)|(6,7) stays|down */
    const long long w2 = 0x0002000200020002ll, w4 = 0x0004000400040004ll;
    const __m512i sh_lo = _mm512_set_epi64(w2, w2, w2, w2, w4, w4, w4, w4);
    const __m512i sh_hi = _mm512_set_epi64(w2, w2, w2, w2, 0, 0, 0, 0);
    __m512 acc[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps() };
    for (int64_t i = 0; i < nb; i++) {
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m256i sc8x2 = _mm256_broadcastsi128_si256(sc8);
        const float dx = x86_h2f(x[i].d);
        __m512i sumi[4];
        {
            const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
            for (int c = 0; c < NC; c++) {
                const block_q8_K *y = (const block_q8_K *)vy[c] + i;
                const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y->bsums)), 5);
                sumi[c] = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), off));
            }
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i L = _mm512_loadu_si512((const void *)(x[i].ql + 64 * h));
            const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h)));
            __m512i w[2];
            /* elements 128h + 0..63: low nibbles of ql[64h..+64], qh bits 0-1 | 2-3 */
            w[0] = _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_and_si512(_mm512_sllv_epi16(H, sh_lo), m30));
            /* elements 128h + 64..127: high nibbles, qh bits 4-5 | 6-7 */
            w[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4), _mm512_and_si512(_mm512_srlv_epi16(H, sh_hi), m30));
#pragma GCC unroll 2
            for (int t = 0; t < 2; t++) {
                const __m512i s = _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(sc8x2, _mm256_load_si256((const __m256i *)k6_ctrl[2 * h + t])));
                for (int c = 0; c < NC; c++) {
                    const int8_t *q8 = ((const block_q8_K *)vy[c])[i].qs + 128 * h + 64 * t;
                    const __m512i p = _mm512_maddubs_epi16(w[t], _mm512_loadu_si512((const void *)q8));
                    sumi[c] = madd_acc(sumi[c], s, p);
                }
            }
        }
        for (int c = 0; c < NC; c++) {
            const block_q8_K *y = (const block_q8_K *)vy[c] + i;
            acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(dx * y->d), _mm512_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) out[c] = x86_hsum512(acc[c]);
}

AI void avx512_q4_K_nc(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) { q4_K_512(n, vx, vy, out, NC, 0); }
AI void avx512_q4_K_r_nc(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) { q4_K_512(n, vx, vy, out, NC, 1); }
AI void avx512_q6_K_nc(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) { q6_K_512(n, vx, vy, out, NC); }

/* ---- decode: NR weight rows x NC activation columns (VNNI) ----------------
   The activation superblocks are loaded once for NR rows; the rows come
   from NR separate slices (see dec_rows_nc), i.e. NR long sequential
   streams.  Integer lanes, summed exactly per row and superblock, then the
   panels' float steps (one fma per sum): decode, vec_dot, small batches and
   the prefill panels give the same bits.
   DEC_PF: software prefetch distance per row stream in bytes (0 = none).
   Decoding from the file mapping, the NR streams cross pages of the page
   cache, and a prefetch issued early takes each page walk off the
   critical path; where the hardware prefetcher keeps up it costs nothing
   (measurements: docs/perf.md, "Kernel tuning constants"). */
#ifndef DEC_PF
#define DEC_PF 2048
#endif
AI void dec_prefetch(const void *p) {
    if (!DEC_PF) return;
    _mm_prefetch((const char *)p + DEC_PF, _MM_HINT_T0);
    _mm_prefetch((const char *)p + DEC_PF + 64, _MM_HINT_T0);
    _mm_prefetch((const char *)p + DEC_PF + 128, _MM_HINT_T0);
}

AI int32_t x86_hsum256_epi32(__m256i v) { return _mm512_reduce_add_epi32(_mm512_zextsi256_si512(v)); }

/* The row kernels' exact integer sums, 4 rows at a time: each row's vector
   folded to 4 lanes, then (sum a, sum b, sum c, sum d) by hadds; their float
   steps then run in the 4 lanes of one vector, the same operations per row
   as scalar ones (fma, fnmadd = fma of the negated product), at a quarter
   of the reductions' cost. */
AI __m128i fold512_epi32(__m512i v) {
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}
AI __m128i fold256_epi32(__m256i v) { return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)); }
AI __m128i hsum4x128_epi32(const __m128i v[4]) { return _mm_hadd_epi32(_mm_hadd_epi32(v[0], v[1]), _mm_hadd_epi32(v[2], v[3])); }

/* sub-block scale pairs for the 64-byte loads of q4_K_rows: lanes 0-1 take
   word a, lanes 2-3 word b */
static const uint8_t k4_ctrl2[4][64] __attribute__((aligned(64))) = { C4(0, 2), C4(1, 3), C4(4, 6), C4(5, 7) };

/* 64 weight bytes at a time: bytes 0-31 are elements 128k + 0..31 (low
   nibbles) / 32..63 (high), bytes 32-63 elements 128k + 64..95 / 96..127.
   The activations are arranged to match once per superblock for NR rows. */
/* NR (<= 4) rows x NC (<= DEC_NC) activation columns y[c], out[c * os + r]:
   a row's weights are unpacked once for the NC columns; each column gets
   exactly the integer sums and float steps it would get alone (NC = 1 is
   vec_dot and decode), so every batch size gives the same bits. */
#define DEC_NC 4
AI void q4_K_rows_t(int64_t n, const void *vx, size_t ws, const block_q8_K *const *y, float *out, size_t os, const int NR, const int NC,
                    const int R) {
    const int64_t nb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0xF);
    __m128 acc[DEC_NC]; /* lane r: row r */
    for (int c = 0; c < NC; c++) acc[c] = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        /* [c][2k]: elements 128k + 0..31 | 64..95, [c][2k+1]: 32..63 | 96..127 */
        __m512i q8[DEC_NC][4];
        __m256i bs[DEC_NC];
        for (int c = 0; c < NC; c++) {
            const block_q8_K *yi = y[c] + i;
            for (int k = 0; k < 2; k++)
                for (int h = 0; h < 2; h++)
                    q8[c][2 * k + h] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(yi->qs + 128 * k + 32 * h))),
                                                          _mm256_loadu_si256((const __m256i *)(yi->qs + 128 * k + 64 + 32 * h)), 1);
            bs[c] = _mm256_loadu_si256((const __m256i *)yi->bsums);
        }
        __m128i S4[DEC_NC][4], M4[DEC_NC][4];
        __m128 dd[4] = { _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps() };
        for (int c = 0; c < NC; c++)
            for (int r = NR; r < 4; r++) S4[c][r] = M4[c][r] = _mm_setzero_si128();
        for (int r = 0; r < NR; r++) {
            const void *x = k4_blk((const char *)vx + r * ws, i, R);
            dec_prefetch(x);
            const __m128i sm8 = k4_sm8(x, R);
            const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(sm8));
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm8, _mm_load_si128((const __m128i *)k4_mins_ctrl)));
            __m512i sumi[DEC_NC];
            for (int c = 0; c < NC; c++) sumi[c] = _mm512_setzero_si512();
#pragma GCC unroll 2
            for (int k = 0; k < 2; k++) {
                const __m512i L = _mm512_loadu_si512((const void *)(k4_qs(x, R) + 64 * k));
                const __m512i lo = _mm512_and_si512(L, m4), hi = _mm512_and_si512(_mm512_srli_epi16(L, 4), m4);
                const __m512i slo = _mm512_shuffle_epi8(sc, _mm512_load_si512((const void *)k4_ctrl2[2 * k]));
                const __m512i shi = _mm512_shuffle_epi8(sc, _mm512_load_si512((const void *)k4_ctrl2[2 * k + 1]));
                X86_UNROLL for (int c = 0; c < NC; c++) {
                    sumi[c] = _mm512_dpwssd_epi32(sumi[c], slo, _mm512_maddubs_epi16(lo, q8[c][2 * k]));
                    sumi[c] = _mm512_dpwssd_epi32(sumi[c], shi, _mm512_maddubs_epi16(hi, q8[c][2 * k + 1]));
                }
            }
            X86_UNROLL for (int c = 0; c < NC; c++) {
                S4[c][r] = fold512_epi32(sumi[c]);
                M4[c][r] = fold256_epi32(_mm256_madd_epi16(mins, bs[c]));
            }
            dd[r] = k4_dd(x); /* d and dmin converted together */
        }
        /* the panel's float steps (panel_q4_K_cols), one per row and
           superblock on the exact integer sums, so that decode and the
           prefill panels agree bit for bit */
        const __m128 a = _mm_unpacklo_ps(dd[0], dd[1]), b = _mm_unpacklo_ps(dd[2], dd[3]); /* (d0 d1 m0 m1), (d2 d3 m2 m3) */
        const __m128 D = _mm_movelh_ps(a, b), DM = _mm_movehl_ps(b, a);
        X86_UNROLL for (int c = 0; c < NC; c++) {
            const __m128 yd = _mm_set1_ps(y[c][i].d); /* times y's d: the same float products */
            acc[c] = _mm_fmadd_ps(_mm_mul_ps(D, yd), _mm_cvtepi32_ps(hsum4x128_epi32(S4[c])), acc[c]);
            acc[c] = _mm_fnmadd_ps(_mm_mul_ps(DM, yd), _mm_cvtepi32_ps(hsum4x128_epi32(M4[c])), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) {
        float o[4];
        _mm_storeu_ps(o, acc[c]);
        for (int r = 0; r < NR; r++) out[c * os + r] = o[r];
    }
}
/* one column (vec_dot, decode) */
AI void q4_K_rows(int64_t n, const void *vx, size_t ws, const block_q8_K *y, float *out, const int NR) { q4_K_rows_t(n, vx, ws, &y, out, 0, NR, 1, 0); }
AI void q4_K_r_rows(int64_t n, const void *vx, size_t ws, const block_q8_K *y, float *out, const int NR) { q4_K_rows_t(n, vx, ws, &y, out, 0, NR, 1, 1); }

/* ---- the 4-row kernels' pieces (q4_K_rows4_t, q6_K_rows4_t) -------------- */
/* Q4_K group g (elements 64g..64g+63): low nibbles of qs[32g..], then high */
AI __m512i q4_K_group(const uint8_t *qs, int g) {
    const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * g)));
    return _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xFFFF0000u, v, 4), _mm512_set1_epi8(0xF));
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

/* as q4_K_rows_t with NR = 4: out[c * os + r].  Weights by 32-byte groups
   (q4_K_group: low nibbles = sub-block 2g, high = 2g + 1), so that each
   column's activations are one contiguous 64-byte operand. */
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
        /* the panel's float steps per lane: d * y.d, dmin * y.d, as in q4_K_rows_t */
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
   same bits as q4_K_rows4_t.  Lanes (rows4_row / rows4_col, T = 3): 128-bit
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

/* as q4_K_rows_t: NR rows x NC columns, each column's bits its own */
AI void q6_K_rows_t(int64_t n, const void *vx, size_t ws, const block_q8_K *const *y, float *out, size_t os, const int NR, const int NC) {
    const int64_t nb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0xF), m30 = _mm512_set1_epi8(0x30);
    const long long w2 = 0x0002000200020002ll, w4 = 0x0004000400040004ll;
    const __m512i sh_lo = _mm512_set_epi64(w2, w2, w2, w2, w4, w4, w4, w4);
    const __m512i sh_hi = _mm512_set_epi64(w2, w2, w2, w2, 0, 0, 0, 0);
    __m128 acc[DEC_NC]; /* lane r: row r */
    for (int c = 0; c < NC; c++) acc[c] = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        __m512i q8[DEC_NC][4];
        __m256i bs[DEC_NC];
        for (int c = 0; c < NC; c++) {
            for (int j = 0; j < 4; j++) q8[c][j] = _mm512_loadu_si512((const void *)(y[c][i].qs + 64 * j));
            bs[c] = _mm256_loadu_si256((const __m256i *)y[c][i].bsums);
        }
        __m128i S4[DEC_NC][4];
        __m128 d4[4] = { _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps() };
        for (int c = 0; c < NC; c++)
            for (int r = NR; r < 4; r++) S4[c][r] = _mm_setzero_si128();
        for (int r = 0; r < NR; r++) {
            const block_q6_K *x = (const block_q6_K *)((const char *)vx + r * ws) + i;
            dec_prefetch(x);
            const __m128i sc8 = _mm_loadu_si128((const __m128i *)x->scales);
            const __m256i sc8x2 = _mm256_broadcastsi128_si256(sc8);
            const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
            __m512i sumi[DEC_NC];
            X86_UNROLL for (int c = 0; c < NC; c++) {
                const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs[c]), 5);
                sumi[c] = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), off));
            }
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m512i L = _mm512_loadu_si512((const void *)(x->ql + 64 * h));
                const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * h)));
                const __m512i w0 = _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_and_si512(_mm512_sllv_epi16(H, sh_lo), m30));
                const __m512i w1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4), _mm512_and_si512(_mm512_srlv_epi16(H, sh_hi), m30));
                const __m512i s0 = _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(sc8x2, _mm256_load_si256((const __m256i *)k6_ctrl[2 * h])));
                const __m512i s1 = _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(sc8x2, _mm256_load_si256((const __m256i *)k6_ctrl[2 * h + 1])));
                X86_UNROLL for (int c = 0; c < NC; c++) {
                    sumi[c] = _mm512_dpwssd_epi32(sumi[c], s0, _mm512_maddubs_epi16(w0, q8[c][2 * h]));
                    sumi[c] = _mm512_dpwssd_epi32(sumi[c], s1, _mm512_maddubs_epi16(w1, q8[c][2 * h + 1]));
                }
            }
            X86_UNROLL for (int c = 0; c < NC; c++) S4[c][r] = fold512_epi32(sumi[c]);
            d4[r] = _mm_set_ss(x86_h2f(x->d));
        }
        /* the panel's step (panel_q6_K_cols): one fma on the exact sum */
        const __m128 D = _mm_movelh_ps(_mm_unpacklo_ps(d4[0], d4[1]), _mm_unpacklo_ps(d4[2], d4[3]));
        X86_UNROLL for (int c = 0; c < NC; c++)
            acc[c] = _mm_fmadd_ps(_mm_mul_ps(D, _mm_set1_ps(y[c][i].d)), _mm_cvtepi32_ps(hsum4x128_epi32(S4[c])), acc[c]);
    }
    for (int c = 0; c < NC; c++) {
        float o[4];
        _mm_storeu_ps(o, acc[c]);
        for (int r = 0; r < NR; r++) out[c * os + r] = o[r];
    }
}
AI void q6_K_rows(int64_t n, const void *vx, size_t ws, const block_q8_K *y, float *out, const int NR) { q6_K_rows_t(n, vx, ws, &y, out, 0, NR, 1); }

/* as q4_K_rows4_t for Q6_K: the -32 offset's sums (scales x bsums) reduced
   as a second tree and taken off once per superblock, 16 items at a time */
AI void q6_K_rows4_t(int64_t n, const void *vx, size_t ws, const block_q8_K *const *y, float *out, size_t os, const int NC) {
    const int64_t nb = n / QK_K;
    const int W = rows4_w(NC);
    const __m512i m4 = _mm512_set1_epi8(0xF), m30 = _mm512_set1_epi8(0x30);
    const long long w2 = 0x0002000200020002ll, w4 = 0x0004000400040004ll;
    const __m512i sh_lo = _mm512_set_epi64(w2, w2, w2, w2, w4, w4, w4, w4);
    const __m512i sh_hi = _mm512_set_epi64(w2, w2, w2, w2, 0, 0, 0, 0);
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
                const __m512i L = _mm512_loadu_si512((const void *)(x->ql + 64 * h));
                const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * h)));
                const __m512i w0 = _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_and_si512(_mm512_sllv_epi16(H, sh_lo), m30));
                const __m512i w1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4), _mm512_and_si512(_mm512_srlv_epi16(H, sh_hi), m30));
                const __m512i sp = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16)),
                                                       _mm512_load_si512((const void *)k6_pk_ctrl));
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

/* ---- Q8_0 x Q8_0, two blocks per 512-bit vector ------------------------------ */
AI __m512i ld2x32(const int8_t *a, const int8_t *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}
/* |x| (as u8) and y with x's sign, so that u8 x s8 products equal x*y */
AI __m512i neg_where(__m512i y, __m512i x) {
    return _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(x), _mm512_setzero_si512(), y);
}
#define Q8_0_512_BODY(DOT)                                                                     \
    const block_q8_0 *x = vx;                                                                  \
    const int64_t nb = n / QK8_0;                                                              \
    __m512 acc[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps() }; \
    int64_t i = 0;                                                                             \
    for (; i + 2 <= nb; i += 2) {                                                              \
        const __m512i qx = ld2x32(x[i].qs, x[i + 1].qs);                                       \
        const __m512i ax = _mm512_abs_epi8(qx);                                                \
        const float d0 = x86_h2f(x[i].d), d1 = x86_h2f(x[i + 1].d);                            \
        for (int c = 0; c < NC; c++) {                                                         \
            const block_q8_0 *y = (const block_q8_0 *)vy[c] + i;                               \
            const __m512i sy = neg_where(ld2x32(y[0].qs, y[1].qs), qx);                        \
            const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(d0 * x86_h2f(y[0].d)),          \
                                                _mm256_set1_ps(d1 * x86_h2f(y[1].d)), 1);       \
            acc[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(DOT(ax, sy)), acc[c]);              \
        }                                                                                      \
    }                                                                                          \
    float tail[4] = { 0, 0, 0, 0 };                                                            \
    if (i < nb) {                                                                              \
        const void *ys[4];                                                                     \
        for (int c = 0; c < NC; c++) ys[c] = (const block_q8_0 *)vy[c] + i;                    \
        avx2_q8_0_nc(QK8_0, x + i, ys, tail, NC);                                              \
    }                                                                                          \
    for (int c = 0; c < NC; c++) out[c] = x86_hsum512(acc[c]) + tail[c];

AI __m512i dot_u8s8_bw(__m512i a, __m512i b) {
    return _mm512_madd_epi16(_mm512_maddubs_epi16(a, b), _mm512_set1_epi16(1));
}
AI __m512i dot_u8s8_vnni(__m512i a, __m512i b) { return _mm512_dpbusd_epi32(_mm512_setzero_si512(), a, b); }

AI void avx512_q8_0_nc(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) {
    Q8_0_512_BODY(dot_u8s8_bw)
}
AI void avx512vnni_q8_0_nc(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) {
    Q8_0_512_BODY(dot_u8s8_vnni)
}

/* ======================================================================== */
/* Prefill gemm over packed 16-row panels (VNNI)                              */
/* ======================================================================== */
/* The per-row kernels above spend 2 instructions per 64 MACs (maddubs, then
   a madd with the sub-block scales) because a lane only ever holds 2-4
   products of one sub-block.  Here 16 weight rows are first unpacked into a
   panel where 32-bit lane r of vector k holds 4 consecutive quants (u8) of
   row r: vpdpbusd with 4 broadcast activation bytes then accumulates a whole
   sub-block per row lane, and the scale is applied once per sub-block (cvt +
   fma) for 16 rows at a time.  The panel (a few KB on the stack, per call)
   is reused by every activation column, so the unpacking cost is paid once
   per 16 rows x superblock, not per column; this is GEMM packing as in
   BLAS, not a copy of the model.  Used when the tile has enough columns. */
#define PANEL_ROWS 16
#define PANEL_SB 4        /* superblocks per panel chunk: ~21 KB, L1-resident */
#ifndef PANEL_PF
#define PANEL_PF 4        /* superblocks the packs prefetch ahead */
#endif
/* The plain Q4_K/Q4_K_R and Q6_K gemms' crossovers, per CPU (the tuning
   record, avx512_tune): since the 4-row kernels reduce rows and columns
   together (q4_K_rows4_t), the rows stay ahead of the panels' packing
   longer.  On a Xeon (picolm-bench --micro, fastest pass, one thread,
   8 MiB matrix) Q4_K's rows cost 0.051 / 0.066 / 0.100 per unit at 1 / 2 /
   4 columns and the panels 0.112 + 0.0103 per column, so the rows win up
   to 6 columns; Q6_K's rows (0.041 / 0.049 / 0.075) against 0.102 + 0.008
   per column win up to 8.  Zen 5's rows were ahead up to 7 (docs/perf.md):
   8 for both there.  Either path gives the same bits. */
#define PANEL_NC 8        /* activation columns per register tile (docs/perf.md) */

typedef struct panel {
    uint8_t q[64][64];    /* [4-element group k][row r: 4 bytes] */
    int32_t sc[16][16];   /* [sub-block][row]: Q4_K 8 sub-blocks of 32, Q6_K 16 of 16 */
    int32_t mp[8][16];    /* [pair t][row]: int16 pairs for vpdpwssd against the
                             activation sub-block sums: Q4_K mins (4 pairs),
                             Q6_K scales (8 pairs, for the -32 offset) */
    float d[16], dmin[16];
} panel;

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
   few rows' weight loads in flight at once (docs/perf.md, session 15). */
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

AI __m512i bcast32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
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

typedef void (*panel_pack_fn)(panel *P, const void *x0, size_t ws, int nrows, int64_t i);
typedef void (*panel_cols_fn)(const panel *P, int nsb, const block_q8_K *const *y, __m512 *acc);

/* dst[c * ds + r] for rows [0, nr) (nr <= 16) of the row group at w */
/* Prefetch rows [0, nrows) of w, bytes [b0, b1) of each: the packer reads 16
   rows at once, more streams than the hardware prefetcher follows, and
   otherwise stalls on DRAM for each of them. */
AI void prefetch_rows(const void *w, size_t ws, int nrows, size_t b0, size_t b1) {
    for (int r = 0; r < nrows; r++)
        for (size_t o = b0 & ~(size_t)63; o < b1; o += 64) _mm_prefetch((const char *)w + r * ws + o, _MM_HINT_T0);
}

/* next_rows: rows of the following group (0 = none), prefetched during the
   last chunk.  streams: the rows' separate streams of bsz bytes per
   superblock, prefetched ahead (nr for plain rows; 1 for an interleaved
   group, its superblocks being one contiguous stream of bsz-byte blocks). */
static void panel_gemm(int64_t n, int nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds,
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
    static const panel_cols_fn name##_tab[PANEL_NC] = { name##_c1, name##_c2, name##_c3, name##_c4,                 \
                                                        name##_c5, name##_c6, name##_c7, name##_c8 };
PANEL_COLS(panel_q4_K_cols)
PANEL_COLS(panel_q6_K_cols)

static void pack_q4_K_v(panel *P, const void *x0, size_t ws, int nrows, int64_t i) { pack_q4_K(P, x0, ws, nrows, i, 0); }
static void pack_q4_K_r_v(panel *P, const void *x0, size_t ws, int nrows, int64_t i) { pack_q4_K(P, x0, ws, nrows, i, 1); }
static void pack_q6_K_v(panel *P, const void *x0, size_t ws, int nrows, int64_t i) { pack_q6_K(P, x0, ws, nrows, i); }

/* ---- row kernels (vec_dot, and gemm for few columns) --------------------- */
X86_WRAP(avx512, q4_K, avx512_q4_K_nc)
X86_WRAP(avx512, q6_K, avx512_q6_K_nc)
X86_WRAP(avx512, q8_0, avx512_q8_0_nc)
X86_WRAP(avx512_vnni, q8_0, avx512vnni_q8_0_nc)
X86_WRAP(avx512, q4_K_r, avx512_q4_K_r_nc)

/* Decode: DEC_NR rows per call, taken from DEC_NR equal contiguous slices
   of the range (rows r, r + m, r + 2m, ...), so that each is one long
   sequential stream.  Adjacent rows would restart the hardware prefetcher
   at every group (docs/perf.md).  dec_rows_nc below. */
#ifndef DEC_NR
#define DEC_NR 4
#endif
/* VNNI vec_dot: the decode row kernel, whose float steps are the panels' */
static void avx512_vnni_vec_dot_q4_K(int64_t n, float *s, const void *x, const void *y) { q4_K_rows(n, x, 0, y, s, 1); }
static void avx512_vnni_vec_dot_q4_K_r(int64_t n, float *s, const void *x, const void *y) { q4_K_r_rows(n, x, 0, y, s, 1); }
static void avx512_vnni_vec_dot_q6_K(int64_t n, float *s, const void *x, const void *y) { q6_K_rows(n, x, 0, y, s, 1); }

/* Fewer columns than the crossover (decode, small batches): the row kernels,
   DEC_NC columns at a time, DEC_NR rows per call from DEC_NR slices.
   FMT 0: Q4_K, 1: Q4_K_R, 2: Q6_K. */
AI void dec_rows_nc(int64_t n, int64_t nr, const void *w, size_t ws, const block_q8_K *const *ys, float *dst, size_t ds, const int NC,
                    const int FMT) {
    const int64_t m = nr / DEC_NR;
    float o[DEC_NC * DEC_NR];
    for (int64_t r = 0; r < m; r++) {
        const char *x = (const char *)w + r * ws;
        if (FMT == 2 && DEC_NR == 4) q6_K_rows4_t(n, x, ws * (size_t)m, ys, o, DEC_NR, NC);
        else if (FMT == 2) q6_K_rows_t(n, x, ws * (size_t)m, ys, o, DEC_NR, DEC_NR, NC);
        else if (DEC_NR == 4 && NC >= 3) q4_K_rows4c_t(n, x, ws * (size_t)m, ys, o, DEC_NR, NC, FMT);
        else if (DEC_NR == 4) q4_K_rows4_t(n, x, ws * (size_t)m, ys, o, DEC_NR, NC, FMT);
        else q4_K_rows_t(n, x, ws * (size_t)m, ys, o, DEC_NR, DEC_NR, NC, FMT);
        for (int c = 0; c < NC; c++)
            for (int k = 0; k < DEC_NR; k++) dst[c * ds + k * m + r] = o[c * DEC_NR + k];
    }
    for (int64_t r = m * DEC_NR; r < nr; r++) {
        const char *x = (const char *)w + r * ws;
        if (FMT == 2) q6_K_rows_t(n, x, ws, ys, dst + r, ds, 1, NC);
        else q4_K_rows_t(n, x, ws, ys, dst + r, ds, 1, NC, FMT);
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

/* VNNI gemm: panels of 16 rows when there are enough columns */
AI void gemm_q4_K_panel_t(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as,
                          float *dst, size_t ds, const int R) {
    if (nc < pk_tuning.panel_min_nc_q4_K) { /* the same bits as each column alone */
        dec_cols(n, nr, nc, w, ws, a, as, dst, ds, R);
        return;
    }
    prefetch_rows(w, ws, nr < PANEL_ROWS ? (int)nr : PANEL_ROWS, 0, (size_t)(n / QK_K < PANEL_SB ? n / QK_K : PANEL_SB) * K4_BSZ(R));
    for (int64_t r = 0; r < nr; r += PANEL_ROWS) {
        const int k = (int)(nr - r < PANEL_ROWS ? nr - r : PANEL_ROWS);
        const int64_t rn = nr - r - PANEL_ROWS;
        panel_gemm(n, k, nc, (const char *)w + r * ws, ws, a, as, dst + r, ds, K4_BSZ(R), k, rn <= 0 ? 0 : rn < PANEL_ROWS ? (int)rn : PANEL_ROWS,
                   R ? pack_q4_K_r_v : pack_q4_K_v, panel_q4_K_cols_tab);
    }
}
static void avx512_vnni_gemm_q4_K_panel(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as,
                                        float *dst, size_t ds) { gemm_q4_K_panel_t(n, nr, nc, w, ws, a, as, dst, ds, 0); }
static void avx512_vnni_gemm_q4_K_r_panel(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as,
                                          float *dst, size_t ds) { gemm_q4_K_panel_t(n, nr, nc, w, ws, a, as, dst, ds, 1); }
static void avx512_vnni_gemm_q6_K_panel(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as,
                                        float *dst, size_t ds) {
    if (nc < pk_tuning.panel_min_nc_q6_K) { /* the same bits as each column alone */
        dec_cols(n, nr, nc, w, ws, a, as, dst, ds, 2);
        return;
    }
    prefetch_rows(w, ws, nr < PANEL_ROWS ? (int)nr : PANEL_ROWS, 0, (size_t)(n / QK_K < PANEL_SB ? n / QK_K : PANEL_SB) * sizeof(block_q6_K));
    for (int64_t r = 0; r < nr; r += PANEL_ROWS) {
        const int k = (int)(nr - r < PANEL_ROWS ? nr - r : PANEL_ROWS);
        const int64_t rn = nr - r - PANEL_ROWS;
        panel_gemm(n, k, nc, (const char *)w + r * ws, ws, a, as, dst + r, ds, sizeof(block_q6_K), k, rn <= 0 ? 0 : rn < PANEL_ROWS ? (int)rn : PANEL_ROWS,
                   pack_q6_K_v, panel_q6_K_cols_tab);
    }
}
/* ======================================================================== */
/* Q4_K_R16 / Q6_K_R16: 16 rows interleaved (blocks.h)                        */
/* ======================================================================== */
/* A 64-byte vector of these layouts is 4 columns x 16 rows, a dword per row:
   the rows are already the lanes, so nothing is transposed.  Every kernel
   here computes the same integers and float steps as this file's Q4_K /
   Q6_K kernels on the base rows, so a Q4_K_M_R16 model gives exactly the
   Q4_K_M model's logits on this backend:
   - VNNI: panel_gemm (whose "packing" is here only a nibble split of one
     contiguous stream) and, for Q4_K_R16 with 1-3 columns, the Q4_K_R16N
     tile further down: the panels' numerics, as the VNNI row kernels;
   - without VNNI: "lane" kernels.  The row
     kernels keep 16 int32 lanes per row and superblock, lane L = columns
     4(L&7)..+3 of 4 of the sub-blocks; here vector L holds lane L of the
     16 rows, each gets the row kernel's cvt + fma, and the final horizontal
     sums become vertical adds in x86_hsum512 / x86_hsum_ps order. */

/* dword r = the int16 pair (a_r, b_r), from sign- or zero-extended dwords */
AI __m512i r16_pair(__m512i a, __m512i b) { return _mm512_mask_blend_epi16(0xAAAAAAAAu, a, _mm512_slli_epi32(b, 16)); }
AI __m512i r16_u8x16(__m128i v) { return _mm512_cvtepu8_epi32(v); }
AI __m512i r16_s8x16(const int8_t *p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)); }

/* x86_hsum512 (a[L] + a[L + 8], then x86_hsum_ps) and x86_hsum_ps, lane-wise */
AI __m512 r16_hsum8(const __m512 *b) {
    return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(b[0], b[4]), _mm512_add_ps(b[2], b[6])),
                         _mm512_add_ps(_mm512_add_ps(b[1], b[5]), _mm512_add_ps(b[3], b[7])));
}
AI __m512 r16_hsum16(const __m512 *a) {
    __m512 b[8];
    for (int p = 0; p < 8; p++) b[p] = _mm512_add_ps(a[p], a[p + 8]);
    return r16_hsum8(b);
}

/* Software prefetch distance of the lane kernels: they read a block in lane
   order, which the hardware prefetcher follows poorly from DRAM. */
#ifndef R16_PF_BYTES
#define R16_PF_BYTES 8192
#endif

/* The sub-block of step j (0..3) in lane half hh (lanes 8hh..8hh+7), in
   q4_K_512's order (its 64-byte loads pair sub-blocks 2j | 2j+1) */
AI int r16_k4_sub(int hh, int j) { return 2 * j + hh; }

/* out[c * os + r] for the 16 rows of the group at vx, columns c < NC */
AI void r16_q4_K_lanes(int64_t n, const void *vx, const void *const *vy, float *out, size_t os, const int NC) {
    const block_q4_K_r16 *x = vx;
    const int64_t nb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0xF);
    __m512 acc[R16_NC][16], accm[R16_NC][8]; /* the row kernels' acc and accm lanes */
    for (int c = 0; c < NC; c++) {
        for (int L = 0; L < 16; L++) acc[c][L] = _mm512_setzero_ps();
        for (int t = 0; t < 8; t++) accm[c][t] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        const block_q4_K_r16 *b = x + i;
        r16_prefetch((const char *)b + R16_PF_BYTES, sizeof *b);
        const block_q8_K *y[R16_NC];
        __m512 dy[R16_NC], dmy[R16_NC];
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->dmin));
        for (int c = 0; c < NC; c++) {
            y[c] = (const block_q8_K *)vy[c] + i;
            dy[c] = _mm512_mul_ps(d, _mm512_set1_ps(y[c]->d));
            dmy[c] = _mm512_mul_ps(dm, _mm512_set1_ps(y[c]->d));
        }
        /* mins: lane t = m_t * (bsums[2t] + bsums[2t + 1]) */
        #pragma GCC unroll 8
        for (int t = 0; t < 8; t++) {
            const __m512i m = r16_u8x16(r16_k4_get6(b->mins_l, b->mins_h, t));
            const __m512i mp = r16_pair(m, m);
            for (int c = 0; c < NC; c++)
                accm[c][t] = _mm512_fmadd_ps(dmy[c], _mm512_cvtepi32_ps(_mm512_madd_epi16(mp, bcast32(y[c]->bsums + 2 * t))), accm[c][t]);
        }
        #pragma GCC unroll 8
        for (int hh = 0; hh < 2; hh++) {
            __m512i sc[4];
            for (int j = 0; j < 4; j++) {
                const __m512i v = r16_u8x16(r16_k4_get6(b->scales_l, b->scales_h, r16_k4_sub(hh, j)));
                sc[j] = r16_pair(v, v);
            }
            /* lane p: low nibbles of qs[4s + p] (p < 4), high of qs[4s + p - 4] */
            #pragma GCC unroll 8
            for (int p = 0; p < 8; p++) {
                __m512i sumi[R16_NC];
                for (int c = 0; c < NC; c++) sumi[c] = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    const int s = r16_k4_sub(hh, j);
                    const __m512i q = _mm512_loadu_si512((const void *)b->qs[4 * s + (p & 3)]);
                    const __m512i w = _mm512_and_si512(p < 4 ? q : _mm512_srli_epi16(q, 4), m4);
                    for (int c = 0; c < NC; c++)
                        sumi[c] = madd_acc(sumi[c], sc[j], _mm512_maddubs_epi16(w, bcast32(y[c]->qs + 32 * s + 4 * p)));
                }
                for (int c = 0; c < NC; c++) acc[c][8 * hh + p] = _mm512_fmadd_ps(dy[c], _mm512_cvtepi32_ps(sumi[c]), acc[c][8 * hh + p]);
            }
        }
    }
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + c * os, _mm512_sub_ps(r16_hsum16(acc[c]), r16_hsum8(accm[c])));
}

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

/* q6_K_rows / q6_K_512 lane L: groups L + 16k (scales 4k + L/4), starting
   from -32 * (sc[2L] bsums[2L] + sc[2L+1] bsums[2L+1]) for L < 8 */
AI void r16_q6_K_lanes(int64_t n, const void *vx, const void *const *vy, float *out, size_t os, const int NC) {
    const block_q6_K_r16 *x = vx;
    const int64_t nb = n / QK_K;
    __m512 acc[R16_NC][16];
    for (int c = 0; c < NC; c++)
        for (int L = 0; L < 16; L++) acc[c][L] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const block_q6_K_r16 *b = x + i;
        r16_prefetch((const char *)b + R16_PF_BYTES, sizeof *b);
        const block_q8_K *y[R16_NC];
        __m512 dy[R16_NC];
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d));
        for (int c = 0; c < NC; c++) {
            y[c] = (const block_q8_K *)vy[c] + i;
            dy[c] = _mm512_mul_ps(d, _mm512_set1_ps(y[c]->d));
        }
        #pragma GCC unroll 8
        for (int l4 = 0; l4 < 4; l4++) {
            __m512i sc[4];
            for (int k = 0; k < 4; k++) {
                const __m512i v = r16_s8x16(b->scales[4 * k + l4]);
                sc[k] = r16_pair(v, v);
            }
            #pragma GCC unroll 8
            for (int L = 4 * l4; L < 4 * l4 + 4; L++) {
                __m512i sumi[R16_NC];
                for (int c = 0; c < NC; c++) sumi[c] = _mm512_setzero_si512();
                if (L < 8) {
                    const __m512i op = r16_pair(r16_s8x16(b->scales[2 * L]), r16_s8x16(b->scales[2 * L + 1]));
                    for (int c = 0; c < NC; c++)
                        sumi[c] = _mm512_sub_epi32(sumi[c], _mm512_slli_epi32(_mm512_madd_epi16(op, bcast32(y[c]->bsums + 2 * L)), 5));
                }
                __m512i q[4];
                r16_q6_K_groups(b, L, q);
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++)
                    for (int c = 0; c < NC; c++)
                        sumi[c] = madd_acc(sumi[c], sc[k], _mm512_maddubs_epi16(q[k], bcast32(y[c]->qs + 4 * (L + 16 * k))));
                for (int c = 0; c < NC; c++) acc[c][L] = _mm512_fmadd_ps(dy[c], _mm512_cvtepi32_ps(sumi[c]), acc[c][L]);
            }
        }
    }
    for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + c * os, r16_hsum16(acc[c]));
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

/* Lane kernels (NC = 1..R16_NC), without VNNI: as q4_K_512 / q6_K_512 for
   any column count.  (With VNNI the R16 layouts use the panels' numerics:
   further down.) */
AI void avx512_q4_K_r16_t(int64_t n, const void *vx, const void *const *vy, float *out, size_t os, const int NC) {
    r16_q4_K_lanes(n, vx, vy, out, os, NC);
}
AI void avx512_q6_K_r16_t(int64_t n, const void *vx, const void *const *vy, float *out, size_t os, const int NC) {
    r16_q6_K_lanes(n, vx, vy, out, os, NC);
}
R16_WRAP(avx512, q4_K_r16, avx512_q4_K_r16_t)
R16_WRAP(avx512, q6_K_r16, avx512_q6_K_r16_t)

/* VNNI gemm: the panel gemm group by group when there are enough columns */
#define R16_PANEL_GEMM(name, BLK, pack, cols)                                                                        \
    static void avx512_vnni_gemm_##name##_panel(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws,        \
                                                const void *a, size_t as, float *dst, size_t ds) {                  \
        if (nc < pk_tuning.panel_min_nc_r16) { avx512_vnni_gemm_##name(n, nr, nc, w, ws, a, as, dst, ds); return; } \
        prefetch_rows(w, ws, 1, 0, (size_t)(n / QK_K < PANEL_SB ? n / QK_K : PANEL_SB) * sizeof(BLK));             \
        for (int64_t g = 0; g < nr; g += PANEL_ROWS)                                                                 \
            panel_gemm(n, PANEL_ROWS, nc, (const char *)w + g * ws, ws, a, as, dst + g, ds, sizeof(BLK), 1,          \
                       g + PANEL_ROWS < nr, pack, cols);                                                             \
    }

/* ------------------------------------------------------------------------ */
/* Layouts with row numerics (Q5_0_R16, Q4_K_R16N), VNNI                     */
/* ------------------------------------------------------------------------ */
/* A 64-byte vector of these layouts is 4 columns of all 16 rows, a dword
   per row: vpdpbusd against the 4 activation bytes broadcast adds each
   row's 4 products in its own lane, exactly (no int16 step).  The integer
   sums and the one fma per row and block are the formats' definitions
   (formats/repack.c), so the results equal the reference and the avx2
   kernels bit for bit, at every batch size. */
AI __m512i bc4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* 16 rows of a Q5_0 block against NC activation blocks: u[g] holds columns
   4g..4g+3 of every row (a dword per row, u = q + 16), d16 the rows'
   scales; q8[c], dy[c], ys16[c] as q5r_half's.  Per row the exact integer
   sum and one fma: Q5_0_R16's definition. */
AI void q5r512_dots(const __m512i *u, __m512 d16, const int8_t *const *q8, const float *dy, const int32_t *ys16, __m512 *acc,
                    const int NC) {
    X86_UNROLL for (int c = 0; c < NC; c++) {
        __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], bc4(q8[c]));
        X86_UNROLL for (int g = 1; g < 8; g++) s = _mm512_dpbusd_epi32(s, u[g], bc4(q8[c] + 4 * g));
        const __m512i isum = _mm512_sub_epi32(s, _mm512_set1_epi32(ys16[c]));
        acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(d16, _mm512_set1_ps(dy[c])), _mm512_cvtepi32_ps(isum), acc[c]);
    }
}

/* Q5_0_R16: the 16 rows of block b against NC panel columns (q5r_panel's
   dy and ys16 = 16 * sum of the column's quants), as q5r_half on 8 rows:
   u = q + 16 in 0..31 (unsigned for vpdpbusd), isum = sum(u * y) - ys16. */
AI void q5r512_block(const block_q5_0_r16 *b, const int8_t *const *q8, const float *dy, const int32_t *ys16, __m512 *acc,
                     const int NC) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m10 = _mm512_set1_epi8(0x10);
    const __m512i qh = _mm512_loadu_si512((const void *)b->qh);
    __m512i u[8];
    X86_UNROLL for (int j = 0; j < 4; j++) {
        /* bit k of every qh byte to bit 4 (k = j, then j + 4) */
        const __m512i hl = j == 0 ? _mm512_slli_epi16(qh, 4) : j == 1 ? _mm512_slli_epi16(qh, 3) : j == 2 ? _mm512_slli_epi16(qh, 2)
                                                                                                            : _mm512_slli_epi16(qh, 1);
        const __m512i hh = j == 0 ? qh : _mm512_srli_epi16(qh, j);
        const __m512i q = _mm512_loadu_si512((const void *)b->qs[j]);
        u[j] = _mm512_or_si512(_mm512_and_si512(q, m4), _mm512_and_si512(hl, m10));
        u[j + 4] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q, 4), m4), _mm512_and_si512(hh, m10));
    }
    q5r512_dots(u, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b->d)), q8, dy, ys16, acc, NC);
}

static void avx512_vnni_vec_dot_q5_0_r16(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_0_r16 *x = vx;
    const block_q8_0 *y = vy;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK5_0; i++) {
        r16_prefetch(x + i + 4, sizeof *x); /* a hint: never faults, past the end included */
        const int8_t *q8 = y[i].qs;
        const float dy = x86_h2f(y[i].d);
        const int32_t ys = q5r_ysum16(&y[i]);
        q5r512_block(x + i, &q8, &dy, &ys, &acc, 1);
    }
    _mm512_storeu_ps(s, acc);
}

AI void q5r512_tile(int64_t nb, const void *vx, const void *a, size_t as, const float *dy, const int32_t *ys, float *out, size_t os,
                    const int NC) {
    const block_q5_0_r16 *x = vx;
    __m512 acc[Q5R_NC];
    X86_UNROLL for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const int8_t *q8[Q5R_NC];
        X86_UNROLL for (int c = 0; c < NC; c++) q8[c] = ((const block_q8_0 *)((const char *)a + c * as))[i].qs;
        q5r512_block(x + i, q8, dy + i * Q5R_NC, ys + i * Q5R_NC, acc, NC);
    }
    X86_UNROLL for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + c * os, acc[c]);
}
Q5R_GEMM(avx512_vnni_gemm_q5_0_r16, avx512_vnni_vec_dot_q5_0_r16, q5r512_tile)

/* Plain Q5_0 rows on VNNI, with Q5_0_R16's numerics.  Qwen2.5-0.5B's
   Q4_K_M holds most of its weights as Q5_0 (its 896 columns are not whole
   256-blocks), so this is that model's main kernel.  Gathers put block i
   of 16 rows side by side, a row per dword lane (qh, the 4 qs dwords, d):
   the unpacked vectors are then Q5_0_R16's and q5r512_dots applies.  Per
   row: the exact integer sum and one fma per block, in block order, as
   q5_0_r16_vec_dot (formats/repack.c) defines; vec_dot takes the same
   steps for one row, so every batch size gives the same bits, and plain
   and repacked Q5_0 agree on this level. */
typedef struct q5g_blk {
    __m512i u[8]; /* columns 4g..4g+3 of the 16 rows, u = q + 16 */
    __m512 d;     /* the rows' scales */
} q5g_blk;

/* block i of the 16 rows at x (ws bytes apart) */
AI void q5g_unpack(const void *x, __m512i vidx, int64_t i, q5g_blk *o) {
    const char *b = (const char *)((const block_q5_0 *)x + i);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m10 = _mm512_set1_epi8(0x10);
    const __m512i qh = _mm512_i32gather_epi32(vidx, b + offsetof(block_q5_0, qh), 1);
    /* byte k of the dword from bit 4g + k of qh, at bit 4: the 4 bits
       spread by one multiply (copies at bits 4, 11, 18, 25: no carries) */
    const __m512i spread = _mm512_set1_epi32(0x02040810);
    X86_UNROLL for (int j = 0; j < 4; j++) {
        const __m512i q = _mm512_i32gather_epi32(vidx, b + offsetof(block_q5_0, qs) + 4 * j, 1);
        const __m512i hl = _mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(qh, 4 * j), _mm512_set1_epi32(0xF)), spread);
        const __m512i hh = _mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(qh, 16 + 4 * j), _mm512_set1_epi32(0xF)), spread);
        /* 0xEA: (A & B) | C, with C already masked below */
        o->u[j] = _mm512_ternarylogic_epi32(q, m4, _mm512_and_si512(hl, m10), 0xEA);
        o->u[j + 4] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(q, 4), m4, _mm512_and_si512(hh, m10), 0xEA);
    }
    const __m512i dw = _mm512_i32gather_epi32(vidx, b + offsetof(block_q5_0, d), 1);
    o->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dw));
}
AI __m512i q5g_vidx(size_t ws) {
    return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32((int)ws));
}

/* one row: the same integers and float steps, the 32 products of a block
   summed across the ymm's 8 lanes */
static void avx512_vnni_vec_dot_q5_0(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        const __m256i u = _mm256_or_si256(x86_nibbles16(x[i].qs), _mm256_maskz_mov_epi8((__mmask32)qh, _mm256_set1_epi8(0x10)));
        const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, _mm256_loadu_si256((const __m256i *)y[i].qs));
        const int32_t isum = x86_hsum256_epi32(p) - q5r_ysum16(&y[i]);
        acc = fmaf(x86_h2f(x[i].d) * x86_h2f(y[i].d), (float)isum, acc);
    }
    *s = acc;
}

/* cache lines of the next 16-row group to prefetch per block: 16 streams
   of 22-byte steps are more than the hardware prefetchers follow */
#define Q5G_PF_LINES(ws, nb) ((16 * (int64_t)(ws) / 64 + (nb) - 1) / (nb))
/* (sum of p0's lanes, p1's, p2's, p3's) */
AI __m128i q5g_hsum4(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
    const __m256i c = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    return _mm_add_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
}
/* NC (<= 3) columns straight from the activation rows: decode.  Gathers
   cost more than they save here (the panel reuses them across columns):
   each row is unpacked in its own ymm, and its 8 lane sums are reduced
   four rows at a time into the row's lane; then the same fma per block. */
AI void q5g_cols(int64_t nb, const void *x, size_t ws, const void *a, size_t as, float *out, size_t os, const int NC) {
    const __m512i vidx = q5g_vidx(ws);
    const __m256i m10 = _mm256_set1_epi8(0x10);
    __m512 acc[3];
    X86_UNROLL for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    const int64_t pfl = Q5G_PF_LINES(ws, nb);
    for (int64_t i = 0; i < nb; i++) {
        const __m256i *yq[3];
        float dy[3];
        int32_t ys[3];
        X86_UNROLL for (int c = 0; c < NC; c++) {
            const block_q8_0 *y = (const block_q8_0 *)((const char *)a + c * as) + i;
            yq[c] = (const __m256i *)y->qs;
            dy[c] = x86_h2f(y->d);
            ys[c] = q5r_ysum16(y);
        }
        /* the next group, a few lines per block (Q5G_PF_LINES) */
        for (int64_t l = i * pfl; l < (i + 1) * pfl; l++) _mm_prefetch((const char *)x + 16 * ws + 64 * l, _MM_HINT_T0);
        __m128i s4[3][4];
        X86_UNROLL for (int q = 0; q < 4; q++) {
            __m256i p[3][4];
            X86_UNROLL for (int k = 0; k < 4; k++) {
                const block_q5_0 *b = (const block_q5_0 *)((const char *)x + (4 * q + k) * ws) + i;
                uint32_t qh;
                memcpy(&qh, b->qh, 4);
                const __m256i u = _mm256_or_si256(x86_nibbles16(b->qs), _mm256_maskz_mov_epi8((__mmask32)qh, m10));
                X86_UNROLL for (int c = 0; c < NC; c++) p[c][k] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, _mm256_loadu_si256(yq[c]));
            }
            X86_UNROLL for (int c = 0; c < NC; c++) s4[c][q] = q5g_hsum4(p[c][0], p[c][1], p[c][2], p[c][3]);
        }
        const __m512i dw = _mm512_i32gather_epi32(vidx, (const char *)((const block_q5_0 *)x + i) + offsetof(block_q5_0, d), 1);
        const __m512 d16 = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dw));
        X86_UNROLL for (int c = 0; c < NC; c++) {
            __m512i s = _mm512_castsi128_si512(s4[c][0]);
            s = _mm512_inserti32x4(s, s4[c][1], 1);
            s = _mm512_inserti32x4(s, s4[c][2], 2);
            s = _mm512_inserti32x4(s, s4[c][3], 3);
            const __m512i isum = _mm512_sub_epi32(s, _mm512_set1_epi32(ys[c]));
            acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(d16, _mm512_set1_ps(dy[c])), _mm512_cvtepi32_ps(isum), acc[c]);
        }
    }
    X86_UNROLL for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + c * os, acc[c]);
}

#define Q5G_KC 32         /* blocks per unpacked weight chunk (18 KB) */
#define Q5G_PANEL 8192    /* activation (dy, ys) pairs per panel: 64 KB */
/* Q5R_NC columns of the unpacked chunk wp (blocks i0.., nk of them): acc
   starts at 0 for the first chunk, else from out, where the previous
   chunk left it (a float stored and reloaded: the same chain) */
AI void q5g_tile(const q5g_blk *wp, int64_t i0, int nk, const void *a, size_t as, const float *dy, const int32_t *ys, float *out,
                 size_t os, const int NC) {
    __m512 acc[Q5R_NC];
    X86_UNROLL for (int c = 0; c < NC; c++) acc[c] = i0 ? _mm512_loadu_ps(out + c * os) : _mm512_setzero_ps();
    for (int k = 0; k < nk; k++) {
        const int64_t i = i0 + k;
        const int8_t *q8[Q5R_NC];
        X86_UNROLL for (int c = 0; c < NC; c++) q8[c] = ((const block_q8_0 *)((const char *)a + c * as))[i].qs;
        q5r512_dots(wp[k].u, wp[k].d, q8, dy + i * Q5R_NC, ys + i * Q5R_NC, acc, NC);
    }
    X86_UNROLL for (int c = 0; c < NC; c++) _mm512_storeu_ps(out + c * os, acc[c]);
}
#define Q5G_TILE(k) else if (m == (k)) q5g_tile(wp, i0, nk, ac, as, dy + t * nb * Q5R_NC, ys + t * nb * Q5R_NC, o, ds, (k))

static void avx512_vnni_gemm_q5_0(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst,
                                  size_t ds) {
    const int64_t nb = n / QK5_0, ng = nr / 16;
    /* rows past the last whole group: one at a time */
    for (int64_t r = ng * 16; r < nr; r++)
        for (int64_t c = 0; c < nc; c++)
            avx512_vnni_vec_dot_q5_0(n, dst + c * ds + r, (const char *)w + r * ws, (const char *)a + c * as);
    /* tiles of Q5R_NC columns over panels of cc columns (cc * nb pairs) */
    const int64_t cc = (Q5G_PANEL / (nb ? nb : 1)) / Q5R_NC * Q5R_NC;
    const int64_t pfl = Q5G_PF_LINES(ws, nb);
    int64_t c0 = 0;
    if (nc >= 4 && cc >= Q5R_NC) {
        float dy[Q5G_PANEL];
        int32_t ys[Q5G_PANEL];
        q5g_blk wp[Q5G_KC];
        while (nc - c0 >= 4) {
            const int64_t pc = nc - c0 < cc ? nc - c0 : cc;
            const int nt = (int)((pc + Q5R_NC - 1) / Q5R_NC);
            for (int t = 0; t < nt; t++) {
                const int m = pc - t * Q5R_NC < Q5R_NC ? (int)(pc - t * Q5R_NC) : Q5R_NC;
                q5r_panel((const char *)a + (c0 + t * Q5R_NC) * as, as, m, nb, dy + t * nb * Q5R_NC, ys + t * nb * Q5R_NC);
            }
            for (int64_t g = 0; g < ng; g++) {
                const void *x = (const char *)w + 16 * g * ws;
                const __m512i vidx = q5g_vidx(ws);
                for (int64_t i0 = 0; i0 < nb; i0 += Q5G_KC) {
                    const int nk = nb - i0 < Q5G_KC ? (int)(nb - i0) : Q5G_KC;
                    for (int k = 0; k < nk; k++) {
                        for (int64_t l = (i0 + k) * pfl; l < (i0 + k + 1) * pfl; l++) _mm_prefetch((const char *)x + 16 * ws + 64 * l, _MM_HINT_T0);
                        q5g_unpack(x, vidx, i0 + k, &wp[k]);
                    }
                    for (int t = 0; t < nt; t++) {
                        const int m = pc - t * Q5R_NC < Q5R_NC ? (int)(pc - t * Q5R_NC) : Q5R_NC;
                        const char *ac = (const char *)a + (c0 + t * Q5R_NC) * as;
                        float *o = dst + (c0 + t * Q5R_NC) * ds + 16 * g;
                        if (m == Q5R_NC) q5g_tile(wp, i0, nk, ac, as, dy + t * nb * Q5R_NC, ys + t * nb * Q5R_NC, o, ds, Q5R_NC);
                        Q5G_TILE(7); Q5G_TILE(6); Q5G_TILE(5); Q5G_TILE(4); Q5G_TILE(3); Q5G_TILE(2); else q5g_tile(wp, i0, nk, ac, as, dy + t * nb * Q5R_NC, ys + t * nb * Q5R_NC, o, ds, 1);
                    }
                }
            }
            c0 += pc;
        }
    }
    /* few columns (decode), and what the panels left */
    for (; c0 < nc; c0 += 3) {
        const int m = nc - c0 < 3 ? (int)(nc - c0) : 3;
        const char *ac = (const char *)a + c0 * as;
        for (int64_t g = 0; g < ng; g++) {
            const void *x = (const char *)w + 16 * g * ws;
            float *o = dst + c0 * ds + 16 * g;
            if (m == 3) q5g_cols(nb, x, ws, ac, as, o, ds, 3);
            else if (m == 2) q5g_cols(nb, x, ws, ac, as, o, ds, 2);
            else q5g_cols(nb, x, ws, ac, as, o, ds, 1);
        }
    }
}

/* Q4_K_R16N: per sub-block s and column, 8 vpdpbusd give each row's
   sum(q * y) (|.| <= 32 * 15 * 128, exact), times the row's scale (vpmulld)
   into isum; the mins' msum by vpdpwssd of (min_2t, min_2t+1) pairs against
   the column's bsums pairs.  avx2_q4_K_r16n_t's sums, 16 rows at once. */
AI void avx512vnni_q4_K_r16n_t(int64_t n, const void *vx, const void *const *vy, float *out, size_t os, const int NC) {
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
                __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[0], bc4(q8));
                X86_UNROLL for (int k = 1; k < 4; k++) t = _mm512_dpbusd_epi32(t, lo[k], bc4(q8 + 4 * k));
                X86_UNROLL for (int k = 0; k < 4; k++) t = _mm512_dpbusd_epi32(t, hi[k], bc4(q8 + 16 + 4 * k));
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
R16_WRAP(avx512_vnni, q4_K_r16n, avx512vnni_q4_K_r16n_t)
/* 4 columns and more: the Q4_K panel, whose float steps are this format's
   definition already (one integer sum per row and superblock) */
R16_PANEL_GEMM(q4_K_r16n, block_q4_K_r16, pack_q4_K_r16, panel_q4_K_cols_tab)
/* Q4_K_R16 on VNNI: the same kernels (the panels' numerics are the VNNI
   Q4_K rows' too, so decode and prefill agree at any batch) */
R16_WRAP(avx512_vnni, q4_K_r16, avx512vnni_q4_K_r16n_t)
R16_PANEL_GEMM(q4_K_r16, block_q4_K_r16, pack_q4_K_r16, panel_q4_K_cols_tab)
/* Q6_K_R16 on VNNI: the panel at every column count (its lane kernels
   follow another float order); decode pays the panel's unpacking */
static void avx512_vnni_gemm_q6_K_r16_panel(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as,
                                            float *dst, size_t ds) {
    for (int64_t g = 0; g < nr; g += PANEL_ROWS)
        panel_gemm(n, PANEL_ROWS, nc, (const char *)w + g * ws, ws, a, as, dst + g, ds, sizeof(block_q6_K_r16), 1, g + PANEL_ROWS < nr,
                   pack_q6_K_r16, panel_q6_K_cols_tab);
}
static void avx512_vnni_vec_dot_q6_K_r16(int64_t n, float *s, const void *x, const void *y) {
    avx512_vnni_gemm_q6_K_r16_panel(n, PANEL_ROWS, 1, x, 0, y, 0, s, 0);
}

/* attn_f16: the avx2 level's, with the y update (elementwise, bound by the
   f16 conversions) on 16 lanes; same values */
typedef __m512 attn_vec;
#define ATTN_FN avx512_attn_f16
#define ATTN_EXPF8 x86_expf8_avx512
#define ATTN_W 16
AI attn_vec attn_ld(const float *p) { return _mm512_loadu_ps(p); }
AI void attn_st(float *p, attn_vec x) { _mm512_storeu_ps(p, x); }
AI attn_vec attn_set1(float x) { return _mm512_set1_ps(x); }
AI attn_vec attn_ld16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
AI attn_vec attn_round16(attn_vec x) { return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)); }
AI attn_vec attn_fma(attn_vec a, attn_vec b, attn_vec c) { return _mm512_fmadd_ps(a, b, c); }
AI attn_vec attn_mul(attn_vec a, attn_vec b) { return _mm512_mul_ps(a, b); }
#include "../x86/attn.h"

/* The avx512 level: the formats of a Q4_K_M model and their repacks; the
   rest is the avx2 level's (linked in, built with AVX2 flags). */
#define K(P, T, A, name) PK_KERNEL(T, A, P##_vec_dot_##name, P##_gemm_##name)
static const picolm_kernel avx512_kernels[] = {
    K(avx512, Q4_K, Q8_K, q4_K), K(avx512, Q6_K, Q8_K, q6_K), K(avx512, Q8_0, Q8_0, q8_0), K(avx512, Q4_K_R, Q8_K, q4_K_r),
    K(avx512, Q4_K_R16, Q8_K, q4_K_r16), K(avx512, Q6_K_R16, Q8_K, q6_K_r16),
};
static const picolm_backend_vtable avx512_prims = {.attn_f16 = avx512_attn_f16};
static void avx512_tune(pk_tune *t, const pk_cpu *cpu);
PK_LEVEL_TUNED(avx512, "avx512", 0, avx512_kernels, PK_COUNT(avx512_kernels), NULL, 0, &avx512_prims, avx512_tune);

/* The VNNI variant (vpdpwssd / vpdpbusd), overlaid when the CPU has it;
   Q4_K, Q4_K_R and the R16 layouts prefill through the 16-row panels. */
#define KP(T, A, name) PK_KERNEL(T, A, avx512_vnni_vec_dot_##name, avx512_vnni_gemm_##name##_panel)
static const picolm_kernel avx512vnni_kernels[] = {
    KP(Q4_K, Q8_K, q4_K), KP(Q6_K, Q8_K, q6_K), K(avx512_vnni, Q8_0, Q8_0, q8_0), KP(Q4_K_R, Q8_K, q4_K_r),
    KP(Q4_K_R16, Q8_K, q4_K_r16), KP(Q6_K_R16, Q8_K, q6_K_r16),
    K(avx512_vnni, Q5_0_R16, Q8_0, q5_0_r16), KP(Q4_K_R16N, Q8_K, q4_K_r16n), K(avx512_vnni, Q5_0, Q8_0, q5_0),
};
static void avx512_tune(pk_tune *t, const pk_cpu *cpu) {
    (void)cpu;
    t->attn_expf = x86_expf8_avx512_matches_libm() ? PK_EXPF_VECTOR : PK_EXPF_LIBM;
}
static void avx512vnni_tune(pk_tune *t, const pk_cpu *cpu) {
    const int intel = cpu->vendor == PICOLM_VENDOR_INTEL;
    t->panel_min_nc_q4_K = intel ? 7 : 8;
    t->panel_min_nc_q6_K = intel ? 9 : 8;
    t->panel_min_nc_r16 = 8;
}
PK_LEVEL_TUNED(avx512vnni, "avx512vnni", PICOLM_CPU_AVX512VNNI, avx512vnni_kernels, PK_COUNT(avx512vnni_kernels), NULL, 0, NULL,
               avx512vnni_tune);
