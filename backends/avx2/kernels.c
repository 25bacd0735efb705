/*
 * The avx2 level (AVX2 + FMA + F16C): every weight format, gemm tiles, the
 * Q8 activation quantizers and the vector primitives.  Shared with the
 * avx512 level: ../x86/ (avx2.h, r16.h, q5r16.h, attn.h, expf.h); this
 * level's own: tile8.h, ktile.h (gemm tiles), r16.h (the 16-row layouts),
 * expf.h.
 */
#include "../x86/avx2.h"
#include "expf.h"
#include "ktile.h"
#include "r16.h"
#include "tile8.h"

/* ======================================================================== */
/* Q4_0 / IQ4_NL x Q8_0, Q4_1 x Q8_1, Q5_0 x Q8_0, Q5_1 x Q8_1              */
/* ======================================================================== */
/* (the row template and unpackers: x86/avx2.h) */
X86_NC32(avx2, q4_0, 1)
X86_NC32(avx2, iq4_nl, 1)
X86_NC32(avx2, q5_0, 1)
X86_NC32(avx2, q4_1, 0)
X86_NC32(avx2, q5_1, 0)

/* ======================================================================== */
/* K-quants x Q8_K                                                            */
/* ======================================================================== */
/* Prefetch of the weights KQ_PF bytes ahead (into the next rows near a
   row's end; past the matrix's end it is harmless, prefetches do not
   fault): the hardware prefetcher alone leaves a single-thread vec_dot and
   the few-column tiles waiting on DRAM (docs/perf.md, "Tuning
   constants") */
#ifndef KQ_PF
#define KQ_PF 1024
#endif
AI void kq_prefetch(const void *xb, size_t bsz) {
    for (size_t o = 0; o < bsz; o += 64) _mm_prefetch((const char *)xb + KQ_PF + o, _MM_HINT_T0);
}
/* The per-superblock float steps every K-quant tile ends with (ktile.h):
   acc[c] += (dx * dy_c) * float(sumi[c]), dy_c from the panel P or the block. */
AI void kq_acc(__m256 *acc, const __m256i *sumi, float dx, const kq_sb *P, const void *const *vy, int64_t i, const int NC) {
    const __m256 vdx = _mm256_set1_ps(dx);
    X86_UNROLL for (int c = 0; c < NC; c++) {
        const __m256 s = P ? _mm256_mul_ps(vdx, _mm256_load_ps(P[i].d[c])) : _mm256_set1_ps(dx * ((const block_q8_K *)vy[c])[i].d);
        acc[c] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(sumi[c]), acc[c]);
    }
}

/* Q4_K, Q4_K_R (the scales pre-unpacked) and Q5_K (a fifth bit from qh):
   the same tile, F picks the block layout */
enum { K45_Q4_K, K45_Q4_K_R, K45_Q5_K };
/* quants 64j + 32 half .. + 31 of a block: sub-block 2j + half, the low
   nibbles (half 0) or the high ones (Q5_K: bit 2j + half of qh -> 16) */
