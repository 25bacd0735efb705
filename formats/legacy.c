/*
 * Legacy ggml block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (weights) and
 * Q8_0, Q8_1 (activations).
 *
 * quantize_row follows ggml's reference quantizers (quantize_row_*_ref)
 * operation for operation: llama-quantize uses them when it has no
 * importance matrix, so quantizing an f32 tensor here reproduces the bytes
 * of a llama-quantize'd file.  Dequantization matches ggml bit for bit, so
 * float contraction (a*b+c -> fma) must stay off.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "picolm/blocks.h"
#include "picolm/fp16.h"
#include "picolm/plugin.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define H2F picolm_half_to_float
#define F2H picolm_float_to_half

static inline int imin(int a, int b) { return a < b ? a : b; }

/* ---- Q4_0: x = d * (q - 8) ----------------------------------------------- */
static void q4_0_quantize(const float *x, void *vy, int64_t k) {
    block_q4_0 *y = vy;
    const int64_t nb = k / QK4_0;
    for (int64_t i = 0; i < nb; i++, x += QK4_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK4_0; j++) {
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const float x0 = x[j] * id, x1 = x[QK4_0 / 2 + j] * id;
            /* ggml truncates through int8_t, then clamps to 15 */
            const uint8_t q0 = (uint8_t)imin(15, (int8_t)(x0 + 8.5f));
            const uint8_t q1 = (uint8_t)imin(15, (int8_t)(x1 + 8.5f));
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}
static void q4_0_dequantize(const void *vx, float *y, int64_t k) {
    const block_q4_0 *x = vx;
    const int64_t nb = k / QK4_0;
    for (int64_t i = 0; i < nb; i++, y += QK4_0) {
        const float d = H2F(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = ((x[i].qs[j] & 0x0F) - 8) * d;
            y[j + QK4_0 / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}
static void q4_0_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        int s0 = 0, s1 = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            s0 += ((x[i].qs[j] & 0x0F) - 8) * y[i].qs[j];
            s1 += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + QK4_0 / 2];
        }
        sum += (s0 + s1) * H2F(x[i].d) * H2F(y[i].d);
    }
    *s = sum;
}

/* ---- Q4_1: x = d * q + m ------------------------------------------------- */
static void q4_1_quantize(const float *x, void *vy, int64_t k) {
    block_q4_1 *y = vy;
    const int64_t nb = k / QK4_1;
    for (int64_t i = 0; i < nb; i++, x += QK4_1) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK4_1; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        y[i].m = F2H(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const float x0 = (x[j] - min) * id, x1 = (x[QK4_1 / 2 + j] - min) * id;
            const uint8_t q0 = (uint8_t)imin(15, (int8_t)(x0 + 0.5f));
            const uint8_t q1 = (uint8_t)imin(15, (int8_t)(x1 + 0.5f));
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}
static void q4_1_dequantize(const void *vx, float *y, int64_t k) {
    const block_q4_1 *x = vx;
    const int64_t nb = k / QK4_1;
    for (int64_t i = 0; i < nb; i++, y += QK4_1) {
        const float d = H2F(x[i].d), m = H2F(x[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j] = (x[i].qs[j] & 0x0F) * d + m;
            y[j + QK4_1 / 2] = (x[i].qs[j] >> 4) * d + m;
        }
    }
}
static void q4_1_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q4_1 *x = vx;
    const block_q8_1 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        int s0 = 0, s1 = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            s0 += (x[i].qs[j] & 0x0F) * y[i].qs[j];
            s1 += (x[i].qs[j] >> 4) * y[i].qs[j + QK4_1 / 2];
        }
        /* the min contributes m * sum(d_y * q_y) = m * s */
        sum += (H2F(x[i].d) * H2F(y[i].d)) * (s0 + s1) + H2F(x[i].m) * H2F(y[i].s);
    }
    *s = sum;
}

