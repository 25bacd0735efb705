/*
 * The avx2 level's kernels for the 16-row interleaved layouts (x86/r16.h):
 * Q4_K_R16, Q6_K_R16, Q4_K_R16N, and Q5_0_R16 (with x86/q5r16.h).  A ymm is
 * one half of a 64-byte vector of the layout: 8 rows.
 *
 * Q4_K_R16 / Q6_K_R16: same integers, same float steps as the row kernels
 * (avx2_q4_K_t, avx2_q6_K_t): those keep 8 int32 partial sums per row and
 * superblock, lane p = columns 4p..4p+3 of every 32-column chunk, each
 * converted and fma'd into its own float lane, summed at the end by
 * x86_hsum_ps.  Here the vectors are "p-major" (one ymm = lane p of 8 rows),
 * so every row goes through exactly those operations and the final
 * horizontal sums become vertical adds in the same order.  Results are
 * bit-identical to the row kernels on the base rows, so a Q4_K_M model and
 * its R16 twin give the same logits with this backend.
 *
 * NC (1..R16_NC activation columns) is a compile-time constant at each call
 * site: each weight vector is loaded and unpacked once per NC columns.
 */
#ifndef PICOLM_AVX2_R16_H
#define PICOLM_AVX2_R16_H
#include "../x86/q5r16.h"
#include "../x86/r16.h"

/* pshufb controls (on a 16-byte vector broadcast to both 128-bit lanes):
   byte b of rows 8h..8h+7 -> the int16 pair (b, b) in row's 32-bit lane.
   u: zero-extended; s: b in the high byte of each int16, for srai 8. */
#define Z 0x80
static const uint8_t r16_pair_u[2][32] __attribute__((aligned(32), unused)) = {
#define P(r) r, Z, r, Z
    { P(0), P(1), P(2), P(3), P(4), P(5), P(6), P(7) },
    { P(8), P(9), P(10), P(11), P(12), P(13), P(14), P(15) },
#undef P
};
static const uint8_t r16_pair_s[2][32] __attribute__((aligned(32), unused)) = {
#define P(r) Z, r, Z, r
    { P(0), P(1), P(2), P(3), P(4), P(5), P(6), P(7) },
    { P(8), P(9), P(10), P(11), P(12), P(13), P(14), P(15) },
#undef P
};
#undef Z

AI __m256i r16_pairs_u8(__m128i v16, int h) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(v16), _mm256_load_si256((const __m256i *)r16_pair_u[h]));
}
AI __m256i r16_pairs_s8(__m128i v16, int h) {
    return _mm256_srai_epi16(_mm256_shuffle_epi8(_mm256_broadcastsi128_si256(v16),
                                                 _mm256_load_si256((const __m256i *)r16_pair_s[h])), 8);
}
/* 4 bytes at p broadcast to 8 lanes */
AI __m256i r16_bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
/* The kernels read a block in lane order, not address order, which the
   hardware prefetchers follow poorly from DRAM (docs/perf.md): fetch the
   block R16_PF ahead. */
#ifndef R16_PF
#define R16_PF 2
#endif
/* (a0+a4 + a2+a6) + (a1+a5 + a3+a7): x86_hsum_ps's order, lane-wise */
AI __m256 r16_sum8(const __m256 a[8]) {
    const __m256 t0 = _mm256_add_ps(a[0], a[4]), t1 = _mm256_add_ps(a[1], a[5]);
    const __m256 t2 = _mm256_add_ps(a[2], a[6]), t3 = _mm256_add_ps(a[3], a[7]);
    return _mm256_add_ps(_mm256_add_ps(t0, t2), _mm256_add_ps(t1, t3));
}
/* x86_hsum_ps128's order */
AI __m256 r16_sum4(const __m256 a[4]) {
    return _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
}

