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

/* The first x[j] of largest magnitude (Q4_0/Q5_0 scale by it, sign included). */
static inline float absmax_signed(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
    }
    return max;
}

static inline void min_max(const float *x, int n, float *min_out, float *max_out) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    *min_out = min;
    *max_out = max;
}

/* Q5_0/Q5_1: quants j and j + 16 (0..31) from the nibbles and the 32 fifth bits. */
static inline void q5_get(const uint8_t *qs, uint32_t qh, int j, int *q0, int *q1) {
    const int h0 = ((qh >> j) << 4) & 0x10;
    const int h1 = (qh >> (j + 12)) & 0x10;
    *q0 = (qs[j] & 0x0F) | h0;
    *q1 = (qs[j] >> 4) | h1;
}

/* Q5_0/Q5_1: store quants j and j + 16 (0..31): nibbles into qs, fifth bits into *qh. */
static inline void q5_put(uint8_t *qs, uint32_t *qh, int j, uint8_t q0, uint8_t q1) {
    qs[j] = (uint8_t)((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    *qh |= ((q0 & 0x10u) >> 4) << j;
    *qh |= ((q1 & 0x10u) >> 4) << (j + 16);
}

static inline uint32_t load_qh(const uint8_t *b) {
    uint32_t qh;
    memcpy(&qh, b, sizeof qh); /* little-endian, as in the file */
    return qh;
}

_Static_assert(QK8_0 == QK8_1 && QK5_0 == 32 && QK5_1 == 32, "shared Q8/Q5 helpers assume 32-element blocks");

/* Q8_0/Q8_1: d = amax / 127 and q = round(x / d) for one block; returns d. */
static inline float q8_block(const float *x, int8_t *qs) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK8_0; j++) qs[j] = (int8_t)roundf(x[j] * id);
    return d;
}

static inline void q8_dequantize_block(const int8_t *qs, picolm_half hd, float *y) {
    const float d = H2F(hd);
    for (int j = 0; j < QK8_0; j++) y[j] = qs[j] * d;
}

/* ---- Q4_0: x = d * (q - 8) ----------------------------------------------- */
static void q4_0_quantize(const float *x, void *vy, int64_t k) {
    block_q4_0 *y = vy;
    const int64_t nb = k / QK4_0;
    for (int64_t i = 0; i < nb; i++, x += QK4_0) {
        const float d = absmax_signed(x, QK4_0) / -8;
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
        float min, max;
        min_max(x, QK4_1, &min, &max);
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
        const float d = absmax_signed(x, QK5_0) / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = F2H(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const float x0 = x[j] * id, x1 = x[QK5_0 / 2 + j] * id;
            const uint8_t q0 = (uint8_t)imin(31, (int8_t)(x0 + 16.5f));
            const uint8_t q1 = (uint8_t)imin(31, (int8_t)(x1 + 16.5f));
            q5_put(y[i].qs, &qh, j, q0, q1);
        }
        memcpy(y[i].qh, &qh, sizeof qh); /* little-endian, as in the file */
    }
}
static void q5_0_dequantize(const void *vx, float *y, int64_t k) {
    const block_q5_0 *x = vx;
    const int64_t nb = k / QK5_0;
    for (int64_t i = 0; i < nb; i++, y += QK5_0) {
        const float d = H2F(x[i].d);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            int q0, q1;
            q5_get(x[i].qs, qh, j, &q0, &q1);
            y[j] = (q0 - 16) * d;
            y[j + QK5_0 / 2] = (q1 - 16) * d;
        }
    }
}
static void q5_0_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        const uint32_t qh = load_qh(x[i].qh);
        int s0 = 0, s1 = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            int q0, q1;
            q5_get(x[i].qs, qh, j, &q0, &q1);
            s0 += (q0 - 16) * y[i].qs[j];
            s1 += (q1 - 16) * y[i].qs[j + QK5_0 / 2];
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
        float min, max;
        min_max(x, QK5_1, &min, &max);
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
            q5_put(y[i].qs, &qh, j, q0, q1);
        }
        memcpy(y[i].qh, &qh, sizeof qh);
    }
}
static void q5_1_dequantize(const void *vx, float *y, int64_t k) {
    const block_q5_1 *x = vx;
    const int64_t nb = k / QK5_1;
    for (int64_t i = 0; i < nb; i++, y += QK5_1) {
        const float d = H2F(x[i].d), m = H2F(x[i].m);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            int q0, q1;
            q5_get(x[i].qs, qh, j, &q0, &q1);
            y[j] = q0 * d + m;
            y[j + QK5_1 / 2] = q1 * d + m;
        }
    }
}
static void q5_1_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q5_1 *x = vx;
    const block_q8_1 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        const uint32_t qh = load_qh(x[i].qh);
        int s0 = 0, s1 = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            int q0, q1;
            q5_get(x[i].qs, qh, j, &q0, &q1);
            s0 += q0 * y[i].qs[j];
            s1 += q1 * y[i].qs[j + QK5_1 / 2];
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
        y[i].d = F2H(q8_block(x, y[i].qs));
    }
}
static void q8_0_dequantize(const void *vx, float *y, int64_t k) {
    const block_q8_0 *x = vx;
    const int64_t nb = k / QK8_0;
    for (int64_t i = 0; i < nb; i++, y += QK8_0) q8_dequantize_block(x[i].qs, x[i].d, y);
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
        const float d = q8_block(x, y[i].qs);
        y[i].d = F2H(d);
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) sum += y[i].qs[j];
        y[i].s = F2H(sum * d);
    }
}
static void q8_1_dequantize(const void *vx, float *y, int64_t k) {
    const block_q8_1 *x = vx;
    const int64_t nb = k / QK8_1;
    for (int64_t i = 0; i < nb; i++, y += QK8_1) q8_dequantize_block(x[i].qs, x[i].d, y);
}