/* ---- Q5_0: x = d * (q - 16), 5th bits in qh ------------------------------ */
static void q5_0_quantize(const float *x, void *vy, int64_t k) {
    block_q5_0 *y = vy;
    const int64_t nb = k / QK5_0;
    for (int64_t i = 0; i < nb; i++, x += QK5_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK5_0; j++) {
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const float x0 = x[j] * id, x1 = x[QK5_0 / 2 + j] * id;
            const uint8_t q0 = (uint8_t)imin(31, (int8_t)(x0 + 16.5f));
            const uint8_t q1 = (uint8_t)imin(31, (int8_t)(x1 + 16.5f));
            y[i].qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= ((q0 & 0x10u) >> 4) << j;
            qh |= ((q1 & 0x10u) >> 4) << (j + QK5_0 / 2);
        }
        memcpy(y[i].qh, &qh, sizeof qh); /* little-endian, as in the file */
    }
}
static void q5_0_dequantize(const void *vx, float *y, int64_t k) {
    const block_q5_0 *x = vx;
    const int64_t nb = k / QK5_0;
    for (int64_t i = 0; i < nb; i++, y += QK5_0) {
        const float d = H2F(x[i].d);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int h0 = ((qh >> j) << 4) & 0x10;
            const int h1 = (qh >> (j + 12)) & 0x10;
            y[j] = (((x[i].qs[j] & 0x0F) | h0) - 16) * d;
            y[j + QK5_0 / 2] = (((x[i].qs[j] >> 4) | h1) - 16) * d;
        }
    }
}
static void q5_0_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        int s0 = 0, s1 = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int h0 = ((qh >> j) << 4) & 0x10;
            const int h1 = (qh >> (j + 12)) & 0x10;
            s0 += (((x[i].qs[j] & 0x0F) | h0) - 16) * y[i].qs[j];
            s1 += (((x[i].qs[j] >> 4) | h1) - 16) * y[i].qs[j + QK5_0 / 2];
        }
        sum += (s0 + s1) * H2F(x[i].d) * H2F(y[i].d);
    }
    *s = sum;
}

/* ---- Q5_1: x = d * q + m ------------------------------------------------- */
static void q5_1_quantize(const float *x, void *vy, int64_t k) {
    block_q5_1 *y = vy;
    const int64_t nb = k / QK5_1;
    for (int64_t i = 0; i < nb; i++, x += QK5_1) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK5_1; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        y[i].m = F2H(min);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            const float x0 = (x[j] - min) * id, x1 = (x[QK5_1 / 2 + j] - min) * id;
            /* no clamp in ggml's reference here (x0 <= 31 + rounding) */
            const uint8_t q0 = (uint8_t)(x0 + 0.5f);
            const uint8_t q1 = (uint8_t)(x1 + 0.5f);
            y[i].qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= ((q0 & 0x10u) >> 4) << j;
            qh |= ((q1 & 0x10u) >> 4) << (j + QK5_1 / 2);
        }
        memcpy(y[i].qh, &qh, sizeof qh);
    }
}
static void q5_1_dequantize(const void *vx, float *y, int64_t k) {
    const block_q5_1 *x = vx;
    const int64_t nb = k / QK5_1;
    for (int64_t i = 0; i < nb; i++, y += QK5_1) {
        const float d = H2F(x[i].d), m = H2F(x[i].m);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int h0 = ((qh >> j) << 4) & 0x10;
            const int h1 = (qh >> (j + 12)) & 0x10;
            y[j] = ((x[i].qs[j] & 0x0F) | h0) * d + m;
            y[j + QK5_1 / 2] = ((x[i].qs[j] >> 4) | h1) * d + m;
        }
    }
}
static void q5_1_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_1 *x = vx;
    const block_q8_1 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        int s0 = 0, s1 = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int h0 = ((qh >> j) << 4) & 0x10;
            const int h1 = (qh >> (j + 12)) & 0x10;
            s0 += ((x[i].qs[j] & 0x0F) | h0) * y[i].qs[j];
            s1 += ((x[i].qs[j] >> 4) | h1) * y[i].qs[j + QK5_1 / 2];
        }
        sum += (H2F(x[i].d) * H2F(y[i].d)) * (s0 + s1) + H2F(x[i].m) * H2F(y[i].s);
    }
    *s = sum;
}

