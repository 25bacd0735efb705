/* The scalar level: the lowest of every chain, plain C on any CPU.  It
   improves two primitives over the core's reference (core/ops.c), whose
   single running sum neither vectorises nor keeps the error low on long
   rows; everything else stays the reference (weight kernels: the format
   plugins'; rmsnorm, scale_axpy_f16, swiglu, f32_to_f16: the core's). */
#include "../level.h"
#include "picolm/fp16.h"

/* four partial sums: lets the compiler vectorise and keeps the error low */
static float scalar_dot_f32(const float *a, const float *b, int n) {
    float s[4] = {0, 0, 0, 0};
    int i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) s[k] += a[i + k] * b[i + k];
    for (; i < n; i++) s[0] += a[i] * b[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}
static float scalar_dot_f32_f16(const float *a, const uint16_t *b, int n) {
    float s[4] = {0, 0, 0, 0};
    int i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) s[k] += a[i + k] * picolm_half_to_float(b[i + k]);
    for (; i < n; i++) s[0] += a[i] * picolm_half_to_float(b[i]);
    return (s[0] + s[1]) + (s[2] + s[3]);
}

static const picolm_backend_vtable scalar_prims = {
    .dot_f32 = scalar_dot_f32,
    .dot_f32_f16 = scalar_dot_f32_f16,
};
PK_LEVEL(scalar, "scalar", 0, NULL, 0, NULL, 0, &scalar_prims);