AI __m256i k45_q(const uint8_t *qs, const void *xb, int j, int half, const int F) {
    const __m256i q4 = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
    __m256i q = _mm256_and_si256(half ? _mm256_srli_epi16(q4, 4) : q4, _mm256_set1_epi8(0xF));
    if (F == K45_Q5_K) {
        const __m256i hbits = _mm256_loadu_si256((const __m256i *)((const block_q5_K *)xb)->qh);
        q = _mm256_or_si256(q, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hbits, 2 * j + half), 4), _mm256_set1_epi8(16)));
    }
    return q;
}
AI void avx2_k45_t(int64_t n, const void *vx, const void *const *vy, float *out, const int NC, const kq_sb *P, const int F) {
    const int64_t nb = n / QK_K;
    const int R = F == K45_Q4_K_R;
    const size_t bsz = F == K45_Q5_K ? sizeof(block_q5_K) : K4_BSZ(R);
    __m256 acc[KQ_NC];
    /* the mins term, 4 lanes a column: per column (vec_dot), or per column
       pair in the two halves of a vector (panel) */
    __m128 accm[KQ_NC];
    __m256 accm2[KQ_NC / 2];
    X86_UNROLL for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps(), accm[c] = _mm_setzero_ps();
    X86_UNROLL for (int p = 0; p < (NC + 1) / 2; p++) accm2[p] = _mm256_setzero_ps();
    /* the next superblock's scales and mins, unpacked one step ahead: every
       product waits on them, and out-of-order execution does not reach that
       far ahead by itself */
    __m128i sm_next = k4_sm8(vx, R);
    for (int64_t i = 0; i < nb; i++) {
        const void *xb = (const char *)vx + (size_t)i * bsz;
        /* Q5_K's scales are Q4_K's (same offset); its quants follow qh */
        const uint8_t *qs = F == K45_Q5_K ? ((const block_q5_K *)xb)->qs : k4_qs(xb, R);
        const __m256i ms = _mm256_cvtepu8_epi16(sm_next);
        sm_next = k4_sm8((const char *)vx + (size_t)(i + 1 < nb ? i + 1 : i) * bsz, R);
        kq_prefetch(xb, bsz);
        const __m128i mins = _mm256_extracti128_si256(ms, 1);
        const __m256i scales = _mm256_permute2x128_si256(ms, ms, 0x00);
        const float dx = k4_d(xb), mx = k4_dmin(xb);
        __m256i sumi[KQ_NC];
        X86_UNROLL for (int c = 0; c < NC; c++) sumi[c] = _mm256_setzero_si256();
        if (P && NC >= KQ_PAIR_NC) {
            /* the wide tiles: sub-blocks 2j and 2j + 1 in the pair layout,
               the activations so arranged in the panel (ktile.h) */
            X86_UNROLL for (int j = 0; j < 4; j++) {
                const __m256i lo = k45_q(qs, xb, j, 0, F), hi = k45_q(qs, xb, j, 1, F);
                const __m256i q1 = kq_pair1(lo, hi), q2 = kq_pair2(lo, hi);
                /* (s[2j], s[2j + 1]) over the int16 lane pairs (constant selectors for clang) */
                const __m256i s = j == 0 ? _mm256_shuffle_epi32(scales, 0x00) : j == 1 ? _mm256_shuffle_epi32(scales, 0x55)
                                : j == 2 ? _mm256_shuffle_epi32(scales, 0xAA) : _mm256_shuffle_epi32(scales, 0xFF);
                X86_UNROLL for (int c = 0; c < NC; c++) {
                    const int8_t *q8 = kq_yq(P, nb, i, c) + 64 * j;
                    const __m256i m = _mm256_add_epi16(_mm256_maddubs_epi16(q1, _mm256_load_si256((const __m256i *)q8)),
                                                       _mm256_maddubs_epi16(q2, _mm256_load_si256((const __m256i *)(q8 + 32))));
                    sumi[c] = x86_keep(_mm256_add_epi32(sumi[c], _mm256_madd_epi16(s, m)));
                }
            }
        } else {
            X86_UNROLL for (int j = 0; j < 4; j++)
                X86_UNROLL for (int half = 0; half < 2; half++) {
                    const __m256i q = k45_q(qs, xb, j, half, F);
                    const __m256i s = x86_bcast_lane16(scales, 2 * j + half);
                    X86_UNROLL for (int c = 0; c < NC; c++) {
                        const int8_t *q8 = ((const block_q8_K *)vy[c])[i].qs + 64 * j + 32 * half;
                        const __m256i p = _mm256_madd_epi16(s, _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)q8)));
                        sumi[c] = x86_keep(_mm256_add_epi32(sumi[c], p));
                    }
                }
        }
        kq_acc(acc, sumi, dx, P, vy, i, NC);
        if (P) {
            const __m256i mins2 = _mm256_broadcastsi128_si256(mins);
            X86_UNROLL for (int p = 0; p < (NC + 1) / 2; p++) {
                const __m256i pm = _mm256_madd_epi16(mins2, _mm256_load_si256((const __m256i *)P[i].q8s[2 * p]));
                accm2[p] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(mx), _mm256_load_ps(P[i].d2[p])), _mm256_cvtepi32_ps(pm), accm2[p]);
            }
        } else {
            X86_UNROLL for (int c = 0; c < NC; c++) {
                const block_q8_K *y = (const block_q8_K *)vy[c] + i;
                const __m128i q8s = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y->bsums), _mm_loadu_si128((const __m128i *)(y->bsums + 8)));
                accm[c] = _mm_fmadd_ps(_mm_set1_ps(mx * y->d), _mm_cvtepi32_ps(_mm_madd_epi16(mins, q8s)), accm[c]);
            }
        }
    }
    X86_UNROLL for (int c = 0; c < NC; c++) {
        const __m128 m = !P ? accm[c] : c & 1 ? _mm256_extractf128_ps(accm2[c / 2], 1) : _mm256_castps256_ps128(accm2[c / 2]);
        out[c] = x86_hsum_ps(acc[c]) - x86_hsum_ps128(m);
    }
}
AI void avx2_q4_K_t(int64_t n, const void *vx, const void *const *vy, float *out, const int NC, const kq_sb *P) { avx2_k45_t(n, vx, vy, out, NC, P, K45_Q4_K); }
AI void avx2_q4_K_r_t(int64_t n, const void *vx, const void *const *vy, float *out, const int NC, const kq_sb *P) { avx2_k45_t(n, vx, vy, out, NC, P, K45_Q4_K_R); }
AI void avx2_q5_K_t(int64_t n, const void *vx, const void *const *vy, float *out, const int NC, const kq_sb *P) { avx2_k45_t(n, vx, vy, out, NC, P, K45_Q5_K); }

