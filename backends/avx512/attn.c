/* attn_f16 (x86/attn.h): the avx2 level's, with the y update (elementwise,
   bound by the f16 conversions) on 16 lanes and this level's vector expf;
   the same values */
#include "avx512.h"
#include "expf.h"

typedef __m512 attn_vec;
#define ATTN_FN attn512
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

void avx512_attn_f16(const float *q, size_t q_stride, int nq, const uint16_t *k, const uint16_t *v, size_t kv_stride, int n, int hd,
                     float scale, float *y, size_t y_stride, float *mx, float *sum) {
    attn512(q, q_stride, nq, k, v, kv_stride, n, hd, scale, y, y_stride, mx, sum);
}
