/*
 * K-quant weight formats (Q2_K .. Q6_K) and the Q8_K activation format:
 * portable reference code, bit-exact with ggml.
 *
 * - dequantize_row_*: same float expressions, in the same order, as ggml's
 *   dequantize_row_q*_K, so results match bit for bit.
 * - quantize_row_*: ggml's quantize_row_q*_K_ref (what llama-quantize uses
 *   without an imatrix), including its search heuristics and the exact float
 *   evaluation order, so a quantized tensor reproduces llama.cpp's bytes.
 * - vec_dot_*: ggml's scalar ggml_vec_dot_q*_K_q8_K (integer products per
 *   sub-block, float scale per super-block, dmin * bsums correction), with
 *   the same float accumulation order.
 *
 * Bit-exactness needs IEEE single precision without contraction into FMA:
 * the pragmas below turn contraction off (gcc's -std=c11 already does, but
 * not -std=gnu11; clang contracts by default, and on AArch64 FMA is always
 * there).  Never build this file with -ffast-math, nor with clang's
 * -ffp-contract=fast, which overrides the pragma (tests/test_kquants then
 * fails the llama.cpp byte comparison).  Endianness does not matter:
 * scales are decoded bytewise.
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <math.h>
#include <string.h>

#include "picolm/blocks.h"
#include "picolm/fp16.h"
#include "picolm/plugin.h"

#define KQ_MAX(a, b) ((a) > (b) ? (a) : (b))
#define KQ_MIN(a, b) ((a) < (b) ? (a) : (b))
#define GROUP_MAX_EPS 1e-15f

static inline float h2f(picolm_half h) { return picolm_half_to_float(h); }
static inline picolm_half f2h(float f) { return picolm_float_to_half(f); }

/* ggml's nearest_int: round half to even via the 1.5*2^23 trick (valid for
   |fval| <= 2^22; out-of-range inputs give garbage, never UB). */
static inline int nearest_int(float fval) {
    float val = fval + 12582912.f;
    int32_t i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* ------------------------------------------------------------------------ */
/* Helpers shared by the quantizers (ggml's make_*_quants, verbatim maths)   */
/* ------------------------------------------------------------------------ */

/* The first element of largest magnitude among x[0..n) (0 when all are 0);
   *amax gets its magnitude. */
static inline float kq_absmax(int n, const float *x, float *amax) {
    float max = 0;
    *amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > *amax) { *amax = ax; max = x[i]; }
    }
    return max;
}

/* Symmetric rounding at iscale with w = x^2: the weighted sums
   sum w*x*l and sum w*l*l, and (when L) L[i] = l + off. */
static inline void kq_sym_sums(int n, int nmax, const float *x, float iscale, int8_t *L, int off,
                               float *sumlx_out, float *suml2_out) {
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = KQ_MAX(-nmax, KQ_MIN(nmax - 1, l));
        if (L) L[i] = (int8_t)(l + off);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    *sumlx_out = sumlx;
    *suml2_out = suml2;
}

