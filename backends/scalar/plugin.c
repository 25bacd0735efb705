/* Scalar backend: portable C primitives, no ISA flags, no kernels (the core
   then uses the format plugins' reference vec_dot and quantizers).  It is the
   backend of last resort, so it must run on any CPU. */
#include "picolm/plugin.h"
#include "picolm/fp16.h"
#include <math.h>

/* four partial sums: lets the compiler vectorise and keeps the error low */
static float scalar_dot_f32(const float *a, const float *b, int n) {
    float s[4] = { 0, 0, 0, 0 };
    int i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) s[k] += a[i + k] * b[i + k];
    for (; i < n; i++) s[0] += a[i] * b[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}
static float scalar_dot_f32_f16(const float *a, const uint16_t *b, int n) {
    float s[4] = { 0, 0, 0, 0 };
    int i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) s[k] += a[i + k] * picolm_half_to_float(b[i + k]);
    for (; i < n; i++) s[0] += a[i] * picolm_half_to_float(b[i]);
    return (s[0] + s[1]) + (s[2] + s[3]);
}
/* f16 accumulator held in floats (see plugin.h): round after each step */
static void scalar_scale_axpy_f16(float *y, float scale, float a, const uint16_t *v, int n) {
    for (int i = 0; i < n; i++) {
        const float yy = scale != 1.0f ? picolm_half_to_float(picolm_float_to_half(y[i] * scale)) : y[i];
        y[i] = picolm_half_to_float(picolm_float_to_half(fmaf(a, picolm_half_to_float(v[i]), yy)));
    }
}
static void scalar_swiglu(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}
static void scalar_f32_to_f16(uint16_t *dst, const float *src, int n) {
    for (int i = 0; i < n; i++) dst[i] = picolm_float_to_half(src[i]);
}

static const picolm_backend_vtable scalar_vtable = {
    .struct_size = sizeof(picolm_backend_vtable),
    .kernel_size = sizeof(picolm_kernel),
    .n_kernels = 0,
    .kernels = NULL,
    .act_quant_size = sizeof(picolm_act_quant),
    .n_act_quants = 0,
    .act_quants = NULL,
    /* rmsnorm: the core's (double accumulation, as llama.cpp) */
    .dot_f32 = scalar_dot_f32,
    .dot_f32_f16 = scalar_dot_f32_f16,
    .scale_axpy_f16 = scalar_scale_axpy_f16,
    .swiglu = scalar_swiglu,
    .f32_to_f16 = scalar_f32_to_f16,
};

static const picolm_plugin scalar_plugin = {
    .abi_version = PICOLM_ABI_VERSION,
    .struct_size = sizeof(picolm_plugin),
    .kind = PICOLM_KIND_BACKEND,
    .name = "scalar",
    .version = "1.0",
    .description = "portable C primitives; weight kernels fall back to the format plugins' reference code",
    .cpu_required = 0,
    .priority = 10,
    .vtable = &scalar_vtable,
};
PICOLM_PLUGIN_NOTE(PICOLM_KIND_BACKEND, "scalar", 0);

PICOLM_EXPORT const picolm_plugin *picolm_plugin_v1(void) { return &scalar_plugin; }
