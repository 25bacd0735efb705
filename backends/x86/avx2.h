/*
 * Shared code of the avx2 and avx512 levels (AVX2 + FMA + F16C): inline
 * helpers, the 32-element formats' block unpackers and row template (the
 * avx512 Q8_0 kernel finishes odd blocks with it), the Q4_K / Q4_K_R block
 * accessors and the fp16 primitives as inline templates.  As x86/base.h:
 * always-inline, one copy per including level.
 *
 * The row templates take NC = 1..4 activation rows (1..8 in the K-quant
 * tiles of avx2/ktile.h).  Integer dot products are exact; only the float
 * accumulation order differs from the reference code.
 */
#ifndef PICOLM_X86_AVX2_H
#define PICOLM_X86_AVX2_H
#include "base.h"

/* x86_keep128 on 256 bits */
AI __m256i x86_keep(__m256i v) {
    __asm__("" : "+x"(v));
    return v;
}

/* exact fp16 -> fp32 (F16C) */
AI float x86_h2f(uint16_t h) { return _cvtsh_ss(h); }

AI float x86_hsum_ps(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}
AI int x86_hsum_i32(__m256i x) {
    __m128i r = _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4e));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xb1));
    return _mm_cvtsi128_si32(r);
}
/* signed x signed bytes -> 8 int32 lanes (each the sum of 4 products) */
AI __m256i x86_dot_i8(__m256i x, __m256i y) {
    const __m256i ax = _mm256_sign_epi8(x, x);
    const __m256i sy = _mm256_sign_epi8(y, x);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
}
/* unsigned x signed bytes -> 8 int32 lanes */
AI __m256i x86_dot_u8(__m256i ux, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ux, y), _mm256_set1_epi16(1));
}
/* 32 packed nibbles: low nibbles of 16 bytes then high nibbles (Q4_0 order) */
AI __m256i x86_nibbles16(const uint8_t *p) {
    const __m128i t = _mm_loadu_si128((const __m128i *)p);
    const __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}
/* 32 bits -> 32 bytes, 0xFF where the bit is set */
AI __m256i x86_bits_to_bytes(uint32_t bits) {
    const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000ll, 0x0101010101010101ll,
                                            0x0202020202020202ll, 0x0303030303030303ll);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    const __m256i m = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfell);
    b = _mm256_or_si256(b, m);
    return _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
}

/* byte shuffles broadcasting int16 lane k of a 128-bit vector over 256 bits */
static const uint8_t x86_bcast16[8][32] __attribute__((aligned(32), unused)) = {
#define R(k) { 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, \
               2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1 }
    R(0), R(1), R(2), R(3), R(4), R(5), R(6), R(7)
#undef R
};
AI __m256i x86_bcast_lane16(__m256i v, int k) {
    return _mm256_shuffle_epi8(v, _mm256_load_si256((const __m256i *)x86_bcast16[k]));
}

