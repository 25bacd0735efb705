/*
 * The neon level: the plain-ASIMD weight kernels (neon_impl.h) and gemm
 * tiles (gemm_base.c), float kernels, activation quantizers and vector
 * primitives.  Base ARMv8-A ASIMD only (fp16 <-> fp32 conversions are base
 * ASIMD too); the SDOT and SMMLA code is in the dotprod and i8mm levels
 * (neon_dot.c).
 */
#include <math.h>

#define NEON_PFX neon_base_
#define NEON_DP 0
#include "neon_impl.h"
#include "neon_gemm.h"

/* ---- float kernels ----------------------------------------------------------
   Float partial sums are flushed into double every 128 elements: the
   reference accumulates in double, and long rows must not drift from it. */
NEON_AI float32x4_t neon_load_h(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
NEON_AI float32x4_t neon_load_bf(const uint16_t *p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

/* one template, three element types */
#define FLOAT_DOT(NAME, T, LOAD, SCALAR)                                            \
    static void NAME(int64_t n, float *s, const void *vx, const void *vy) {         \
        const T *x = vx, *y = vy;                                                   \
        neon_f64acc accd = NEON_F64ACC_ZERO;                                        \
        int64_t i = 0;                                                              \
        while (i + 16 <= n) {                                                       \
            float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;             \
            const int64_t end = (n - i) / 16 > 8 ? i + 128 : n - (n - i) % 16;      \
            for (; i < end; i += 16) {                                              \
                a0 = vfmaq_f32(a0, LOAD(x + i), LOAD(y + i));                       \
                a1 = vfmaq_f32(a1, LOAD(x + i + 4), LOAD(y + i + 4));               \
                a2 = vfmaq_f32(a2, LOAD(x + i + 8), LOAD(y + i + 8));               \
                a3 = vfmaq_f32(a3, LOAD(x + i + 12), LOAD(y + i + 12));             \
            }                                                                       \
            accd = neon_flush_f64(accd, vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3))); \
        }                                                                           \
        double sum = neon_f64acc_sum(accd);                                         \
        for (; i < n; i++) sum += (double)(SCALAR(x[i]) * SCALAR(y[i]));            \
        *s = (float)sum;                                                            \
    }
#define F32_ID(v) (v)
FLOAT_DOT(neon_vec_dot_f32, float, vld1q_f32, F32_ID)
FLOAT_DOT(neon_vec_dot_f16, uint16_t, neon_load_h, neon_h2f)
FLOAT_DOT(neon_vec_dot_bf16, uint16_t, neon_load_bf, picolm_bf16_to_float)

/* ---- activation quantizers (byte-equal to the format plugins) -------------- */
/* 32 floats -> int8 of round-half-away(x * id) (= roundf, as the reference) */
NEON_AI int8x16_t neon_q8_round16(const float *x, float id) {
    const int32x4_t i0 = vcvtaq_s32_f32(vmulq_n_f32(vld1q_f32(x), id));
    const int32x4_t i1 = vcvtaq_s32_f32(vmulq_n_f32(vld1q_f32(x + 4), id));
    const int32x4_t i2 = vcvtaq_s32_f32(vmulq_n_f32(vld1q_f32(x + 8), id));
    const int32x4_t i3 = vcvtaq_s32_f32(vmulq_n_f32(vld1q_f32(x + 12), id));
    const int16x8_t h0 = vcombine_s16(vqmovn_s32(i0), vqmovn_s32(i1));
    const int16x8_t h1 = vcombine_s16(vqmovn_s32(i2), vqmovn_s32(i3));
    return vcombine_s8(vqmovn_s16(h0), vqmovn_s16(h1));
}
NEON_AI float neon_amax32(const float *x) {
    float32x4_t m = vabsq_f32(vld1q_f32(x));
    for (int j = 4; j < 32; j += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + j)));
    return vmaxvq_f32(m);
}

