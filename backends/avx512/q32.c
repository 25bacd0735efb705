/*
 * The avx512 level's 32-element formats against Q8_0: Q8_0 two blocks per
 * vector; Q5_0_R16 (x86/q5r16.h) and plain Q5_0 with Q5_0_R16's numerics.
 * A 64-byte vector of Q5_0_R16 is 4 columns of all 16 rows, a dword per
 * row: vpdpbusd against the 4 activation bytes broadcast adds each row's 4
 * products in its own lane, exactly (no int16 step).  The integer sums and
 * the one fma per row and block are the format's definition
 * (formats/repack.c), so the results equal the reference and the avx2
 * kernels bit for bit, at every batch size.
 */
#include "avx512.h"
#include "../x86/q5r16.h"
#include "../x86/r16.h"

AI int32_t x86_hsum256_epi32(__m256i v) { return _mm512_reduce_add_epi32(_mm512_zextsi256_si512(v)); }

/* ---- Q8_0 x Q8_0 -------------------------------------------------------------- */
AI __m512i ld2x32(const int8_t *a, const int8_t *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}
/* |x| (as u8) and y with x's sign, so that u8 x s8 products equal x*y */
AI __m512i neg_where(__m512i y, __m512i x) {
    return _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(x), _mm512_setzero_si512(), y);
}
/* NC (<= 4) columns: per pair of blocks and column, one fma of the exact
   integer sums (vpdpbusd) by the two blocks' scale products; an odd last
   block through avx2_q8_0_nc (x86/avx2.h), whose steps are the same */
AI void q8_0_nc(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) {
    const block_q8_0 *x = vx;
    const int64_t nb = n / QK8_0;
    __m512 acc[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps() };
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i qx = ld2x32(x[i].qs, x[i + 1].qs);
        const __m512i ax = _mm512_abs_epi8(qx);
        const float d0 = x86_h2f(x[i].d), d1 = x86_h2f(x[i + 1].d);
        for (int c = 0; c < NC; c++) {
            const block_q8_0 *y = (const block_q8_0 *)vy[c] + i;
            const __m512i sy = neg_where(ld2x32(y[0].qs, y[1].qs), qx);
            const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(d0 * x86_h2f(y[0].d)), _mm256_set1_ps(d1 * x86_h2f(y[1].d)), 1);
            acc[c] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ax, sy)), acc[c]);
        }
    }
    float tail[4] = { 0, 0, 0, 0 };
    if (i < nb) {
        const void *ys[4];
        for (int c = 0; c < NC; c++) ys[c] = (const block_q8_0 *)vy[c] + i;
        avx2_q8_0_nc(QK8_0, x + i, ys, tail, NC);
    }
    for (int c = 0; c < NC; c++) out[c] = x86_hsum512(acc[c]) + tail[c];
}
X86_WRAP(a512, q8_0, q8_0_nc)
void avx512_vec_dot_q8_0(int64_t n, float *s, const void *x, const void *y) { a512_vec_dot_q8_0(n, s, x, y); }
void avx512_gemm_q8_0(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds) {
    a512_gemm_q8_0(n, nr, nc, w, ws, a, as, dst, ds);
}

/* ---- Q5_0_R16 x Q8_0 ---------------------------------------------------------- */

/* 16 rows of a Q5_0 block against NC activation blocks: u[g] holds columns
   4g..4g+3 of every row (a dword per row, u = q + 16), d16 the rows'
   scales; q8[c], dy[c], ys16[c] as q5r_half's.  Per row the exact integer
   sum and one fma: Q5_0_R16's definition. */
AI void q5r512_dots(const __m512i *u, __m512 d16, const int8_t *const *q8, const float *dy, const int32_t *ys16, __m512 *acc,
                    const int NC) {
    X86_UNROLL for (int c = 0; c < NC; c++) {
        __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], bcast32(q8[c]));
        X86_UNROLL for (int g = 1; g < 8; g++) s = _mm512_dpbusd_epi32(s, u[g], bcast32(q8[c] + 4 * g));
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

void avx512_vec_dot_q5_0_r16(int64_t n, float *s, const void *vx, const void *vy) {
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
Q5R_GEMM(q5r512_gemm, avx512_vec_dot_q5_0_r16, q5r512_tile)
void avx512_gemm_q5_0_r16(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst, size_t ds) {
    q5r512_gemm(n, nr, nc, w, ws, a, as, dst, ds);
}

/* Plain Q5_0 rows, with Q5_0_R16's numerics.  Qwen2.5-0.5B's
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
void avx512_vec_dot_q5_0(int64_t n, float *s, const void *vx, const void *vy) {
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

void avx512_gemm_q5_0(int64_t n, int64_t nr, int64_t nc, const void *w, size_t ws, const void *a, size_t as, float *dst,
                                  size_t ds) {
    const int64_t nb = n / QK5_0, ng = nr / 16;
    /* rows past the last whole group: one at a time */
    for (int64_t r = ng * 16; r < nr; r++)
        for (int64_t c = 0; c < nc; c++)
            avx512_vec_dot_q5_0(n, dst + c * ds + r, (const char *)w + r * ws, (const char *)a + c * as);
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