/* ---- Q8_0: x = d * q ----------------------------------------------------- */
static void q8_0_quantize(const float *x, void *vy, int64_t k) {
    block_q8_0 *y = vy;
    const int64_t nb = k / QK8_0;
    for (int64_t i = 0; i < nb; i++, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        for (int j = 0; j < QK8_0; j++) y[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}
static void q8_0_dequantize(const void *vx, float *y, int64_t k) {
    const block_q8_0 *x = vx;
    const int64_t nb = k / QK8_0;
    for (int64_t i = 0; i < nb; i++, y += QK8_0) {
        const float d = H2F(x[i].d);
        for (int j = 0; j < QK8_0; j++) y[j] = x[i].qs[j] * d;
    }
}
static void q8_0_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q8_0 *x = vx, *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int si = 0;
        for (int j = 0; j < QK8_0; j++) si += x[i].qs[j] * y[i].qs[j];
        sum += si * (H2F(x[i].d) * H2F(y[i].d));
    }
    *s = sum;
}

/* ---- Q8_1: x = d * q, s = d * sum(q) (activation only) ------------------- */
static void q8_1_quantize(const float *x, void *vy, int64_t k) {
    block_q8_1 *y = vy;
    const int64_t nb = k / QK8_1;
    for (int64_t i = 0; i < nb; i++, x += QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_1; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[i].qs[j] = (int8_t)roundf(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].s = F2H(sum * d);
    }
}
static void q8_1_dequantize(const void *vx, float *y, int64_t k) {
    const block_q8_1 *x = vx;
    const int64_t nb = k / QK8_1;
    for (int64_t i = 0; i < nb; i++, y += QK8_1) {
        const float d = H2F(x[i].d);
        for (int j = 0; j < QK8_1; j++) y[j] = x[i].qs[j] * d;
    }
}

#define W PICOLM_FMT_WEIGHT
#define A PICOLM_FMT_ACTIVATION

static const picolm_format legacy_formats[] = {
    { PICOLM_TYPE_Q4_0, W, "Q4_0", QK4_0, sizeof(block_q4_0), q4_0_dequantize, q4_0_quantize, PICOLM_TYPE_Q8_0, q4_0_vec_dot },
    { PICOLM_TYPE_Q4_1, W, "Q4_1", QK4_1, sizeof(block_q4_1), q4_1_dequantize, q4_1_quantize, PICOLM_TYPE_Q8_1, q4_1_vec_dot },
    { PICOLM_TYPE_Q5_0, W, "Q5_0", QK5_0, sizeof(block_q5_0), q5_0_dequantize, q5_0_quantize, PICOLM_TYPE_Q8_0, q5_0_vec_dot },
    { PICOLM_TYPE_Q5_1, W, "Q5_1", QK5_1, sizeof(block_q5_1), q5_1_dequantize, q5_1_quantize, PICOLM_TYPE_Q8_1, q5_1_vec_dot },
    { PICOLM_TYPE_Q8_0, W | A, "Q8_0", QK8_0, sizeof(block_q8_0), q8_0_dequantize, q8_0_quantize, PICOLM_TYPE_Q8_0, q8_0_vec_dot },
    { PICOLM_TYPE_Q8_1, A, "Q8_1", QK8_1, sizeof(block_q8_1), q8_1_dequantize, q8_1_quantize, PICOLM_TYPE_Q8_1, NULL },
};

static const picolm_format_vtable legacy_vtable = {
    sizeof(picolm_format_vtable), sizeof(picolm_format),
    sizeof legacy_formats / sizeof legacy_formats[0], legacy_formats,
};

static const picolm_plugin legacy_plugin = {
    .abi_version = PICOLM_ABI_VERSION,
    .struct_size = sizeof(picolm_plugin),
    .kind = PICOLM_KIND_FORMAT,
    .name = "legacy",
    .version = "1.0",
    .description = "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 (reference code)",
    .vtable = &legacy_vtable,
};

PICOLM_EXPORT const picolm_plugin *picolm_plugin_v1(void) { return &legacy_plugin; }