/* 16 int8 scales -> the int16 pair (sc[2k], sc[2k+1]) broadcast over 2x128 */
static const uint8_t x86_k6_shuf[8][16] __attribute__((aligned(16), unused)) = {
#define R(k) { 2*k, 2*k, 2*k, 2*k, 2*k, 2*k, 2*k, 2*k, 2*k+1, 2*k+1, 2*k+1, 2*k+1, 2*k+1, 2*k+1, 2*k+1, 2*k+1 }
    R(0), R(1), R(2), R(3), R(4), R(5), R(6), R(7)
#undef R
};

/* int16 lanes 2k (low half) and 2k + 1 (high half) broadcast over their
   halves: (sc[2k], sc[2k+1]) from the int16 scales */
static const uint8_t x86_k6_pair[4][32] __attribute__((aligned(32))) = {
#define R(k) { 4*k, 4*k+1, 4*k, 4*k+1, 4*k, 4*k+1, 4*k, 4*k+1, 4*k, 4*k+1, 4*k, 4*k+1, 4*k, 4*k+1, 4*k, 4*k+1, \
               4*k+2, 4*k+3, 4*k+2, 4*k+3, 4*k+2, 4*k+3, 4*k+2, 4*k+3, 4*k+2, 4*k+3, 4*k+2, 4*k+3, 4*k+2, 4*k+3, 4*k+2, 4*k+3 }
    R(0), R(1), R(2), R(3)
#undef R
};

