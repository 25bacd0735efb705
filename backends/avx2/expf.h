/* x86_expf8_avx2: glibc's expf on 8 floats (x86/expf.h), in two 4-double
   halves with a gather for the table (AVX2 + FMA) */
#ifndef PICOLM_AVX2_EXPF_H
#define PICOLM_AVX2_EXPF_H
#include "../x86/expf.h"

/* glibc's special cases, over the main path's y (x its input) */
X86_EXPF_AI __m256 x86_expf_special(__m256 x, __m256 y) {
    y = _mm256_blendv_ps(y, _mm256_set1_ps(0x1p-149f), _mm256_cmp_ps(x, _mm256_set1_ps(X86_EXPF_MAYUFLOW), _CMP_LT_OQ));
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(X86_EXPF_UFLOW), _CMP_LT_OQ));
    return _mm256_blendv_ps(y, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
X86_EXPF_AI __m128 x86_expf4_main(__m128 xf) {
    const __m256d x = _mm256_cvtps_pd(xf), inv = _mm256_set1_pd(X86_EXPF_INVLN2N), shift = _mm256_set1_pd(X86_EXPF_SHIFT);
    const __m256d kds = _mm256_fmadd_pd(inv, x, shift);
    const __m256d r = _mm256_fmsub_pd(inv, x, _mm256_sub_pd(kds, shift));
    const __m256i ki = _mm256_castpd_si256(kds);
    const __m256i t = _mm256_i64gather_epi64((const long long *)x86_expf_tab, _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    const __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64(ki, 47)));
    const __m256d z = _mm256_fmadd_pd(_mm256_set1_pd(X86_EXPF_C0), r, _mm256_set1_pd(X86_EXPF_C1));
    const __m256d y = _mm256_fmadd_pd(_mm256_set1_pd(X86_EXPF_C2), r, _mm256_set1_pd(1.0));
    return _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_fmadd_pd(z, _mm256_mul_pd(r, r), y), s));
}
X86_EXPF_AI __m256 x86_expf8_avx2(__m256 x) {
    const __m256 y = _mm256_set_m128(x86_expf4_main(_mm256_extractf128_ps(x, 1)), x86_expf4_main(_mm256_castps256_ps128(x)));
    return x86_expf_special(x, y);
}
X86_EXPF_MATCHES_LIBM(x86_expf8_avx2)

#endif