/* ======================================================================== */
/* Q4_K_R16 x Q8_K                                                            */
/* ======================================================================== */
/* out[c * os + r] = dot(row r of the group at vx, column c), r < 16, c < NC */
AI void avx2_q4_K_r16_t(int64_t n, const void *vx, const void *const *vy, float *out, size_t os, const int NC) {
    const block_q4_K_r16 *x = vx;
    const int64_t nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    /* float accumulators, per column and half: 8 data lanes p, 4 min lanes t */
    __m256 acc[R16_NC][2][8], accm[R16_NC][2][4];
    for (int c = 0; c < NC; c++)
        for (int h = 0; h < 2; h++) {
            for (int p = 0; p < 8; p++) acc[c][h][p] = _mm256_setzero_ps();
            for (int t = 0; t < 4; t++) accm[c][h][t] = _mm256_setzero_ps();
        }
    for (int64_t i = 0; i < nb; i++) {
        const block_q4_K_r16 *b = x + i;
        r16_prefetch(b + R16_PF, sizeof *b);
        __m128i sc6[8], mn6[8];
        for (int s = 0; s < 8; s++) {
            sc6[s] = r16_k4_get6(b->scales_l, b->scales_h, s);
            mn6[s] = r16_k4_get6(b->mins_l, b->mins_h, s);
        }
        const block_q8_K *y[R16_NC];
        int32_t q8s[R16_NC][4];
        r16_k8_cols(vy, i, NC, y, q8s);
        for (int h = 0; h < 2; h++) {
            const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b->d + 8 * h)));
            const __m256 m8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b->dmin + 8 * h)));
            /* mins: lane t of the row kernel = m[2t] * q8s[2t] + m[2t+1] * q8s[2t+1] */
            for (int t = 0; t < 4; t++) {
                const __m128i lo = _mm_unpacklo_epi8(mn6[2 * t], mn6[2 * t + 1]);
                const __m128i hi = _mm_unpackhi_epi8(mn6[2 * t], mn6[2 * t + 1]);
                const __m256i mp = _mm256_cvtepu8_epi16(h ? hi : lo);
                for (int c = 0; c < NC; c++) {
                    const __m256i pm = _mm256_madd_epi16(mp, _mm256_set1_epi32(q8s[c][t]));
                    accm[c][h][t] = _mm256_fmadd_ps(_mm256_mul_ps(m8, _mm256_set1_ps(y[c]->d)), _mm256_cvtepi32_ps(pm), accm[c][h][t]);
                }
            }
            __m256i scv[8];
            #pragma GCC unroll 16
            for (int s = 0; s < 8; s++) scv[s] = r16_pairs_u8(sc6[s], h);
            __m256 dy[R16_NC];
            for (int c = 0; c < NC; c++) dy[c] = _mm256_mul_ps(d8, _mm256_set1_ps(y[c]->d));
            /* lane p < 4: low nibbles of vector 4s+p; lane p+4: high nibbles */
            for (int p = 0; p < 4; p++) {
                __m256i sl[R16_NC], sh[R16_NC];
                for (int c = 0; c < NC; c++) sl[c] = sh[c] = _mm256_setzero_si256();
                #pragma GCC unroll 16
                for (int s = 0; s < 8; s++) {
                    const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs[4 * s + p] + 32 * h));
                    const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                    for (int c = 0; c < NC; c++) {
                        const int8_t *q8 = y[c]->qs + 32 * s + 4 * p;
                        sl[c] = _mm256_add_epi32(sl[c], _mm256_madd_epi16(scv[s], _mm256_maddubs_epi16(lo, r16_bcast4(q8))));
                        sh[c] = _mm256_add_epi32(sh[c], _mm256_madd_epi16(scv[s], _mm256_maddubs_epi16(hi, r16_bcast4(q8 + 16))));
                    }
                }
                for (int c = 0; c < NC; c++) {
                    acc[c][h][p] = _mm256_fmadd_ps(dy[c], _mm256_cvtepi32_ps(sl[c]), acc[c][h][p]);
                    acc[c][h][p + 4] = _mm256_fmadd_ps(dy[c], _mm256_cvtepi32_ps(sh[c]), acc[c][h][p + 4]);
                }
            }
        }
    }
    for (int c = 0; c < NC; c++)
        for (int h = 0; h < 2; h++)
            _mm256_storeu_ps(out + c * os + 8 * h, _mm256_sub_ps(r16_sum8(acc[c][h]), r16_sum4(accm[c][h])));
}

