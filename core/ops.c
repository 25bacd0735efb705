#include "ops.h"

#include <math.h>

#include "picolm/fp16.h"
#include "plugins.h"

void ref_rmsnorm(float *o, const float *x, const float *w, int n, float eps) {
    /* accumulate in double (measured closest to llama.cpp's references) */
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) o[i] = x[i] * scale * w[i];
}

float ref_dot_f32(const float *a, const float *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

float ref_dot_f32_f16(const float *a, const uint16_t *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * picolm_half_to_float(b[i]);
    return s;
}

static inline float round_f16(float x) { return picolm_half_to_float(picolm_float_to_half(x)); }

/* y is an f16 accumulator held in floats: both steps round to f16, as
   ggml_vec_scale_f16 followed by ggml_vec_mad_f16 do. */
void ref_scale_axpy_f16(float *y, float scale, float a, const uint16_t *v, int n) {
    for (int i = 0; i < n; i++) {
        const float yy = scale != 1.0f ? round_f16(y[i] * scale) : y[i];
        y[i] = round_f16(fmaf(a, picolm_half_to_float(v[i]), yy));
    }
}

void ref_swiglu(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void ref_f32_to_f16(uint16_t *dst, const float *src, int n) {
    for (int i = 0; i < n; i++) dst[i] = picolm_float_to_half(src[i]);
}

void ref_ops(struct pl_ops *ops) {
    ops->rmsnorm = ref_rmsnorm;
    ops->dot_f32 = ref_dot_f32;
    ops->dot_f32_f16 = ref_dot_f32_f16;
    ops->scale_axpy_f16 = ref_scale_axpy_f16;
    ops->swiglu = ref_swiglu;
    ops->f32_to_f16 = ref_f32_to_f16;
}