/* Symmetric quantizer with an RMSE search (used by Q6_K with rmse_type 1 and
   no importance weights, i.e. w = x^2).  L receives values in [0, 2*nmax). */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L) {
    float amax;
    const float max = kq_absmax(n, x, &amax);
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx, suml2;
    kq_sym_sums(n, nmax, x, iscale, L, nmax, &sumlx, &suml2);
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        kq_sym_sums(n, nmax, x, iscale, NULL, 0, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + KQ_MAX(-nmax, KQ_MIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric quantizer with iterative per-element refinement (Q3_K). */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L) {
    float amax;
    const float max = kq_absmax(n, x, &amax);
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float sumlx, suml2;
    kq_sym_sums(n, nmax, x, -nmax / max, L, 0, &sumlx, &suml2);
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int new_l = nearest_int(x[i] * sl2 / slx);
                new_l = KQ_MAX(-nmax, KQ_MIN(nmax - 1, new_l));
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric (scale + min) quantizer with a weighted least-squares search
   over nstep+1 candidate scales (Q2_K, Q4_K, Q5_K).  Returns the scale and
   stores -min (>= 0) in *the_min. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights,
                              uint8_t *L, float *the_min, uint8_t *Laux,
                              float rmin, float rdelta, int nstep, int use_mad) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)KQ_MAX(0, KQ_MIN(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        float w = weights[i];
        best_error += w * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = KQ_MAX(0, KQ_MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                float w = weights[i];
                cur_error += w * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* 6-bit scale j and min j of Q4_K/Q5_K's 12-byte packed scales. */
static inline void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* Q4_K/Q5_K: pack 8 6-bit scales and mins into 12 bytes. */
static void pack_scale_min_k4(uint8_t *s, int j, uint8_t ls, uint8_t lm) {
    if (j < 4) {
        s[j] = ls;
        s[j + 4] = lm;
    } else {
        s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        s[j - 4] |= (uint8_t)((ls >> 4) << 6);
        s[j - 0] |= (uint8_t)((lm >> 4) << 6);
    }
}

/* Q3_K: signed 6-bit scale j (already minus 32) from the 12 packed bytes.
   Bytewise equivalent of ggml's little-endian uint32 shuffle. */
static inline int q3k_scale(const uint8_t *s, int j) {
    int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* Q2_K/Q3_K: the low 2 bits of 256 quants, four to a byte (element j + 32 k
   of each 128 in bits 2k of byte j). */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) |
                                      (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Q3_K..Q6_K superblocks as 256 signed quants in element order: shared by   */
/* dequantize (y = scale * q [- min]) and the scalar vec_dot (ggml's aux8).  */
/* ------------------------------------------------------------------------ */
static void q3_K_expand(const block_q3_K *x, int8_t *a) {
    const uint8_t *q3 = x->qs;
    const uint8_t *hm = x->hmask;
    uint8_t m = 1;
    for (int j = 0; j < QK_K; j += 128) {
        for (int sh = 0; sh < 8; sh += 2) {
            for (int l = 0; l < 32; ++l)
                a[l] = (int8_t)(((q3[l] >> sh) & 3) - (hm[l] & m ? 0 : 4));
            a += 32;
            m = (uint8_t)(m << 1);
        }
        q3 += 32;
    }
}

static void q4_K_expand(const block_q4_K *x, int8_t *a) {
    const uint8_t *q4 = x->qs;
    for (int j = 0; j < QK_K / 64; ++j) {
        for (int l = 0; l < 32; ++l) a[l] = (int8_t)(q4[l] & 0xF);
        a += 32;
        for (int l = 0; l < 32; ++l) a[l] = (int8_t)(q4[l] >> 4);
        a += 32;
        q4 += 32;
    }
}

static void q5_K_expand(const block_q5_K *x, int8_t *a) {
    const uint8_t *q4 = x->qs;
    const uint8_t *hm = x->qh;
    uint8_t m = 1;
    for (int j = 0; j < QK_K / 64; ++j) {
        for (int l = 0; l < 32; ++l) a[l] = (int8_t)((q4[l] & 0xF) + (hm[l] & m ? 16 : 0));
        a += 32;
        m = (uint8_t)(m << 1);
        for (int l = 0; l < 32; ++l) a[l] = (int8_t)((q4[l] >> 4) + (hm[l] & m ? 16 : 0));
        a += 32;
        m = (uint8_t)(m << 1);
        q4 += 32;
    }
}

static void q6_K_expand(const block_q6_K *x, int8_t *a) {
    const uint8_t *q4 = x->ql;
    const uint8_t *qh = x->qh;
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            a[l + 0] = (int8_t)(((q4[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            a[l + 32] = (int8_t)(((q4[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            a[l + 64] = (int8_t)(((q4[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            a[l + 96] = (int8_t)(((q4[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
        a += 128;
        q4 += 64;
        qh += 32;
    }
}

/* Q4_K/Q5_K dequantization: y = d * scale_j * q - dmin * min_j per 32. */
static void k4_dequantize_block(const int8_t *a, const uint8_t *packed, picolm_half hd, picolm_half hdmin, float *y) {
    const float d = h2f(hd);
    const float min = h2f(hdmin);
    uint8_t sc, m;
    for (int j = 0; j < QK_K / 32; ++j) {
        get_scale_min_k4(j, packed, &sc, &m);
        const float dj = d * sc;
        const float mj = min * m;
        for (int l = 0; l < 32; ++l) *y++ = dj * a[32 * j + l] - mj;
    }
}

/* One superblock of the Q3_K..Q6_K scalar dots (ggml's order): integer
   products scaled per 16 into 8 lanes, then sums[l] += d_x * d_y * lane.
   scale_of16[j] is the integer scale of quants j*16..j*16+15. */
static void kdot_block(const int8_t *aux8, const int *scale_of16, picolm_half xd, const block_q8_K *y, float *sums) {
    int32_t aux32[8] = {0};
    int16_t aux16[8];
    const int8_t *a = aux8;
    const int8_t *q8 = y->qs;
    for (int j = 0; j < QK_K / 16; ++j) {
        const int32_t scale = scale_of16[j];
        for (int h = 0; h < 2; ++h) {
            for (int l = 0; l < 8; ++l) aux16[l] = (int16_t)(q8[l] * a[l]);
            for (int l = 0; l < 8; ++l) aux32[l] += scale * aux16[l];
            q8 += 8;
            a += 8;
        }
    }
    const float d = h2f(xd) * y->d;
    for (int l = 0; l < 8; ++l) sums[l] += d * aux32[l];
}

/* Q4_K/Q5_K dot of one superblock: kdot_block on the 6-bit scales; returns
   the min correction dmin * sum(bsums * min) the caller subtracts. */
static float k4_dot_block(const int8_t *aux8, const uint8_t *packed, picolm_half xd, picolm_half xdmin,
                          const block_q8_K *y, float *sums) {
    uint8_t scales[8], mins[8];
    for (int j = 0; j < QK_K / 32; ++j) get_scale_min_k4(j, packed, &scales[j], &mins[j]);
    int sumi = 0;
    for (int j = 0; j < QK_K / 16; ++j) sumi += y->bsums[j] * mins[j / 2];
    int sc16[QK_K / 16];
    for (int j = 0; j < QK_K / 16; ++j) sc16[j] = scales[j / 2];
    kdot_block(aux8, sc16, xd, y, sums);
    const float dmin = h2f(xdmin) * y->d;
    return dmin * sumi;
}

static float ksum8(const float *sums, float sumf) {
    for (int l = 0; l < 8; ++l) sumf += sums[l];
    return sumf;
}

/* The Q4_K family (Q4_K, Q5_K, and Q4_K_R through its Q4_K form) seen one
   superblock at a time: the 256 expanded quants, the packed 6-bit scales
   and mins, d and dmin.  One dequantize and one vec_dot serve them all. */
typedef struct k4_view {
    int8_t a[QK_K];
    const uint8_t *scales;
    picolm_half d, dmin;
    block_q4_K tmp; /* a Q4_K form made on the way (Q4_K_R) */
} k4_view;
typedef void (*k4_view_fn)(const void *x, int64_t i, k4_view *v);
/* NAME##_view for a block type with Q4_K's d, dmin and scales, expanded by NAME##_expand */
#define K4_VIEW(NAME, BLOCK)                                          \
    static void NAME##_view(const void *x, int64_t i, k4_view *v) {   \
        const BLOCK *b = (const BLOCK *)x + i;                        \
        NAME##_expand(b, v->a);                                       \
        v->scales = b->scales;                                        \
        v->d = b->d;                                                  \
        v->dmin = b->dmin;                                            \
    }

static void k4_dequantize(const void *src, float *y, int64_t n, k4_view_fn view) {
    k4_view v;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        view(src, i, &v);
        k4_dequantize_block(v.a, v.scales, v.d, v.dmin, y);
    }
}

static void k4_vec_dot(int64_t n, float *s, const void *vx, const void *vy, k4_view_fn view) {
    const block_q8_K *y = vy;
    k4_view v;
    float sums[8] = {0};
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        view(vx, i, &v);
        sumf -= k4_dot_block(v.a, v.scales, v.d, v.dmin, &y[i], sums);
    }
    *s = ksum8(sums, sumf);
}

/* ------------------------------------------------------------------------ */
/* Q2_K                                                                       */
/* ------------------------------------------------------------------------ */
static void q2_K_dequantize(const void *src, float *y, int64_t n) {
    const block_q2_K *x = src;
    const int64_t nb = n / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = h2f(x[i].d);
        const float min = h2f(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        float dl, ml;
        for (int k = 0; k < QK_K; k += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                uint8_t sc = x[i].scales[is++];
                dl = d * (sc & 0xF);
                ml = min * (sc >> 4);
                for (int l = 0; l < 16; ++l) *y++ = dl * ((int8_t)((q[l] >> shift) & 3)) - ml;
                sc = x[i].scales[is++];
                dl = d * (sc & 0xF);
                ml = min * (sc >> 4);
                for (int l = 0; l < 16; ++l) *y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3)) - ml;
                shift += 2;
            }
            q += 32;
        }
    }
}

static void q2_K_quantize(const float *x, void *dst, int64_t n) {
    block_q2_K *y = dst;
    const int64_t nb = n / QK_K;
    uint8_t L[QK_K];
    uint8_t Laux[16];
    float weights[16];
    float mins[QK_K / 16];
    float scales[QK_K / 16];
    const float q4scale = 15.f;

    for (int64_t i = 0; i < nb; i++) {
        float max_scale = 0; /* scales are >= 0 since the min is deducted */
        float max_min = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                         -0.5f, 0.1f, 15, 1);
            float scale = scales[j];
            if (scale > max_scale) max_scale = scale;
            float min = mins[j];
            if (min > max_min) max_min = min;
        }

        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) {
                int l = nearest_int(iscale * scales[j]);
                y[i].scales[j] = (uint8_t)l;
            }
            y[i].d = f2h(max_scale / q4scale);
        } else {
            for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = 0;
            y[i].d = f2h(0.f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; ++j) {
                int l = nearest_int(iscale * mins[j]);
                y[i].scales[j] |= (uint8_t)(l << 4);
            }
            y[i].dmin = f2h(max_min / q4scale);
        } else {
            y[i].dmin = f2h(0.f);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = h2f(y[i].d) * (y[i].scales[j] & 0xF);
            if (!d) continue;
            const float dm = h2f(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int((x[16 * j + ii] + dm) / d);
                l = KQ_MAX(0, KQ_MIN(3, l));
                L[16 * j + ii] = (uint8_t)l;
            }
        }
        pack_2bit(L, y[i].qs);
        x += QK_K;
    }
}

static void q2_K_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q2_K *x = vx;
    const block_q8_K *y = vy;
    const int64_t nb = n / QK_K;
    float sumf = 0;
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t *q2 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        const uint8_t *sc = x[i].scales;
        /* the min part needs only the activation's 16-element sums */
        int summs = 0;
        for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (sc[j] >> 4);
        const float dall = y[i].d * h2f(x[i].d);
        const float dmin = y[i].d * h2f(x[i].dmin);
        int isum = 0;
        int is = 0;
        for (int k = 0; k < QK_K / 128; ++k) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                int d = sc[is++] & 0xF;
                int isuml = 0;
                for (int l = 0; l < 16; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
                isum += d * isuml;
                d = sc[is++] & 0xF;
                isuml = 0;
                for (int l = 16; l < 32; ++l) isuml += q8[l] * ((q2[l] >> shift) & 3);
                isum += d * isuml;
                shift += 2;
                q8 += 32;
            }
            q2 += 32;
        }
        sumf += dall * isum - dmin * summs;
    }
    *s = sumf;
}

/* ------------------------------------------------------------------------ */
/* Q3_K                                                                       */
/* ------------------------------------------------------------------------ */
static void q3_K_dequantize(const void *src, float *y, int64_t n) {
    const block_q3_K *x = src;
    const int64_t nb = n / QK_K;
    int8_t a[QK_K];
    for (int64_t i = 0; i < nb; i++) {
        const float d_all = h2f(x[i].d);
        q3_K_expand(&x[i], a);
        for (int j = 0; j < QK_K / 16; ++j) {
            const float dl = d_all * q3k_scale(x[i].scales, j);
            for (int l = 0; l < 16; ++l) *y++ = dl * a[16 * j + l];
        }
    }
}

static void q3_K_quantize(const float *x, void *dst, int64_t n) {
    block_q3_K *y = dst;
    const int64_t nb = n / QK_K;
    int8_t L[QK_K];
    float scales[QK_K / 16];

    for (int64_t i = 0; i < nb; i++) {
        float max_scale = 0;
        float amax = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            float scale = fabsf(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }

        memset(y[i].scales, 0, 12);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) {
                /* ggml narrows to int8 before clamping: keep that */
                int8_t l = (int8_t)nearest_int(iscale * scales[j]);
                l = (int8_t)(KQ_MAX(-32, KQ_MIN(31, l)) + 32);
                if (j < 8) {
                    y[i].scales[j] = (uint8_t)(l & 0xF);
                } else {
                    y[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                }
                l >>= 4;
                y[i].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            y[i].d = f2h(1 / iscale);
        } else {
            y[i].d = f2h(0.f);
        }

        for (int j = 0; j < QK_K / 16; ++j) {
            int sc = q3k_scale(y[i].scales, j);
            float d = h2f(y[i].d) * sc;
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = KQ_MAX(-4, KQ_MIN(3, l));
                L[16 * j + ii] = (int8_t)(l + 4);
            }
        }

        /* high bit of quants 0..31 -> bit 0 of hmask[0..31], 32..63 -> bit 1, ... */
        memset(y[i].hmask, 0, QK_K / 8);
        int m = 0;
        uint8_t hm = 1;
        for (int j = 0; j < QK_K; ++j) {
            if (L[j] > 3) {
                y[i].hmask[m] |= hm;
                L[j] -= 4;
            }
            if (++m == QK_K / 8) {
                m = 0;
                hm = (uint8_t)(hm << 1);
            }
        }
        pack_2bit((const uint8_t *)L, y[i].qs); /* L is 0..3 here */
        x += QK_K;
    }
}

static void q3_K_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q3_K *x = vx;
    const block_q8_K *y = vy;
    const int64_t nb = n / QK_K;
    int8_t aux8[QK_K];
    float sums[8] = {0};
    for (int64_t i = 0; i < nb; ++i) {
        q3_K_expand(&x[i], aux8);
        int sc16[QK_K / 16];
        for (int j = 0; j < QK_K / 16; ++j) sc16[j] = q3k_scale(x[i].scales, j);
        kdot_block(aux8, sc16, x[i].d, &y[i], sums);
    }
    *s = ksum8(sums, 0);
}

/* ------------------------------------------------------------------------ */
/* Q4_K and Q5_K (shared scale/min quantization of 8 sub-blocks of 32)       */
/* ------------------------------------------------------------------------ */

/* Per sub-block (scale, min) search, then 6-bit scales relative to the
   block maxima.  nmax = 15 (Q4_K) or 31 (Q5_K). */
static void k4_scales(const float *x, int nmax, float rmin, int nstep, uint8_t *L,
                      uint8_t *packed, picolm_half *d_out, picolm_half *dmin_out) {
    uint8_t Laux[32];
    float weights[32];
    float mins[QK_K / 32];
    float scales[QK_K / 32];
    float max_scale = 0;
    float max_min = 0;
    memset(packed, 0, K_SCALE_SIZE); /* pack_scale_min_k4 ORs the high bits in */
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                     rmin, 0.1f, nstep, 0);
        float scale = scales[j];
        if (scale > max_scale) max_scale = scale;
        float min = mins[j];
        if (min > max_min) max_min = min;
    }

    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; ++j) {
        /* ggml narrows to uint8 before clamping: keep that */
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = KQ_MIN(63, ls);
        lm = KQ_MIN(63, lm);
        pack_scale_min_k4(packed, j, ls, lm);
    }
    *d_out = f2h(max_scale / 63.f);
    *dmin_out = f2h(max_min / 63.f);

    uint8_t sc, m;
    for (int j = 0; j < QK_K / 32; ++j) {
        get_scale_min_k4(j, packed, &sc, &m);
        const float d = h2f(*d_out) * sc;
        if (!d) continue;
        const float dm = h2f(*dmin_out) * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = nearest_int((x[32 * j + ii] + dm) / d);
            l = KQ_MAX(0, KQ_MIN(nmax, l));
            L[32 * j + ii] = (uint8_t)l;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Q4_K                                                                       */
/* ------------------------------------------------------------------------ */
K4_VIEW(q4_K, block_q4_K)

static void q4_K_dequantize(const void *src, float *y, int64_t n) { k4_dequantize(src, y, n, q4_K_view); }

static void q4_K_quantize(const float *x, void *dst, int64_t n) {
    block_q4_K *y = dst;
    const int64_t nb = n / QK_K;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++) {
        k4_scales(x, 15, -1.f, 20, L, y[i].scales, &y[i].d, &y[i].dmin);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < QK_K; j += 64) {
            for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
            q += 32;
        }
        x += QK_K;
    }
}

static void q4_K_vec_dot(int64_t n, float *s, const void *vx, const void *vy) { k4_vec_dot(n, s, vx, vy, q4_K_view); }

/* ------------------------------------------------------------------------ */
/* Q5_K                                                                       */
/* ------------------------------------------------------------------------ */
K4_VIEW(q5_K, block_q5_K)

static void q5_K_dequantize(const void *src, float *y, int64_t n) { k4_dequantize(src, y, n, q5_K_view); }

static void q5_K_quantize(const float *x, void *dst, int64_t n) {
    block_q5_K *y = dst;
    const int64_t nb = n / QK_K;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++) {
        k4_scales(x, 31, -0.5f, 15, L, y[i].scales, &y[i].d, &y[i].dmin);
        uint8_t *qh = y[i].qh;
        uint8_t *ql = y[i].qs;
        memset(qh, 0, QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int k = 0; k < QK_K; k += 64) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[k + j];
                if (l1 > 15) { l1 -= 16; qh[j] |= m1; }
                int l2 = L[k + j + 32];
                if (l2 > 15) { l2 -= 16; qh[j] |= m2; }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
            ql += 32;
        }
        x += QK_K;
    }
}