#define W PICOLM_FMT_WEIGHT
#define A PICOLM_FMT_ACTIVATION

static const picolm_format legacy_formats[] = {
    PICOLM_FORMAT(PICOLM_TYPE_Q4_0, W, "Q4_0", QK4_0, sizeof(block_q4_0), q4_0_dequantize, q4_0_quantize, PICOLM_TYPE_Q8_0, q4_0_vec_dot),
    PICOLM_FORMAT(PICOLM_TYPE_Q4_1, W, "Q4_1", QK4_1, sizeof(block_q4_1), q4_1_dequantize, q4_1_quantize, PICOLM_TYPE_Q8_1, q4_1_vec_dot),
    PICOLM_FORMAT(PICOLM_TYPE_Q5_0, W, "Q5_0", QK5_0, sizeof(block_q5_0), q5_0_dequantize, q5_0_quantize, PICOLM_TYPE_Q8_0, q5_0_vec_dot),
    PICOLM_FORMAT(PICOLM_TYPE_Q5_1, W, "Q5_1", QK5_1, sizeof(block_q5_1), q5_1_dequantize, q5_1_quantize, PICOLM_TYPE_Q8_1, q5_1_vec_dot),
    PICOLM_FORMAT(PICOLM_TYPE_Q8_0, W | A, "Q8_0", QK8_0, sizeof(block_q8_0), q8_0_dequantize, q8_0_quantize, PICOLM_TYPE_Q8_0, q8_0_vec_dot),
    PICOLM_FORMAT(PICOLM_TYPE_Q8_1, A, "Q8_1", QK8_1, sizeof(block_q8_1), q8_1_dequantize, q8_1_quantize, PICOLM_TYPE_Q8_1, NULL),
};

#ifndef PICOLM_LEGACY_NO_PLUGIN /* repack.c includes this file for its code and is a plugin of its own */
static const picolm_format_vtable legacy_vtable = PICOLM_FORMAT_VTABLE(legacy_formats);
PICOLM_DEFINE_PLUGIN(PICOLM_KIND_FORMAT, "legacy", "1.0", "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 (reference code)", 0, 0,
                     &legacy_vtable);
#endif
