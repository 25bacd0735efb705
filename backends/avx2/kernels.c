/* AVX2 + FMA + F16C kernels and the backend vtable (data only; the
   descriptor in plugin.c, built without -m flags, points here). */
#include "x86_avx2.h"
#include "x86_avx2_r16.h"

X86_WRAP(avx2, q8_0, avx2_q8_0_nc)
X86_WRAP(avx2, q4_0, avx2_q4_0_nc)
X86_WRAP(avx2, q4_1, avx2_q4_1_nc)
X86_WRAP(avx2, q5_0, avx2_q5_0_nc)
X86_WRAP(avx2, q5_1, avx2_q5_1_nc)
X86_WRAP(avx2, iq4_nl, avx2_iq4_nl_nc)
X86_WRAP(avx2, q2_K, avx2_q2_K_nc)
X86_WRAP(avx2, q3_K, avx2_q3_K_nc)
X86_WRAP(avx2, q4_K, avx2_q4_K_nc)
X86_WRAP(avx2, q4_K_r, avx2_q4_K_r_nc)
X86_WRAP(avx2, q5_K, avx2_q5_K_nc)
X86_WRAP(avx2, q6_K, avx2_q6_K_nc)
X86_WRAP(avx2, iq4_xs, avx2_iq4_xs_nc)
X86_WRAP(avx2, f32, avx2_f32_nc)
X86_WRAP(avx2, f16, avx2_f16_nc)
X86_WRAP(avx2, bf16, avx2_bf16_nc)
R16_WRAP(avx2, q4_K_r16, avx2_q4_K_r16_t)
R16_WRAP(avx2, q6_K_r16, avx2_q6_K_r16_t)

#define K(T, A, name) { PICOLM_TYPE_##T, PICOLM_TYPE_##A, avx2_vec_dot_##name, avx2_gemm_##name }
static const picolm_kernel avx2_kernels[] = {
    K(Q4_K, Q8_K, q4_K), K(Q6_K, Q8_K, q6_K), K(Q8_0, Q8_0, q8_0),
    { PICOLM_TYPE_Q4_K_R, PICOLM_TYPE_Q8_K, avx2_vec_dot_q4_K_r, avx2_gemm_q4_K_r },
    K(Q4_0, Q8_0, q4_0), K(Q4_1, Q8_1, q4_1), K(Q5_0, Q8_0, q5_0), K(Q5_1, Q8_1, q5_1),
    K(IQ4_NL, Q8_0, iq4_nl), K(Q2_K, Q8_K, q2_K), K(Q3_K, Q8_K, q3_K), K(Q5_K, Q8_K, q5_K),
    K(Q4_K_R16, Q8_K, q4_K_r16), K(Q6_K_R16, Q8_K, q6_K_r16),
    K(IQ4_XS, Q8_K, iq4_xs), K(F32, F32, f32), K(F16, F16, f16), K(BF16, BF16, bf16),
};
static const picolm_act_quant avx2_act_quants[] = {
    { PICOLM_TYPE_Q8_0, avx2_quantize_q8_0 },
    { PICOLM_TYPE_Q8_1, avx2_quantize_q8_1 },
    { PICOLM_TYPE_Q8_K, avx2_quantize_q8_K },
};

HIDDEN const picolm_backend_vtable picolm_avx2_vtable = {
    .struct_size = sizeof(picolm_backend_vtable),
    .kernel_size = sizeof(picolm_kernel),
    .n_kernels = sizeof avx2_kernels / sizeof avx2_kernels[0],
    .kernels = avx2_kernels,
    .act_quant_size = sizeof(picolm_act_quant),
    .n_act_quants = sizeof avx2_act_quants / sizeof avx2_act_quants[0],
    .act_quants = avx2_act_quants,
    .score = NULL,
    /* rmsnorm: the core's (double accumulation, as llama.cpp) */
    .dot_f32 = avx2_dot_f32,
    .dot_f32_f16 = avx2_dot_f32_f16,
    .scale_axpy_f16 = avx2_scale_axpy_f16,
    .attn_f16 = avx2_attn_f16,
    .swiglu = avx2_swiglu,
    .f32_to_f16 = avx2_f32_to_f16,
};
