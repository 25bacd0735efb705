/*
 * Portable half / bfloat16 conversions, header-only so that plugins need no
 * core symbols.  half->float is exact; float->half rounds to nearest even,
 * matching ggml (and F16C's VCVTPS2PH with imm 0).
 */
#ifndef PICOLM_FP16_H
#define PICOLM_FP16_H
#include <stdint.h>
#include <string.h>

static inline float picolm_u32_as_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t picolm_f32_as_u32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float picolm_half_to_float(uint16_t h) {
    /* Scale trick (exact): move exponent/mantissa into place, then rescale. */
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    const uint32_t exp_offset = 0xE0u << 23;
    const float exp_scale = 0x1.0p-112f;
    const float normalized = picolm_u32_as_f32((two_w >> 4) + exp_offset) * exp_scale;
    const uint32_t magic_mask = 126u << 23;
    const float magic_bias = 0.5f;
    const float denormalized = picolm_u32_as_f32((two_w >> 17) | magic_mask) - magic_bias;
    const uint32_t denorm_cutoff = 1u << 27;
    const uint32_t result = sign | (two_w < denorm_cutoff ? picolm_f32_as_u32(denormalized)
                                                          : picolm_f32_as_u32(normalized));
    return picolm_u32_as_f32(result);
}

static inline uint16_t picolm_float_to_half(float f) {
    const float scale_to_inf = 0x1.0p+112f;
    const float scale_to_zero = 0x1.0p-110f;
    float base = (f < 0 ? -f : f) * scale_to_inf;
    base *= scale_to_zero;
    const uint32_t w = picolm_f32_as_u32(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = picolm_u32_as_f32((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = picolm_f32_as_u32(base);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissa_bits = bits & 0x00000FFFu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

static inline float picolm_bf16_to_float(uint16_t h) { return picolm_u32_as_f32((uint32_t)h << 16); }

static inline uint16_t picolm_float_to_bf16(float f) {
    uint32_t u = picolm_f32_as_u32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64); /* quiet NaN */
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}
#endif