static void q5_K_vec_dot(int64_t n, float *s, const void *vx, const void *vy) { k4_vec_dot(n, s, vx, vy, q5_K_view); }

/* ------------------------------------------------------------------------ */
/* Q6_K                                                                       */
/* ------------------------------------------------------------------------ */
static void q6_K_dequantize(const void *src, float *y, int64_t n) {
    const block_q6_K *x = src;
    const int64_t nb = n / QK_K;
    int8_t a[QK_K];
    for (int64_t i = 0; i < nb; i++) {
        const float d = h2f(x[i].d);
        q6_K_expand(&x[i], a);
        for (int l = 0; l < QK_K; ++l) *y++ = d * x[i].scales[l / 16] * a[l];
    }
}

static void q6_K_quantize(const float *x, void *dst, int64_t n) {
    block_q6_K *y = dst;
    const int64_t nb = n / QK_K;
    int8_t L[QK_K];
    float scales[QK_K / 16];

    for (int64_t i = 0; i < nb; i++) {
        float max_scale = 0;
        float max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            scales[ib] = scale;
            const float abs_scale = fabsf(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof(block_q6_K));
            y[i].d = f2h(0.f);
            x += QK_K;
            continue;
        }

        float iscale = -128.f / max_scale;
        y[i].d = f2h(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ++ib)
            y[i].scales[ib] = (int8_t)KQ_MIN(127, nearest_int(iscale * scales[ib]));

        for (int j = 0; j < QK_K / 16; ++j) {
            float d = h2f(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = KQ_MAX(-32, KQ_MIN(31, l));
                L[16 * j + ii] = (int8_t)(l + 32);
            }
        }

        uint8_t *ql = y[i].ql;
        uint8_t *qh = y[i].qh;
        for (int j = 0; j < QK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF;
                const uint8_t q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF;
                const uint8_t q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
        x += QK_K;
    }
}