/* ======================================================================== */
/* The 32-element formats (Q8_0, Q4_0, IQ4_NL, Q5_0 x Q8_0; Q4_1, Q5_1 x Q8_1) */
/* ======================================================================== */
/* ---- weight block unpackers: block i of row x -> 32 values, d (and m) ---- */
typedef __m256i (*x86_unpack32_fn)(const void *, int64_t, float *, float *);
/* signed formats: qx = the values as signed bytes (sign trick below) */
AI __m256i x86_u32_q8_0(const void *x, int64_t i, float *d, float *m) {
    const block_q8_0 *b = (const block_q8_0 *)x + i;
    (void)m;
    *d = x86_h2f(b->d);
    return _mm256_loadu_si256((const __m256i *)b->qs);
}
AI __m256i x86_u32_q4_0(const void *x, int64_t i, float *d, float *m) {
    const block_q4_0 *b = (const block_q4_0 *)x + i;
    (void)m;
    *d = x86_h2f(b->d);
    return _mm256_sub_epi8(x86_nibbles16(b->qs), _mm256_set1_epi8(8));
}
AI __m256i x86_u32_iq4_nl(const void *x, int64_t i, float *d, float *m) {
    const block_iq4_nl *b = (const block_iq4_nl *)x + i;
    (void)m;
    const __m128i t = _mm_loadu_si128((const __m128i *)picolm_kvalues_iq4nl);
    *d = x86_h2f(b->d);
    return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), x86_nibbles16(b->qs));
}
AI __m256i x86_u32_q5_0(const void *x, int64_t i, float *d, float *m) {
    const block_q5_0 *b = (const block_q5_0 *)x + i;
    (void)m;
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    *d = x86_h2f(b->d);
    /* q - 16 = nibble - (bit clear ? 16 : 0) */
    const __m256i hb = _mm256_andnot_si256(x86_bits_to_bytes(qh), _mm256_set1_epi8((char)0xF0));
    return _mm256_or_si256(x86_nibbles16(b->qs), hb);
}
/* unsigned formats (x Q8_1): the values 0..15 / 0..31, and the min m */
AI __m256i x86_u32_q4_1(const void *x, int64_t i, float *d, float *m) {
    const block_q4_1 *b = (const block_q4_1 *)x + i;
    *d = x86_h2f(b->d);
    *m = x86_h2f(b->m);
    return x86_nibbles16(b->qs);
}
AI __m256i x86_u32_q5_1(const void *x, int64_t i, float *d, float *m) {
    const block_q5_1 *b = (const block_q5_1 *)x + i;
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    *d = x86_h2f(b->d);
    *m = x86_h2f(b->m);
    const __m256i hb = _mm256_and_si256(x86_bits_to_bytes(qh), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(x86_nibbles16(b->qs), hb);
}

/* One weight row x NC activation rows.  SIGNED: x
   Q8_0 with the sign trick (|qx| x sign(qy, qx)); else x Q8_1, unsigned,
   plus the mins term, a float sum of its own added last.  Per block and
   column: acc = fma(dx * dy, float(8 lanes of 4 products), acc). */
AI void x86_nc32(int64_t n, const void *vx, const void *const *vy, float *out, const int NC, const x86_unpack32_fn unpack,
                 const int SIGNED) {
    const int64_t nb = n / 32;
    const size_t bsz = SIGNED ? sizeof(block_q8_0) : sizeof(block_q8_1);
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    float accm[4] = { 0, 0, 0, 0 };
    for (int64_t i = 0; i < nb; i++) {
        float dx, mx = 0;
        const __m256i qx = unpack(vx, i, &dx, &mx);
        const __m256i ax = SIGNED ? _mm256_sign_epi8(qx, qx) : qx;
        X86_UNROLL for (int c = 0; c < NC; c++) {
            /* a Q8_1 block is Q8_0's with s after d: both end in the 32 quants */
            const uint8_t *yb = (const uint8_t *)vy[c] + (size_t)i * bsz;
            const __m256i qy = _mm256_loadu_si256((const __m256i *)(yb + bsz - 32));
            const __m256i p = x86_dot_u8(ax, SIGNED ? _mm256_sign_epi8(qy, qx) : qy);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * x86_h2f(((const block_q8_1 *)yb)->d)), _mm256_cvtepi32_ps(p), acc[c]);
            if (!SIGNED) accm[c] += mx * x86_h2f(((const block_q8_1 *)yb)->s);
        }
    }
    X86_UNROLL for (int c = 0; c < NC; c++) out[c] = SIGNED ? x86_hsum_ps(acc[c]) : x86_hsum_ps(acc[c]) + accm[c];
}
/* pfx##_##name##_nc: the format's row template, for X86_WRAP */
#define X86_NC32(pfx, name, SIGNED)                                                                      \
    AI void pfx##_##name##_nc(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) { \
        x86_nc32(n, vx, vy, out, NC, x86_u32_##name, SIGNED);                                            \
    }
/* avx2_q8_0_nc: also the avx512 Q8_0 kernels' tail */
X86_NC32(avx2, q8_0, 1)

/* ======================================================================== */
/* Q4_K / Q4_K_R blocks                                                       */
/* ======================================================================== */
/* Q4_K_R (blocks.h) is Q4_K with the scales pre-unpacked: the Q4_K kernels
   (avx2, avx512) take R = 1 for it, the same code with the scales
   loaded instead of unpacked. */
#define K4_BSZ(R) ((R) ? sizeof(block_q4_K_r) : sizeof(block_q4_K))
/* superblock i of the row at x */
AI const void *k4_blk(const void *x, int64_t i, const int R) { return (const char *)x + (size_t)i * K4_BSZ(R); }
AI const uint8_t *k4_qs(const void *b, const int R) { return R ? ((const block_q4_K_r *)b)->qs : ((const block_q4_K *)b)->qs; }
AI float k4_d(const void *b) { return x86_h2f(((const block_q4_K *)b)->d); }    /* d, dmin lead both layouts */
AI float k4_dmin(const void *b) { return x86_h2f(((const block_q4_K *)b)->dmin); }
/* (d, dmin, 0, 0) as floats */
AI __m128 k4_dd(const void *b) {
    int32_t v;
    memcpy(&v, b, 4);
    return _mm_cvtph_ps(_mm_cvtsi32_si128(v));
}
/* picolm_k4_scales in vector registers: the 12 packed bytes at p (read as
   16: the quants follow in every block that has them) -> the 8 scales
   (bytes 0-7) and 8 mins (bytes 8-15); a dozen vector instructions instead
   of the scalar shuffle's twenty, per row and superblock */