AI void avx2_q6_K_t(int64_t n, const void *vx, const void *const *vy, float *out, const int NC, const kq_sb *P) {
    const block_q6_K *x = vx;
    const int64_t nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0xF), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[KQ_NC];
    X86_UNROLL for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    /* the next superblock's scales, loaded one step ahead (as avx2_k45_t's) */
    __m128i sc8_next = _mm_loadu_si128((const __m128i *)x[0].scales);
    for (int64_t i = 0; i < nb; i++) {
        kq_prefetch(x + i, sizeof *x);
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8_next);
        sc8_next = _mm_loadu_si128((const __m128i *)x[i + 1 < nb ? i + 1 : i].scales);
        const float dx = x86_h2f(x[i].d);
        __m256i sumi[KQ_NC];
        /* the -32 offset, via the activation block sums: sum_j sc[j]*32*bsums[j] */
        X86_UNROLL for (int c = 0; c < NC; c++) {
            const block_q8_K *y = (const block_q8_K *)vy[c] + i;
            const __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y->bsums));
            sumi[c] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
        }
        X86_UNROLL for (int h = 0; h < 2; h++) {
            /* scales 8h..8h+7 as int16 in both halves */
            /* (two calls: the selector must be a constant for clang) */
            const __m256i sch = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11) : _mm256_permute2x128_si256(sc16, sc16, 0x00);
            /* quants 32k..32k+31 of this half: ql[64h + 32(k&1)] low (k < 2) or
               high nibbles, with bits 2k..2k+1 of qh[32h] as bits 4-5 */
            X86_UNROLL for (int k = 0; k < 4; k++) {
                const __m256i b = _mm256_loadu_si256((const __m256i *)(x[i].ql + 64 * h + 32 * (k & 1)));
                const __m256i hb = _mm256_loadu_si256((const __m256i *)(x[i].qh + 32 * h));
                const __m256i hk = k == 0 ? _mm256_slli_epi16(hb, 4) : k == 1 ? _mm256_slli_epi16(hb, 2) : k == 2 ? hb : _mm256_srli_epi16(hb, 2);
                const __m256i q = _mm256_or_si256(_mm256_and_si256(k < 2 ? b : _mm256_srli_epi16(b, 4), m4), _mm256_and_si256(hk, m30));
                const __m256i s = _mm256_shuffle_epi8(sch, _mm256_load_si256((const __m256i *)x86_k6_pair[k]));
                X86_UNROLL for (int c = 0; c < NC; c++) {
                    const int8_t *q8 = ((const block_q8_K *)vy[c])[i].qs + 128 * h + 32 * k;
                    const __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)q8));
                    sumi[c] = x86_keep(_mm256_add_epi32(sumi[c], _mm256_madd_epi16(s, p)));
                }
            }
        }
        kq_acc(acc, sumi, dx, P, vy, i, NC);
    }
    X86_UNROLL for (int c = 0; c < NC; c++) out[c] = x86_hsum_ps(acc[c]);
}

AI void avx2_q2_K_nc(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) {
    const block_q2_K *x = vx;
    const int64_t nb = n / QK_K;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    for (int64_t i = 0; i < nb; i++) {
        const __m128i sb = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m128i sc8 = _mm_and_si128(sb, _mm_set1_epi8(0xF));
        const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0xF)));
        const float dx = x86_h2f(x[i].d), mx = x86_h2f(x[i].dmin);
        __m256i sumi[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
        X86_UNROLL for (int h = 0; h < 2; h++) {
            const __m256i qb = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            X86_UNROLL for (int k = 0; k < 4; k++) {
                /* elements 128h + 32k .. +32: bits 2k of the 32 bytes; scales 8h+2k, +1 */
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(qb, 2 * k), m3);
                const __m256i s = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, _mm_load_si128((const __m128i *)x86_k6_shuf[4 * h + k])));
                X86_UNROLL for (int c = 0; c < NC; c++) {
                    const int8_t *q8 = ((const block_q8_K *)vy[c])[i].qs + 128 * h + 32 * k;
                    const __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)q8));
                    sumi[c] = x86_keep(_mm256_add_epi32(sumi[c], _mm256_madd_epi16(s, p)));
                }
            }
        }
        X86_UNROLL for (int c = 0; c < NC; c++) {
            const block_q8_K *y = (const block_q8_K *)vy[c] + i;
            const __m256i pm = _mm256_madd_epi16(mins16, _mm256_loadu_si256((const __m256i *)y->bsums));
            __m256 t = _mm256_mul_ps(_mm256_set1_ps(dx * y->d), _mm256_cvtepi32_ps(sumi[c]));
            t = _mm256_fnmadd_ps(_mm256_set1_ps(mx * y->d), _mm256_cvtepi32_ps(pm), t);
            acc[c] = _mm256_add_ps(acc[c], t);
        }
    }
    X86_UNROLL for (int c = 0; c < NC; c++) out[c] = x86_hsum_ps(acc[c]);
}

