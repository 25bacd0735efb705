/* x86_expf8_avx512: glibc's expf on 8 floats (x86/expf.h), in one
   8-double vector with the table in registers (AVX-512F + VL) */
#ifndef PICOLM_AVX512_EXPF_H
#define PICOLM_AVX512_EXPF_H
#include "../x86/expf.h"

X86_EXPF_AI __m256 x86_expf8_avx512(__m256 xf) {
    const __m512d x = _mm512_cvtps_pd(xf), inv = _mm512_set1_pd(X86_EXPF_INVLN2N), shift = _mm512_set1_pd(X86_EXPF_SHIFT);
    const __m512d kds = _mm512_fmadd_pd(inv, x, shift);
    const __m512d r = _mm512_fmsub_pd(inv, x, _mm512_sub_pd(kds, shift));
    const __m512i ki = _mm512_castpd_si512(kds);
    /* entry k % 32: k's low 4 bits pick one of 16 in each half, bit 4 the half */
    const __m512i *tab = (const __m512i *)x86_expf_tab;
    const __m512i lo = _mm512_permutex2var_epi64(_mm512_load_si512(tab), ki, _mm512_load_si512(tab + 1));
    const __m512i hi = _mm512_permutex2var_epi64(_mm512_load_si512(tab + 2), ki, _mm512_load_si512(tab + 3));
    const __m512i t = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
    const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64(ki, 47)));
    const __m512d z = _mm512_fmadd_pd(_mm512_set1_pd(X86_EXPF_C0), r, _mm512_set1_pd(X86_EXPF_C1));
    const __m512d y = _mm512_fmadd_pd(_mm512_set1_pd(X86_EXPF_C2), r, _mm512_set1_pd(1.0));
    const __m256 yf = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_fmadd_pd(z, _mm512_mul_pd(r, r), y), s));
    /* the special cases on masks (AVX-512VL) */
    __m256 o = _mm256_mask_blend_ps(_mm256_cmp_ps_mask(xf, _mm256_set1_ps(X86_EXPF_MAYUFLOW), _CMP_LT_OQ), yf,
                                    _mm256_set1_ps(0x1p-149f));
    o = _mm256_maskz_mov_ps(_mm256_cmp_ps_mask(xf, _mm256_set1_ps(X86_EXPF_UFLOW), _CMP_NLT_UQ), o);
    return _mm256_mask_add_ps(o, _mm256_cmp_ps_mask(xf, xf, _CMP_UNORD_Q), xf, xf);
}
X86_EXPF_MATCHES_LIBM(x86_expf8_avx512)

#endif