AI __m128i k4_unpack_sm(const uint8_t *p) {
    const __m128i b = _mm_loadu_si128((const __m128i *)p);
    /* low 6 bits of q0-3 and q4-7, low 4 bits of q8-11 */
    const __m128i lo = _mm_and_si128(_mm_shuffle_epi8(b, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, -1, -1, -1, -1)),
                                     _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
    /* high 4 bits of q8-11 (mins 4-7) */
    const __m128i lo2 = _mm_shuffle_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0F)),
                                         _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 8, 9, 10, 11));
    /* the top 2 bits of q0-3 and q4-7 as bits 4-5 of scales 4-7 and mins 4-7 */
    const __m128i hi = _mm_shuffle_epi8(_mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30)),
                                        _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    return _mm_or_si128(_mm_or_si128(lo, lo2), hi);
}
/* the 8 scales (bytes 0-7) and 8 mins (bytes 8-15) */
AI __m128i k4_sm8(const void *b, const int R) {
    if (R) return _mm_loadu_si128((const __m128i *)((const block_q4_K_r *)b)->sc);
    return k4_unpack_sm(((const block_q4_K *)b)->scales);
}

AI __m256 x86_load_f32(const void *p, int64_t i) { return _mm256_loadu_ps((const float *)p + i); }
AI __m256 x86_load_f16(const void *p, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
}
AI __m256 x86_load_bf16(const void *p, int64_t i) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* ======================================================================== */
/* fp16 primitives (the avx2 level's; the avx512 attention reuses them)      */
/* ======================================================================== */
AI float x86_dot_f32_f16(const float *a, const uint16_t *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), x86_load_f16(b, i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), x86_load_f16(b, i + 8), s1);
    }
    float s = x86_hsum_ps(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * picolm_half_to_float(b[i]);
    return s;
}
/* f16 accumulator held in floats (see plugin.h): round after each step */
AI __m256 x86_round_f16(__m256 x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)); }
AI void x86_scale_axpy_f16(float *y, float scale, float a, const uint16_t *v, int n) {
    const __m256 vs = _mm256_set1_ps(scale), va = _mm256_set1_ps(a);
    int i = 0;
    if (scale != 1.0f)
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, x86_load_f16(v, i), x86_round_f16(_mm256_mul_ps(_mm256_loadu_ps(y + i), vs))));
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, x86_load_f16(v, i), _mm256_loadu_ps(y + i)));
    for (int j = 0; j < i; j += 8) _mm256_storeu_ps(y + j, x86_round_f16(_mm256_loadu_ps(y + j)));
    for (; i < n; i++) {
        const float yy = scale != 1.0f ? picolm_half_to_float(picolm_float_to_half(y[i] * scale)) : y[i];
        y[i] = picolm_half_to_float(picolm_float_to_half(fmaf(a, picolm_half_to_float(v[i]), yy)));
    }
}
/* x86_hsum_ps of 8 vectors d[0..7] into lanes 0..7, with its adds and
   operand order ((0+4) + (2+6)) + ((1+5) + (3+7)), so each lane has its
   bits; in two steps, so that the 8 need not be live at once:
   x86_hsum8_halves(d[j], d[j + 4]) for j = 0..3, then x86_hsum8_ps. */
AI __m256 x86_hsum8_halves(__m256 a, __m256 b) { /* a's halves added, then b's */
    return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}
AI __m256 x86_hsum8_ps(const __m256 u[4]) {
    __m256 w[2]; /* per 128-bit lane: (0+2, 1+3) of u[2i], then of u[2i + 1] */
    for (int i = 0; i < 2; i++) {
        const __m256d a = _mm256_castps_pd(u[2 * i]), b = _mm256_castps_pd(u[2 * i + 1]);
        w[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)), _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
    }
    return _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], 0x88), _mm256_shuffle_ps(w[0], w[1], 0xdd));
}
/* One online-softmax step (plugin.h, attn_f16): score s against the running
   max *m and sum *sum; *ws rescales the accumulator, *w weighs this V row. */
AI void attn_softmax_step(float s, float *m, float *sum, float *ws, float *w) {
    if (s > *m) {
        *ws = expf(*m - s);
        *m = s;
        *w = 1.0f;
    } else {
        *ws = 1.0f;
        *w = expf(s - *m);
    }
    *sum = *sum * *ws + *w;
}
#endif