static void q6_K_vec_dot(int64_t n, float *s, const void *vx, const void *vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    const int64_t nb = n / QK_K;
    int8_t aux8[QK_K];
    float sums[8] = {0};
    for (int64_t i = 0; i < nb; ++i) {
        q6_K_expand(&x[i], aux8);
        int sc16[QK_K / 16];
        for (int j = 0; j < QK_K / 16; ++j) sc16[j] = x[i].scales[j];
        kdot_block(aux8, sc16, x[i].d, &y[i], sums);
    }
    *s = ksum8(sums, 0);
}

/* ------------------------------------------------------------------------ */
/* Q8_K (activations)                                                         */
/* ------------------------------------------------------------------------ */
static void q8_K_dequantize(const void *src, float *y, int64_t n) {
    const block_q8_K *x = src;
    const int64_t nb = n / QK_K;
    for (int64_t i = 0; i < nb; i++)
        for (int j = 0; j < QK_K; ++j) *y++ = x[i].d * x[i].qs[j];
}

static void q8_K_quantize(const float *x, void *dst, int64_t n) {
    block_q8_K *y = dst;
    const int64_t nb = n / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        float amax;
        const float max = kq_absmax(QK_K, x, &amax);
        if (!amax) {
            /* ggml leaves bsums stale here; zero them so they stay consistent */
            y[i].d = 0;
            memset(y[i].qs, 0, QK_K);
            memset(y[i].bsums, 0, sizeof y[i].bsums);
            x += QK_K;
            continue;
        }
        /* -127 (not -128) as ggml: the largest magnitude maps to -127 or 127 */
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; ++j) {
            int v = nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)KQ_MIN(127, v);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
        x += QK_K;
    }
}

