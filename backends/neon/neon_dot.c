/* The dotprod level: the SDOT kernel set and gemm tiles (gemm_dot.c); and
   the i8mm level: the SMMLA tiles for Q4_K/Q6_K (gemm_i8mm.c) over these
   vec_dots.  mk/aarch64.mk compiles this file and gemm_dot.c with
   -march=armv8.2-a+dotprod, gemm_i8mm.c with +i8mm too; the plugin overlays
   each level only when the CPU reports its features (backends/level.h).
   Built without dotprod, both levels are empty and say so in their names,
   so the build never breaks. */
#define NEON_PFX neon_dot_
#if defined(__ARM_FEATURE_DOTPROD)
#define NEON_DP 1
#else
#define NEON_DP 0
#endif
#include "neon_impl.h"
#include "neon_gemm.h"

#define ROW(T, A, name) PK_KERNEL(T, A, neon_dot_##name, NULL),
/* AArch32: no tiles (kernels.c) */
#if defined(__aarch64__) && NEON_DP
#define NEON_TILES 1
#define ROW_GEMM(T, A, name) PK_KERNEL(T, A, neon_dot_##name, neon_gemm_dot_##name),
#define ROW_I8MM(T, A, name) PK_KERNEL(T, A, neon_dot_##name, neon_gemm_i8mm_##name),
#else
#define NEON_TILES 0
#define ROW_GEMM ROW
#define ROW_I8MM ROW
#endif
static const picolm_kernel dot_kernels[] = {NEON_TILED_LIST(ROW_GEMM) NEON_UNTILED_LIST(ROW)};
PK_LEVEL(dotprod, NEON_DP ? "dotprod" : "dotprod(not compiled in)", PICOLM_CPU_ARM_DOTPROD, dot_kernels,
         NEON_DP ? PK_COUNT(dot_kernels) : 0, NULL, 0, NULL);

static const picolm_kernel i8mm_kernels[] = {NEON_GEMM_I8MM_LIST(ROW_I8MM)};
PK_LEVEL(i8mm, NEON_TILES ? "i8mm" : "i8mm(AArch64 with dotprod only)", PICOLM_CPU_ARM_DOTPROD | PICOLM_CPU_ARM_I8MM,
         i8mm_kernels, NEON_TILES ? PK_COUNT(i8mm_kernels) : 0, NULL, 0, NULL);