static void neon_quantize_q8_0(const float *x, void *vy, int64_t k) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < k / QK8_0; i++, x += QK8_0) {
        const float d = neon_amax32(x) / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = picolm_float_to_half(d);
        vst1q_s8(y[i].qs, neon_q8_round16(x, id));
        vst1q_s8(y[i].qs + 16, neon_q8_round16(x + 16, id));
    }
}

static void neon_quantize_q8_1(const float *x, void *vy, int64_t k) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < k / QK8_1; i++, x += QK8_1) {
        const float d = neon_amax32(x) / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = picolm_float_to_half(d);
        const int8x16_t q0 = neon_q8_round16(x, id), q1 = neon_q8_round16(x + 16, id);
        vst1q_s8(y[i].qs, q0);
        vst1q_s8(y[i].qs + 16, q1);
        const int sum = vaddlvq_s8(q0) + vaddlvq_s8(q1);
        y[i].s = picolm_float_to_half(sum * d);
    }
}

static void neon_quantize_q8_K(const float *x, void *vy, int64_t k) {
    block_q8_K *y = vy;
    for (int64_t i = 0; i < k / QK_K; i++, x += QK_K) {
        float32x4_t m = vabsq_f32(vld1q_f32(x));
        for (int j = 4; j < QK_K; j += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + j)));
        const float amax = vmaxvq_f32(m);
        if (!amax) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* the reference keeps the FIRST element of largest magnitude */
        float max = 0;
        for (int j = 0; j < QK_K; j++)
            if (fabsf(x[j]) == amax) { max = x[j]; break; }
        const float iscale = -127.f / max;
        const int32x4_t lim = vdupq_n_s32(127);
        for (int j = 0; j < QK_K; j += 16) {
            /* round half to even, as ggml's nearest_int; clamp at 127 */
            int32x4_t q[4];
            for (int l = 0; l < 4; l++)
                q[l] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4 * l), iscale)), lim);
            const int16x8_t h0 = vcombine_s16(vqmovn_s32(q[0]), vqmovn_s32(q[1]));
            const int16x8_t h1 = vcombine_s16(vqmovn_s32(q[2]), vqmovn_s32(q[3]));
            const int8x16_t q8 = vcombine_s8(vqmovn_s16(h0), vqmovn_s16(h1));
            vst1q_s8(y[i].qs + j, q8);
            y[i].bsums[j / 16] = vaddlvq_s8(q8);
        }
        y[i].d = 1 / iscale;
    }
}

/* ---- vector primitives ------------------------------------------------------ */
static float neon_dot_f32(const float *a, const float *b, int n) {
    float s;
    neon_vec_dot_f32(n, &s, a, b);
    return s;
}

static float neon_dot_f32_f16(const float *a, const uint16_t *b, int n) {
    neon_f64acc accd = NEON_F64ACC_ZERO;
    int i = 0;
    while (i + 16 <= n) {
        float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;
        const int end = (n - i) / 16 > 8 ? i + 128 : n - (n - i) % 16;
        for (; i < end; i += 16) {
            a0 = vfmaq_f32(a0, vld1q_f32(a + i), neon_load_h(b + i));
            a1 = vfmaq_f32(a1, vld1q_f32(a + i + 4), neon_load_h(b + i + 4));
            a2 = vfmaq_f32(a2, vld1q_f32(a + i + 8), neon_load_h(b + i + 8));
            a3 = vfmaq_f32(a3, vld1q_f32(a + i + 12), neon_load_h(b + i + 12));
        }
        accd = neon_flush_f64(accd, vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    }
    double sum = neon_f64acc_sum(accd);
    for (; i < n; i++) sum += (double)(a[i] * neon_h2f(b[i]));
    return (float)sum;
}

/* round to the nearest half (ties to even) and back: FCVTN/FCVTL, exact */
NEON_AI float32x4_t neon_round_f16(float32x4_t x) { return vcvt_f32_f16(vcvt_f16_f32(x)); }

/* V update with an f16 accumulator held in floats (plugin.h):
   y = f16(y*scale) unless scale == 1, then y = f16(fma(a, v, y)) */
static void neon_scale_axpy_f16(float *y, float scale, float a, const uint16_t *v, int n) {
    const int scaled = scale != 1.0f;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t y0 = vld1q_f32(y + i), y1 = vld1q_f32(y + i + 4);
        if (scaled) {
            y0 = neon_round_f16(vmulq_n_f32(y0, scale));
            y1 = neon_round_f16(vmulq_n_f32(y1, scale));
        }
        vst1q_f32(y + i, neon_round_f16(vfmaq_n_f32(y0, neon_load_h(v + i), a)));
        vst1q_f32(y + i + 4, neon_round_f16(vfmaq_n_f32(y1, neon_load_h(v + i + 4), a)));
    }
    for (; i < n; i++) {
        const float yy = scaled ? picolm_half_to_float(picolm_float_to_half(y[i] * scale)) : y[i];
        y[i] = picolm_half_to_float(picolm_float_to_half(fmaf(a, neon_h2f(v[i]), yy)));
    }
}