/* ======================================================================== */
/* Q4_K_R16N x Q8_K: Q4_K_R16's bytes, numerics of its own                    */
/* ======================================================================== */
/* The format's definition (formats/repack.c, q4_K_r16n_vec_dot): per row
   and superblock the exact integer sums isum = sum_s scale_s * (q . y)_s and
   msum = sum_s min_s * bsum_s, then acc = fma(d_r * d_y, isum, acc) and
   acc = fma(-(dmin_r * d_y), msum, acc).  Every row lives in its own lane,
   so nothing is summed across lanes: a sub-block costs 8 maddubs, their
   int16 sum (8 pairs of 15 * 128 at most: 30720 < 32768) and one madd by
   the scale, against 8 maddubs and 8 madds in Q4_K's order above. */
AI void avx2_q4_K_r16n_t(int64_t n, const void *vx, const void *const *vy, float *out, size_t os, const int NC) {
    const block_q4_K_r16 *x = vx;
    const int64_t nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc[R16_NC][2];
    for (int c = 0; c < NC; c++) acc[c][0] = acc[c][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const block_q4_K_r16 *b = x + i;
        r16_prefetch(b + R16_PF, sizeof *b);
        const block_q8_K *y[R16_NC];
        int32_t q8s[R16_NC][4];
        r16_k8_cols(vy, i, NC, y, q8s);
        for (int h = 0; h < 2; h++) {
            __m256i isum[R16_NC], msum[R16_NC];
            for (int c = 0; c < NC; c++) isum[c] = msum[c] = _mm256_setzero_si256();
            X86_UNROLL for (int t = 0; t < 4; t++) {
                const __m128i m0 = r16_k4_get6(b->mins_l, b->mins_h, 2 * t), m1 = r16_k4_get6(b->mins_l, b->mins_h, 2 * t + 1);
                const __m256i mp = _mm256_cvtepu8_epi16(h ? _mm_unpackhi_epi8(m0, m1) : _mm_unpacklo_epi8(m0, m1));
                for (int c = 0; c < NC; c++) msum[c] = _mm256_add_epi32(msum[c], _mm256_madd_epi16(mp, _mm256_set1_epi32(q8s[c][t])));
            }
            X86_UNROLL for (int s = 0; s < 8; s++) {
                const __m256i sc = r16_pairs_u8(r16_k4_get6(b->scales_l, b->scales_h, s), h);
                __m256i u[8];
                X86_UNROLL for (int k = 0; k < 4; k++) {
                    const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs[4 * s + k] + 32 * h));
                    u[k] = _mm256_and_si256(q, m4);
                    u[k + 4] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                }
                for (int c = 0; c < NC; c++) {
                    const int8_t *q8 = y[c]->qs + 32 * s;
                    __m256i lo = _mm256_maddubs_epi16(u[0], r16_bcast4(q8)), hi = _mm256_maddubs_epi16(u[4], r16_bcast4(q8 + 16));
                    X86_UNROLL for (int k = 1; k < 4; k++) {
                        lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(u[k], r16_bcast4(q8 + 4 * k)));
                        hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(u[k + 4], r16_bcast4(q8 + 16 + 4 * k)));
                    }
                    isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(_mm256_add_epi16(lo, hi), sc));
                }
            }
            const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b->d + 8 * h)));
            const __m256 m8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b->dmin + 8 * h)));
            for (int c = 0; c < NC; c++) {
                const __m256 dy = _mm256_set1_ps(y[c]->d);
                acc[c][h] = _mm256_fmadd_ps(_mm256_mul_ps(d8, dy), _mm256_cvtepi32_ps(isum[c]), acc[c][h]);
                acc[c][h] = _mm256_fnmadd_ps(_mm256_mul_ps(m8, dy), _mm256_cvtepi32_ps(msum[c]), acc[c][h]);
            }
        }
    }
    for (int c = 0; c < NC; c++)
        for (int h = 0; h < 2; h++) _mm256_storeu_ps(out + c * os + 8 * h, acc[c][h]);
}

