/* SSE4.1/SSSE3 kernels for the formats of a Q4_K_M model (Q4_K, Q6_K, Q8_0)
   plus Q4_0; everything else falls back to the reference code.  No F16C at
   this level: fp16 scales go through the exact portable conversion. */
#include "../x86/base.h"

#define H2F(h) picolm_half_to_float(h)

AI __m128i dot_i8(__m128i x, __m128i y) {
    return _mm_madd_epi16(_mm_maddubs_epi16(_mm_sign_epi8(x, x), _mm_sign_epi8(y, x)), _mm_set1_epi16(1));
}

/* Q8_0 follows ggml's scalar order: the exact integer sum of each block,
   then sum += sumi * (dx * dy) in float, block after block (mul, then add:
   no FMA at this ISA level), so that greedy continuations keep llama.cpp's
   near-ties (docs/perf.md). */
AI void sse_q8_0_nc(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) {
    const block_q8_0 *x = vx;
    float acc[4] = { 0, 0, 0, 0 };
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const __m128i x0 = _mm_loadu_si128((const __m128i *)x[i].qs), x1 = _mm_loadu_si128((const __m128i *)(x[i].qs + 16));
        const float dx = H2F(x[i].d);
        X86_UNROLL for (int c = 0; c < NC; c++) {
            const block_q8_0 *y = (const block_q8_0 *)vy[c] + i;
            __m128i p = _mm_add_epi32(dot_i8(x0, _mm_loadu_si128((const __m128i *)y->qs)),
                                      dot_i8(x1, _mm_loadu_si128((const __m128i *)(y->qs + 16))));
            p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0x4e));
            p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0xb1));
            acc[c] += (float)_mm_cvtsi128_si32(p) * (dx * H2F(y->d));
        }
    }
    X86_UNROLL for (int c = 0; c < NC; c++) out[c] = acc[c];
}

AI void sse_q4_0_nc(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) {
    const block_q4_0 *x = vx;
    const __m128i m4 = _mm_set1_epi8(0xF), m8 = _mm_set1_epi8(8);
    __m128 acc[4] = { _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps() };
    for (int64_t i = 0; i < n / QK4_0; i++) {
        const __m128i q = _mm_loadu_si128((const __m128i *)x[i].qs);
        const __m128i x0 = _mm_sub_epi8(_mm_and_si128(q, m4), m8);
        const __m128i x1 = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), m4), m8);
        const float dx = H2F(x[i].d);
        X86_UNROLL for (int c = 0; c < NC; c++) {
            const block_q8_0 *y = (const block_q8_0 *)vy[c] + i;
            const __m128i p = _mm_add_epi32(dot_i8(x0, _mm_loadu_si128((const __m128i *)y->qs)),
                                            dot_i8(x1, _mm_loadu_si128((const __m128i *)(y->qs + 16))));
            acc[c] = _mm_add_ps(acc[c], _mm_mul_ps(_mm_set1_ps(dx * H2F(y->d)), _mm_cvtepi32_ps(p)));
        }
    }
    X86_UNROLL for (int c = 0; c < NC; c++) out[c] = x86_hsum_ps128(acc[c]);
}

/* int16 lane k broadcast */
static const uint8_t bc16[8][16] __attribute__((aligned(16))) = {
#define R(k) { 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1, 2*k, 2*k+1 }
    R(0), R(1), R(2), R(3), R(4), R(5), R(6), R(7)
#undef R
};