/* expf, Cephes-style: x = n ln2 + r, |r| <= ln2/2, degree-5 polynomial
   (~1 ulp); inputs clamped to where 2^n stays a normal float */
NEON_AI float32x4_t neon_expf(float32x4_t x) {
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.3f)), vdupq_n_f32(88.3f));
    const float32x4_t z = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
    float32x4_t r = vfmsq_f32(x, z, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, z, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    const float32x4_t y = vaddq_f32(vfmaq_f32(r, p, vmulq_f32(r, r)), vdupq_n_f32(1.0f));
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(z), vdupq_n_s32(127)), 23);
    return vmulq_f32(y, vreinterpretq_f32_s32(e));
}

static void neon_swiglu(float *g, const float *u, int n) {
    int i = 0;
    const float32x4_t one = vdupq_n_f32(1.0f);
    for (; i + 4 <= n; i += 4) {
        const float32x4_t x = vld1q_f32(g + i);
        const float32x4_t sig = vdivq_f32(x, vaddq_f32(one, neon_expf(vnegq_f32(x))));
        vst1q_f32(g + i, vmulq_f32(sig, vld1q_f32(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void neon_f32_to_f16(uint16_t *dst, const float *src, int n) {
    /* FCVTN rounds to nearest even with subnormals (FPCR default), exactly
       as picolm_float_to_half */
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    for (; i < n; i++) dst[i] = picolm_float_to_half(src[i]);
}

/* ---- the neon level ---------------------------------------------------------- */
#define ROW(T, A, name) PK_KERNEL(T, A, neon_base_##name, NULL),
#if defined(__aarch64__)
#define ROW_GEMM(T, A, name) PK_KERNEL(T, A, neon_base_##name, neon_gemm_base_##name),
#else
/* AArch32 (16 vector registers): the tiles counted more instructions than
   vec_dot per row on a Cortex-A7 (docs/perf.md); the core's vec_dot loop
   runs instead */
#define ROW_GEMM ROW
#endif
static const picolm_kernel neon_kernels[] = {
    NEON_TILED_LIST(ROW_GEMM) NEON_UNTILED_LIST(ROW)
    PK_KERNEL(F16, F16, neon_vec_dot_f16, NULL), PK_KERNEL(F32, F32, neon_vec_dot_f32, NULL),
    PK_KERNEL(BF16, BF16, neon_vec_dot_bf16, NULL),
};
static const picolm_act_quant neon_act_quants[] = {
    { PICOLM_TYPE_Q8_0, neon_quantize_q8_0 },
    { PICOLM_TYPE_Q8_1, neon_quantize_q8_1 },
    { PICOLM_TYPE_Q8_K, neon_quantize_q8_K },
};

static const picolm_backend_vtable neon_prims = {
    .dot_f32 = neon_dot_f32,
    .dot_f32_f16 = neon_dot_f32_f16,
    .scale_axpy_f16 = neon_scale_axpy_f16,
    .swiglu = neon_swiglu,
    .f32_to_f16 = neon_f32_to_f16,
};
PK_LEVEL(neon, "neon", 0, neon_kernels, PK_COUNT(neon_kernels), neon_act_quants, PK_COUNT(neon_act_quants), &neon_prims);
