/* The avx512 level (backends/level.h): the formats of a Q4_K_M model, their
   repacks and Qwen's Q5_0 rows, and attn_f16; the rest is the avx2 level's
   (linked in, built with AVX2 flags).  Every kernel here uses VNNI
   (vpdpbusd, vpdpwssd), which the plugin requires. */
#include "avx512.h"
#include "expf.h"

#define K(T, A, name) PK_KERNEL(T, A, avx512_vec_dot_##name, avx512_gemm_##name)
static const picolm_kernel avx512_kernels[] = {
    K(Q4_K, Q8_K, q4_K), K(Q6_K, Q8_K, q6_K), K(Q8_0, Q8_0, q8_0), K(Q4_K_R, Q8_K, q4_K_r),
    K(Q4_K_R16, Q8_K, q4_K_r16), K(Q6_K_R16, Q8_K, q6_K_r16), K(Q5_0_R16, Q8_0, q5_0_r16),
    K(Q4_K_R16N, Q8_K, q4_K_r16), /* Q4_K_R16's bytes, and here its numerics */
    K(Q5_0, Q8_0, q5_0),
};
static const picolm_backend_vtable avx512_prims = {.attn_f16 = avx512_attn_f16};

/* The gemms' crossovers from the decode row kernels to the 16-row panels
   (kquants.c, r16.c).  Since the 4-row kernels reduce rows and columns
   together, the rows stay ahead of the panels' packing longer.  On a Xeon
   (picolm-bench --micro, fastest pass, one thread, 8 MiB matrix) Q4_K's
   rows cost 0.051 / 0.066 / 0.100 per unit at 1 / 2 / 4 columns and the
   panels 0.112 + 0.0103 per column, so the rows win up to 6 columns; Q6_K's
   rows (0.041 / 0.049 / 0.075) against 0.102 + 0.008 per column up to 8.
   Zen 5's rows were ahead up to 7 (docs/perf.md): 8 there, and where the
   vendor is unknown.  Either path gives the same bits.
   Decode's 4 slices of a 64-row claim are short streams when rows are:
   on Zen 5 (2 threads, LFM2-700M: rows of 6 superblocks) decode ran
   10-15% slower with them than with one row at a time, which were ahead
   up to 8 superblocks a row, level at 16 (docs/perf.md): 16 there and
   where the vendor is unknown; not measured on Intel, which keeps them. */
static void avx512_tune(pk_tune *t, const pk_cpu *cpu) {
    const int intel = cpu->vendor == PICOLM_VENDOR_INTEL;
    t->panel_min_nc_q4_K = intel ? 7 : 8;
    t->panel_min_nc_q6_K = intel ? 9 : 8;
    t->panel_min_nc_r16 = 8;
    t->dec_slices_min_nb_q4_K = t->dec_slices_min_nb_q6_K = intel ? 0 : 16;
    t->attn_expf = x86_expf8_avx512_matches_libm() ? PK_EXPF_VECTOR : PK_EXPF_LIBM;
}
PK_LEVEL_TUNED(avx512, "avx512", PICOLM_CPU_AVX512VNNI, avx512_kernels, PK_COUNT(avx512_kernels), NULL, 0, &avx512_prims, avx512_tune);