AI void sse_q4_K_nc(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) {
    const block_q4_K *x = vx;
    const __m128i m4 = _mm_set1_epi8(0xF);
    __m128 acc[4] = { _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps() };
    float accm[4] = { 0, 0, 0, 0 };
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint32_t utmp[4];
        picolm_k4_scales(x[i].scales, utmp);
        const __m128i sm = _mm_set_epi32((int)utmp[3], (int)utmp[2], (int)utmp[1], (int)utmp[0]);
        const __m128i sc = _mm_cvtepu8_epi16(sm), mins = _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8));
        const float dx = H2F(x[i].d), mx = H2F(x[i].dmin);
        __m128i sumi[4] = { _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128() };
        X86_UNROLL for (int j = 0; j < 4; j++) {
            const __m128i a = _mm_loadu_si128((const __m128i *)(x[i].qs + 32 * j));
            const __m128i b = _mm_loadu_si128((const __m128i *)(x[i].qs + 32 * j + 16));
            const __m128i la = _mm_and_si128(a, m4), lb = _mm_and_si128(b, m4);
            const __m128i ha = _mm_and_si128(_mm_srli_epi16(a, 4), m4), hb = _mm_and_si128(_mm_srli_epi16(b, 4), m4);
            const __m128i sl = _mm_shuffle_epi8(sc, _mm_load_si128((const __m128i *)bc16[2 * j]));
            const __m128i sh = _mm_shuffle_epi8(sc, _mm_load_si128((const __m128i *)bc16[2 * j + 1]));
            X86_UNROLL for (int c = 0; c < NC; c++) {
                const int8_t *q8 = ((const block_q8_K *)vy[c])[i].qs + 64 * j;
                __m128i pl = _mm_add_epi16(_mm_maddubs_epi16(la, _mm_loadu_si128((const __m128i *)q8)),
                                           _mm_maddubs_epi16(lb, _mm_loadu_si128((const __m128i *)(q8 + 16))));
                __m128i ph = _mm_add_epi16(_mm_maddubs_epi16(ha, _mm_loadu_si128((const __m128i *)(q8 + 32))),
                                           _mm_maddubs_epi16(hb, _mm_loadu_si128((const __m128i *)(q8 + 48))));
                /* int16 sums of 4 products of 15*127: at most 7620, no overflow */
                sumi[c] = x86_keep128(_mm_add_epi32(sumi[c], _mm_add_epi32(_mm_madd_epi16(sl, pl), _mm_madd_epi16(sh, ph))));
            }
        }
        X86_UNROLL for (int c = 0; c < NC; c++) {
            const block_q8_K *y = (const block_q8_K *)vy[c] + i;
            const __m128i b0 = _mm_loadu_si128((const __m128i *)y->bsums), b1 = _mm_loadu_si128((const __m128i *)(y->bsums + 8));
            const __m128i pm = _mm_madd_epi16(mins, _mm_hadd_epi16(b0, b1));
            const __m128i t = _mm_add_epi32(pm, _mm_shuffle_epi32(pm, 0x4e));
            const int msum = _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1)));
            acc[c] = _mm_add_ps(acc[c], _mm_mul_ps(_mm_set1_ps(dx * y->d), _mm_cvtepi32_ps(sumi[c])));
            accm[c] += mx * y->d * (float)msum;
        }
    }
    X86_UNROLL for (int c = 0; c < NC; c++) out[c] = x86_hsum_ps128(acc[c]) - accm[c];
}

