/*
 * An out-of-tree picolm format plugin: proof that a weight format can be
 * added without touching or rebuilding picolm.  Built on its own with
 *
 *     cc -std=c11 -O2 -shared -fPIC -I include tests/dropin/format/q8_64.c -o DIR/format-q8_64.so
 *
 * using nothing but the public header include/picolm/plugin.h.
 *
 * Q8_64 (type id 1064, a picolm-private id): blocks of 64 weights, one
 * float32 scale and 64 signed bytes, 68 bytes = 8.5 bits per weight.  Its
 * activations are plain F32 (vec_dot_type F32), so the plugin needs no
 * activation quantizer and the core pairs it with the stock F32 format.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "picolm/plugin.h"

#define Q8_64_TYPE 1064
#define QK 64

typedef struct {
    float d;        /* scale: x = d * q */
    int8_t q[QK];
} block_q8_64;

_Static_assert(sizeof(block_q8_64) == 68, "block_q8_64 must be packed");

static void q8_64_quantize(const float *x, void *vy, int64_t n) {
    block_q8_64 *y = vy;
    for (int64_t b = 0; b < n / QK; b++, x += QK) {
        float amax = 0.0f;
        for (int i = 0; i < QK; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = d;
        for (int i = 0; i < QK; i++) {
            const float v = roundf(x[i] * id);
            y[b].q[i] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : v);
        }
    }
}

static void q8_64_dequantize(const void *vx, float *y, int64_t n) {
    const block_q8_64 *x = vx;
    for (int64_t b = 0; b < n / QK; b++)
        for (int i = 0; i < QK; i++) y[b * QK + i] = x[b].d * (float)x[b].q[i];
}

/* weights (Q8_64) . activations (F32) */
static void q8_64_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q8_64 *x = vx;
    const float *y = vy;
    double sum = 0.0;
    for (int64_t b = 0; b < n / QK; b++) {
        float acc = 0.0f;
        for (int i = 0; i < QK; i++) acc += (float)x[b].q[i] * y[b * QK + i];
        sum += (double)(x[b].d * acc);
    }
    *s = (float)sum;
}

static const picolm_format formats[] = {
    PICOLM_FORMAT(Q8_64_TYPE, PICOLM_FMT_WEIGHT, "Q8_64", QK, sizeof(block_q8_64), q8_64_dequantize, q8_64_quantize,
     PICOLM_TYPE_F32, q8_64_vec_dot),
};

static const picolm_format_vtable vtable = PICOLM_FORMAT_VTABLE(formats);

PICOLM_DEFINE_PLUGIN(PICOLM_KIND_FORMAT, "dropin-q8_64", "1.0",
                     "Q8_64: 64 int8 weights + f32 scale (out-of-tree example)", 0, 0, &vtable);
