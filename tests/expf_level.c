/* tests/test_expf.c's view of one x86 level's vector expf
   (backends/<level>/expf.h, backends/x86/expf.h): this file is built once
   per level, with the level's flags and -DLEVEL=<level> (the Makefile), so
   that each variant is the code its plugin runs. */
#define STR2(x) #x
#define STR(x) STR2(x)
#include STR(../backends/LEVEL/expf.h)

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define VEXPF CAT(x86_expf8_, LEVEL)

int CAT(expf_guard_, LEVEL)(void);
uint32_t CAT(expf_diffs_, LEVEL)(const uint32_t *x, const uint32_t *want, uint32_t n, uint32_t *first);

/* the plugin's run-time check */
int CAT(expf_guard_, LEVEL)(void) { return CAT(VEXPF, _matches_libm)(); }
/* how many x (bit patterns, n a multiple of 8) have expf bits other than
   want; *first: the first of them */
uint32_t CAT(expf_diffs_, LEVEL)(const uint32_t *x, const uint32_t *want, uint32_t n, uint32_t *first) {
    uint32_t bad = 0;
    for (uint32_t i = 0; i < n; i += 8) {
        const __m256i y = _mm256_castps_si256(VEXPF(_mm256_loadu_ps((const float *)(x + i))));
        const __m256i ne = _mm256_xor_si256(y, _mm256_loadu_si256((const __m256i *)(want + i)));
        if (_mm256_testz_si256(ne, ne)) continue;
        uint32_t d[8];
        _mm256_storeu_si256((__m256i *)d, ne);
        for (int k = 0; k < 8; k++)
            if (d[k] && !bad++) *first = x[i + k];
    }
    return bad;
}