AI void sse_q6_K_nc(int64_t n, const void *vx, const void *const *vy, float *out, const int NC) {
    const block_q6_K *x = vx;
    const __m128i m4 = _mm_set1_epi8(0xF), m3 = _mm_set1_epi8(3);
    __m128 acc[4] = { _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps() };
    for (int64_t i = 0; i < n / QK_K; i++) {
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m128i sc_lo = _mm_cvtepi8_epi16(sc8), sc_hi = _mm_cvtepi8_epi16(_mm_srli_si128(sc8, 8));
        const float dx = H2F(x[i].d);
        __m128i sumi[4];
        X86_UNROLL for (int c = 0; c < NC; c++) {
            const block_q8_K *y = (const block_q8_K *)vy[c] + i;
            const __m128i off = _mm_add_epi32(_mm_madd_epi16(sc_lo, _mm_loadu_si128((const __m128i *)y->bsums)),
                                              _mm_madd_epi16(sc_hi, _mm_loadu_si128((const __m128i *)(y->bsums + 8))));
            sumi[c] = _mm_sub_epi32(_mm_setzero_si128(), _mm_slli_epi32(off, 5));
        }
        X86_UNROLL for (int h = 0; h < 2; h++) {
            X86_UNROLL for (int half = 0; half < 2; half++) { /* 16 of the 32 columns l */
                const int o = 16 * half;
                const __m128i b1 = _mm_loadu_si128((const __m128i *)(x[i].ql + 64 * h + o));
                const __m128i b2 = _mm_loadu_si128((const __m128i *)(x[i].ql + 64 * h + 32 + o));
                const __m128i hb = _mm_loadu_si128((const __m128i *)(x[i].qh + 32 * h + o));
                __m128i q[4];
                q[0] = _mm_or_si128(_mm_and_si128(b1, m4), _mm_slli_epi16(_mm_and_si128(hb, m3), 4));
                q[1] = _mm_or_si128(_mm_and_si128(b2, m4), _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(hb, 2), m3), 4));
                q[2] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(b1, 4), m4), _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(hb, 4), m3), 4));
                q[3] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(b2, 4), m4), _mm_and_si128(_mm_srli_epi16(hb, 2), _mm_set1_epi8(0x30)));
                X86_UNROLL for (int k = 0; k < 4; k++) {
                    /* elements 128h + 32k + o .. +16: scale 8h + 2k + half */
                    const int si = 8 * h + 2 * k + half;
                    const __m128i s = _mm_set1_epi16(x[i].scales[si]);
                    X86_UNROLL for (int c = 0; c < NC; c++) {
                        const int8_t *q8 = ((const block_q8_K *)vy[c])[i].qs + 128 * h + 32 * k + o;
                        const __m128i p = _mm_maddubs_epi16(q[k], _mm_loadu_si128((const __m128i *)q8));
                        sumi[c] = x86_keep128(_mm_add_epi32(sumi[c], _mm_madd_epi16(s, p)));
                    }
                }
            }
        }
        X86_UNROLL for (int c = 0; c < NC; c++) {
            const block_q8_K *y = (const block_q8_K *)vy[c] + i;
            acc[c] = _mm_add_ps(acc[c], _mm_mul_ps(_mm_set1_ps(dx * y->d), _mm_cvtepi32_ps(sumi[c])));
        }
    }
    X86_UNROLL for (int c = 0; c < NC; c++) out[c] = x86_hsum_ps128(acc[c]);
}

X86_WRAP(sse4, q8_0, sse_q8_0_nc)
X86_WRAP(sse4, q4_0, sse_q4_0_nc)
X86_WRAP(sse4, q4_K, sse_q4_K_nc)
X86_WRAP(sse4, q6_K, sse_q6_K_nc)

static float sse4_dot_f32(const float *a, const float *b, int n) {
    __m128 s0 = _mm_setzero_ps(), s1 = _mm_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = _mm_add_ps(s0, _mm_mul_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
        s1 = _mm_add_ps(s1, _mm_mul_ps(_mm_loadu_ps(a + i + 4), _mm_loadu_ps(b + i + 4)));
    }
    float s = x86_hsum_ps128(_mm_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

#define K(T, A, name) PK_KERNEL(T, A, sse4_vec_dot_##name, sse4_gemm_##name)
static const picolm_kernel sse4_kernels[] = {
    K(Q4_K, Q8_K, q4_K), K(Q6_K, Q8_K, q6_K), K(Q8_0, Q8_0, q8_0), K(Q4_0, Q8_0, q4_0),
};
static const picolm_backend_vtable sse4_prims = {.dot_f32 = sse4_dot_f32};
PK_LEVEL(sse4, "sse4", 0, sse4_kernels, PK_COUNT(sse4_kernels), NULL, 0, &sse4_prims);