/* ======================================================================== */
/* Q6_K_R16 x Q8_K                                                            */
/* ======================================================================== */
AI void avx2_q6_K_r16_t(int64_t n, const void *vx, const void *const *vy, float *out, size_t os, const int NC) {
    const block_q6_K_r16 *x = vx;
    const int64_t nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0xF), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[R16_NC][2][8];
    for (int c = 0; c < NC; c++)
        for (int h = 0; h < 2; h++)
            for (int p = 0; p < 8; p++) acc[c][h][p] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const block_q6_K_r16 *b = x + i;
        r16_prefetch(b + R16_PF, sizeof *b);
        const block_q8_K *y[R16_NC];
        for (int c = 0; c < NC; c++) y[c] = (const block_q8_K *)vy[c] + i;
        for (int h = 0; h < 2; h++) {
            const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b->d + 8 * h)));
            __m256i scv[16];
            #pragma GCC unroll 16
            for (int s = 0; s < 16; s++) scv[s] = r16_pairs_s8(_mm_loadu_si128((const __m128i *)b->scales[s]), h);
            __m256 dy[R16_NC];
            for (int c = 0; c < NC; c++) dy[c] = _mm256_mul_ps(d8, _mm256_set1_ps(y[c]->d));
            /* lane p: groups g = p + 8m (columns 4g..4g+3), scale g / 4 */
            for (int p = 0; p < 8; p++) {
                /* the -32 offset: -32 * (sc[2p] * bsums[2p] + sc[2p+1] * bsums[2p+1]) */
                const __m128i s0 = _mm_loadu_si128((const __m128i *)b->scales[2 * p]);
                const __m128i s1 = _mm_loadu_si128((const __m128i *)b->scales[2 * p + 1]);
                const __m256i sp = _mm256_cvtepi8_epi16(h ? _mm_unpackhi_epi8(s0, s1) : _mm_unpacklo_epi8(s0, s1));
                __m256i sumi[R16_NC];
                for (int c = 0; c < NC; c++) {
                    const __m256i off = _mm256_madd_epi16(sp, r16_bcast4((const int8_t *)(y[c]->bsums + 2 * p)));
                    sumi[c] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
                }
                #pragma GCC unroll 16
                for (int u = p; u < 16; u += 8) {
                    /* groups u, u+16 (ql[u], ql[u+16] low nibbles), u+32, u+48 (high) */
                    const __m256i qa = _mm256_loadu_si256((const __m256i *)(b->ql[u] + 32 * h));
                    const __m256i qb = _mm256_loadu_si256((const __m256i *)(b->ql[u + 16] + 32 * h));
                    const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh[u] + 32 * h));
                    __m256i q[4];
                    q[0] = _mm256_or_si256(_mm256_and_si256(qa, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
                    q[1] = _mm256_or_si256(_mm256_and_si256(qb, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
                    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), m4), _mm256_and_si256(qh, m30));
                    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
                    #pragma GCC unroll 16
                    for (int k = 0; k < 4; k++) {
                        const int g = u + 16 * k;
                        for (int c = 0; c < NC; c++) {
                            const __m256i pr = _mm256_maddubs_epi16(q[k], r16_bcast4(y[c]->qs + 4 * g));
                            sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(scv[g / 4], pr));
                        }
                    }
                }
                for (int c = 0; c < NC; c++) acc[c][h][p] = _mm256_fmadd_ps(dy[c], _mm256_cvtepi32_ps(sumi[c]), acc[c][h][p]);
            }
        }
    }
    for (int c = 0; c < NC; c++)
        for (int h = 0; h < 2; h++) _mm256_storeu_ps(out + c * os + 8 * h, r16_sum8(acc[c][h]));
}

/* ======================================================================== */
/* Q5_0_R16 x Q8_0 (x86/q5r16.h)                                              */
/* ======================================================================== */
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

Q5R_GEMM(avx2_gemm_q5_0_r16, avx2_vec_dot_q5_0_r16, q5r_tile)

#endif