AI void avx2_q3_K_nc(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) {
    const block_q3_K *x = vx;
    const int64_t nb = n / QK_K;
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    for (int64_t i = 0; i < nb; i++) {
        uint32_t aux[4];
        picolm_q3_K_scales(x[i].scales, aux);
        const __m128i sc8 = _mm_sub_epi8(_mm_set_epi32((int)aux[3], (int)aux[2], (int)aux[1], (int)aux[0]), _mm_set1_epi8(32));
        const float dx = x86_h2f(x[i].d);
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x[i].hmask);
        __m256i sumi[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
        X86_UNROLL for (int h = 0; h < 2; h++) {
            const __m256i qb = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
            X86_UNROLL for (int k = 0; k < 4; k++) {
                /* value = q2 - (hmask bit (4h+k) clear ? 4 : 0), in -4..3 */
                const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(qb, 2 * k), m3);
                const __m256i hbit = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), _mm256_set1_epi8(1));
                const __m256i q = _mm256_sub_epi8(q2, _mm256_slli_epi16(_mm256_xor_si256(hbit, _mm256_set1_epi8(1)), 2));
                const __m256i aq = _mm256_sign_epi8(q, q);
                const __m256i s = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, _mm_load_si128((const __m128i *)x86_k6_shuf[4 * h + k])));
                X86_UNROLL for (int c = 0; c < NC; c++) {
                    const int8_t *q8 = ((const block_q8_K *)vy[c])[i].qs + 128 * h + 32 * k;
                    const __m256i qy = _mm256_loadu_si256((const __m256i *)q8);
                    const __m256i p = _mm256_maddubs_epi16(aq, _mm256_sign_epi8(qy, q));
                    sumi[c] = x86_keep(_mm256_add_epi32(sumi[c], _mm256_madd_epi16(s, p)));
                }
            }
        }
        X86_UNROLL for (int c = 0; c < NC; c++) {
            const block_q8_K *y = (const block_q8_K *)vy[c] + i;
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * y->d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    X86_UNROLL for (int c = 0; c < NC; c++) out[c] = x86_hsum_ps(acc[c]);
}

AI void avx2_iq4_xs_nc(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) {
    const block_iq4_xs *x = vx;
    const int64_t nb = n / QK_K;
    const __m128i t = _mm_loadu_si128((const __m128i *)picolm_kvalues_iq4nl);
    const __m256i lut = _mm256_set_m128i(t, t);
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    for (int64_t i = 0; i < nb; i++) {
        const float dx = x86_h2f(x[i].d);
        __m256i sumi[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
        X86_UNROLL for (int ib = 0; ib < 8; ib++) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const __m256i s = _mm256_set1_epi16((short)(ls - 32));
            const __m256i qx = _mm256_shuffle_epi8(lut, x86_nibbles16(x[i].qs + 16 * ib));
            const __m256i ax = _mm256_sign_epi8(qx, qx);
            X86_UNROLL for (int c = 0; c < NC; c++) {
                const int8_t *q8 = ((const block_q8_K *)vy[c])[i].qs + 32 * ib;
                const __m256i qy = _mm256_loadu_si256((const __m256i *)q8);
                const __m256i p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(qy, qx));
                sumi[c] = x86_keep(_mm256_add_epi32(sumi[c], _mm256_madd_epi16(s, p)));
            }
        }
        X86_UNROLL for (int c = 0; c < NC; c++) {
            const block_q8_K *y = (const block_q8_K *)vy[c] + i;
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * y->d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    X86_UNROLL for (int c = 0; c < NC; c++) out[c] = x86_hsum_ps(acc[c]);
}

/* ======================================================================== */
/* Float formats (n is any count)                                             */
/* ======================================================================== */
#define X86_FLOAT_NC(name, LOAD, SCALAR)                                                   \
    AI void name(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) { \
        __m256 acc[4][2];                                                                  \
        for (int c = 0; c < 4; c++) acc[c][0] = acc[c][1] = _mm256_setzero_ps();           \
        int64_t i = 0;                                                                     \
        for (; i + 16 <= n; i += 16) {                                                     \
            const __m256 x0 = LOAD(vx, i), x1 = LOAD(vx, i + 8);                           \
            X86_UNROLL for (int c = 0; c < NC; c++) {                                      \
                acc[c][0] = _mm256_fmadd_ps(x0, LOAD(vy[c], i), acc[c][0]);                \
                acc[c][1] = _mm256_fmadd_ps(x1, LOAD(vy[c], i + 8), acc[c][1]);            \
            }                                                                              \
        }                                                                                  \
        X86_UNROLL for (int c = 0; c < NC; c++) {                                          \
            float s = x86_hsum_ps(_mm256_add_ps(acc[c][0], acc[c][1]));                    \
            for (int64_t k = i; k < n; k++) s += SCALAR(vx, k) * SCALAR(vy[c], k);         \
            out[c] = s;                                                                    \
        }                                                                                  \
    }
AI float x86_s_f32(const void *p, int64_t i) { return ((const float *)p)[i]; }
AI float x86_s_f16(const void *p, int64_t i) { return picolm_half_to_float(((const uint16_t *)p)[i]); }
AI float x86_s_bf16(const void *p, int64_t i) { return picolm_bf16_to_float(((const uint16_t *)p)[i]); }
X86_FLOAT_NC(avx2_f32_nc, x86_load_f32, x86_s_f32)
X86_FLOAT_NC(avx2_f16_nc, x86_load_f16, x86_s_f16)
X86_FLOAT_NC(avx2_bf16_nc, x86_load_bf16, x86_s_bf16)

/* ======================================================================== */
/* Activation quantizers: byte-identical to the reference quantize_row      */
/* ======================================================================== */
/* C roundf (half away from zero) of integral-range floats, exactly */
AI __m256 x86_roundf(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
    const __m256 frac = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, t)); /* exact */
    const __m256 up = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                    _mm256_or_ps(sign, _mm256_set1_ps(1.0f)));
    return _mm256_add_ps(t, up);
}
AI float x86_hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
/* 4 x 8 int32 -> 32 int8 in order (saturating) */
AI __m256i x86_pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i p = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* amax/127, id = 1/d, roundf(x*id): the 32-element Q8_0/Q8_1 recipe.
   Returns d; *qsum = sum of the quantized values */
