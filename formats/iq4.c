/*
 * Non-linear 4-bit formats: IQ4_NL (blocks of 32, one fp16 scale) and
 * IQ4_XS (super-blocks of 256: fp16 scale + eight 6-bit sub-scales).
 * Both index the 16-entry grid picolm_kvalues_iq4nl.
 *
 * quantize_row is llama.cpp's quantize_iq4_nl / quantize_iq4_xs without an
 * importance matrix (weights x^2, a 15-step scale search), reproduced
 * operation for operation so that llama-quantize'd files come out byte for
 * byte.  Float contraction stays off for the same reason.
 */
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

static const int8_t *const kv = picolm_kvalues_iq4nl;

/* ggml's round-to-nearest trick: exact for |f| < 2^22 */
static inline int nearest_int(float f) {
    float v = f + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* Index of the grid value nearest to x (ties go up, as in ggml). */
static inline int best_index_int8(int n, const int8_t *val, float x) {
    if (x <= val[0]) return 0;
    if (x >= val[n - 1]) return n - 1;
    int ml = 0, mu = n - 1;
    while (mu - ml > 1) {
        int mav = (ml + mu) / 2;
        if (x < val[mav]) mu = mav; else ml = mav;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

#define GROUP_MAX_EPS 1e-15f
#define NTRY 7

/* One super-block of sbs values in sub-blocks of 32.  sbs == 32: IQ4_NL
   (the sub-block scale goes to *dh directly); sbs == 256: IQ4_XS (6-bit
   sub-scales relative to *dh).  Mirrors ggml's quantize_row_iq4_nl_impl
   with no quant_weights and ntry = 7. */
static void iq4_quantize_superblock(int sbs, const float *x, uint16_t *dh, uint8_t *q4,
                                    uint16_t *scales_h, uint8_t *scales_l) {
    enum { BS = 32 };
    float scales[QK_K / BS];
    float weight[BS];
    uint8_t L[QK_K];

    memset(q4, 0, (size_t)sbs / 2);
    *dh = F2H(0.f);

    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < sbs / BS; ib++) {
        const float *xb = x + ib * BS;
        uint8_t *Lb = L + ib * BS;
        for (int j = 0; j < BS; j++) weight[j] = xb[j] * xb[j];
        float amax = 0, max = 0;
        for (int j = 0; j < BS; j++) {
            float ax = fabsf(xb[j]);
            if (ax > amax) { amax = ax; max = xb[j]; }
        }
        if (amax < GROUP_MAX_EPS) {
            scales[ib] = 0;
            /* ggml leaves L stale here; 0 keeps it defined (the scale is 0) */
            memset(Lb, 0, BS);
            continue;
        }
        float d = -max / kv[0];
        float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < BS; j++) {
            float al = id * xb[j];
            int l = best_index_int8(16, kv, al);
            Lb[j] = (uint8_t)l;
            float q = kv[l];
            float w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
        float best = d * sumqx;
        for (int itry = -NTRY; itry <= NTRY; itry++) {
            id = (itry + kv[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < BS; j++) {
                float al = id * xb[j];
                int l = best_index_int8(16, kv, al);
                float q = kv[l];
                float w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        float abs_d = fabsf(d);
        if (abs_d > amax_scale) { amax_scale = abs_d; max_scale = d; }
    }

    if (sbs / BS > 1) {
        *scales_h = 0;
        float d = -max_scale / 32;
        *dh = F2H(d);
        float id = d ? 1 / d : 0.f;
        for (int ib = 0; ib < sbs / BS; ib++) {
            int l = nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            float dl = d * l;
            float idl = dl ? 1 / dl : 0.f;
            uint8_t *Lb = L + ib * BS;
            const float *xb = x + ib * BS;
            for (int j = 0; j < BS; j++) Lb[j] = (uint8_t)best_index_int8(16, kv, idl * xb[j]);
            l += 32;
            const uint8_t l_l = (uint8_t)(l & 0xf), l_h = (uint8_t)(l >> 4);
            if (ib % 2 == 0) scales_l[ib / 2] = l_l;
            else scales_l[ib / 2] |= (uint8_t)(l_l << 4);
            *scales_h |= (uint16_t)(l_h << 2 * (ib % 8));
        }
    } else {
        *dh = F2H(scales[0]);
        float id = scales[0] ? 1 / scales[0] : 0;
        for (int j = 0; j < sbs; j++) L[j] = (uint8_t)best_index_int8(16, kv, id * x[j]);
    }

    for (int i = 0; i < sbs / 32; i++)
        for (int j = 0; j < 16; j++)
            q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

/* ---- IQ4_NL --------------------------------------------------------------- */
static void iq4_nl_quantize(const float *x, void *vy, int64_t k) {
    block_iq4_nl *y = vy;
    for (int64_t i = 0; i < k / QK4_NL; i++)
        iq4_quantize_superblock(QK4_NL, x + i * QK4_NL, &y[i].d, y[i].qs, NULL, NULL);
}
static void iq4_nl_dequantize(const void *vx, float *y, int64_t k) {
    const block_iq4_nl *x = vx;
    for (int64_t i = 0; i < k / QK4_NL; i++, y += QK4_NL) {
        const float d = H2F(x[i].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[j] = d * kv[x[i].qs[j] & 0xf];
            y[j + QK4_NL / 2] = d * kv[x[i].qs[j] >> 4];
        }
    }
}
static void iq4_nl_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_iq4_nl *x = vx;
    const block_q8_0 *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / QK4_NL; i++) {
        const float d = H2F(y[i].d) * H2F(x[i].d);
        int s1 = 0, s2 = 0;
        for (int j = 0; j < QK4_NL / 2; j++) {
            s1 += y[i].qs[j] * kv[x[i].qs[j] & 0xf];
            s2 += y[i].qs[j + QK4_NL / 2] * kv[x[i].qs[j] >> 4];
        }
        sum += d * (s1 + s2);
    }
    *s = sum;
}

/* ---- IQ4_XS --------------------------------------------------------------- */
static void iq4_xs_quantize(const float *x, void *vy, int64_t k) {
    block_iq4_xs *y = vy;
    for (int64_t i = 0; i < k / QK_K; i++)
        iq4_quantize_superblock(QK_K, x + i * QK_K, &y[i].d, y[i].qs, &y[i].scales_h, y[i].scales_l);
}
/* 6-bit sub-scale of sub-block ib, biased by 32 */
static inline int iq4_xs_scale(const block_iq4_xs *b, int ib) {
    return (((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b->scales_h >> 2 * ib) & 3) << 4)) - 32;
}
static void iq4_xs_dequantize(const void *vx, float *y, int64_t k) {
    const block_iq4_xs *x = vx;
    for (int64_t i = 0; i < k / QK_K; i++) {
        const float d = H2F(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < QK_K / 32; ib++, y += 32, qs += 16) {
            const float dl = d * iq4_xs_scale(&x[i], ib);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * kv[qs[j] & 0xf];
                y[j + 16] = dl * kv[qs[j] >> 4];
            }
        }
    }
}
static void iq4_xs_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_iq4_xs *x = vx;
    const block_q8_K *y = vy;
    float sum = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d4d8 = H2F(x[i].d) * y[i].d;
        const uint8_t *qs = x[i].qs;
        const int8_t *q8 = y[i].qs;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 16, q8 += 32) {
            int s1 = 0, s2 = 0;
            for (int j = 0; j < 16; j++) {
                s1 += q8[j] * kv[qs[j] & 0xf];
                s2 += q8[j + 16] * kv[qs[j] >> 4];
            }
            sum += d4d8 * iq4_xs_scale(&x[i], ib) * (s1 + s2);
        }
    }
    *s = sum;
}

#define W PICOLM_FMT_WEIGHT

static const picolm_format iq4_formats[] = {
    PICOLM_FORMAT(PICOLM_TYPE_IQ4_NL, W, "IQ4_NL", QK4_NL, sizeof(block_iq4_nl), iq4_nl_dequantize, iq4_nl_quantize, PICOLM_TYPE_Q8_0, iq4_nl_vec_dot),
    PICOLM_FORMAT(PICOLM_TYPE_IQ4_XS, W, "IQ4_XS", QK_K, sizeof(block_iq4_xs), iq4_xs_dequantize, iq4_xs_quantize, PICOLM_TYPE_Q8_K, iq4_xs_vec_dot),
};

static const picolm_format_vtable iq4_vtable = PICOLM_FORMAT_VTABLE(iq4_formats);
PICOLM_DEFINE_PLUGIN(PICOLM_KIND_FORMAT, "iq4", "1.0", "IQ4_NL and IQ4_XS (reference code)", 0, 0, &iq4_vtable);
