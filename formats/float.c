/*
 * Float weight formats: F32, F16, BF16.
 *
 * Each is its own activation type (like ggml: an F16 weight row is dotted
 * with an activation row rounded to fp16).  The reference dot products
 * accumulate in double, as ggml's scalar ggml_vec_dot_f32/f16/bf16 do.
 */
#include <string.h>

#include "picolm/blocks.h"
#include "picolm/fp16.h"
#include "picolm/plugin.h"

/* ---- F32 ---------------------------------------------------------------- */
static void f32_to_float(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}
static void f32_from_float(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}
static void f32_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * y[i]);
    *s = (float)sum;
}

/* ---- F16 ---------------------------------------------------------------- */
static void f16_to_float(const void *src, float *dst, int64_t n) {
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++) dst[i] = picolm_half_to_float(x[i]);
}
static void f16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *y = dst;
    for (int64_t i = 0; i < n; i++) y[i] = picolm_float_to_half(src[i]);
}
static void f16_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(picolm_half_to_float(x[i]) * picolm_half_to_float(y[i]));
    *s = (float)sum;
}

/* ---- BF16 --------------------------------------------------------------- */
static void bf16_to_float(const void *src, float *dst, int64_t n) {
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++) dst[i] = picolm_bf16_to_float(x[i]);
}
static void bf16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *y = dst;
    for (int64_t i = 0; i < n; i++) y[i] = picolm_float_to_bf16(src[i]);
}
static void bf16_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(picolm_bf16_to_float(x[i]) * picolm_bf16_to_float(y[i]));
    *s = (float)sum;
}

#define WA (PICOLM_FMT_WEIGHT | PICOLM_FMT_ACTIVATION)

static const picolm_format float_formats[] = {
    PICOLM_FORMAT(PICOLM_TYPE_F32, WA, "F32", 1, 4, f32_to_float, f32_from_float, PICOLM_TYPE_F32, f32_vec_dot),
    PICOLM_FORMAT(PICOLM_TYPE_F16, WA, "F16", 1, 2, f16_to_float, f16_from_float, PICOLM_TYPE_F16, f16_vec_dot),
    PICOLM_FORMAT(PICOLM_TYPE_BF16, WA, "BF16", 1, 2, bf16_to_float, bf16_from_float, PICOLM_TYPE_BF16, bf16_vec_dot),
};

static const picolm_format_vtable float_vtable = PICOLM_FORMAT_VTABLE(float_formats);
PICOLM_DEFINE_PLUGIN(PICOLM_KIND_FORMAT, "float", "1.0", "F32, F16 and BF16 weights (reference code)", 0, 0, &float_vtable);