AI float x86_q8_block32(const float *x, int8_t *qs, int *qsum) {
    const __m256 ab = _mm256_set1_ps(-0.0f);
    __m256 v[4];
    for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + 8 * k);
    __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(ab, v[0]), _mm256_andnot_ps(ab, v[1])),
                              _mm256_max_ps(_mm256_andnot_ps(ab, v[2]), _mm256_andnot_ps(ab, v[3])));
    const float amax = x86_hmax_ps(mx);
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; k++) q[k] = _mm256_cvttps_epi32(x86_roundf(_mm256_mul_ps(v[k], vid)));
    if (qsum) *qsum = x86_hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    _mm256_storeu_si256((__m256i *)qs, x86_pack32(q[0], q[1], q[2], q[3]));
    return d;
}
static void avx2_quantize_q8_0(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++)
        y[i].d = _cvtss_sh(x86_q8_block32(x + 32 * i, y[i].qs, NULL), 0);
}
static void avx2_quantize_q8_1(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++) {
        int sum;
        const float d = x86_q8_block32(x + 32 * i, y[i].qs, &sum);
        y[i].d = _cvtss_sh(d, 0);
        y[i].s = _cvtss_sh((float)sum * d, 0);
    }
}
static void avx2_quantize_q8_K(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    const __m256 ab = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m256 mx = _mm256_setzero_ps();
        for (int k = 0; k < 32; k++) mx = _mm256_max_ps(mx, _mm256_andnot_ps(ab, _mm256_loadu_ps(x + 8 * k)));
        const float amax = x86_hmax_ps(mx);
        if (!(amax > 0)) {
            /* the reference: d = 0, zero quants, zero sums (also for NaN input) */
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* the reference keeps the FIRST element of largest magnitude */
        float max = 0;
        const __m256 va = _mm256_set1_ps(amax);
        for (int k = 0; k < 32; k++) {
            const __m256 v = _mm256_loadu_ps(x + 8 * k);
            const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(ab, v), va, _CMP_EQ_OQ));
            if (m) { max = x[8 * k + __builtin_ctz((unsigned)m)]; break; }
        }
        const float iscale = -127.f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        for (int g = 0; g < 8; g++) {
            __m256i q[4];
            /* cvtps rounds half to even, as the reference's nearest_int */
            for (int k = 0; k < 4; k++) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * g + 8 * k)));
            const __m256i p = x86_pack32(q[0], q[1], q[2], q[3]); /* saturates at 127 */
            _mm256_storeu_si256((__m256i *)(y[i].qs + 32 * g), p);
            /* bsums of the two 16-element groups */
            const __m256i s16 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), p), _mm256_set1_epi16(1));
            /* s16: 8 int32, lanes 0-3 = group 2g, 4-7 = group 2g+1 */
            __m128i s = _mm_hadd_epi32(_mm256_castsi256_si128(s16), _mm256_extracti128_si256(s16, 1));
            s = _mm_hadd_epi32(s, s);
            y[i].bsums[2 * g] = (int16_t)_mm_cvtsi128_si32(s);
            y[i].bsums[2 * g + 1] = (int16_t)_mm_extract_epi32(s, 1);
        }
        y[i].d = 1 / iscale;
    }
}