/* ------------------------------------------------------------------------ */
/* Descriptor                                                                 */
/* ------------------------------------------------------------------------ */
static const picolm_format kquant_formats[] = {
    PICOLM_FORMAT(PICOLM_TYPE_Q2_K, PICOLM_FMT_WEIGHT, "Q2_K", QK_K, sizeof(block_q2_K),
      q2_K_dequantize, q2_K_quantize, PICOLM_TYPE_Q8_K, q2_K_vec_dot),
    PICOLM_FORMAT(PICOLM_TYPE_Q3_K, PICOLM_FMT_WEIGHT, "Q3_K", QK_K, sizeof(block_q3_K),
      q3_K_dequantize, q3_K_quantize, PICOLM_TYPE_Q8_K, q3_K_vec_dot),
    PICOLM_FORMAT(PICOLM_TYPE_Q4_K, PICOLM_FMT_WEIGHT, "Q4_K", QK_K, sizeof(block_q4_K),
      q4_K_dequantize, q4_K_quantize, PICOLM_TYPE_Q8_K, q4_K_vec_dot),
    PICOLM_FORMAT(PICOLM_TYPE_Q5_K, PICOLM_FMT_WEIGHT, "Q5_K", QK_K, sizeof(block_q5_K),
      q5_K_dequantize, q5_K_quantize, PICOLM_TYPE_Q8_K, q5_K_vec_dot),
    PICOLM_FORMAT(PICOLM_TYPE_Q6_K, PICOLM_FMT_WEIGHT, "Q6_K", QK_K, sizeof(block_q6_K),
      q6_K_dequantize, q6_K_quantize, PICOLM_TYPE_Q8_K, q6_K_vec_dot),
    /* activation only: no weight-side vec_dot */
    PICOLM_FORMAT(PICOLM_TYPE_Q8_K, PICOLM_FMT_ACTIVATION, "Q8_K", QK_K, sizeof(block_q8_K),
      q8_K_dequantize, q8_K_quantize, PICOLM_TYPE_Q8_K, NULL),
};

#ifndef PICOLM_KQUANTS_NO_PLUGIN /* repack.c includes this file for its code and is a plugin of its own */
static const picolm_format_vtable kquant_vtable = PICOLM_FORMAT_VTABLE(kquant_formats);
PICOLM_DEFINE_PLUGIN(PICOLM_KIND_FORMAT, "kquants", "1.0", "K-quants Q2_K..Q6_K weights and Q8_K activations (ggml-exact reference code)",
                     0, 0, &kquant_vtable);
#endif