/* ======================================================================== */
/* Vector primitives                                                          */
/* ======================================================================== */
static float avx2_dot_f32(const float *a, const float *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    float s = x86_hsum_ps(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}
static float avx2_dot_f32_f16(const float *a, const uint16_t *b, int n) { return x86_dot_f32_f16(a, b, n); }
static void avx2_scale_axpy_f16(float *y, float scale, float a, const uint16_t *v, int n) { x86_scale_axpy_f16(y, scale, a, v, n); }
/* expf for 8 lanes, ~1 ulp on [-87, 88] (Cody-Waite reduction + degree-6
   polynomial); saturates to 0 / +inf outside, NaN propagates. */
AI __m256 x86_expf(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-87.3365447504f);
    const __m256 big = _mm256_cmp_ps(x, hi, _CMP_GT_OQ), small = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^k in two steps so that k = 128 (x near 88.7) does not overflow the exponent */
    const __m256i ki = _mm256_cvtps_epi32(k);
    const __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, _mm256_set1_epi32(127)), 23));
    const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, _mm256_set1_epi32(127)), 23));
    __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, p1), p2);
    e = _mm256_blendv_ps(e, _mm256_set1_ps(INFINITY), big);
    e = _mm256_andnot_ps(small, e);
    return _mm256_blendv_ps(e, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
/* attn_f16: the y update on 8 lanes */
typedef __m256 attn_vec;
#define ATTN_FN avx2_attn_f16
#define ATTN_EXPF8 x86_expf8_avx2
#define ATTN_W 8
AI attn_vec attn_ld(const float *p) { return _mm256_loadu_ps(p); }
AI void attn_st(float *p, attn_vec x) { _mm256_storeu_ps(p, x); }
AI attn_vec attn_set1(float x) { return _mm256_set1_ps(x); }
AI attn_vec attn_ld16(const uint16_t *p) { return x86_load_f16(p, 0); }
AI attn_vec attn_round16(attn_vec x) { return x86_round_f16(x); }
AI attn_vec attn_fma(attn_vec a, attn_vec b, attn_vec c) { return _mm256_fmadd_ps(a, b, c); }
AI attn_vec attn_mul(attn_vec a, attn_vec b) { return _mm256_mul_ps(a, b); }
#include "../x86/attn.h"
static void avx2_swiglu(float *g, const float *u, int n) {
    int i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 e = x86_expf(_mm256_sub_ps(_mm256_setzero_ps(), x));
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, e));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
static void avx2_f32_to_f16(uint16_t *dst, const float *src, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = picolm_float_to_half(src[i]);
}

X86_WRAP(avx2, q8_0, avx2_q8_0_nc)
X86_WRAP(avx2, q4_0, avx2_q4_0_nc)
X86_WRAP(avx2, q4_1, avx2_q4_1_nc)
X86_WRAP(avx2, q5_0, avx2_q5_0_nc)
X86_WRAP(avx2, q5_1, avx2_q5_1_nc)
X86_WRAP(avx2, iq4_nl, avx2_iq4_nl_nc)
X86_WRAP(avx2, q2_K, avx2_q2_K_nc)
X86_WRAP(avx2, q3_K, avx2_q3_K_nc)
KQ_WRAP(avx2, q4_K, avx2_q4_K_t, 1)
KQ_WRAP(avx2, q4_K_r, avx2_q4_K_r_t, 1)
KQ_WRAP(avx2, q5_K, avx2_q5_K_t, 1)
KQ_WRAP(avx2, q6_K, avx2_q6_K_t, 0)
X86_WRAP(avx2, iq4_xs, avx2_iq4_xs_nc)
X86_WRAP(avx2, f32, avx2_f32_nc)
X86_WRAP(avx2, f16, avx2_f16_nc)
X86_WRAP(avx2, bf16, avx2_bf16_nc)
R16_WRAP(avx2, q4_K_r16, avx2_q4_K_r16_t)
R16_WRAP(avx2, q6_K_r16, avx2_q6_K_r16_t)
R16_WRAP(avx2, q4_K_r16n, avx2_q4_K_r16n_t)
T8_WRAP(avx2, q8_0, 1)
T8_WRAP(avx2, q4_0, 1)
T8_WRAP(avx2, iq4_nl, 1)
T8_WRAP(avx2, q5_0, 1)
T8_WRAP(avx2, q4_1, 0)
T8_WRAP(avx2, q5_1, 0)

#define K(T, A, name) PK_KERNEL(T, A, avx2_vec_dot_##name, avx2_gemm_##name)
/* the 32-element formats prefill through the 8-column tiles (tile8.h) */
#define K8(T, A, name) PK_KERNEL(T, A, avx2_vec_dot_##name, avx2_gemm8_##name)
static const picolm_kernel avx2_kernels[] = {
    K(Q4_K, Q8_K, q4_K), K(Q6_K, Q8_K, q6_K), K8(Q8_0, Q8_0, q8_0), K(Q4_K_R, Q8_K, q4_K_r),
    K8(Q4_0, Q8_0, q4_0), K8(Q4_1, Q8_1, q4_1), K8(Q5_0, Q8_0, q5_0), K8(Q5_1, Q8_1, q5_1),
    K8(IQ4_NL, Q8_0, iq4_nl), K(Q2_K, Q8_K, q2_K), K(Q3_K, Q8_K, q3_K), K(Q5_K, Q8_K, q5_K),
    K(Q4_K_R16, Q8_K, q4_K_r16), K(Q6_K_R16, Q8_K, q6_K_r16), K(Q5_0_R16, Q8_0, q5_0_r16),
    K(Q4_K_R16N, Q8_K, q4_K_r16n),
    K(IQ4_XS, Q8_K, iq4_xs), K(F32, F32, f32), K(F16, F16, f16), K(BF16, BF16, bf16),
};
static const picolm_act_quant avx2_act_quants[] = {
    { PICOLM_TYPE_Q8_0, avx2_quantize_q8_0 },
    { PICOLM_TYPE_Q8_1, avx2_quantize_q8_1 },
    { PICOLM_TYPE_Q8_K, avx2_quantize_q8_K },
};
/* rmsnorm: the core's (double accumulation, as llama.cpp) */
static const picolm_backend_vtable avx2_prims = {
    .dot_f32 = avx2_dot_f32,
    .dot_f32_f16 = avx2_dot_f32_f16,
    .scale_axpy_f16 = avx2_scale_axpy_f16,
    .attn_f16 = avx2_attn_f16,
    .swiglu = avx2_swiglu,
    .f32_to_f16 = avx2_f32_to_f16,
};
static void avx2_tune(pk_tune *t, const pk_cpu *cpu) {
    (void)cpu;
    t->attn_expf = x86_expf8_avx2_matches_libm() ? PK_EXPF_VECTOR : PK_EXPF_LIBM;
}
PK_LEVEL_TUNED(avx2, "avx2", 0, avx2_kernels, PK_COUNT(avx2_kernels), avx2_act_quants, PK_COUNT(avx2_act_quants), &avx2_prims,
               avx2_tune);
